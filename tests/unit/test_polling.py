"""The poll loops' decisions: backoff, hydrate, training watchdog, export."""

from __future__ import annotations

import pytest

from traingrid.errors import ExportFailed, ExportTimedOut, FileSystemFailed, HydrateTimedOut
from traingrid.training import polling
from traingrid.training.polling import JobState, Poll

PLAN_JOB = {"nodes": 20, "instance_type": "p3.16xlarge", "vcpus": 64}
LIMITS = {"hydrate_s": 3600, "runnable_s": 1800, "training_s": 7200, "archive_s": 3600}


def test_backoff_grows_to_its_cap():
    waits = [polling.TRAINING_BACKOFF.wait_after(n) for n in range(1, 12)]
    assert waits[0] == 30
    assert waits == sorted(waits)
    assert waits[-1] == polling.TRAINING_BACKOFF.max_s


def test_poll_counts_the_waits_it_made():
    poll = Poll()
    for _ in range(3):
        poll = poll.advance(polling.HYDRATE_BACKOFF)
    assert poll.attempt == 3
    assert poll.elapsed_s == 30 + 45


def test_available_file_system_reports_its_mount():
    result = polling.check_file_system(
        {"FileSystemId": "fs-1", "Lifecycle": "AVAILABLE", "DNSName": "fs-1.fsx",
         "LustreConfiguration": {"MountName": "abcd1234"}}, Poll(), 3600)
    assert (result["lifecycle"], result["dns_name"], result["mount_name"]) == (
        "AVAILABLE", "fs-1.fsx", "abcd1234")


def test_failed_file_system_says_why_and_what_to_do():
    with pytest.raises(FileSystemFailed, match="access denied.*submit the run again"):
        polling.check_file_system(
            {"FileSystemId": "fs-1", "Lifecycle": "FAILED",
             "FailureDetails": {"Message": "access denied"}}, Poll(), 3600)


def test_hydrate_is_bounded():
    poll = Poll(attempt=40, elapsed_s=3500, wait_s=300)
    with pytest.raises(HydrateTimedOut, match="timeouts.hydrate_minutes = 60"):
        polling.check_file_system({"FileSystemId": "fs-1", "Lifecycle": "CREATING"}, poll, 3600)


def job(**fields) -> JobState:
    return JobState.of({"id": "job-1", "name": "run-1", **fields})


def test_stuck_job_is_terminated_with_a_diagnosis():
    state = job(waiting_s=1700, poll={"attempt": 9, "elapsed_s": 1700, "wait_s": 300})
    must_terminate = polling.check_training_job(
        state, {"status": "RUNNABLE", "jobQueue": "arn:aws:batch:r:1:job-queue/gpu-queue"},
        PLAN_JOB, LIMITS)
    assert must_terminate
    assert state.error == "TrainingJobStuck"
    assert "20 × p3.16xlarge in job queue gpu-queue" in state.cause
    assert "1280 vCPUs" in state.cause
    state.terminated = True
    assert not polling.check_training_job(state, {"status": "FAILED"}, PLAN_JOB, LIMITS)
    assert state.error == "TrainingJobStuck" and state.done and not state.started


def test_running_past_the_limit_is_terminated():
    state = job(status="RUNNING", running_s=7100, started=True,
                poll={"attempt": 30, "elapsed_s": 7400, "wait_s": 300})
    assert polling.check_training_job(state, {"status": "RUNNING"}, PLAN_JOB, LIMITS)
    assert state.error == "TrainingTimedOut"


def test_failed_job_cause_names_node_exit_code_and_logs():
    description = {
        "jobName": "run-1", "jobId": "job-1", "status": "FAILED", "startedAt": 1,
        "statusReason": "Essential container in task exited",
        "nodeProperties": {"mainNode": 0},
        "attempts": [{"container": {"exitCode": 3, "logStreamName": "jd/default/x"}}],
    }
    state = job()
    assert not polling.check_training_job(state, description, PLAN_JOB, LIMITS)
    assert state.error == "TrainingJobFailed" and state.started and state.done
    assert "main node 0 exited with code 3" in state.cause
    assert "jd/default/x" in state.cause


def test_succeeded_job_is_done_without_error():
    state = job()
    assert not polling.check_training_job(
        state, {"status": "SUCCEEDED", "startedAt": 1}, PLAN_JOB, LIMITS)
    assert state.as_output()["done"] and state.error is None and state.started


def test_export_outcomes():
    done = polling.check_export({"TaskId": "t", "Lifecycle": "SUCCEEDED",
                                 "Status": {"SucceededCount": 4}}, Poll(), 3600)
    assert done["exported"] == 4
    with pytest.raises(ExportFailed, match="AccessDenied. Nothing was deleted"):
        polling.check_export({"TaskId": "t", "Lifecycle": "FAILED",
                              "FailureDetails": {"Message": "AccessDenied"}}, Poll(), 3600)
    with pytest.raises(ExportTimedOut):
        polling.check_export({"TaskId": "t", "Lifecycle": "EXECUTING"},
                             Poll(attempt=50, elapsed_s=3590, wait_s=120), 3600)
