"""Fault ``throttling``: the first calls of every FSx and Batch operation are throttled with
the service's own error, and retries absorb them."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from traingrid.aws import clients
from traingrid_local.emulator import throttling
from traingrid_local.emulator.clock import CLOCK
from traingrid_local.emulator.fault_injection import FaultPlan
from traingrid_local.emulator.session import ACCOUNT_ID, Emulator

from .conftest import StartEmulator
from .helpers import create_batch

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


# --- account rate limits ------------------------------------------------------------------

SUBMIT_LIMIT = throttling.ACCOUNT_RATE_LIMITS["batch:submitjob"]


def _submitter(emulator: Emulator, config: Config) -> Any:
    setup = create_batch(emulator)
    batch = boto3.client("batch", region_name=emulator.region, config=config)
    count = iter(range(10_000))

    def submit() -> Any:
        return batch.submit_job(jobName=f"job-{next(count)}", jobQueue=setup.job_queue_arn,
                                jobDefinition=setup.job_definition_arn)

    return submit


def test_submit_job_accepts_50_calls_a_second_and_throttles_the_rest(
        emulator: Emulator) -> None:
    submit = _submitter(emulator, NO_RETRIES)

    with CLOCK.paused():  # every call in the same simulated instant
        outcomes = _outcomes(submit, SUBMIT_LIMIT + 7)
    assert outcomes == ["ok"] * SUBMIT_LIMIT + [("TooManyRequestsException", 429)] * 7

    CLOCK.sleep(1.0)  # a second later the window has room again
    assert _outcomes(submit, 1) == ["ok"]
    rates = throttling.RATES
    account = (ACCOUNT_ID, emulator.region)
    assert len(rates.accepted("batch:submitjob", *account)) == SUBMIT_LIMIT + 1
    assert rates.refused("batch:submitjob", *account) == 7


def test_the_window_slides_with_simulated_time(start_emulator: StartEmulator) -> None:
    # A slow clock: the milliseconds between the paused bursts stay milliseconds.
    emulator = start_emulator(speed=2)
    submit = _submitter(emulator, NO_RETRIES)
    with CLOCK.paused():
        assert _outcomes(submit, SUBMIT_LIMIT // 2) == ["ok"] * (SUBMIT_LIMIT // 2)
    CLOCK.sleep(0.6)
    with CLOCK.paused():
        # The first half is still within the last second: only the other half fits.
        outcomes = _outcomes(submit, SUBMIT_LIMIT)
    assert outcomes.count("ok") == SUBMIT_LIMIT - SUBMIT_LIMIT // 2
    CLOCK.sleep(0.6)
    with CLOCK.paused():
        # The first half has left the window; the second half has not.
        assert _outcomes(submit, SUBMIT_LIMIT).count("ok") == SUBMIT_LIMIT // 2


def test_adaptive_retries_get_every_call_through_under_the_limit(emulator: Emulator) -> None:
    submit = _submitter(emulator, Config(retries=dict(clients.RETRIES)))
    calls = 3 * SUBMIT_LIMIT

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda _: submit(), range(calls)))

    assert len({r["jobId"] for r in results}) == calls
    accepted = throttling.RATES.accepted("batch:submitjob", ACCOUNT_ID, emulator.region)
    assert len(accepted) == calls
    assert throttling.peak_per_window(accepted) <= SUBMIT_LIMIT


def test_other_accounts_and_regions_have_their_own_limit() -> None:
    rates = throttling.RateLimits({"batch:submitjob": 2})
    with CLOCK.paused():
        assert [rates.admit("batch:submitjob", "111", "us-east-1") for _ in range(3)] == [
            True, True, False]
        assert rates.admit("batch:submitjob", "111", "eu-west-1")
        assert rates.admit("batch:submitjob", "222", "us-east-1")
        assert all(rates.admit("batch:describejobs", "111", "us-east-1") for _ in range(5))


@pytest.mark.parametrize(("moments", "peak"), [
    ([], 0),
    ([5.0], 1),
    ([1.0, 1.0, 1.0], 3),
    ([0.0, 0.5, 0.99, 1.0, 1.5], 3),  # (0.0, 1.0] holds 0.5, 0.99 and 1.0; 0.0 is out
    ([0.0, 1.0, 2.0, 3.0], 1),
    ([0.0, 0.1, 5.0, 5.1, 5.2], 3),
])
def test_peak_per_window_counts_the_busiest_second(moments: list[float], peak: int) -> None:
    assert throttling.peak_per_window(moments) == peak
