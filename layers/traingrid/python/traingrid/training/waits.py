"""Decisions of the TrainingRun's waits, from the services' own descriptions.

Pure functions: each takes what a Describe call returned plus the wait's state and returns the
next state. The hydrate and export loops poll with backoff (FSx publishes no lifecycle events)
and count elapsed time as the sum of the waits the state machine made; the training wait is
woken by Batch events and measures time with Batch's own timestamps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, cast

from traingrid.errors import (
    ExportFailed,
    ExportTimedOut,
    FileSystemFailed,
    HydrateTimedOut,
    TrainingJobFailed,
    TrainingJobStuck,
    TrainingTimedOut,
)
from traingrid.training.capacity import Shortage
from traingrid.training.job_shape import last_attempt_container
from traingrid.vocabulary.statuses import (
    ENDED_JOB_STATUSES,
    ON_NODES,
    WAITING_FOR_CAPACITY,
    BatchJobStatus,
    FileSystemLifecycle,
    TaskLifecycle,
)
from traingrid.vocabulary.training_run import (
    ExportState,
    FileSystemState,
    PollState,
    TrainingJobState,
)


@dataclass(frozen=True)
class Backoff:
    first_s: int
    factor: float
    max_s: int

    def wait_after(self, attempt: int) -> int:
        return int(min(self.max_s, self.first_s * self.factor ** max(attempt - 1, 0)))


# A file system in one of these will never hydrate.
HYDRATE_FAILED = (FileSystemLifecycle.FAILED, FileSystemLifecycle.MISCONFIGURED,
                  FileSystemLifecycle.DELETING)
HYDRATE_BACKOFF = Backoff(first_s=30, factor=1.5, max_s=300)
EXPORT_BACKOFF = Backoff(first_s=15, factor=1.5, max_s=120)
# The shortest wait between two checks of an export.
EXPORT_TAIL_S = 5


@dataclass
class Poll:
    """Where a poll loop is: checks made, simulated seconds waited, the next wait."""

    attempt: int = 0
    elapsed_s: int = 0
    wait_s: int = 0

    @classmethod
    def of(cls, data: Mapping[str, Any] | None) -> Poll:
        data = data or {}
        return cls(int(data.get("attempt", 0)), int(data.get("elapsed_s", 0)),
                   int(data.get("wait_s", 0)))

    def state(self) -> PollState:
        return PollState(attempt=self.attempt, elapsed_s=self.elapsed_s, wait_s=self.wait_s)

    def advance(self, backoff: Backoff) -> Poll:
        """The state after one more check: the previous wait has passed."""
        attempt = self.attempt + 1
        return Poll(attempt, self.elapsed_s + self.wait_s, backoff.wait_after(attempt))


# --- Hydrate -----------------------------------------------------------------------------


def check_file_system(
    description: dict[str, Any], poll: Poll, limit_s: int
) -> FileSystemState:
    """Next state of the hydrate loop from a DescribeFileSystems entry."""
    fs_id = description["FileSystemId"]
    lifecycle = description.get("Lifecycle", FileSystemLifecycle.CREATING)
    poll = poll.advance(HYDRATE_BACKOFF)
    if lifecycle == FileSystemLifecycle.AVAILABLE:
        lustre = description.get("LustreConfiguration", {})
        return FileSystemState(
            id=fs_id, lifecycle=lifecycle, dns_name=description.get("DNSName", ""),
            mount_name=lustre.get("MountName", "fsx"), hydrate_s=poll.elapsed_s,
            poll=poll.state())
    if lifecycle in HYDRATE_FAILED:
        reason = description.get("FailureDetails", {}).get("Message", "no reason given")
        raise FileSystemFailed(
            f"FSx file system {fs_id} is {lifecycle} while hydrating: {reason}. It is being "
            "deleted. Check that FSx can read the dataset prefix (bucket policy, KMS key) and "
            "that the subnet and security group allow Lustre traffic (TCP 988, 1018-1023), "
            "then submit the run again."
        )
    if poll.elapsed_s > limit_s:
        raise HydrateTimedOut(
            f"FSx file system {fs_id} is still {lifecycle} after {poll.elapsed_s // 60} min "
            f"(limit timeouts.hydrate_minutes = {limit_s // 60}). It is being deleted. "
            "Raise the limit for large datasets or check the FSx service health."
        )
    return FileSystemState(id=fs_id, lifecycle=lifecycle, poll=poll.state())


# --- Train -------------------------------------------------------------------------------
#
# The job is not polled on a schedule: the state machine waits on a task token that a Batch
# "Job State Change" event completes (training/completion.py). Each wait has a timeout, after
# which the job is checked once and the wait starts again, so a lost event costs at most one
# timeout. The decisions below run on every check, whatever woke it.

# A wait that ends at a limit ends this much after it, so the check that follows sees it passed.
LIMIT_MARGIN_S = 30
# The shortest wait, and the wait for a job told to terminate to report FAILED.
MIN_WAIT_S = 30
AFTER_TERMINATE_WAIT_S = 300
# While a job waits for nodes, it is checked this often for AWS's word that none will come
# (training/capacity.py), for its first CAPACITY_WATCH_S in the queue: EC2 says it within a
# minute or two of the group's launch, and a job still queued after that waits as before.
# 90 s decides within 5 minutes of submission and costs a job that gets its nodes in the
# usual two or three minutes one or two checks (a wait's timeout each, no polling loop).
CAPACITY_CHECK_S = 90
CAPACITY_WATCH_S = 15 * 60


@dataclass
class JobState:
    """The training wait's memory between checks (kept in the execution's state, small)."""

    id: str
    name: str
    status: BatchJobStatus = BatchJobStatus.SUBMITTED
    checks: int = 0
    wait_s: int = 0  # the timeout of the wait the execution is in (TimeoutSecondsPath)
    waiting_s: int = 0
    running_s: int = 0
    started: bool = False
    terminated: bool = False
    error: str | None = None
    cause: str | None = None
    # A FAILED job's main-node exit code (None: the container never exited, e.g. its host went
    # away) and Batch's statusReason: what tells an infrastructure failure from the code's.
    exit_code: int | None = None
    status_reason: str | None = None
    # AWS's capacity error that ended the wait before the runnable limit (its code), if any.
    capacity_code: str | None = None

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> JobState:
        state = cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
        state.status = BatchJobStatus(state.status)
        return state

    @property
    def done(self) -> bool:
        return self.status in ENDED_JOB_STATUSES

    def as_output(self) -> TrainingJobState:
        """The wait's state as the execution carries it."""
        return cast(TrainingJobState, asdict(self) | {"done": self.done})


def runnable_diagnosis(job: JobState, description: dict[str, Any], plan_job: dict[str, Any],
                       limit_s: int) -> str:
    queue = description.get("jobQueue", "?").rsplit("/", 1)[-1]
    nodes, instance_type = plan_job["nodes"], plan_job["instance_type"]
    return (
        f"No capacity for {nodes} × {instance_type} in job queue {queue}: job {job.name} "
        f"({job.id}) waited {job.waiting_s // 60} min in {description.get('status')} (limit "
        f"timeouts.runnable_minutes = {limit_s // 60}) and was terminated. Check that the "
        f"queue's compute environment allows {instance_type} and at least "
        f"{nodes * plan_job['vcpus']} vCPUs (maxvCpus), your EC2 quota for the instance "
        "family, and the subnet's capacity; or submit with fewer nodes."
    )


def shortage_diagnosis(job: JobState, description: dict[str, Any], plan_job: dict[str, Any],
                       shortage: Shortage) -> str:
    queue = description.get("jobQueue", "?").rsplit("/", 1)[-1]
    nodes, instance_type = plan_job["nodes"], plan_job["instance_type"]
    return (
        f"No capacity for {nodes} × {instance_type} in job queue {queue}: AWS reports "
        f"{shortage.describe()}. Job {job.name} ({job.id}) was terminated after "
        f"{job.waiting_s // 60} min in {description.get('status')}, not left to wait out "
        "timeouts.runnable_minutes. Ask for fewer nodes (min_nodes lets the run shrink), "
        "another instance type or Availability Zone, or a higher EC2 quota for the family."
    )


def main_container(description: dict[str, Any]) -> dict[str, Any]:
    """The container of the job's last attempt (the main node's, for a multi-node job), on
    either backend (``job_shape``)."""
    return last_attempt_container(description)


def failure_cause(description: dict[str, Any]) -> str:
    """Why a Batch job failed, in words: status reason, the node and its exit code, logs."""
    parts = [f"Batch job {description.get('jobName')} ({description.get('jobId')}) FAILED"]
    if reason := description.get("statusReason"):
        parts.append(f"reason: {reason}")
    container = main_container(description)
    main_node = description.get("nodeProperties", {}).get("mainNode", 0)
    if "exitCode" in container:
        parts.append(f"main node {main_node} exited with code {container['exitCode']}")
    if container.get("reason"):
        parts.append(f"container: {container['reason']}")
    if container.get("logStreamName"):
        parts.append(f"logs: CloudWatch stream {container['logStreamName']}")
    return "; ".join(parts) + ". Check the training logs, fix the cause and submit the run again."


def _seconds_between(start_ms: Any, end_ms: Any) -> int:
    return max(0, round((end_ms - start_ms) / 1000))


def measure_job(state: JobState, description: dict[str, Any], now_ms: int) -> None:
    """Time in the queue and on the nodes, from Batch's own timestamps (not from how often the
    job was looked at)."""
    created, started = description.get("createdAt"), description.get("startedAt")
    end = description.get("stoppedAt") or now_ms
    if started:
        state.started = True
        state.running_s = _seconds_between(started, end)
        if created:
            state.waiting_s = _seconds_between(created, started)
    elif created:
        state.waiting_s = _seconds_between(created, end)


def check_training_job(
    state: JobState, description: dict[str, Any], plan_job: dict[str, Any],
    limits: dict[str, int], now_ms: int, shortage: Shortage | None = None,
) -> bool:
    """Update the wait's state in place from a DescribeJobs entry (and, for a queued job,
    AWS's word that no capacity will come); True when the job must be terminated (stuck in
    the queue or over its training limit)."""
    state.status = BatchJobStatus(description["status"])
    state.checks += 1
    measure_job(state, description, now_ms)
    if state.status in ON_NODES:
        state.started = True
    if state.error is None:
        if state.status in WAITING_FOR_CAPACITY and state.waiting_s > limits["runnable_s"]:
            state.error = TrainingJobStuck.__name__
            state.cause = runnable_diagnosis(state, description, plan_job, limits["runnable_s"])
        elif state.status in WAITING_FOR_CAPACITY and shortage is not None:
            state.error, state.capacity_code = TrainingJobStuck.__name__, shortage.code
            state.cause = shortage_diagnosis(state, description, plan_job, shortage)
        elif state.status in ON_NODES and state.running_s > limits["training_s"]:
            state.error = TrainingTimedOut.__name__
            state.cause = (
                f"Batch job {state.name} ({state.id}) ran {state.running_s // 3600} h, over "
                f"timeouts.training_hours = {limits['training_s'] / 3600:g}, and was "
                "terminated. Its outputs so far are archived; raise the limit or resume "
                "from the last checkpoint."
            )
        elif state.status == BatchJobStatus.FAILED:
            state.error = TrainingJobFailed.__name__
            state.cause = failure_cause(description)
            state.exit_code = main_container(description).get("exitCode")
            state.status_reason = description.get("statusReason")
    return state.error is not None and not state.terminated and not state.done


def next_wait(state: JobState, limits: dict[str, int], fallback_s: int) -> int:
    """How long the next wait for the job may last before it is checked without an event: the
    fallback timeout, or until just past the limit that applies now, if that comes first."""
    if state.terminated:
        return max(MIN_WAIT_S, min(fallback_s, AFTER_TERMINATE_WAIT_S))
    if state.status in WAITING_FOR_CAPACITY:
        budget = limits["runnable_s"] - state.waiting_s
    else:
        budget = limits["training_s"] - state.running_s
    wait = budget + LIMIT_MARGIN_S if budget <= fallback_s else fallback_s
    if state.status in WAITING_FOR_CAPACITY and state.waiting_s < CAPACITY_WATCH_S:
        wait = min(wait, CAPACITY_CHECK_S)
    return max(MIN_WAIT_S, wait)


# --- Archive -----------------------------------------------------------------------------


def _epoch(value: Any) -> float | None:
    """An FSx timestamp as epoch seconds (boto3 parses them to datetimes)."""
    if value is None:
        return None
    return value.timestamp() if hasattr(value, "timestamp") else float(value)


def export_remaining_s(task: dict[str, Any], now_s: float) -> float | None:
    """Seconds until an executing export should end, extrapolated from its progress so far
    (negative once that moment has passed); None when it has reported no progress."""
    status = task.get("Status") or {}
    total = status.get("TotalCount") or 0
    done = (status.get("SucceededCount") or 0) + (status.get("FailedCount") or 0)
    start, updated = _epoch(task.get("StartTime")), _epoch(status.get("LastUpdatedTime"))
    if not (total and done and start is not None and updated is not None) or updated <= start:
        return None
    return (updated - start) * (total - done) / done - (now_s - updated)


def export_wait(remaining: float, backoff_wait: int) -> int:
    """The next export check: at its predicted end; past it, after half as long again as it
    is overdue (so a poor prediction costs a few checks, not one every few seconds)."""
    if remaining < 0:
        return int(max(EXPORT_TAIL_S, min(backoff_wait, -remaining / 2)))
    return int(max(EXPORT_TAIL_S, min(backoff_wait, remaining + 1)))


def check_export(task: dict[str, Any], poll: Poll, limit_s: int,
                 now_s: float | None = None) -> ExportState:
    """Next state of the export loop from a DescribeDataRepositoryTasks entry.

    The file system waits, idle, until this loop sees the export end, so once the export
    reports progress the next check is timed for its predicted end instead of the next backoff
    step."""
    task_id, lifecycle = task["TaskId"], task["Lifecycle"]
    poll = poll.advance(EXPORT_BACKOFF)
    if lifecycle == TaskLifecycle.SUCCEEDED:
        report = task.get("Status", {})
        return ExportState(id=task_id, lifecycle=lifecycle,
                           exported=int(report.get("SucceededCount", 0)), poll=poll.state())
    if lifecycle in (TaskLifecycle.FAILED, TaskLifecycle.CANCELED):
        reason = task.get("FailureDetails", {}).get("Message", "no reason given")
        raise ExportFailed(
            f"Archive export {task_id} {lifecycle}: {reason}. Nothing was deleted"
        )
    if poll.elapsed_s > limit_s:
        raise ExportTimedOut(
            f"Archive export {task_id} still {lifecycle} after {poll.elapsed_s // 60} min "
            f"(limit timeouts.archive_minutes = {limit_s // 60}). Nothing was deleted"
        )
    remaining = export_remaining_s(task, now_s) if now_s is not None else None
    if remaining is not None:
        poll.wait_s = export_wait(remaining, poll.wait_s)
    return ExportState(id=task_id, lifecycle=lifecycle, poll=poll.state())
