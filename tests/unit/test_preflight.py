"""The pre-flight check's side of the runtime: its exit code is an infrastructure failure that
another attempt retries, its verdict becomes the attempt's reason, and each instance type's
thresholds reach the job."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from traingrid.training import attempts
from traingrid.training.attempts import FailureKind, classify, next_attempt
from traingrid.training.plan import GIB, DatasetSize, job_environment, plan_run
from traingrid.training.run_request import TrainingRunRequest
from traingrid.validation import parse
from traingrid.vocabulary.catalog import INSTANCE_TYPES, preflight_thresholds
from traingrid_node.preflight import PREFLIGHT_FILE
from traingrid_node.status import EXIT_PREFLIGHT

CAUSE = ("pre-flight check failed: node 10.20.0.12 (rank 2): 41 images/s, median 205: "
         "below 50%")
SLOW = {"id": "job-1", "status": "FAILED", "error": "TrainingJobFailed", "started": True,
        "running_s": 95, "exit_code": 75, "status_reason": "Essential container in task exited"}


def planned_job():
    request = parse(TrainingRunRequest, {"dataset": "s3://bkt/imagenet/", "nodes": 4})
    return plan_run(request, run="run-1", execution_arn="arn:x:run-1",
                    dataset=DatasetSize(1, GIB),
                    now=datetime(2026, 11, 25, tzinfo=UTC))["job"]


def test_the_node_images_exit_code_is_the_runtimes():
    assert attempts.EXIT_PREFLIGHT == EXIT_PREFLIGHT == 75
    assert EXIT_PREFLIGHT in attempts.INFRASTRUCTURE_EXIT_CODES
    assert attempts.PREFLIGHT_FILE == PREFLIGHT_FILE


def test_a_failed_pre_flight_is_infrastructure_and_its_verdict_is_the_next_attempts_reason():
    assert classify(SLOW).kind is FailureKind.INFRASTRUCTURE
    assert classify(SLOW).summary == "exit 75: the pre-flight check failed"
    job = next_attempt(planned_job(), {**SLOW, "preflight": CAUSE}, None)
    assert job["resubmit"] is True and job["nodes"] == 4
    first, second = job["attempts"]
    assert first["outcome"] == f"exit 75: {CAUSE}"
    assert second["reason"] == first["outcome"] and second["resumed_from"] is None
    assert "10.20.0.12 (rank 2): 41 images/s, median 205" in second["reason"]
    # Exit 75 without the check's verdict in S3 still retries.
    assert next_attempt(planned_job(), SLOW, None)["resubmit"] is True


def test_every_instance_type_gets_thresholds_and_the_job_carries_them():
    for name, instance in INSTANCE_TYPES.items():
        thresholds = preflight_thresholds(instance)
        assert thresholds["instance_type"] == name
        assert 0 < thresholds["min_images_per_s"] < instance.gpu_images_per_s
        assert thresholds["min_bus_gb_s"] > 0 and thresholds["min_share"] == 0.5
        request = TrainingRunRequest(dataset="s3://data/set/", instance_type=name)
        assert json.loads(job_environment(request, "r1", 8)["TRAINGRID_PREFLIGHT"]) == thresholds
    p3 = preflight_thresholds(INSTANCE_TYPES["p3.16xlarge"])
    assert (p3["min_images_per_s"], p3["min_bus_gb_s"]) == (480, 0.47)  # 40% of 1,200; 25 Gbit/s
