"""An emulator session: the embedded AWS account, with the simulated clock and chosen faults."""

from __future__ import annotations

import logging
import os
import time
import warnings
from collections.abc import Mapping
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

import boto3
from moto import mock_aws

import traingrid.clock
from traingrid.aws import clients
from traingrid_local.emulator import (
    account,
    batch,
    batch_pods,
    capacity,
    cloudformation,
    events,
    fault_injection,
    fsx,
    lambda_inprocess,
    s3,
    sagemaker,
    sfn_catch,
    sfn_clock,
    sfn_events,
    sfn_faults,
    sfn_history,
    sfn_integrations,
    sfn_stack,
    sfn_stop,
    throttling,
)
from traingrid_local.emulator.alarms import ALARMS
from traingrid_local.emulator.clock import CLOCK
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
MOTO_CONFIG = {
    "stepfunctions": {"execute_state_machine": True},
    "lambda": {"use_docker": False},
    "batch": {"use_docker": False},
}
# sfn_faults wraps what sfn_clock sets up: it comes after it.
ADAPTATIONS = (sfn_stack, cloudformation, lambda_inprocess, sfn_integrations, sfn_clock, sfn_catch,
               sfn_faults, sfn_events, sfn_stop, sfn_history, events, s3, fsx, batch, batch_pods,
               capacity,
               sagemaker, throttling, account)
DEFAULT_SPEED = 2000.0


def apply_adaptations() -> None:
    """Adapt moto for an emulator session (``PATCHES.undo_all`` puts it back)."""
    PATCHES.check_version()
    if PATCHES.applied:
        raise PatchError("moto is adapted already: an emulator is open in this process, "
                         "close it first")
    try:
        for adaptation in ADAPTATIONS:
            adaptation.apply()
    except BaseException:
        PATCHES.undo_all()
        raise
    # The interpreter logs every caught failure with a traceback; our reports say it better.
    logging.getLogger("moto.stepfunctions.parser").setLevel(logging.CRITICAL)
    # moto warns for each declared type it has no model for; deploy.py says which and why.
    logging.getLogger("moto").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", message="Tried to parse .* not supported by moto")
    # A function call that had nothing to count: CloudWatch would get the cold-start metric only.
    warnings.filterwarnings("ignore", message="No application metrics to publish")


class Emulator:
    """``with Emulator(speed=2000, faults={"throttling"}) as emulator: ...``"""

    def __init__(self, speed: float = DEFAULT_SPEED,
                 fault_names: frozenset[str] | set[str] = frozenset(),
                 region: str = REGION, fault_region: str = "us-west-2",
                 state_faults: Mapping[str, fault_injection.StateFault] | None = None) -> None:
        self.speed = speed
        self.fault_plan = fault_injection.FaultPlan(
            frozenset(fault_names), fault_region=fault_region, at_states=dict(state_faults or {}))
        self.region = region
        self._mock = mock_aws(config=MOTO_CONFIG)
        self._saved_env: dict[str, str | None] = {}
        self._saved_now = traingrid.clock.now
        self._clients: dict[tuple[str, str], Any] = {}

    def __enter__(self) -> Emulator:
        for key, value in ENVIRONMENT.items():
            self._saved_env[key] = os.environ.get(key)
            os.environ[key] = value
        apply_adaptations()
        self._mock.start()
        CLOCK.reset(self.speed)
        ALARMS.clear()
        throttling.RATES.reset()
        account.ACCOUNT.reset()
        capacity.reset()
        fault_injection.set_plan(self.fault_plan)
        sfn_events.enabled(True)
        traingrid.clock.now = CLOCK.now
        # Record what each function calls, through the sessions its clients come from: ours,
        # and boto3's default for code that makes its own. They are kept across emulator
        # sessions, with their parsed service models.
        if boto3.DEFAULT_SESSION is None:
            boto3.setup_default_session()
        for botocore_session in (clients.session(), boto3.DEFAULT_SESSION._session):
            botocore_session.register(
                "before-call", lambda_inprocess.record_call, unique_id="traingrid-record-call")
        lambda_inprocess.reset()
        clients.reset()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        sfn_events.enabled(False)  # what the session stops as it closes is not news
        self.stop_running_executions()
        ALARMS.clear()
        batch.FROZEN["on"] = True
        try:
            self._mock.stop()
        finally:
            batch.FROZEN["on"] = False
            PATCHES.undo_all()
        clients.reset()
        traingrid.clock.now = self._saved_now
        fault_injection.set_plan(fault_injection.FaultPlan())
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

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
        for arn in running:
            sfn.stop_execution(executionArn=arn, error="Emulator.Closed",
                               cause="the emulator session ended")
        deadline = time.monotonic() + grace_seconds
        while running and time.monotonic() < deadline:
            running = [a for a in running
                       if sfn.describe_execution(executionArn=a)["status"] == "RUNNING"]
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
