"""End-to-end runs: deploy template.yaml into the emulator, upload a manifest, follow the run."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from traingrid_local import report
from traingrid_local.demo import (
    DEFAULT_KEY,
    DEMO_BUCKET,
    SCENARIOS,
    upload_sample_dataset,
    wait_for_runs,
)
from traingrid_local.emulator import batch, lambda_inprocess
from traingrid_local.emulator.deploy import Stack, deploy
from traingrid_local.emulator.session import Emulator

SPEED = 4000.0


@dataclass
class Outcome:
    report: dict[str, Any]
    stack: Stack
    emulator: Emulator
    calls: dict[str, set[str]]

    @property
    def execution(self) -> dict[str, Any]:
        (only,) = self.report["executions"]
        return only


@pytest.fixture
def run_scenario(monkeypatch):
    """Run one scenario end to end; the emulator stays open for the test's own checks."""
    sessions = []
    monkeypatch.setattr(batch, "TRAINING_SECONDS", 3600)

    def run(scenario: str = "happy", manifest: Any = None, uploads: int = 1,
            key: str = DEFAULT_KEY) -> Outcome:
        emulator = Emulator(speed=SPEED, fault_names=SCENARIOS[scenario][0])
        sessions.append(emulator.__enter__())
        stack = deploy(emulator, parameters={"DataBucketName": DEMO_BUCKET})
        upload_sample_dataset(emulator)
        body = json.dumps(manifest if manifest is not None else {}).encode()
        for _ in range(uploads):
            emulator.client("s3").put_object(Bucket=DEMO_BUCKET, Key=key, Body=body)
        arns = wait_for_runs(emulator, stack.outputs["TrainingRunStateMachineArn"], 120, None)
        result = report.build(emulator, stack, arns)
        return Outcome(result, stack, emulator, dict(lambda_inprocess.CALLS))

    yield run
    for emulator in sessions:
        emulator.__exit__(None, None, None)
