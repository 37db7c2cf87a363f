"""A TrainingRun's outcome as the database keeps it: from the run's own state as it ends, and
from Step Functions' description of an execution that ended without recording it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from traingrid.training.outcome import LIMITS, from_execution, from_state

ARN = "arn:aws:states:us-east-1:123456789012:execution:traingrid-TrainingRun:resnet-1"
STARTED = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
ENDED = STARTED + timedelta(hours=3)
PLAN = {
    "run": "resnet-1",
    "dataset": {"uri": "s3://data/imagenet/"},
    "job": {"nodes": 4, "instance_type": "p3.16xlarge", "mpi_gpus": 32, "requested_nodes": 4,
            "attempts": [{"attempt": 1, "nodes": 4, "reason": "first attempt",
                          "resumed_from": None}]},
    "archive": {"bucket": "data", "prefix": "runs/resnet-1/"},
    "estimate": {"max_usd": 35268.58},
}
JOB = {"id": "job-1", "status": "SUCCEEDED", "running_s": 7200, "started": True}
FILE_SYSTEM = {"id": "fs-1"}


def test_a_succeeded_run_records_what_it_used_and_where_its_artifacts_are():
    state = {"plan": PLAN, "job": JOB, "file_system": FILE_SYSTEM, "archive": {
        "complete": True, "manifest": "s3://data/runs/resnet-1/manifest.json",
        "objects": 13, "bytes": 148925}}

    record = from_state(state, "SUCCEEDED", ARN, STARTED, ENDED)

    assert record == {
        "execution_arn": ARN, "name": "resnet-1", "status": "SUCCEEDED",
        "started_at": STARTED, "ended_at": ENDED, "dataset": "s3://data/imagenet/",
        "nodes": 4, "instance_type": "p3.16xlarge", "mpi_gpus": 32,
        "estimated_max_usd": Decimal("35268.58"), "job_id": "job-1",
        "job_status": "SUCCEEDED", "training_s": 7200, "file_system_id": "fs-1",
        "artifacts": "s3://data/runs/resnet-1/",
        "manifest": "s3://data/runs/resnet-1/manifest.json", "archived_objects": 13,
        "archived_bytes": 148925, "retained_file_system": None, "error": None,
        "failure_cause": None, "recorded_by": "run",
        "nodes_used": 4, "attempts": PLAN["job"]["attempts"],
    }


def test_a_shrunk_run_records_the_nodes_asked_for_those_it_trained_on_and_every_attempt():
    attempts = [{"attempt": 1, "nodes": 8, "reason": "first attempt", "resumed_from": None,
                 "job_id": "job-0", "outcome": "no capacity: waited 31 min in the queue",
                 "ran_s": 0},
                {"attempt": 2, "nodes": 4, "reason": "no capacity ...; shrunk to 4",
                 "resumed_from": None}]
    plan = {**PLAN, "job": {**PLAN["job"], "requested_nodes": 8, "attempts": attempts}}

    record = from_state({"plan": plan, "job": JOB}, "SUCCEEDED", ARN, STARTED, ENDED)

    assert (record["nodes"], record["nodes_used"], record["mpi_gpus"]) == (8, 4, 32)
    assert [a["nodes"] for a in record["attempts"]] == [8, 4]


def test_a_run_whose_last_attempt_got_no_nodes_records_the_nodes_of_the_one_that_did():
    attempts = [{"attempt": 1, "nodes": 8, "reason": "first attempt", "resumed_from": None,
                 "job_id": "job-0", "outcome": "node lost", "ran_s": 1200},
                {"attempt": 2, "nodes": 8, "reason": "node lost", "resumed_from": None,
                 "job_id": "job-1", "outcome": "no capacity", "ran_s": 0}]
    plan = {**PLAN, "job": {**PLAN["job"], "nodes": 8, "trained": True, "attempts": attempts}}
    job = {"id": "job-1", "status": "FAILED", "started": False}

    record = from_state({"plan": plan, "job": job}, "FAILED", ARN, STARTED, ENDED)

    assert record["nodes_used"] == 8
    assert from_state({"plan": {**plan, "job": {**plan["job"], "trained": False}},
                       "job": job}, "FAILED", ARN, STARTED, ENDED)["nodes_used"] is None


def test_a_run_whose_archive_failed_says_its_file_system_holds_the_artifacts():
    state = {"plan": PLAN, "job": JOB, "file_system": FILE_SYSTEM,
             "archive": {"complete": False},
             "retained": {"file_system_id": "fs-1", "where": "fs-1:/fsx/runs/resnet-1"},
             "explained": {"error": "ExportFailed", "cause": "The export failed. Copy ..."}}

    record = from_state(state, "FAILED", ARN, STARTED, ENDED)

    assert (record["artifacts"], record["manifest"]) == ("fs-1:/fsx/runs/resnet-1", None)
    assert record["retained_file_system"] == "fs-1"
    assert (record["error"], record["failure_cause"]) == ("ExportFailed",
                                                          "The export failed. Copy ...")
    assert record["archived_objects"] is None


def test_a_run_that_failed_while_planning_records_its_request():
    state = {"request": {"dataset": "s3://data/nothing/"},
             "explained": {"error": "DatasetNotFound", "cause": "No objects under ..."}}

    record = from_state(state, "FAILED", ARN, STARTED, ENDED)

    assert record["name"] == "resnet-1" and record["dataset"] == "s3://data/nothing/"
    assert record["nodes"] is None and record["job_id"] is None
    assert record["error"] == "DatasetNotFound"


def test_a_run_records_itself_only_as_succeeded_or_failed():
    with pytest.raises(ValueError, match="ABORTED"):
        from_state({}, "ABORTED", ARN, STARTED, ENDED)


def described(status: str, **fields) -> dict:
    return {"executionArn": ARN, "name": "resnet-1", "status": status, "startDate": STARTED,
            "stopDate": ENDED, "input": json.dumps({"request": {
                "dataset": "s3://data/imagenet/", "nodes": 4}}), **fields}


def test_a_stopped_execution_is_recorded_with_the_janitors_cause():
    record = from_execution(described("ABORTED"), "The execution ended ABORTED before ...")

    assert (record["status"], record["error"]) == ("ABORTED", "ABORTED")
    assert record["failure_cause"] == "The execution ended ABORTED before ..."
    assert (record["dataset"], record["nodes"]) == ("s3://data/imagenet/", 4)
    assert record["recorded_by"] == "janitor" and record["ended_at"] == ENDED


def test_a_failed_execution_keeps_its_own_error_and_cause():
    record = from_execution(described("FAILED", error="TrainingJobFailed",
                                      cause="Batch job ... FAILED"), "janitor's words")
    assert (record["error"], record["failure_cause"]) == ("TrainingJobFailed",
                                                          "Batch job ... FAILED")


def test_a_succeeded_execution_is_recorded_from_its_summary():
    summary = {"run": "resnet-1", "status": "SUCCEEDED", "dataset": "s3://data/imagenet/",
               "job_id": "job-1", "file_system_id": "fs-1", "nodes": 4,
               "instance_type": "p3.16xlarge", "mpi_gpus": 32, "job_status": "SUCCEEDED",
               "training_s": 7200, "manifest": "s3://data/runs/resnet-1/manifest.json",
               "objects": 13, "bytes": 148925, "estimate": {"max_usd": 12.5}}

    record = from_execution(described("SUCCEEDED", output=json.dumps(summary)))

    assert record["artifacts"] == "s3://data/runs/resnet-1/"
    assert (record["job_id"], record["job_status"], record["training_s"]) == (
        "job-1", "SUCCEEDED", 7200)
    assert record["estimated_max_usd"] == Decimal("12.5")
    assert record["error"] is None and record["failure_cause"] is None


def test_a_running_execution_has_no_outcome_yet():
    with pytest.raises(ValueError, match="has not ended"):
        from_execution(described("RUNNING"))


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
PARTS = ("plan", "job", "file_system", "archive", "retained", "explained", "request")


PART = JSON | st.fixed_dictionaries({}, optional={
    key: JSON for key in ("run", "job", "id", "uri", "manifest", "complete", "objects",
                          "estimate", "where", "error", "cause", "bucket", "nodes")})


@given(st.dictionaries(st.sampled_from(PARTS), PART), st.sampled_from(["SUCCEEDED", "FAILED"]))
def test_any_state_gives_a_record_that_fits_its_columns(state, status):
    record = from_state(state, status, ARN, STARTED, ENDED)
    for key, limit in LIMITS.items():
        assert record[key] is None or (isinstance(record[key], str)
                                       and len(record[key]) <= limit), key
    for key in ("nodes", "mpi_gpus", "training_s", "archived_objects"):
        assert record[key] is None or 0 <= record[key] < 2**31, key
    money = record["estimated_max_usd"]
    assert money is None or (money.is_finite() and 0 <= money < 10**6)
