"""Another attempt or not: shrink after no capacity, resume after an infrastructure failure,
never retry the training code's own failure; and the request fields that bound it."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from traingrid.errors import RequestInvalid
from traingrid.training import attempts
from traingrid.training.attempts import FailureKind, classify, newest_checkpoint, next_attempt
from traingrid.training.failures import explain
from traingrid.training.plan import GIB, DatasetSize, plan_run
from traingrid.training.run_request import TrainingRunRequest
from traingrid.validation import parse

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
STUCK = {"id": "job-1", "status": "FAILED", "error": "TrainingJobStuck", "waiting_s": 1860,
         "started": False, "running_s": 0}
LOST = {"id": "job-1", "status": "FAILED", "error": "TrainingJobFailed", "started": True,
        "running_s": 1200, "exit_code": None,
        "status_reason": "Host EC2 (instance i-0d1e2a3d4b5e6e7f8) terminated."}
CODE = {**LOST, "exit_code": 1, "status_reason": "Essential container in task exited"}
CHECKPOINT = "/fsx/runs/run-1/checkpoints/epoch-0002.pt"


def planned_job(**fields):
    request = parse(TrainingRunRequest, {"dataset": "s3://bkt/imagenet/", **fields})
    plan = plan_run(request, run="run-1", execution_arn="arn:x:run-1",
                    dataset=DatasetSize(1, GIB), now=NOW)
    return plan["job"]


@pytest.mark.parametrize(("job", "kind"), [
    (STUCK, FailureKind.CAPACITY),
    (LOST, FailureKind.INFRASTRUCTURE),
    ({**CODE, "exit_code": 66}, FailureKind.INFRASTRUCTURE),  # rendezvous timed out
    ({**CODE, "exit_code": 65}, FailureKind.INFRASTRUCTURE),  # FSx mount failed
    ({**CODE, "exit_code": None, "status_reason": "CannotStartContainerError"},
     FailureKind.INFRASTRUCTURE),
    (CODE, FailureKind.TRAINING),
    ({**CODE, "exit_code": 3}, FailureKind.TRAINING),  # mpirun passing on a rank's exit
    ({**CODE, "exit_code": 70}, FailureKind.INFRASTRUCTURE),  # the host lacked EFA devices
    ({**LOST, "error": "TrainingTimedOut"}, FailureKind.LIMIT),
])
def test_failures_are_told_apart_by_exit_code_and_batch_reason(job, kind):
    assert classify(job).kind is kind


def test_no_capacity_halves_the_nodes_down_to_min_nodes_then_stops():
    job = planned_job(nodes=20, min_nodes=4, max_attempts=5)
    tried = []
    while True:
        tried.append(job["nodes"])
        job = next_attempt(job, STUCK, None)
        if not job["resubmit"]:
            break
    assert tried == [20, 10, 5, 4]
    assert job["decision"] == "not retried: no capacity for 4 nodes and min_nodes is 4"
    assert [a["nodes"] for a in job["attempts"]] == [20, 10, 5, 4]
    assert all(a["outcome"].startswith("no capacity") for a in job["attempts"])
    assert job["trained"] is False


def test_a_shrunk_attempt_recomputes_the_gpus_and_keeps_the_per_gpu_batch():
    job = next_attempt(planned_job(nodes=20, min_nodes=8), STUCK, None)
    assert (job["nodes"], job["mpi_gpus"]) == (10, 80)
    env = job["environment"]
    assert (env["MPI_GPUS"], env["BATCH_SIZE"], env["TRAINGRID_ATTEMPT"]) == ("80", "256", "2")
    assert env["TRAINGRID_MIN_NODES"] == "8"
    assert job["attempts"][-1] == {
        "attempt": 2, "nodes": 10, "resumed_from": None,
        "reason": "no capacity: waited 31 min in the queue on 20 nodes; shrunk to 10"}
    assert job["decision"] == "attempt 2 of 3 on 10 nodes, from the start"


def test_without_min_nodes_a_run_does_not_shrink():
    job = next_attempt(planned_job(nodes=20), STUCK, None)
    assert job["resubmit"] is False
    assert job["decision"] == "not retried: no capacity for 20 nodes and min_nodes is 20"


def test_a_lost_node_resumes_on_the_same_nodes_from_the_checkpoint():
    job = next_attempt(planned_job(nodes=4), LOST, CHECKPOINT)
    assert (job["resubmit"], job["nodes"], job["trained"]) == (True, 4, True)
    assert job["attempts"][0] | {"job_id": "job-1", "ran_s": 1200} == job["attempts"][0]
    assert job["attempts"][1]["resumed_from"] == CHECKPOINT
    assert job["attempts"][1]["reason"].startswith("node lost: Host EC2")
    assert job["decision"] == f"attempt 2 of 3 on 4 nodes, resuming from {CHECKPOINT}"


def test_infrastructure_failures_stop_after_max_attempts():
    job = planned_job(nodes=4, max_attempts=3)
    for _ in range(3):
        job = next_attempt(job, LOST, CHECKPOINT)
    assert job["resubmit"] is False
    assert len(job["attempts"]) == 3
    assert job["decision"].endswith("all 3 attempts used")


def test_the_training_codes_own_failure_is_never_retried():
    job = next_attempt(planned_job(nodes=4), CODE, CHECKPOINT)
    assert job["resubmit"] is False and len(job["attempts"]) == 1
    assert job["decision"] == ("not retried: the training command exited 1; another attempt "
                               "would fail the same way")


def test_the_failure_cause_names_every_node_count_tried():
    job = planned_job(nodes=20, min_nodes=5)
    for _ in range(3):
        job = next_attempt(job, STUCK, None)
    state = {"plan": {"job": job}, "job": STUCK | {"cause": "No capacity for 5 × p3.16xlarge"}}

    cause = explain(state)["cause"]

    assert "The run made 3 attempts: 1: 20 nodes (first attempt)" in cause
    assert "2: 10 nodes" in cause and "3: 5 nodes" in cause
    assert "The last attempt was not retried: no capacity" in cause


def test_the_newest_checkpoint_is_found_by_epoch_not_by_name():
    prefix = "runs/run-1/checkpoints/"
    keys = [prefix + name for name in ("epoch-0009.pt", "epoch-10000.pt", "epoch-0010.pt",
                                       ".epoch-0011.pt.partial", "notes.txt")]
    assert newest_checkpoint(keys, prefix) == prefix + "epoch-10000.pt"
    assert newest_checkpoint([prefix + "notes.txt"], prefix) is None


def test_min_nodes_above_nodes_is_refused_with_the_other_rule_across_fields():
    with pytest.raises(RequestInvalid) as raised:
        parse(TrainingRunRequest, {"dataset": "s3://bkt/x/", "nodes": 4, "min_nodes": 8,
                                   "epochs": 5, "warmup_epochs": 5})
    assert [p["message"] for p in raised.value.problems] == [
        "warmup_epochs (5) must be less than epochs (5); min_nodes (8) must be at most "
        "nodes (4)"]


@pytest.mark.parametrize("max_attempts", [0, 11, 2.5])
def test_max_attempts_is_bounded(max_attempts):
    with pytest.raises(RequestInvalid) as raised:
        parse(TrainingRunRequest, {"dataset": "s3://bkt/x/", "max_attempts": max_attempts})
    assert [p["pointer"] for p in raised.value.problems] == ["/max_attempts"]


def test_the_plan_starts_the_attempts_and_covers_them_all_in_its_expiry():
    job = planned_job(nodes=8, min_nodes=2, max_attempts=2)
    assert job["attempts"] == [attempts.first_attempt(8)]
    assert (job["requested_nodes"], job["min_nodes"], job["max_attempts"]) == (8, 2, 2)
    assert job["environment"]["TRAINGRID_MIN_NODES"] == "2"
