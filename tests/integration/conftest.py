"""End-to-end runs: deploy TrainGrid into the emulator, start a pipeline the way a user does
(an upload), follow its runs to the end."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from traingrid.db.engine import transaction
from traingrid.db.repositories import TrainingRunRepository
from traingrid_local.api.client import ApiClient
from traingrid_local.demo.runner import (
    DEFAULT_KEY,
    SCENARIOS,
    manifest_body,
    upload_sample_dataset,
    wait_for_runs,
)
from traingrid_local.demo.served import Served, served
from traingrid_local.emulator import batch, lambda_inprocess, sagemaker
from traingrid_local.emulator.deploy import Stack
from traingrid_local.emulator.session import Emulator
from traingrid_local.stack import report, sample_campaign
from traingrid_local.stack.environment import DEMO_BUCKET, Deployment, deploy_traingrid

SPEED = 4000.0


@dataclass
class Outcome:
    report: dict[str, Any]
    deployment: Deployment
    emulator: Emulator
    calls: dict[str, set[str]]

    @property
    def stack(self) -> Stack:
        return self.deployment.stack

    @property
    def execution(self) -> dict[str, Any]:
        (only,) = self.report["executions"]
        return only

    @property
    def record(self) -> dict[str, Any] | None:
        """The only execution's outcome as the campaign database holds it."""
        return training_record(self.deployment, self.execution["execution_arn"])


def training_record(deployment: Deployment, execution_arn: str) -> dict[str, Any] | None:
    with transaction(deployment.database_url) as session:
        row = TrainingRunRepository(session).get(execution_arn)
        return {c.name: getattr(row, c.name) for c in row.__table__.columns} if row else None


@pytest.fixture
def emulated(monkeypatch, tmp_path):
    """Start an emulator with a scenario's faults and deploy TrainGrid into it."""
    sessions: list[tuple[Emulator, Deployment]] = []
    monkeypatch.setattr(batch, "TRAINING_SECONDS", 3600)
    monkeypatch.setattr(sagemaker, "TRAINING_SECONDS", 3600)

    def start(scenario: str, fault_region: str = "us-west-2", speed: float = SPEED,
              parameters: dict[str, str] | None = None) -> tuple[Emulator, Deployment]:
        emulator = Emulator(speed=speed, fault_names=SCENARIOS[scenario].faults,
                            fault_region=fault_region,
                            state_faults=SCENARIOS[scenario].state_faults).__enter__()
        deployment = deploy_traingrid(
            emulator, database_url=f"sqlite:///{tmp_path / f'db{len(sessions)}.sqlite'}",
            parameters=parameters)
        sessions.append((emulator, deployment))
        return emulator, deployment

    yield start
    for emulator, deployment in sessions:
        emulator.__exit__(None, None, None)
        deployment.close()


def finish(emulator: Emulator, deployment: Deployment, machine: str,
           janitor: bool = False, fast_forward: bool = False) -> Outcome:
    """Follow the runs to their end (up to a generous five real minutes); with ``janitor``,
    its schedule fires meanwhile; with ``fast_forward``, the clock skips the simulated time
    in which every thread waits for it."""
    arns = wait_for_runs(emulator, [deployment.stack.outputs[machine]], 300, None,
                         deployment if janitor else None, fast_forward)
    return Outcome(report.build(emulator, deployment, arns), deployment, emulator,
                   dict(lambda_inprocess.CALLS))


@pytest.fixture
def run_scenario(emulated):
    """A TrainingRun from a manifest upload."""

    def run(scenario: str = "happy", manifest: Any = None, uploads: int = 1,
            key: str = DEFAULT_KEY, speed: float = SPEED, janitor: bool = False,
            fast_forward: bool = False) -> Outcome:
        emulator, deployment = emulated(scenario, speed=speed)
        upload_sample_dataset(emulator)
        body = manifest_body(SCENARIOS[scenario], None if manifest is None
                             else json.dumps(manifest).encode())
        for _ in range(uploads):
            emulator.client("s3").put_object(Bucket=DEMO_BUCKET, Key=key, Body=body)
        return finish(emulator, deployment, "TrainingRunStateMachineArn", janitor,
                      fast_forward)

    return run


@pytest.fixture
def run_campaign(emulated):
    """A CampaignFanout from the sample campaign's regional uploads and _READY markers."""

    def run(scenario: str = "happy", fault_region: str = "us-west-2",
            repeat_markers: int = 1) -> Outcome:
        emulator, deployment = emulated(scenario, fault_region)
        sample_campaign.seed(deployment)
        for _ in range(repeat_markers):
            sample_campaign.upload_and_mark(emulator, deployment)
        return finish(emulator, deployment, "CampaignFanoutStateMachineArn")

    return run



@contextmanager
def serving(tmp_path_factory: pytest.TempPathFactory, training_seconds: int,
            label: str, faults: frozenset[str] = frozenset(),
            throttled: bool = True) -> Iterator[Served]:
    """`traingrid serve`: the seeded emulator (with ``faults``), the API on a free loopback
    port, jobs that train ``training_seconds``; closed (server, then emulator) on leaving."""
    database = tmp_path_factory.mktemp(label) / "campaigns.sqlite"
    training = {"batch": training_seconds, "sagemaker": training_seconds}
    with served(port=0, speed=SPEED, database_url=f"sqlite:///{database}",
                faults=faults, training_seconds=training, throttled=throttled) as api:
        yield api


@pytest.fixture(scope="module")
def served_api(tmp_path_factory):
    """The served API for a test module, closed after its last test."""
    with serving(tmp_path_factory, 3600, "api") as api:
        yield api


@pytest.fixture
def client(served_api):
    return ApiClient(served_api.url, timeout=30)
