"""The poll loops' decisions: backoff, hydrate, training watchdog, export."""

from __future__ import annotations

import pytest

from traingrid.errors import ExportFailed, ExportTimedOut, FileSystemFailed, HydrateTimedOut
from traingrid.training import waits
from traingrid.training.capacity import Shortage
from traingrid.training.waits import JobState, Poll

PLAN_JOB = {"nodes": 20, "instance_type": "p3.16xlarge", "vcpus": 64}
LIMITS = {"hydrate_s": 3600, "runnable_s": 1800, "training_s": 7200, "archive_s": 3600}


def test_backoff_grows_to_its_cap():
    backoff_waits = [waits.HYDRATE_BACKOFF.wait_after(n) for n in range(1, 12)]
    assert backoff_waits[0] == 30
    assert backoff_waits == sorted(backoff_waits)
    assert backoff_waits[-1] == waits.HYDRATE_BACKOFF.max_s


def test_poll_counts_the_waits_it_made():
    poll = Poll()
    for _ in range(3):
        poll = poll.advance(waits.HYDRATE_BACKOFF)
    assert poll.attempt == 3
    assert poll.elapsed_s == 30 + 45


def test_available_file_system_reports_its_mount():
    result = waits.check_file_system(
        {"FileSystemId": "fs-1", "Lifecycle": "AVAILABLE", "DNSName": "fs-1.fsx",
         "LustreConfiguration": {"MountName": "abcd1234"}}, Poll(), 3600)
    assert (result["lifecycle"], result["dns_name"], result["mount_name"]) == (
        "AVAILABLE", "fs-1.fsx", "abcd1234")


def test_failed_file_system_says_why_and_what_to_do():
    with pytest.raises(FileSystemFailed, match="access denied.*submit the run again"):
        waits.check_file_system(
            {"FileSystemId": "fs-1", "Lifecycle": "FAILED",
             "FailureDetails": {"Message": "access denied"}}, Poll(), 3600)


def test_hydrate_is_bounded():
    poll = Poll(attempt=40, elapsed_s=3500, wait_s=300)
    with pytest.raises(HydrateTimedOut, match="timeouts.hydrate_minutes = 60"):
        waits.check_file_system({"FileSystemId": "fs-1", "Lifecycle": "CREATING"}, poll, 3600)


def job(**fields) -> JobState:
    return JobState.of({"id": "job-1", "name": "run-1", **fields})


MINUTE_MS = 60_000
CREATED = 1_700_000_000_000  # ms, as Batch stamps createdAt


def check(state: JobState, status: str, now_min: float, shortage: Shortage | None = None,
          **description) -> bool:
    """Check the job ``now_min`` minutes after it was created."""
    return waits.check_training_job(
        state, {"status": status, "createdAt": CREATED, **description}, PLAN_JOB, LIMITS,
        CREATED + int(now_min * MINUTE_MS), shortage)


def test_time_in_the_queue_and_on_the_nodes_comes_from_batch_timestamps():
    state = job()
    check(state, "RUNNABLE", 12)
    assert (state.waiting_s, state.running_s, state.started) == (720, 0, False)

    check(state, "RUNNING", 100, startedAt=CREATED + 20 * MINUTE_MS)
    assert (state.waiting_s, state.running_s, state.started) == (1200, 4800, True)

    check(state, "SUCCEEDED", 500, startedAt=CREATED + 20 * MINUTE_MS,
          stoppedAt=CREATED + 90 * MINUTE_MS)
    assert state.running_s == 70 * 60  # until it stopped, not until it was looked at
    assert state.checks == 3 and state.done


def test_stuck_job_is_terminated_with_a_diagnosis():
    state = job()
    assert not check(state, "RUNNABLE", 29)
    must_terminate = check(state, "RUNNABLE", 31,
                           jobQueue="arn:aws:batch:r:1:job-queue/gpu-queue")
    assert must_terminate
    assert state.error == "TrainingJobStuck"
    assert "20 × p3.16xlarge in job queue gpu-queue" in state.cause
    assert "1280 vCPUs" in state.cause
    assert "waited 31 min in RUNNABLE" in state.cause
    state.terminated = True
    assert not check(state, "FAILED", 32, stoppedAt=CREATED + 32 * MINUTE_MS)
    assert state.error == "TrainingJobStuck" and state.done and not state.started


def test_running_past_the_limit_is_terminated():
    state = job()
    assert check(state, "RUNNING", 5 + 121, startedAt=CREATED + 5 * MINUTE_MS)
    assert state.error == "TrainingTimedOut"
    assert "ran 2 h, over timeouts.training_hours = 2" in state.cause


def test_failed_job_cause_names_node_exit_code_and_logs():
    description = {
        "jobName": "run-1", "jobId": "job-1", "status": "FAILED", "startedAt": 1,
        "statusReason": "Essential container in task exited",
        "nodeProperties": {"mainNode": 0},
        "attempts": [{"container": {"exitCode": 3, "logStreamName": "jd/default/x"}}],
    }
    state = job()
    assert not waits.check_training_job(state, description, PLAN_JOB, LIMITS, 2)
    assert state.error == "TrainingJobFailed" and state.started and state.done
    assert "main node 0 exited with code 3" in state.cause
    assert "jd/default/x" in state.cause


def test_succeeded_job_is_done_without_error():
    state = job()
    assert not waits.check_training_job(
        state, {"status": "SUCCEEDED", "startedAt": 1}, PLAN_JOB, LIMITS, 2)
    assert state.as_output()["done"] and state.error is None and state.started


@pytest.mark.parametrize(("state", "expected_s"), [
    # Just queued: checked every minute for AWS's word on capacity, then the fallback.
    (job(status="RUNNABLE", waiting_s=0), waits.CAPACITY_CHECK_S),
    (job(status="SUBMITTED", waiting_s=0), waits.CAPACITY_CHECK_S),
    (job(status="RUNNABLE", waiting_s=waits.CAPACITY_WATCH_S - 1), waits.CAPACITY_CHECK_S),
    (job(status="RUNNABLE", waiting_s=waits.CAPACITY_WATCH_S),
     LIMITS["runnable_s"] - waits.CAPACITY_WATCH_S + waits.LIMIT_MARGIN_S),
    # The runnable limit comes before the fallback: wake just after it.
    (job(status="RUNNABLE", waiting_s=1200), 600 + waits.LIMIT_MARGIN_S),
    # Training far from its limit: the fallback; near it: just after it.
    (job(status="RUNNING", running_s=600), 900),
    (job(status="RUNNING", running_s=7000), 200 + waits.LIMIT_MARGIN_S),
    # Past a limit already (about to be terminated): never shorter than a minute.
    (job(status="RUNNING", running_s=9000), waits.MIN_WAIT_S),
    # Terminated: FAILED is reported within minutes.
    (job(status="RUNNING", terminated=True), waits.AFTER_TERMINATE_WAIT_S),
])
def test_the_next_wait_is_the_fallback_or_until_just_past_the_next_limit(state, expected_s):
    assert waits.next_wait(state, LIMITS, fallback_s=900) == expected_s


def test_a_fallback_as_long_as_the_limit_still_wakes_past_the_limit():
    state = job(status="RUNNABLE", waiting_s=waits.CAPACITY_WATCH_S)
    wait = waits.next_wait(state, LIMITS, fallback_s=LIMITS["runnable_s"])
    assert wait == LIMITS["runnable_s"] - waits.CAPACITY_WATCH_S + waits.LIMIT_MARGIN_S
    # The check at the timeout terminates it.
    assert check(state, "RUNNABLE", (waits.CAPACITY_WATCH_S + wait) / 60)


NO_P3 = Shortage("InsufficientInstanceCapacity",
                 "scaling activity of Auto Scaling group ce-asg-1",
                 "Could not launch On-Demand Instances. InsufficientInstanceCapacity - We "
                 "currently do not have sufficient p3.16xlarge capacity in the Availability "
                 "Zone you requested (us-east-1a).")


def test_aws_saying_there_is_no_capacity_ends_the_wait_within_minutes():
    state = job()
    assert check(state, "RUNNABLE", 2, shortage=NO_P3,
                 jobQueue="arn:aws:batch:r:1:job-queue/gpu-queue")
    assert (state.error, state.capacity_code) == ("TrainingJobStuck",
                                                  "InsufficientInstanceCapacity")
    assert "No capacity for 20 × p3.16xlarge in job queue gpu-queue: AWS reports " \
           "InsufficientInstanceCapacity (scaling activity of Auto Scaling group ce-asg-1)" \
           in state.cause
    assert "do not have sufficient p3.16xlarge capacity" in state.cause
    assert "after 2 min in RUNNABLE" in state.cause


def test_a_job_on_its_nodes_is_not_stopped_by_an_old_capacity_message():
    state = job()
    assert not check(state, "RUNNING", 5, shortage=NO_P3, startedAt=CREATED + MINUTE_MS)
    assert state.error is None and state.capacity_code is None


def test_without_aws_saying_so_a_queued_job_waits_as_before():
    state = job()
    assert not check(state, "RUNNABLE", 20, shortage=None)
    assert state.error is None


def test_export_check_is_timed_for_the_predicted_end():
    # Half the files in 100 s: the other half takes about 100 s more.
    task = {"TaskId": "t", "Lifecycle": "EXECUTING", "StartTime": 1000.0,
            "Status": {"TotalCount": 10, "SucceededCount": 5, "LastUpdatedTime": 1100.0}}
    assert waits.export_remaining_s(task, now_s=1110.0) == pytest.approx(90.0)
    poll = Poll(attempt=3, elapsed_s=60, wait_s=34)
    sooner = waits.check_export(task, poll, 3600, now_s=1190.0)
    assert sooner["poll"]["wait_s"] == 11  # 10 s to the predicted end, plus one
    just_due = waits.check_export(task, poll, 3600, now_s=1202.0)
    assert just_due["poll"]["wait_s"] == waits.EXPORT_TAIL_S
    # Long past the prediction: wait half as long again as it is overdue.
    overdue = waits.check_export(task, poll, 3600, now_s=1240.0)
    assert overdue["poll"]["wait_s"] == 20
    # Far from the end, or without progress: the backoff step.
    far = waits.check_export(task | {"Status": {"TotalCount": 10, "SucceededCount": 1,
                                                  "LastUpdatedTime": 1100.0}},
                               poll, 3600, now_s=1100.0)
    assert far["poll"]["wait_s"] == waits.EXPORT_BACKOFF.wait_after(4)
    pending = waits.check_export({"TaskId": "t", "Lifecycle": "PENDING"}, poll, 3600, 1100.0)
    assert pending["poll"]["wait_s"] == waits.EXPORT_BACKOFF.wait_after(4)


def test_export_outcomes():
    done = waits.check_export({"TaskId": "t", "Lifecycle": "SUCCEEDED",
                                 "Status": {"SucceededCount": 4}}, Poll(), 3600)
    assert done["exported"] == 4
    with pytest.raises(ExportFailed, match="AccessDenied. Nothing was deleted"):
        waits.check_export({"TaskId": "t", "Lifecycle": "FAILED",
                              "FailureDetails": {"Message": "AccessDenied"}}, Poll(), 3600)
    with pytest.raises(ExportTimedOut):
        waits.check_export({"TaskId": "t", "Lifecycle": "EXECUTING"},
                             Poll(attempt=50, elapsed_s=3590, wait_s=120), 3600)
