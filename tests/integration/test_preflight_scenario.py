"""``slow-node``: the first job's pre-flight check names a node far below the others and exits
75 before training; NextAttempt reads its verdict from S3, retries on fresh hosts, and the run
succeeds on the second attempt with nothing leaked."""

from __future__ import annotations

import json

from tests.integration.iam import missing_permissions
from traingrid_local.stack.environment import DEMO_BUCKET

FIGURE = "node 10.20.0.20 (rank 80): 260 images/s, median 1,302: below 50%"


def test_a_slow_node_fails_the_pre_flight_and_the_next_attempt_succeeds(run_scenario):
    outcome = run_scenario("slow-node")
    execution = outcome.execution
    assert execution["status"] == "SUCCEEDED", execution["cause"]
    first, second = execution["attempts"]
    assert first["outcome"] == f"exit 75: pre-flight check failed: {FIGURE}"
    assert first["ran_s"] == 150  # the check's time, not the long run's
    assert (second["nodes"], second["reason"], second["resumed_from"]) == (
        20, first["outcome"], None)
    # The record keeps the measurement: every rank's figures, the verdict, the thresholds.
    s3 = outcome.emulator.client("s3")
    document = json.loads(s3.get_object(
        Bucket=DEMO_BUCKET, Key=f"runs/{execution['name']}/outputs/preflight.json",
    )["Body"].read())
    assert document["passed"] is True  # the second job's check, on healthy hosts
    assert document["thresholds"]["instance_type"] == "p4d.24xlarge"
    assert len(document["ranks"]) == 160
    record = outcome.record
    assert record["status"] == "SUCCEEDED"
    assert [a["reason"] for a in record["attempts"]] == ["first attempt", first["outcome"]]
    assert outcome.report["leaked_resources"] == []
    # NextAttempt read the verdict with its own role's s3:GetObject.
    next_attempt = outcome.stack.resources["NextAttemptFunction"]
    assert any("GetObject" in op for op in outcome.calls[next_attempt]), outcome.calls
    assert missing_permissions(outcome.stack, outcome.calls) == []
    assert outcome.emulator.client("fsx").describe_file_systems()["FileSystems"] == []
