"""Fault ``throttling``: the first calls of every FSx and Batch operation are throttled with
the service's own error, and retries absorb them."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from traingrid.aws import clients
from traingrid_local.emulator.faults import FaultPlan
from traingrid_local.emulator.session import Emulator

from .conftest import StartEmulator

# One attempt, no retries. (botocore's ``max_attempts`` counts retries: 1 would retry once.)
NO_RETRIES = Config(retries={"total_max_attempts": 1, "mode": "standard"})


def _outcomes(call: Any, times: int = 3) -> list[tuple[str, int] | str]:
    """For each call: the error code and HTTP status, or "ok"."""
    outcomes: list[tuple[str, int] | str] = []
    for _ in range(times):
        try:
            call()
        except ClientError as error:
            outcomes.append((error.response["Error"]["Code"],
                             error.response["ResponseMetadata"]["HTTPStatusCode"]))
        else:
            outcomes.append("ok")
    return outcomes


@pytest.fixture
def throttled(start_emulator: StartEmulator) -> Emulator:
    return start_emulator(faults={"throttling"})


def test_the_first_two_fsx_calls_are_throttled(throttled: Emulator) -> None:
    fsx = boto3.client("fsx", region_name=throttled.region, config=NO_RETRIES)

    outcomes = _outcomes(fsx.describe_file_systems)

    assert outcomes == [("ThrottlingException", 400)] * 2 + ["ok"]


def test_each_operation_has_its_own_first_calls(throttled: Emulator) -> None:
    fsx = boto3.client("fsx", region_name=throttled.region, config=NO_RETRIES)

    assert _outcomes(fsx.describe_file_systems) == [("ThrottlingException", 400)] * 2 + ["ok"]
    assert _outcomes(fsx.describe_data_repository_tasks, 1) == [("ThrottlingException", 400)]
    assert throttled.fault_plan.throttled_calls() == 3


def test_a_client_with_default_retries_gets_through(throttled: Emulator) -> None:
    response = throttled.client("fsx").describe_file_systems()

    assert response["FileSystems"] == []
    assert response["ResponseMetadata"]["RetryAttempts"] == 2
    assert throttled.fault_plan.throttled_calls() == 2


def test_the_functions_clients_retry_more_often_than_the_fault_throttles() -> None:
    retries = clients.RETRIES

    assert retries["mode"] == "adaptive"
    assert retries["max_attempts"] > FaultPlan(frozenset({"throttling"})).throttle_first_calls


def test_batch_operations_are_throttled_with_http_429(throttled: Emulator) -> None:
    batch = boto3.client("batch", region_name=throttled.region, config=NO_RETRIES)

    outcomes = _outcomes(lambda: batch.describe_jobs(jobs=["no-such-job"]))

    assert outcomes == [("TooManyRequestsException", 429)] * 2 + ["ok"]


def test_operations_outside_the_list_are_not_throttled(throttled: Emulator) -> None:
    batch = boto3.client("batch", region_name=throttled.region, config=NO_RETRIES)

    assert _outcomes(batch.describe_job_queues) == ["ok"] * 3
    assert throttled.fault_plan.throttled_calls() == 0


def test_nothing_is_throttled_without_the_fault(emulator: Emulator) -> None:
    fsx = boto3.client("fsx", region_name=emulator.region, config=NO_RETRIES)
    batch = boto3.client("batch", region_name=emulator.region, config=NO_RETRIES)

    assert _outcomes(fsx.describe_file_systems) == ["ok"] * 3
    assert _outcomes(lambda: batch.describe_jobs(jobs=["no-such-job"])) == ["ok"] * 3
