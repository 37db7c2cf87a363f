"""An emulator session: the embedded AWS account, with the simulated clock and chosen faults."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

import boto3
from moto import mock_aws
from moto.core.config import DefaultConfig

import traingrid.clock
from traingrid.aws import clients
from traingrid_local.emulator import (
    account,
    batch,
    batch_environments,
    batch_pods,
    capacity,
    cloudformation,
    cloudwatch_alarms,
    embedded_metrics,
    events,
    fault_injection,
    fsx,
    fsx_quota,
    instances,
    lambda_environments,
    lambda_inprocess,
    metric_alarms,
    rds,
    s3,
    sagemaker,
    sagemaker_events,
    sagemaker_metrics,
    sfn_catch,
    sfn_clock,
    sfn_events,
    sfn_faults,
    sfn_history,
    sfn_integrations,
    sfn_nested,
    sfn_stack,
    sfn_stop,
    stores,
    throttling,
)
from traingrid_local.emulator.alarms import ALARMS
from traingrid_local.emulator.clock import CLOCK, DEFAULT_SPEED
from traingrid_local.emulator.patching import PATCHES, PatchError

ACCOUNT_ID = "123456789012"
REGION = "us-east-1"
# moto reads these; the Step Functions interpreter's own clients land in this account.
ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_REGION": REGION,
    "MOTO_ACCOUNT_ID": ACCOUNT_ID,
}
MOTO_CONFIG: DefaultConfig = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
    "batch": {"use_docker": False},
}
# sfn_faults wraps what sfn_clock sets up: it comes after it. fsx wraps fsx_quota's
# CreateFileSystem: its checks of the request come first, as FSx's do, and a repeated token
# returns its file system before the quota counts it.
ADAPTATIONS = (stores, sfn_stack, cloudformation, cloudwatch_alarms, metric_alarms,
               embedded_metrics, lambda_inprocess, sfn_integrations, sfn_clock, sfn_catch,
               sfn_faults, sfn_events, sfn_nested, sfn_stop, sfn_history, events, s3,
               fsx_quota, fsx, instances, batch, batch_environments, batch_pods, capacity,
               sagemaker, sagemaker_events, sagemaker_metrics, throttling, account, rds)
# The botocore handler that notes each call for the function making it.
RECORD_CALLS = "traingrid-record-call"
# What ``training_seconds`` may set: the modules whose TRAINING_SECONDS a job trains for.
TRAINING_SERVICES = {"batch": batch, "sagemaker": sagemaker}


def apply_adaptations() -> None:
    """Adapt moto for an emulator session (``PATCHES.undo_all`` puts it back)."""
    PATCHES.check_version()
    if PATCHES.applied:
        raise PatchError("moto is adapted already: an emulator is open in this process, "
                         "close it first")
    try:
        # Before lambda_inprocess puts its view in place of os.environ: the process's own.
        PATCHES.update(os.environ, ENVIRONMENT, "the process environment (moto's account)")
        for adaptation in ADAPTATIONS:
            adaptation.apply()
        # The interpreter logs every caught failure with a traceback; our reports say it
        # better.
        PATCHES.log_level("moto.stepfunctions.parser", logging.CRITICAL)
        # moto warns for each declared type it has no model for; deploy.py says which and why.
        PATCHES.log_level("moto", logging.ERROR)
        PATCHES.ignore_warnings("Tried to parse .* not supported by moto")
        # A function call that had nothing to count: CloudWatch would get the cold-start
        # metric only.
        PATCHES.ignore_warnings("No application metrics to publish")
    except BaseException:
        PATCHES.undo_all()
        raise


class Emulator:
    """``with Emulator(speed=2000, faults={"throttling"}) as emulator: ...``

    ``training_seconds`` (``{"batch": 3600, "sagemaker": 3600}``): how long a job of each of
    those services trains, in simulated seconds, instead of its module's TRAINING_SECONDS
    (a Batch job of the reference epochs), for the session."""

    def __init__(self, speed: float = DEFAULT_SPEED,
                 fault_names: frozenset[str] | set[str] = frozenset(),
                 region: str = REGION, fault_region: str = "us-west-2",
                 state_faults: Mapping[str, fault_injection.StateFault] | None = None,
                 training_seconds: Mapping[str, float] | None = None) -> None:
        unknown = set(training_seconds or ()) - TRAINING_SERVICES.keys()
        if unknown:
            raise ValueError(f"training_seconds: no service {', '.join(sorted(unknown))}; "
                             f"there are {', '.join(TRAINING_SERVICES)}")
        self.speed = speed
        self.training_seconds = dict(training_seconds or {})
        self.fault_plan = fault_injection.FaultPlan(
            frozenset(fault_names), fault_region=fault_region, at_states=dict(state_faults or {}))
        self.region = region
        self._mock = mock_aws(config=MOTO_CONFIG)
        self._clients: dict[tuple[str, str], Any] = {}

    def __enter__(self) -> Emulator:
        apply_adaptations()
        # Everything TrainGrid stamps comes from the simulated clock during the session.
        PATCHES.replace(traingrid.clock, "now", CLOCK.now)
        PATCHES.replace(traingrid.clock, "service_seconds", CLOCK.simulated_seconds)
        for service, seconds in self.training_seconds.items():
            PATCHES.replace(TRAINING_SERVICES[service], "TRAINING_SECONDS", seconds)
        self._mock.start()
        CLOCK.reset(self.speed)
        ALARMS.clear()
        throttling.RATES.reset()
        account.ACCOUNT.reset()
        capacity.reset()
        batch_environments.reset()
        fault_injection.set_plan(self.fault_plan)
        # Record what each function calls, through the sessions its clients come from: ours,
        # and boto3's default for code that makes its own. The sessions are kept across
        # emulator sessions, with their parsed service models; the recording is not.
        if boto3.DEFAULT_SESSION is None:
            boto3.setup_default_session()
        for botocore_session in (clients.session(), clients.listing_session(),
                                 boto3.DEFAULT_SESSION._session):
            PATCHES.event_handler(botocore_session, "before-call", lambda_inprocess.record_call,
                                  RECORD_CALLS)
        lambda_inprocess.reset()
        clients.reset()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        sfn_events.silence()  # what the session stops as it closes is not news
        try:
            self.stop_running_executions()
        finally:  # whatever happened, the session closes: an open one would block the next
            self._close()

    def _close(self) -> None:
        ALARMS.clear()
        batch.freeze()
        try:
            self._mock.stop()
        finally:
            # The environment, the clock, the fault plan, the training times, the flags
            # above too.
            PATCHES.undo_all()
            lambda_environments.close()  # the functions' database connections with them
        clients.reset()

    def set_faults(self, fault_names: frozenset[str] | set[str] = frozenset(),
                   state_faults: Mapping[str, fault_injection.StateFault] | None = None) -> None:
        """Another fault plan from now on (runs already started see it too)."""
        self.fault_plan = fault_injection.FaultPlan(frozenset(fault_names),
                                           fault_region=self.fault_plan.fault_region,
                                           at_states=dict(state_faults or {}))
        fault_injection.set_plan(self.fault_plan)

    def client(self, service: str, region: str | None = None) -> Any:
        """A client of the emulated account, one per service and region for the session."""
        key = (service, region or self.region)
        if key not in self._clients:
            self._clients[key] = boto3.client(service, region_name=key[1])
        return self._clients[key]

    def stop_running_executions(self, grace_seconds: float = 5.0) -> None:
        """Executions run in threads; stop them before the mock goes away under them."""
        sfn = self.client("stepfunctions")
        running = [
            execution["executionArn"]
            for machine in sfn.list_state_machines()["stateMachines"]
            for execution in sfn.list_executions(
                stateMachineArn=machine["stateMachineArn"], statusFilter="RUNNING"
            )["executions"]
        ]
        deadline = time.monotonic() + grace_seconds
        for arn in running:
            self._stop_execution(sfn, arn, deadline)
        while running and time.monotonic() < deadline:
            running = [a for a in running
                       if sfn.describe_execution(executionArn=a)["status"] == "RUNNING"]
            time.sleep(0.05)

    @staticmethod
    def _stop_execution(sfn: Any, arn: str, deadline: float) -> None:
        """Stop one execution; one that has only just started has no interpreter yet to stop
        (moto's worker sets it up on its thread): try again until ``deadline``."""
        while True:
            try:
                sfn.stop_execution(executionArn=arn, error="Emulator.Closed",
                                   cause="the emulator session ended")
                return
            except AttributeError:  # moto: ExecutionWorker.env is still None
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)

    def paused(self) -> Any:
        """Hold the simulated clock, e.g. while uploading what takes seconds on AWS."""
        return CLOCK.paused()

    def simulated_seconds(self, start: Any, end: Any) -> float:
        return CLOCK.simulated_seconds(start, end)

    def simulated_seconds_at(self, real: datetime) -> float:
        """Simulated epoch seconds of a real instant (Step Functions stamps history in real
        time)."""
        return CLOCK.simulated_at(real.timestamp()).timestamp()

    @staticmethod
    def real_now() -> Any:
        return datetime.now(UTC)

    def now_iso(self) -> str:
        return traingrid.clock.iso(CLOCK.now())
