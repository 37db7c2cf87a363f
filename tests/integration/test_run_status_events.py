"""Run-status events: every TrainingRun, fan-out and region job publishes its changes to the
default EventBridge bus (`TrainGrid Run Status Change`, source `traingrid`), each detail valid
against schema/events/run-status-change.json, and the demo's report lists them."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from traingrid.notifications.run_status import DETAIL_TYPE, SOURCE
from traingrid_local.stack import run_events

pytestmark = pytest.mark.e2e

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "schema" / "events"
                     / "run-status-change.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator(
    SCHEMA, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def delivered(outcome) -> list[dict]:
    events = run_events.published(outcome.emulator)
    assert events, "no run-status event reached the default bus's rule"
    for event in events:
        assert event["source"] == SOURCE and event["detail-type"] == DETAIL_TYPE
        VALIDATOR.validate(event["detail"])
        assert event["detail"]["execution_arn"] in event["resources"]
    return events


def test_a_training_run_publishes_running_then_how_it_ended(run_scenario):
    outcome = run_scenario("happy")
    events = delivered(outcome)
    arn = outcome.execution["execution_arn"]
    assert [(e["detail"]["kind"], e["detail"]["status"]) for e in events] == [
        ("TrainingRun", "RUNNING"), ("TrainingRun", "SUCCEEDED")]
    running, ended = (e["detail"] for e in events)
    assert running["execution_arn"] == ended["execution_arn"] == arn
    assert running["nodes"] >= 1 and running["dataset"].startswith("s3://")
    assert ended["cost_usd"] > 0
    assert [(e["kind"], e["status"]) for e in outcome.report["run_status_events"]] == [
        ("TrainingRun", "RUNNING"), ("TrainingRun", "SUCCEEDED")]


def test_a_failed_training_run_says_why(run_scenario):
    outcome = run_scenario("batch-job-failed")
    (*_, ended) = delivered(outcome)
    assert ended["detail"]["status"] == "FAILED"
    assert ended["detail"]["error"] and ended["detail"]["cause"]


def test_a_fanout_publishes_itself_and_each_regions_job(run_campaign):
    outcome = run_campaign("sagemaker-job-failed")
    events = delivered(outcome)
    kinds = [(e["detail"]["kind"], e["detail"]["status"]) for e in events]
    assert kinds[0] == ("CampaignFanout", "RUNNING")
    assert kinds[-1] == ("CampaignFanout", outcome.execution["status"])
    jobs = [e["detail"] for e in events if e["detail"]["kind"] == "RegionJob"]
    planned = events[0]["detail"]["regions"]
    assert sorted(job["requested_region"] for job in jobs) == sorted(planned)
    assert any(job["status"] == "Failed" and job["cause"] for job in jobs)
    assert events[0]["detail"]["campaign"] == "av-drive-2026-11"
    listed = outcome.report["run_status_events"]
    assert len(listed) == len(events) and {e["name"] for e in listed} == {
        outcome.execution["name"]}
