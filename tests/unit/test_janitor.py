"""The janitor's decisions: release what an ended execution left, never data that is not safe."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from traingrid.janitor.decide import (
    BATCH_JOB,
    FILE_SYSTEM,
    GONE,
    TRAINING_JOB,
    Action,
    Export,
    JobRun,
    Resource,
    decide,
    owned_by,
)

MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:traingrid-TrainingRun"
OTHER_MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:other-TrainingRun"
EXECUTION = "arn:aws:states:us-east-1:123456789012:execution:traingrid-TrainingRun:run-1"
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
WEEK = timedelta(days=7)
HOUR = timedelta(hours=1)


def tags(**extra: str) -> dict[str, str]:
    return {"traingrid:run": "run-1", "traingrid:execution": EXECUTION, **extra}


def fs(status: str = "AVAILABLE", **fields) -> Resource:
    fields.setdefault("tags", tags())
    return Resource(FILE_SYSTEM, "fs-1", "us-east-1", status, **fields)


def ran(stopped: datetime = NOW - HOUR, status: str = "FAILED") -> JobRun:
    return JobRun("job-1", status, started=True, stopped_at=stopped)


def one(resource: Resource, status: str = "ABORTED", now: datetime = NOW):
    (decision,) = decide([resource], {EXECUTION: status}, now, WEEK, [MACHINE])
    return decision


@pytest.mark.parametrize("kind", [FILE_SYSTEM, BATCH_JOB, TRAINING_JOB])
@pytest.mark.parametrize("status", ["RUNNING", "PENDING_REDRIVE"])
def test_nothing_of_a_running_execution_is_touched(kind: str, status: str) -> None:
    resource = Resource(kind, "r-1", "us-east-1", "RUNNING", tags())

    decision = one(resource, status)

    assert decision.action is Action.KEEP and status in decision.reason


def test_an_execution_the_janitor_has_not_looked_up_counts_as_running() -> None:
    (decision,) = decide([fs(jobs=())], {}, NOW, WEEK, [MACHINE])

    assert decision.action is Action.KEEP


@pytest.mark.parametrize("resource_tags", [
    {"traingrid:run": "run-1"},
    {"traingrid:execution": EXECUTION.replace("traingrid-TrainingRun", "other-TrainingRun")},
    {"traingrid:execution": "not an arn"},
])
def test_resources_of_other_stacks_or_untagged_are_left_alone(resource_tags) -> None:
    decision = one(fs(tags=resource_tags))

    assert decision.action is Action.KEEP
    assert "traingrid:execution" in decision.reason


def test_ownership_is_by_the_execution_arn_of_this_stacks_state_machines() -> None:
    assert owned_by(EXECUTION, [MACHINE])
    assert not owned_by(EXECUTION, [OTHER_MACHINE])
    # A state machine whose name extends ours is not ours.
    assert not owned_by(EXECUTION.replace("TrainingRun:", "TrainingRun2:"), [MACHINE])
    assert not owned_by(None, [MACHINE])


@pytest.mark.parametrize(("status", "action"), [
    ("SUBMITTED", Action.TERMINATE), ("RUNNABLE", Action.TERMINATE),
    ("RUNNING", Action.TERMINATE), ("SUCCEEDED", Action.KEEP), ("FAILED", Action.KEEP),
])
def test_a_batch_job_of_an_ended_execution_is_terminated_while_live(status, action) -> None:
    decision = one(Resource(BATCH_JOB, "job-1", "us-east-1", status, tags()), "TIMED_OUT")

    assert decision.action is action
    if action is Action.TERMINATE:
        assert "run-1 ended TIMED_OUT" in decision.reason


@pytest.mark.parametrize(("status", "action"), [
    ("InProgress", Action.STOP), ("Stopping", Action.WAIT), ("Completed", Action.KEEP),
    ("Stopped", Action.KEEP), ("Failed", Action.KEEP),
])
def test_a_training_job_of_an_ended_execution_is_stopped_while_in_progress(status, action):
    decision = one(Resource(TRAINING_JOB, "job-euc1-1", "eu-central-1", status, tags()))

    assert decision.action is action


def test_an_execution_that_no_longer_exists_has_ended() -> None:
    decision = one(Resource(BATCH_JOB, "job-1", "us-east-1", "RUNNING", tags()), GONE)

    assert decision.action is Action.TERMINATE
    assert "no longer exists" in decision.reason


def test_a_file_system_of_a_run_stopped_while_hydrating_waits_then_goes() -> None:
    assert one(fs("CREATING")).action is Action.WAIT
    deleted = one(fs("AVAILABLE"))
    assert deleted.action is Action.DELETE
    assert "no training job ran on it" in deleted.reason


@pytest.mark.parametrize("status", ["FAILED", "MISCONFIGURED"])
def test_a_broken_file_system_is_deleted(status: str) -> None:
    assert one(fs(status, jobs=(ran(),))).action is Action.DELETE


def test_a_file_system_without_its_run_is_left_for_a_person() -> None:
    decision = one(fs(tags={"traingrid:execution": EXECUTION}))

    assert decision.action is Action.KEEP and "traingrid:run" in decision.reason


def test_a_file_system_being_deleted_is_left_to_it() -> None:
    assert one(fs("DELETING")).action is Action.KEEP


def test_a_file_system_waits_while_its_job_is_still_stopping() -> None:
    decision = one(fs(jobs=(JobRun("job-1", "RUNNING", started=True),)))

    assert decision.action is Action.WAIT and "job-1 is still RUNNING" in decision.reason


def test_a_job_that_never_started_wrote_nothing() -> None:
    never = JobRun("job-1", "FAILED", started=False, stopped_at=NOW)

    assert one(fs(jobs=(never,))).action is Action.DELETE


def test_a_run_between_attempts_keeps_its_file_system_for_the_next_one() -> None:
    lost = ran(stopped=NOW - HOUR)
    resubmitted = JobRun("job-2", "RUNNABLE", started=False)

    decision = one(fs(jobs=(lost, resubmitted)), status="RUNNING")

    assert decision.action is Action.KEEP and "RUNNING" in decision.reason


def test_an_earlier_attempts_outputs_are_exported_even_if_the_last_one_never_started() -> None:
    lost = ran(stopped=NOW - 2 * HOUR)
    never = JobRun("job-2", "FAILED", started=False, stopped_at=NOW - HOUR)

    assert one(fs(jobs=(lost, never))).action is Action.ARCHIVE
    exported = Export("task-1", "SUCCEEDED", NOW - HOUR)
    assert one(fs(jobs=(lost, never), exports=(exported,))).action is Action.DELETE


def test_an_archived_run_lets_its_file_system_go() -> None:
    assert one(fs(jobs=(ran(),), archived=True)).action is Action.DELETE


def test_outputs_that_are_not_archived_are_exported_first() -> None:
    decision = one(fs(jobs=(ran(),)))

    assert decision.action is Action.ARCHIVE


def test_an_export_in_progress_is_waited_for_and_a_finished_one_frees_the_file_system() -> None:
    busy = Export("task-1", "EXECUTING", NOW - timedelta(minutes=5))
    done = Export("task-1", "SUCCEEDED", NOW - timedelta(minutes=5))

    assert one(fs(jobs=(ran(),), exports=(busy,))).action is Action.WAIT
    assert one(fs(jobs=(ran(),), exports=(done,))).action is Action.DELETE


def test_an_export_from_before_the_job_ended_does_not_cover_its_outputs() -> None:
    early = Export("task-0", "SUCCEEDED", NOW - 3 * HOUR)

    decision = one(fs(jobs=(ran(stopped=NOW - HOUR),), exports=(early,)))

    assert decision.action is Action.ARCHIVE


def test_a_failed_export_keeps_the_file_system_with_an_expiry() -> None:
    failed = Export("task-2", "FAILED", NOW - timedelta(minutes=10))

    decision = one(fs(jobs=(ran(),), exports=(failed,)))

    assert decision.action is Action.RETAIN
    assert decision.expires_at == "2026-11-28T12:00:00Z"
    assert "task-2" in decision.reason and decision.expires_at in decision.reason


def test_a_retry_after_a_failed_export_counts() -> None:
    failed = Export("task-2", "FAILED", NOW - timedelta(minutes=30))
    retried = Export("task-3", "EXECUTING", NOW - timedelta(minutes=5))

    assert one(fs(jobs=(ran(),), exports=(failed, retried))).action is Action.WAIT


@pytest.mark.parametrize(("expires", "action"), [
    ("2026-11-21T12:00:01Z", Action.KEEP),
    ("2026-11-21T11:59:59Z", Action.DELETE),
    ("next tuesday", Action.KEEP),
    ("", Action.KEEP),
])
def test_a_kept_file_system_stays_until_its_expiry(expires: str, action: Action) -> None:
    kept = fs(jobs=(ran(),), tags=tags(**{"traingrid:retained": "archive-failed",
                                           "traingrid:expires-at": expires}))

    decision = one(kept, "FAILED")

    assert decision.action is action
    if expires == "next tuesday":
        assert "is not a time" in decision.reason


def test_an_unknown_resource_type_is_an_error() -> None:
    with pytest.raises(ValueError, match="does not release 'ec2:instance'"):
        one(Resource("ec2:instance", "i-1", "us-east-1", "running", tags()))


def test_decisions_say_what_and_why() -> None:
    decision = one(Resource(BATCH_JOB, "job-1", "us-east-1", "RUNNING", tags()))

    assert decision.as_dict() == {
        "action": "terminate", "type": BATCH_JOB, "id": "job-1", "region": "us-east-1",
        "run": "run-1", "execution_arn": EXECUTION, "execution_status": "ABORTED",
        "reason": "its execution run-1 ended ABORTED; nothing watches this job any more",
    }


# --- Whatever the file system's story, data that is not safe is never deleted -------------

moments = st.integers(min_value=-48, max_value=48).map(lambda h: NOW + timedelta(hours=h))
jobs = st.builds(JobRun, id=st.sampled_from(["job-1", "job-2"]),
                 status=st.sampled_from(["SUBMITTED", "RUNNABLE", "RUNNING", "SUCCEEDED",
                                         "FAILED"]),
                 started=st.booleans(), stopped_at=st.none() | moments)
exports = st.builds(Export, id=st.sampled_from(["task-1", "task-2"]),
                    lifecycle=st.sampled_from(["PENDING", "EXECUTING", "SUCCEEDED", "FAILED",
                                               "CANCELED"]),
                    created_at=moments)
retention = st.none() | st.tuples(st.sampled_from(["archive-failed", "janitor-archive-failed"]),
                                  moments)


@given(status=st.sampled_from(["CREATING", "AVAILABLE", "FAILED", "UPDATING", "DELETING"]),
       run_jobs=st.lists(jobs, max_size=3), run_exports=st.lists(exports, max_size=3),
       archived=st.booleans(), kept=retention,
       execution=st.sampled_from(["RUNNING", "ABORTED", "FAILED", "TIMED_OUT", GONE]))
def test_a_file_system_is_deleted_only_when_its_data_is_safe(status, run_jobs, run_exports,
                                                            archived, kept, execution):
    extra = {} if kept is None else {"traingrid:retained": kept[0],
                                     "traingrid:expires-at": kept[1].strftime(
                                         "%Y-%m-%dT%H:%M:%SZ")}
    resource = fs(status, jobs=tuple(run_jobs), exports=tuple(run_exports), archived=archived,
                  tags=tags(**extra))

    decision = one(resource, execution)

    if decision.action is not Action.DELETE:
        return
    assert execution != "RUNNING"
    assert not any(j.status in ("SUBMITTED", "RUNNABLE", "RUNNING") for j in run_jobs) or (
        status == "FAILED" or kept is not None)
    wrote = [j for j in run_jobs if j.started]
    last_end = max((j.stopped_at for j in wrote if j.stopped_at), default=None)
    exported = any(e.lifecycle == "SUCCEEDED" and (last_end is None or e.created_at >= last_end)
                   for e in run_exports)
    safe = (archived or not wrote or exported or status == "FAILED"
            or (kept is not None and kept[1] <= NOW))
    assert safe, decision.reason
