"""``traingrid demo``: deploy the stack into the emulator, upload a dataset and its manifest,
and follow the TrainingRun it starts to the end."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from traingrid_local import report
from traingrid_local.emulator import batch as emulated_batch
from traingrid_local.emulator.deploy import deploy
from traingrid_local.emulator.faults import FAULTS
from traingrid_local.emulator.session import DEFAULT_SPEED, Emulator

DEMO_BUCKET = "traingrid-demo-data"
DATASET_PREFIX = "imagenet2012/resized/"
DEFAULT_KEY = DATASET_PREFIX + "manifest.json"
# Small stand-ins for the ImageNet TFRecord shards.
SAMPLE_SHARDS = [f"train-{i:05d}-of-01024" for i in range(8)] + ["validation-00000-of-00128"]
SHARD_BYTES = 64 * 1024

# scenario → (faults it injects, the status its run must end in)
SCENARIOS: dict[str, tuple[frozenset[str], str]] = {
    "happy": (frozenset(), "SUCCEEDED"),
    **{name: (frozenset({name}), "FAILED") for name in FAULTS if name != "throttling"},
    "throttling": (frozenset({"throttling"}), "SUCCEEDED"),
}

Progress = Callable[[list[dict[str, Any]]], None]


@dataclass
class DemoOptions:
    pipeline: str = "training"
    scenario: str = "happy"
    manifest: Path | None = None
    key: str = DEFAULT_KEY
    uploads: int = 1
    speed: float = DEFAULT_SPEED
    training_hours: float = 6.0
    timeout_s: float = 300.0
    extra_faults: frozenset[str] = field(default_factory=frozenset)

    def validate(self) -> None:
        problems = []
        if self.pipeline != "training":
            problems.append(f"unknown pipeline {self.pipeline!r} (available: training)")
        if self.scenario not in SCENARIOS:
            problems.append(f"unknown scenario {self.scenario!r} "
                            f"(available: {', '.join(SCENARIOS)})")
        if self.uploads < 1:
            problems.append("--uploads must be at least 1")
        if self.manifest is not None and not self.manifest.is_file():
            problems.append(f"manifest file {self.manifest} does not exist")
        if not self.key or self.key.startswith("/"):
            problems.append("--key must be a relative S3 key like data/manifest.json")
        if problems:
            raise ValueError("; ".join(problems))


def upload_sample_dataset(emulator: Emulator) -> None:
    s3 = emulator.client("s3")
    for name in SAMPLE_SHARDS:
        block = hashlib.sha256(name.encode()).digest()
        s3.put_object(Bucket=DEMO_BUCKET, Key=DATASET_PREFIX + name,
                      Body=block * (SHARD_BYTES // len(block)))


def wait_for_runs(emulator: Emulator, state_machine_arn: str, timeout_s: float,
                  progress: Progress | None) -> list[str]:
    """Follow every execution of the state machine until all have ended (or time runs out)."""
    sfn = emulator.client("stepfunctions")
    deadline = time.monotonic() + timeout_s
    while True:
        executions = sfn.list_executions(stateMachineArn=state_machine_arn)["executions"]
        running = [e for e in executions if e["status"] == "RUNNING"]
        if progress is not None:
            progress([
                {"name": e["name"], "status": e["status"],
                 "state": report.current_state(report.history(emulator, e["executionArn"])),
                 "simulated_seconds": round(emulator.simulated_seconds(
                     e["startDate"], e.get("stopDate") or emulator.real_now()))}
                for e in executions
            ])
        if not running or time.monotonic() > deadline:
            return [e["executionArn"] for e in reversed(executions)]
        time.sleep(0.2)


def run(options: DemoOptions, progress: Progress | None = None) -> dict[str, Any]:
    options.validate()
    fault_names, expected = SCENARIOS[options.scenario]
    emulated_batch.TRAINING_SECONDS = options.training_hours * 3600
    started = time.monotonic()
    with Emulator(speed=options.speed, fault_names=fault_names | options.extra_faults) as emulator:
        stack = deploy(emulator, parameters={"DataBucketName": DEMO_BUCKET})
        upload_sample_dataset(emulator)
        body = options.manifest.read_bytes() if options.manifest else b"{}\n"
        s3 = emulator.client("s3")
        for _ in range(options.uploads):
            s3.put_object(Bucket=DEMO_BUCKET, Key=options.key, Body=body)
        arns = wait_for_runs(emulator, stack.outputs["TrainingRunStateMachineArn"],
                             options.timeout_s, progress)
        result = report.build(emulator, stack, arns)
    result.update({
        "pipeline": options.pipeline,
        "scenario": options.scenario,
        "expected_status": expected,
        "clock_speed": options.speed,
        "wall_seconds": round(time.monotonic() - started, 2),
    })
    result["ok"] = bool(result["executions"]) and not result["leaked_resources"] and all(
        e["status"] == expected for e in result["executions"]
    )
    return result
