"""Which of TrainGrid's resources to release, and how, from what they are and whether the
execution that made them still runs.

Pure: no AWS calls. Every FSx file system, Batch job and SageMaker training job TrainGrid
creates is tagged with its execution's ARN (``traingrid:execution``). A resource whose
execution has ended (aborted, timed out, failed before its cleanup, or gone) has no one left to
release it: the janitor does. What it never does is delete data that is not safe: a file
system is deleted only when it holds nothing that is not in S3 (the run's archive manifest
exists or S3 holds every file of the job's output index, no training job ever ran on it, or an
export of the run's outputs succeeded after its job ended); otherwise its outputs are exported
first, and if that fails it is kept, tagged with an expiry, like the pipeline's own kept file
systems.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from traingrid.clock import iso, parse_iso
from traingrid.vocabulary.campaign_fanout import RegionJobStatus
from traingrid.vocabulary.statuses import (
    LIVE_BATCH_STATUSES,
    LIVE_RUN_STATUSES,
    FileSystemLifecycle,
    RunStatus,
    TaskLifecycle,
)

FILE_SYSTEM = "fsx:file-system"
BATCH_JOB = "batch:job"
TRAINING_JOB = "sagemaker:training-job"

EXECUTION_TAG = "traingrid:execution"
RUN_TAG = "traingrid:run"
EXPIRES_TAG = "traingrid:expires-at"
RETAINED_TAG = "traingrid:retained"
RETAINED_BY_JANITOR = "janitor-archive-failed"

# Step Functions execution statuses under which the execution still owns its resources.
RUNNING = LIVE_RUN_STATUSES
GONE = "GONE"  # DescribeExecution knows no such execution (any more)
BUSY_FILE_SYSTEM = frozenset({FileSystemLifecycle.CREATING, FileSystemLifecycle.UPDATING})
BROKEN_FILE_SYSTEM = frozenset({FileSystemLifecycle.FAILED, FileSystemLifecycle.MISCONFIGURED})
BUSY_EXPORT = frozenset({TaskLifecycle.PENDING, TaskLifecycle.EXECUTING, TaskLifecycle.CANCELING})
FAILED_EXPORT = frozenset({TaskLifecycle.FAILED, TaskLifecycle.CANCELED})


class Action(StrEnum):
    KEEP = "keep"  # nothing to do: not ours, still used, or already going
    WAIT = "wait"  # released on a later pass, once something has finished
    TERMINATE = "terminate"  # a Batch job
    STOP = "stop"  # a SageMaker training job
    ARCHIVE = "archive"  # export a file system's outputs to S3 before deleting it
    DELETE = "delete"  # a file system whose data is safe
    RETAIN = "retain"  # a file system whose outputs could not be exported: keep, with expiry


# What a pass leaves for a later one.
PENDING = frozenset({Action.WAIT, Action.ARCHIVE})
RELEASING = frozenset({Action.TERMINATE, Action.STOP, Action.DELETE, Action.ARCHIVE,
                       Action.RETAIN})


@dataclass(frozen=True)
class JobRun:
    """A Batch job of a file system's run."""

    id: str
    status: str
    started: bool
    stopped_at: datetime | None = None


@dataclass(frozen=True)
class Export:
    """An export task of a file system."""

    id: str
    lifecycle: str
    created_at: datetime


@dataclass(frozen=True)
class Resource:
    kind: str
    id: str
    region: str
    status: str  # FSx Lifecycle, Batch status, SageMaker TrainingJobStatus
    tags: Mapping[str, str]
    arn: str = ""
    # File systems only: the run's Batch jobs, the file system's exports, whether S3 holds the
    # run's outputs (its manifest, or every file of the job's output index).
    jobs: tuple[JobRun, ...] = ()
    exports: tuple[Export, ...] = ()
    archived: bool = False

    @property
    def execution_arn(self) -> str | None:
        return self.tags.get(EXECUTION_TAG)

    @property
    def run(self) -> str | None:
        return self.tags.get(RUN_TAG)


@dataclass(frozen=True)
class Decision:
    resource: Resource
    action: Action
    reason: str
    execution_status: str | None = None
    expires_at: str | None = None  # RETAIN: the file system's new expiry

    def as_dict(self) -> dict[str, str | None]:
        return {
            "action": str(self.action), "type": self.resource.kind, "id": self.resource.id,
            "region": self.resource.region, "run": self.resource.run,
            "execution_arn": self.resource.execution_arn,
            "execution_status": self.execution_status, "reason": self.reason,
            **({"expires_at": self.expires_at} if self.expires_at else {}),
        }


def execution_prefix(state_machine_arn: str) -> str:
    """What the ARNs of a state machine's executions start with."""
    return state_machine_arn.replace(":stateMachine:", ":execution:", 1) + ":"


def owned_by(execution_arn: str | None, state_machine_arns: Iterable[str]) -> bool:
    """True when the execution is one of these state machines' (this stack's)."""
    return bool(execution_arn) and any(
        execution_arn.startswith(execution_prefix(machine))  # type: ignore[union-attr]
        for machine in state_machine_arns)


def execution_name(execution_arn: str) -> str:
    return execution_arn.rsplit(":", 1)[-1]


def decide(resources: Iterable[Resource], statuses: Mapping[str, str],
           now: datetime, retention: timedelta,
           state_machine_arns: Collection[str]) -> list[Decision]:
    """One decision per resource. ``statuses``: execution ARN → its status (``GONE`` when
    Step Functions no longer knows it); an execution missing there is taken to be running."""
    decisions = []
    for resource in resources:
        arn = resource.execution_arn
        if not owned_by(arn, state_machine_arns):
            decisions.append(Decision(resource, Action.KEEP, (
                f"its {EXECUTION_TAG} tag names no execution of this stack" if arn
                else f"it has no {EXECUTION_TAG} tag")))
            continue
        status = statuses.get(arn, RunStatus.RUNNING)  # type: ignore[arg-type]
        if status in RUNNING:
            decisions.append(Decision(resource, Action.KEEP, f"its execution is {status}",
                                      status))
            continue
        ended = (f"its execution {execution_name(arn)} ended {status}"  # type: ignore[arg-type]
                 if status != GONE else f"its execution {arn} no longer exists")
        decide_one = {FILE_SYSTEM: _file_system, BATCH_JOB: _batch_job,
                      TRAINING_JOB: _training_job}.get(resource.kind)
        if decide_one is None:
            raise ValueError(f"the janitor does not release {resource.kind!r} resources")
        action, reason, expires = decide_one(resource, ended, now, retention)
        decisions.append(Decision(resource, action, reason, status, expires))
    return decisions


Outcome = tuple[Action, str, str | None]


def _batch_job(job: Resource, ended: str, now: datetime, retention: timedelta) -> Outcome:
    if job.status in LIVE_BATCH_STATUSES:
        return Action.TERMINATE, f"{ended}; nothing watches this job any more", None
    return Action.KEEP, f"the job has ended ({job.status})", None


def _training_job(job: Resource, ended: str, now: datetime, retention: timedelta) -> Outcome:
    if job.status == RegionJobStatus.IN_PROGRESS:
        return Action.STOP, f"{ended}; nothing watches this training job any more", None
    if job.status == RegionJobStatus.STOPPING:
        return Action.WAIT, f"{ended}; the training job is stopping", None
    return Action.KEEP, f"the training job has ended ({job.status})", None


def _file_system(fs: Resource, ended: str, now: datetime, retention: timedelta) -> Outcome:
    if fs.status == FileSystemLifecycle.DELETING:
        return Action.KEEP, "it is being deleted", None
    if not fs.run:
        return (Action.KEEP, f"{ended}, but it has no {RUN_TAG} tag: the janitor cannot tell "
                             "where its outputs belong; delete it by hand once they are safe",
                None)
    if fs.tags.get(RETAINED_TAG):
        return _retained(fs, now)
    if fs.status in BUSY_FILE_SYSTEM:
        return Action.WAIT, f"{ended}; the file system is {fs.status}", None
    if fs.status in BROKEN_FILE_SYSTEM:
        return Action.DELETE, f"{ended}; the file system is {fs.status} and holds no data", None
    if live := [j for j in fs.jobs if j.status in LIVE_BATCH_STATUSES]:
        return (Action.WAIT, f"{ended}; its training job {live[0].id} is still "
                             f"{live[0].status}", None)
    if fs.archived:
        return Action.DELETE, f"{ended}; the run's outputs are archived in S3", None
    return _outputs(fs, ended, now, retention)


def _outputs(fs: Resource, ended: str, now: datetime, retention: timedelta) -> Outcome:
    """A file system whose training job ran and whose run is not archived: its outputs are
    safe only once an export that started after the job ended has succeeded."""
    ran = [j for j in fs.jobs if j.started]
    if not ran:
        return (Action.DELETE, f"{ended}; no training job ran on it: it holds only the dataset, "
                               "which is in S3", None)
    job_ended = max((j.stopped_at for j in ran if j.stopped_at), default=None)
    exports = sorted((e for e in fs.exports if job_ended is None or e.created_at >= job_ended),
                     key=lambda e: e.created_at)
    if any(e.lifecycle == TaskLifecycle.SUCCEEDED for e in exports):
        return Action.DELETE, f"{ended}; the run's outputs were exported to S3", None
    if busy := [e for e in exports if e.lifecycle in BUSY_EXPORT]:
        return (Action.WAIT, f"{ended}; export {busy[0].id} of its outputs is "
                             f"{busy[0].lifecycle}", None)
    if exports and exports[-1].lifecycle in FAILED_EXPORT:
        expires = iso(now + retention)
        return (Action.RETAIN, f"{ended}; exporting its outputs failed ({exports[-1].id}): kept "
                               f"until {expires} so nothing is lost", expires)
    return Action.ARCHIVE, f"{ended}; its outputs are not archived yet: exporting them first", None


def _retained(fs: Resource, now: datetime) -> Outcome:
    expires = fs.tags.get(EXPIRES_TAG)
    try:
        expiry = parse_iso(expires or "")
    except ValueError:
        return (Action.KEEP, f"it is kept ({fs.tags[RETAINED_TAG]}) and its {EXPIRES_TAG} tag "
                             f"({expires!r}) is not a time: delete it by hand once its data is "
                             "safe", None)
    if expiry > now:
        return Action.KEEP, f"it is kept until {expires} ({fs.tags[RETAINED_TAG]})", None
    return Action.DELETE, f"it was kept until {expires} ({fs.tags[RETAINED_TAG]}): that has " \
                          "passed", None
