"""The job's metrics.json is the job's own writing: read for the goodput once
(``training.recoveries``), every value that is not a number the attempt could have had is left
out and named, the rest counted, and the manifest is written whatever the file holds."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from traingrid.aws import clients
from traingrid.costs import receipt
from traingrid.training import manifest, recoveries
from traingrid.training.archive import OUTPUT_INDEX, outputs_of
from traingrid.training.plan import MANIFEST_NAME, DatasetSize, plan_run
from traingrid.training.run_request import TrainingRunRequest

BOUNDS = recoveries.Bounds(nodes=20, seconds=3600)
BUCKET = "recoveries-test-data"


def recovery(**changed: Any) -> dict[str, Any]:
    return {"nodes_before": 20, "nodes_after": 19, "world_size_before": 160,
            "world_size_after": 152, "recovery_s": 60.0, "lost_work_s": 300.0,
            "steps_lost": 732} | changed


def test_overflowing_values_are_left_out_and_named_and_the_rest_still_counts():
    document = {"recoveries": [recovery(lost_work_s=1e308), recovery(nodes_before=10**400),
                               recovery(recovery_s=1.7e308, lost_work_s=-1), recovery()]}
    reported = recoveries.read(document, BOUNDS)
    assert reported.phases == {"recovery": 19 * 60, "lost_work": 20 * 300}
    assert reported.ignored == [
        "/recoveries/0/lost_work_s: 1e+308 is longer than the attempt ran (3600 s); the "
        "recovery is left out",
        "/recoveries/1/nodes_before: an integer too large is not from 1 to the attempt's nodes "
        "(20); the recovery is left out",
        "/recoveries/2/recovery_s: 1.7e+308 is longer than the attempt ran (3600 s); the "
        "recovery is left out",
        "/recoveries/2/lost_work_s: -1 is negative; the recovery is left out",
    ]


@pytest.mark.parametrize(("changed", "named"), [
    ({"nodes_before": 21}, "/recoveries/0/nodes_before: 21 is not from 1 to the attempt's"),
    ({"nodes_after": 20, "nodes_before": 19}, "/recoveries/0/nodes_after: 20 is not from 1 "
                                              "to nodes_before (19)"),
    ({"nodes_after": 0}, "/recoveries/0/nodes_after: 0 is not from 1"),
    ({"nodes_before": True}, "/recoveries/0/nodes_before: true is not a whole number"),
    ({"nodes_before": 19.0}, "/recoveries/0/nodes_before: 19 is not a whole number"),
    ({"recovery_s": "60"}, "/recoveries/0/recovery_s: text is not a finite number"),
    ({"recovery_s": None}, "/recoveries/0/recovery_s: null is not a finite number"),
    ({"recovery_s": float("nan")}, "/recoveries/0/recovery_s: nan is not a finite number"),
    ({"lost_work_s": float("inf")}, "/recoveries/0/lost_work_s: inf is not a finite number"),
    ({"lost_work_s": 3601}, "/recoveries/0/lost_work_s: 3601 is longer than the attempt ran"),
    ({"lost_work_s": [1]}, "/recoveries/0/lost_work_s: a list is not a finite number"),
])
def test_a_value_the_attempt_could_not_have_had_leaves_its_recovery_out(changed, named):
    reported = recoveries.read({"recoveries": [recovery(**changed)]}, BOUNDS)
    assert reported.phases == {}  # not clamped into the figures: left out
    assert len(reported.ignored) == 1 and reported.ignored[0].startswith(named), reported


def test_recoveries_adding_up_to_more_than_the_attempt_ran_are_left_out_past_it():
    each = recovery(recovery_s=600, lost_work_s=600)  # 20 minutes of the attempt's 60 each
    reported = recoveries.read({"recoveries": [each] * 4}, BOUNDS)
    assert reported.phases == {"recovery": 3 * 19 * 600, "lost_work": 3 * 20 * 600}
    assert reported.ignored == [
        "/recoveries/3: with the recoveries before it, 4800 s of recovery and lost work, more "
        "than the attempt ran (3600 s); the recovery is left out"]


def test_what_is_not_a_list_of_recoveries_is_said_so_and_nothing_is_read():
    assert recoveries.read({"top1_accuracy": 0.7}, BOUNDS) == recoveries.Reported()
    assert recoveries.read([1], BOUNDS).ignored == [
        "metrics.json is a list, not an object; no recoveries read"]
    assert recoveries.read({"recoveries": {"a": 1}}, BOUNDS).ignored == [
        "/recoveries: an object, not a list; no recoveries read"]
    assert recoveries.read({"recoveries": ["x"]}, BOUNDS).ignored == [
        "/recoveries/0: text, not a recovery; left out"]


def test_the_notes_stay_a_few_short_lines_however_much_is_wrong():
    hostile = {"recoveries": [recovery(nodes_before="x" * 100_000)] * 10_000}
    reported = recoveries.read(hostile, BOUNDS)
    assert reported.phases == {}
    assert len(reported.ignored) == recoveries.MAX_NOTES + 1
    assert reported.ignored[-1] == "and 9980 more value(s) left out"
    assert all(len(note) <= recoveries.NOTE_CHARS for note in reported.ignored)
    assert "xxx" not in "".join(reported.ignored)  # what the job wrote is described, not echoed


def test_the_receipt_counts_what_was_read_and_says_what_was_left_out():
    reported = recoveries.read({"recoveries": [recovery(lost_work_s=1e308), recovery()]},
                               BOUNDS)
    state = {"plan": {"job": {"instance_type": "p3.16xlarge", "attempts": [
                 {"attempt": 1, "nodes": 20, "reason": "first attempt", "resumed_from": None,
                  "job_id": "job-1"}]}},
             "job": {"id": "job-1", "status": "SUCCEEDED", "running_s": 3600},
             "archive": {"complete": True, "phases": reported.phases,
                         "ignored": reported.ignored}}
    cost = receipt.receipt(receipt.from_state(state, 0.0, ""), None)
    good = cost["goodput"]
    assert good["ignored"] == reported.ignored
    assert good["lost_node_hours"]["lost_work"] == round(20 * 300 / 3600, 6)
    assert good["goodput"] == round((20 * 3600 - 19 * 60 - 20 * 300) / (20 * 3600), 4)
    # Nothing left out, nothing said.
    del state["archive"]["ignored"]
    assert "ignored" not in receipt.receipt(receipt.from_state(state, 0.0, ""), None)["goodput"]


@pytest.fixture
def archived(monkeypatch: pytest.MonkeyPatch) -> Any:
    """A run's archive on moto's S3 whose job wrote ``metrics.json`` as the test says."""
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        clients.reset()
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        request = TrainingRunRequest.model_validate({"dataset": f"s3://{BUCKET}/data/",
                                                     "nodes": 20})
        plan = dict(plan_run(request, run="r1", execution_arn="arn",
                             dataset=DatasetSize(1, 1 << 30),
                             now=datetime(2026, 11, 25, tzinfo=UTC)))

        def write(metrics: bytes) -> dict[str, Any]:
            outputs = outputs_of(plan["archive"])
            s3.put_object(Bucket=BUCKET, Key=outputs + "metrics.json", Body=metrics)
            s3.put_object(Bucket=BUCKET, Key=outputs + OUTPUT_INDEX, Body=json.dumps(
                {"files": [{"path": "metrics.json", "size": len(metrics)}]}).encode())
            event: Any = {"plan": plan, "file_system": {"id": "fs-1"},
                          "job": {"id": "job-1", "status": "SUCCEEDED", "running_s": 3600},
                          "export": {"id": "task-1", "lifecycle": "SUCCEEDED", "exported": 2}}
            state = manifest.write_manifest(event)
            written = s3.get_object(Bucket=BUCKET, Key=plan["archive"]["prefix"] + MANIFEST_NAME)
            return state | {"manifest_objects": json.loads(written["Body"].read())["object_count"]}

        yield write
        clients.reset()


@pytest.mark.parametrize("metrics", [
    json.dumps({"recoveries": [recovery(lost_work_s=1e308)]}).encode(),
    b'{"recoveries": [{"nodes_before": 1' + b"0" * 400 + b', "nodes_after": 1, '
    b'"recovery_s": 1, "lost_work_s": 1}]}',
    b'{"recoveries": [{"lost_work_s": 1e999}]}',  # out of a double's range: not JSON we read
    b"[" * 100_000,
])
def test_whatever_metrics_json_holds_the_manifest_is_written(archived, metrics):
    state = archived(metrics)
    assert state["complete"] is True and state["manifest_objects"] == 2
    assert "phases" not in state
    assert state["ignored"] and all(len(n) <= recoveries.NOTE_CHARS for n in state["ignored"])


def test_a_readable_recovery_beside_a_forged_one_reaches_the_runs_state(archived):
    state = archived(json.dumps({"recoveries": [recovery(), recovery(nodes_before=500)]}
                                ).encode())
    assert state["phases"] == {"recovery": 19 * 60, "lost_work": 20 * 300}
    assert state["ignored"] == ["/recoveries/1/nodes_before: 500 is not from 1 to the "
                                "attempt's nodes (20); the recovery is left out"]
