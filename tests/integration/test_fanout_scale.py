"""A long, wide CampaignFanout: each region's branch is an execution of its own, so no history
grows with regions × days; a region's job that ends is noticed by SageMaker's event, not by a
poll; one region's database error does not stop the others, nor lose its outcome."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from tests.integration.conftest import finish
from traingrid.campaigns.branch import EVENT_FALLBACK_S
from traingrid_local import bench_scale_fanout
from traingrid_local.emulator import sagemaker
from traingrid_local.emulator.clock import CLOCK
from traingrid_local.stack import report, sample_campaign

pytestmark = pytest.mark.e2e
DAY = 86400


def branches(emulator, deployment) -> dict[str, list[dict]]:
    """Each region's branch execution: its history, by the data's region."""
    sfn = emulator.client("stepfunctions")
    found = {}
    for execution in sfn.list_executions(stateMachineArn=deployment.stack.outputs[
            "CampaignRegionStateMachineArn"])["executions"]:
        region = json.loads(sfn.describe_execution(executionArn=execution["executionArn"])[
            "input"])["job"]["requested_region"]
        found[region] = report.history(emulator, execution["executionArn"])
    return found


def test_four_regions_training_five_days_keep_every_history_under_2000_events(
        emulated, monkeypatch):
    emulator, deployment = emulated("happy")
    monkeypatch.setattr(sagemaker, "TRAINING_SECONDS", 5 * DAY)

    execution = bench_scale_fanout.run_wide_fanout(emulator, deployment)

    assert execution["status"] == "SUCCEEDED", execution.get("cause")
    jobs = json.loads(execution["output"])["jobs"]
    assert sorted(j["requested_region"] for j in jobs) == sorted(deployment.regional)
    assert {j["status"] for j in jobs} == {"Completed"}
    counts = bench_scale_fanout.histories(emulator, deployment)
    assert len(counts) == 1 + len(deployment.regional)  # the fan-out and one branch a region
    # 20 region-days: an inline Map polling every 10 minutes would hold ~26,000 events.
    assert max(counts.values()) <= 2000, counts
    assert counts[execution["executionArn"]] <= 100


def test_a_job_that_ends_is_noticed_by_its_event_not_a_poll(emulated, monkeypatch):
    emulator, deployment = emulated("happy")
    monkeypatch.setattr(sagemaker, "TRAINING_SECONDS", DAY)  # ends between two checks

    execution = bench_scale_fanout.run_wide_fanout(emulator, deployment)

    assert execution["status"] == "SUCCEEDED", execution.get("cause")
    for region, events in branches(emulator, deployment).items():
        awaited = [e for e in events if e["type"] == "TaskSucceeded"
                   and "woken_by" in (e["taskSucceededEventDetails"].get("output") or "")]
        assert awaited, region
        (last,) = awaited[-1:]
        assert json.loads(last["taskSucceededEventDetails"]["output"])["woken_by"] == "event"
        timed_out = [e for e in events if e["type"] == "TaskTimedOut"]
        assert len(timed_out) == DAY // EVENT_FALLBACK_S, region  # the safety net's checks
        # Woken minutes after the job ended, not at the next check hours later.
        (job,) = [j for j in json.loads(execution["output"])["jobs"]
                  if j["requested_region"] == region]
        ended = emulator.client("sagemaker", job["region"]).describe_training_job(
            TrainingJobName=job["job_name"])["TrainingEndTime"]
        noticed = last["timestamp"]
        assert abs(CLOCK.simulated_at(noticed.timestamp()) - ended) < timedelta(minutes=5), region


@pytest.fixture
def record_fails_in_us_west_2() -> Iterator[list[str]]:
    """The campaign database refuses the first five writes of us-west-2's region job (as when
    it cannot be reached: OperationalError): RecordRegionJob's first try and its four
    retries."""
    failed: list[str] = []

    def refuse(conn, cursor, statement, parameters, context, executemany):  # noqa: ANN001
        if (statement.startswith("UPDATE region_jobs") and len(failed) < 5
                and "us-west-2" in repr(parameters)):
            failed.append(statement)
            raise OperationalError(statement, parameters, Exception("server closed the "
                                                                     "connection unexpectedly"))

    event.listen(Engine, "before_cursor_execute", refuse)
    yield failed
    event.remove(Engine, "before_cursor_execute", refuse)


def test_a_database_error_recording_one_region_fails_no_region(emulated,
                                                                record_fails_in_us_west_2):
    emulator, deployment = emulated("happy")
    sample_campaign.seed(deployment)
    sample_campaign.upload_and_mark(emulator, deployment)

    outcome = finish(emulator, deployment, "CampaignFanoutStateMachineArn", fast_forward=True)

    assert len(record_fails_in_us_west_2) == 5
    assert outcome.execution["status"] == "SUCCEEDED", outcome.execution["cause"]
    # Every region's outcome is in the database, us-west-2's too (FinishFanout recorded it).
    recorded = sample_campaign.region_jobs(deployment.database_url,
                                           outcome.execution["execution_arn"])
    assert {(j["requested_region"], j["status"]) for j in recorded} == {
        (r, "Completed") for r in sample_campaign.REGION_PRICES}
    events = branches(emulator, deployment)["us-west-2"]
    entered = [e["stateEnteredEventDetails"]["name"] for e in events
               if e["type"].endswith("StateEntered")]
    assert entered[-2:] == ["RecordRegionJob", "RegionNotRecorded"]
    failed = [e for e in events if e["type"] in ("TaskFailed", "LambdaFunctionFailed")]
    assert len(failed) == 5  # tried, then retried 4 times
