"""``traingrid demo``: deploy TrainGrid into the emulator, start its pipelines the way users do
(an upload), and follow every run to the end."""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from traingrid.db.engine import dispose
from traingrid_local.demo.scenarios import DATASET_PREFIX, DEFAULT_KEY, SCENARIOS, Scenario
from traingrid_local.emulator.alarms import ALARMS
from traingrid_local.emulator.clock import CLOCK, DEFAULT_SPEED
from traingrid_local.emulator.session import Emulator
from traingrid_local.stack import eks_cluster, report, sample_campaign, schedules
from traingrid_local.stack.cron_expression import interval_seconds
from traingrid_local.stack.environment import (
    DEMO_BUCKET,
    MACHINE_NAMES,
    STATE_MACHINES,
    Deployment,
    deploy_traingrid,
)

# Small stand-ins for the ImageNet TFRecord shards.
SAMPLE_SHARDS = [f"train-{i:05d}-of-01024" for i in range(8)] + ["validation-00000-of-00128"]
SHARD_BYTES = 64 * 1024
PIPELINES = ("training", "campaign")
# Kept after the demo, so `traingrid campaigns` can show what it recorded.
DEMO_DATABASE = Path(".traingrid") / "campaigns.db"


# The janitor runs on its schedule until nothing is left to release, at most this many times.
JANITOR_PASSES = 12
# How often a demo that fast-forwards looks whether every thread waits for the clock.
FAST_FORWARD_LOOK_S = 0.01
Progress = Callable[[list[dict[str, Any]]], None]


@dataclass
class DemoOptions:
    pipeline: str = "all"
    scenario: str = "happy"
    manifest: Path | None = None
    key: str = DEFAULT_KEY
    uploads: int = 1
    fault_region: str = "us-west-2"
    speed: float = DEFAULT_SPEED
    training_hours: float = 6.0
    timeout_s: float = 300.0
    database_url: str | None = None
    backend: str = "ecs"  # or eks: TrainingRun on the emulated user's EKS cluster
    # Skip the simulated time in which every thread waits for the clock (the same simulated
    # times and durations, seconds less of wall time).
    fast_forward: bool = True

    def pipelines(self) -> tuple[str, ...]:
        wanted = PIPELINES if self.pipeline == "all" else (self.pipeline,)
        expected = SCENARIOS[self.scenario].expected
        return tuple(p for p in wanted if p in expected)

    def validate(self) -> None:
        problems = []
        if self.pipeline not in (*PIPELINES, "all"):
            problems.append(f"unknown pipeline {self.pipeline!r} "
                            f"(available: all, {', '.join(PIPELINES)})")
        if self.scenario not in SCENARIOS:
            problems.append(f"unknown scenario {self.scenario!r} "
                            f"(available: {', '.join(SCENARIOS)})")
        elif not problems and not self.pipelines():
            applies = ", ".join(SCENARIOS[self.scenario].expected)
            problems.append(f"scenario {self.scenario!r} does not apply to the {self.pipeline} "
                            f"pipeline (it applies to {applies})")
        if self.uploads < 1:
            problems.append("--uploads must be at least 1")
        problems += eks_cluster.backend_problems(self.backend)
        if self.manifest is not None and not _is_file(self.manifest):
            problems.append(f"manifest file {self.manifest} does not exist")
        if not self.key or self.key.startswith("/"):
            problems.append("--key must be a relative S3 key like data/manifest.json")
        for option, value in (("--speed", self.speed), ("--training-hours", self.training_hours)):
            if not math.isfinite(value) or value <= 0:
                problems.append(f"{option} must be a positive number, not {value}")
        if problems:
            raise ValueError("; ".join(problems))


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a name too long for the file system, say
        return False


def upload_sample_dataset(emulator: Emulator) -> None:
    s3 = emulator.client("s3")
    for name in SAMPLE_SHARDS:
        block = hashlib.sha256(name.encode()).digest()
        s3.put_object(Bucket=DEMO_BUCKET, Key=DATASET_PREFIX + name,
                      Body=block * (SHARD_BYTES // len(block)))


def manifest_body(scenario: Scenario, given: bytes | None) -> bytes:
    """The run request to upload: the scenario's fields, overridden by the given manifest's.
    A manifest that is not a JSON object is uploaded as it is (for the trigger to refuse)."""
    if given is None:
        given = b"{}"
    try:
        fields = json.loads(given)
    except ValueError:
        return given
    if not isinstance(fields, dict):
        return given
    return json.dumps({**scenario.request, **fields}).encode() + b"\n"


def start_training(emulator: Emulator, options: DemoOptions) -> None:
    upload_sample_dataset(emulator)
    body = manifest_body(SCENARIOS[options.scenario],
                         options.manifest.read_bytes() if options.manifest else None)
    for _ in range(options.uploads):
        emulator.client("s3").put_object(Bucket=DEMO_BUCKET, Key=options.key, Body=body)


def start_campaign(emulator: Emulator, deployment: Deployment) -> None:
    sample_campaign.seed(deployment)
    sample_campaign.upload_and_mark(emulator, deployment)


def wait_for_runs(emulator: Emulator, state_machine_arns: list[str], timeout_s: float,
                  progress: Progress | None, janitor: Deployment | None = None,
                  fast_forward: bool = False) -> list[str]:
    """Follow every execution of the state machines until all have ended (or time runs out).

    With ``janitor``, its schedule fires once every scheduled interval of simulated time while
    the runs go, as EventBridge's does: runs whose job's event is lost are woken by it. (Off
    otherwise: with events delivered a pass during the runs finds nothing to do, and hundreds
    of them would slow a multi-day run down.) With ``fast_forward``, the clock skips ahead
    whenever every thread waits for it (``SimulatedClock.fast_forward``)."""
    sfn = emulator.client("stepfunctions")
    deadline = time.monotonic() + timeout_s
    interval_s = next_pass = None
    if janitor is not None:
        interval_s = interval_seconds(emulator.client("events").describe_rule(
            Name=janitor.stack.resources["JanitorFunctionSweep"])["ScheduleExpression"])
        next_pass = CLOCK.timestamp() + interval_s
    while True:
        executions = [e for arn in state_machine_arns
                      for e in reversed(sfn.list_executions(stateMachineArn=arn)["executions"])]
        if progress is not None:
            progress([
                {"name": e["name"], "status": e["status"],
                 "state": report.current_state(report.history(emulator, e["executionArn"])),
                 "simulated_seconds": round(emulator.simulated_seconds(
                     e["startDate"], e.get("stopDate") or emulator.real_now()))}
                for e in executions
            ])
        if all(e["status"] != "RUNNING" for e in executions) or time.monotonic() > deadline:
            return [e["executionArn"] for e in executions]
        if janitor is not None and interval_s and next_pass is not None:
            if (now := CLOCK.timestamp()) >= next_pass:
                schedules.fire(emulator, janitor.stack, "janitor")
                while next_pass <= now:  # a pass that came due meanwhile is not made twice
                    next_pass += interval_s
            pass_time(min(0.2, CLOCK.real_seconds(interval_s) / 4), fast_forward, next_pass)
        else:
            pass_time(0.2, fast_forward, None)


def pass_time(real_s: float, fast_forward: bool, schedule_due: float | None) -> None:
    """Sleep ``real_s``; with ``fast_forward``, skip the clock ahead meanwhile whenever every
    thread waits for it: at most to the next alarm and to ``schedule_due`` (a simulated
    timestamp), which ends the sleep."""
    if not fast_forward:
        time.sleep(real_s)
        return
    end = time.monotonic() + real_s
    while (left := end - time.monotonic()) > 0:
        if schedule_due is not None and CLOCK.timestamp() >= schedule_due:
            return
        if CLOCK.fast_forward([ALARMS.next_due(), schedule_due]):
            ALARMS.wake()  # the next alarm may be due now
        time.sleep(min(left, FAST_FORWARD_LOOK_S))


def settle(emulator: Emulator, deployment: Deployment, max_passes: int = JANITOR_PASSES,
           fast_forward: bool = False) -> list[dict[str, Any]]:
    """Fire the janitor's schedule, once every scheduled interval of simulated time, until a
    pass finds nothing left to wait for (an export, a stopping job, a hydrating file system);
    the passes' results. Ended runs set it off at once already (their status-change event):
    these are the passes EventBridge's schedule makes afterwards. With ``fast_forward``, the
    clock skips to each pass whenever every thread waits for it."""
    schedule = emulator.client("events").describe_rule(
        Name=deployment.stack.resources["JanitorFunctionSweep"])["ScheduleExpression"]
    interval_s = interval_seconds(schedule)
    passes: list[dict[str, Any]] = []
    while len(passes) < max_passes:
        result = schedules.fire(emulator, deployment.stack, "janitor")
        passes.append(result)
        if not result["pending"] and not result["errors"]:
            break
        pass_time(CLOCK.real_seconds(interval_s), fast_forward, CLOCK.timestamp() + interval_s)
    return passes


def demo_database_url() -> str:
    """A fresh database file for each demo, kept afterwards for `traingrid campaigns`."""
    url = f"sqlite:///{DEMO_DATABASE.resolve()}"
    dispose(url)  # connections to the previous demo's file
    shutil.rmtree(DEMO_DATABASE.parent, ignore_errors=True)
    DEMO_DATABASE.parent.mkdir(parents=True)
    return url


def run(options: DemoOptions, progress: Progress | None = None) -> dict[str, Any]:
    options.validate()
    scenario, pipelines = SCENARIOS[options.scenario], options.pipelines()
    started = time.monotonic()
    with Emulator(speed=options.speed, fault_names=scenario.faults,
                  fault_region=options.fault_region, state_faults=scenario.state_faults,
                  training_seconds={"batch": options.training_hours * 3600}) as emulator:
        deployment = deploy_traingrid(
            emulator, database_url=options.database_url or demo_database_url(),
            parameters=eks_cluster.backend_parameters(emulator, options.backend))
        try:
            if "training" in pipelines:
                start_training(emulator, options)
            if "campaign" in pipelines:
                start_campaign(emulator, deployment)
            machines = [deployment.stack.outputs[STATE_MACHINES[p]] for p in pipelines]
            arns = wait_for_runs(emulator, machines, options.timeout_s, progress,
                                 deployment if "lost-events" in scenario.faults else None,
                                 options.fast_forward)
            passes = settle(emulator, deployment, fast_forward=options.fast_forward)
            result = report.build(emulator, deployment, arns, passes)
        finally:
            deployment.close()
    expected = {MACHINE_NAMES[p]: scenario.expected[p] for p in pipelines}
    for entry in result["executions"]:
        entry["expected_status"] = expected.get(entry["state_machine"])
    result.update({
        "expected": expected, "pipelines": list(pipelines), "scenario": options.scenario,
        "backend": options.backend,
        "faults": sorted(scenario.faults), "fault_region": options.fault_region,
        "clock_speed": options.speed, "wall_seconds": round(time.monotonic() - started, 2),
    })
    ran = {e["state_machine"] for e in result["executions"]}
    result["ok"] = set(expected) <= ran and not result["leaked_resources"] and all(
        e["status"] == e["expected_status"] for e in result["executions"])
    return result

