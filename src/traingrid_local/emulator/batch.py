"""Adaptation (moto 5.2.5): AWS Batch multi-node jobs that queue, start, run and end over simulated
time.

With ``{"batch": {"use_docker": False}}`` moto marks a job SUCCEEDED the moment it is submitted,
ignores ``nodeOverrides``, and describes no node or exit details. Here a job moves SUBMITTED →
PENDING → RUNNABLE → STARTING → RUNNING → SUCCEEDED/FAILED on the clock, honours the per-run node
count and environment, reports ``statusReason``, attempts with exit codes and ``nodeProperties``,
describes each node as the job ``<jobId>#<index>`` with ``nodeDetails``, and ``TerminateJob`` ends
it FAILED with the given reason. Every status change is announced on the account's default event bus
as a "Batch Job State Change" event (detail: the job as DescribeJobs shows it), at the simulated
moment it happens, as Batch does. Faults: ``batch-job-failed`` (main node exits 1 after some
training), ``node-lost`` (the main node's host of a run's first job is terminated after some
training: the job FAILS with no exit code and only the checkpoints written so far reach S3;
``node-lost-every-attempt``: of every job), ``worker-lost`` and ``hung-job``
(:mod:`.batch_nodes`), ``stuck-runnable`` (a job never placed, as is one asking
a node for more memory than it registers, or under ``capacity-8-nodes`` for more than 8 nodes: then
EC2's InsufficientInstanceCapacity shows in the compute environment's scaling activities,
:mod:`.capacity`; under ``vcpu-quota`` for more vCPUs than the account's limit, VcpuLimitExceeded),
``slow-node`` (a run's first job: the trainer's pre-flight check names a slow node and the job exits
75 before training), and ``lost-events`` (no state-change event is ever delivered). A container has
Docker's 64 MiB ``/dev/shm`` unless the job definition sets ``linuxParameters.sharedMemorySize``;
the image's trainer whose data loaders need more fails its first step with a bus error (exit 1, the
training code's failure), as on AWS. When a job that started ends, the emulated container's outputs
land on its FSx file system (a job terminated before it started ran no container; nodes whose Lustre
client cannot mount its version exit 65 at once, :func:`.workload.mount_refusal`: neither writes
anything).

Which node a job fits, the p3 sizes moto's EC2 catalog lacks, and the compute environments
Batch's AMI cannot launch (p3 and g3 on ECS_AL2023_NVIDIA) are :mod:`.instances`'.
"""

from __future__ import annotations

import json
import sys
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from moto.batch.models import BatchBackend, Job, JobDefinition
from moto.batch.responses import BatchResponse
from moto.batch_simple.models import BatchSimpleBackend

from traingrid.training.attempts import EXIT_PREFLIGHT
from traingrid_local.emulator import (
    batch_nodes,
    batch_pods,
    capacity,
    events,
    fault_injection,
    instances,
    training_curves,
    workload,
)
from traingrid_local.emulator.alarms import ALARMS
from traingrid_local.emulator.attached import Attached
from traingrid_local.emulator.clock import CLOCK
from traingrid_local.emulator.patching import PATCHES

# Simulated seconds in each state before RUNNING; RUNNING lasts TRAINING_SECONDS.
QUEUE_TIMELINE = (("SUBMITTED", 5), ("PENDING", 10), ("RUNNABLE", 120), ("STARTING", 180))
TRAINING_SECONDS: float = 6 * 3600  # of a run of REFERENCE_EPOCHS; runs train for their epochs
REFERENCE_EPOCHS = 90
ORDER = ("SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING", "SUCCEEDED", "FAILED")
FAILING_AFTER_SECONDS = 20 * 60
BUS_ERROR_AFTER_SECONDS = 90  # the first real step, once the loaders have filled /dev/shm
MAIN_NODE_EXIT_CODE = 1
LOST_INSTANCE = "i-0d1e2a3d4b5e6e7f8"
CAPACITY_NODES = 8  # all the capacity-8-nodes fault lets a job have
VCPU_LIMIT = 512  # the vcpu-quota fault's account limit (5 × p4d.24xlarge)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


@dataclass
class SimulatedJob:
    """One job's simulated life, decided at submission."""

    submitted_at: datetime
    environment: dict[str, str]
    num_nodes: int
    instance_type: str | None
    stuck: bool  # never placed: no capacity (fault), or more than a node registers
    fails: bool
    training_seconds: float
    command: list[str] = field(default_factory=list)
    lost: bool = False  # the main node's host goes away mid-training
    worker_lost: bool = False  # a worker's host goes away mid-training: batch_nodes
    hangs: bool = False  # the training stops stepping: the watchdog exits 71 (batch_nodes)
    # The trainer's pre-flight check finds a slow node and the job exits before training.
    slow_node: bool = False
    # Why the trainer's first step dies of SIGBUS (its loaders outgrow /dev/shm), else None.
    bus_error: str | None = None
    mount_error: str | None = None  # why no node can mount the run's file system, if so
    status: str = "SUBMITTED"
    started_at: datetime | None = None
    stopped_at: datetime | None = None
    exit_code: int | None = None
    reason: str | None = None
    announced: int = 0  # how many of the statuses in its path events have announced
    lock: threading.Lock = field(default_factory=threading.Lock)

    def schedule(self) -> list[tuple[str, datetime]]:
        """Each status and when the job enters it, as decided at submission."""
        moments, elapsed = [("SUBMITTED", self.submitted_at)], 0.0
        for (_, seconds), (following, _) in zip(QUEUE_TIMELINE, [*QUEUE_TIMELINE[1:],
                                                                ("RUNNING", 0)], strict=True):
            elapsed += seconds
            moments.append((following, self.submitted_at + timedelta(seconds=elapsed)))
            if following == "STARTING" and self.stuck:
                return moments[:-1]
        end = ("FAILED" if any((self.fails, self.lost, self.bus_error, self.slow_node,
                                self.mount_error, self.hangs)) else "SUCCEEDED")
        return [*moments, (end, self.submitted_at + timedelta(seconds=elapsed + self.run_for()))]

    def runnable_at(self) -> datetime:
        return next(at for status, at in self.schedule() if status == "RUNNABLE")

    def run_for(self) -> float:
        """Seconds from RUNNING to the job's end."""
        if self.mount_error or self.bus_error:  # the mount, or the first step
            return (workload.MOUNT_FAILS_AFTER_SECONDS if self.mount_error
                    else BUS_ERROR_AFTER_SECONDS)
        if self.slow_node:
            return workload.PREFLIGHT_SECONDS
        if self.hangs:
            return batch_nodes.LOST_AFTER_SECONDS + batch_nodes.HANG_WINDOW_SECONDS
        if self.worker_lost:
            return batch_nodes.worker_lost_run_for(self.training_seconds, self.num_nodes)
        return FAILING_AFTER_SECONDS if self.fails or self.lost else self.training_seconds

    def lost_node_description(self, index: int) -> dict[str, Any] | None:
        """The worker node a ``worker_lost`` job lost (its last), once lost, as DescribeJobs
        describes it; None for every other node."""
        if not (self.worker_lost and self.started_at and index == self.num_nodes - 1 > 0):
            return None
        lost_at = self.started_at + timedelta(seconds=batch_nodes.LOST_AFTER_SECONDS)
        return batch_nodes.lost_node(_ms(lost_at)) if lost_at <= CLOCK.now() else None

    def path(self) -> list[str]:
        """The statuses the job has been in so far, in order (a terminated job ends FAILED
        where it was)."""
        if self.status not in ("SUCCEEDED", "FAILED"):
            return [status for status, at in self.schedule() if at <= CLOCK.now()
                    ][: ORDER.index(self.status) + 1]
        stopped = self.stopped_at or CLOCK.now()
        # A status entered at the very moment of the stop was entered (the clock stands at an
        # alarm's moment until it is taken, so a TerminateJob may come at exactly that time).
        before = [status for status, at in self.schedule()
                  if at <= stopped and status not in ("SUCCEEDED", "FAILED")]
        return [*before, self.status]

    def advance(self, job: Job) -> str:
        with self.lock:
            if self.status in ("SUCCEEDED", "FAILED"):
                return self.status
            now = CLOCK.now()
            if job.stop:
                self._finish(job, now, succeeded=False, reason=job.job_stopped_reason,
                             exit_code=143 if self.started_at else None)
                return self.status
            elapsed = (now - self.submitted_at).total_seconds()
            for status, seconds in QUEUE_TIMELINE:
                if elapsed < seconds or (status == "RUNNABLE" and self.stuck):
                    self.status = status
                    return status
                elapsed -= seconds
            if self.started_at is None:
                self.started_at = now - timedelta(seconds=elapsed)
            run_for = self.run_for()
            if elapsed < run_for:
                self.status = "RUNNING"
                return self.status
            self._end(job, self.started_at + timedelta(seconds=run_for))
            return self.status

    def _end(self, job: Job, end: datetime) -> None:
        """The job's end as decided at submission."""
        if self.mount_error:
            self._finish(job, end, succeeded=False, exit_code=workload.MOUNT_EXIT_CODE,
                         reason="Essential container in task exited")
        elif self.bus_error:
            self._finish(job, end, succeeded=False, exit_code=workload.BUS_ERROR_EXIT_CODE,
                         reason="Essential container in task exited", error=self.bus_error)
        elif self.slow_node:
            self._finish(job, end, succeeded=False, exit_code=EXIT_PREFLIGHT,
                         reason="Essential container in task exited")
        elif self.lost:
            self._finish(job, end, succeeded=False, exit_code=None, exports=False,
                         reason=f"Host EC2 (instance {LOST_INSTANCE}) terminated.")
        elif self.hangs:
            self._finish(job, end, succeeded=False, exit_code=batch_nodes.HANG_EXIT_CODE,
                         reason="Essential container in task exited")
        elif self.fails:
            self._finish(job, end, succeeded=False, exit_code=MAIN_NODE_EXIT_CODE,
                         reason="Essential container in task exited")
        else:
            self._finish(job, end, succeeded=True, exit_code=0)

    def _finish(self, job: Job, at: datetime, *, succeeded: bool, exit_code: int | None,
                reason: str | None = None, exports: bool = True,
                error: str | None = None) -> None:
        # The container writes (and exports) its outputs before the job is seen to end; a job
        # that never started ran no container and writes nothing.
        if self.started_at is not None and not self.mount_error:
            preflight = (workload.preflight_document(self.environment, self.num_nodes,
                                                     slow=self.slow_node)
                         if self.environment.get("TRAINGRID_PREFLIGHT") else None)
            if preflight is not None and preflight["cause"]:
                error = preflight["cause"]
            workload.write_outputs(
                job.backend.account_id, job.backend.region_name, self.environment,
                command=self.command, preflight=preflight, trained=self,
                succeeded=succeeded, exit_code=exit_code, exports=exports, error=error,
                ran_seconds=(at - self.started_at).total_seconds(),
            )
        self.stopped_at, self.exit_code, self.reason = at, exit_code, reason
        self.status = "SUCCEEDED" if succeeded else "FAILED"

    def describe(self, job: Job, base: dict[str, Any]) -> dict[str, Any]:
        out = dict(base, status=self.status, createdAt=_ms(self.submitted_at))
        for key in ("startedAt", "stoppedAt", "statusReason"):  # moto's, in real time
            out.pop(key, None)
        node_properties = dict(job.job_definition.node_properties or {})
        node_properties["numNodes"] = self.num_nodes
        out["nodeProperties"] = node_properties
        stream = f"{job.job_definition.name}/default/{job.job_id}"
        container: dict[str, Any] = {"logStreamName": stream}
        if self.started_at:
            out["startedAt"] = _ms(self.started_at)
        if self.stopped_at:
            out["stoppedAt"] = _ms(self.stopped_at)
            if self.exit_code is not None:
                container["exitCode"] = self.exit_code
            if self.reason:
                out["statusReason"] = self.reason
                container["reason"] = self.reason
        out["container"] = container
        out["attempts"] = [] if not self.started_at else [{
            "container": container,
            "startedAt": _ms(self.started_at),
            **({"stoppedAt": _ms(self.stopped_at)} if self.stopped_at else {}),
            **({"statusReason": self.reason} if self.reason else {}),
        }]
        return out


# A job's simulated life, on the job (``job.simulated``); none on a job moto made on its own.
SIMULATED: Attached[SimulatedJob] = Attached("simulated")


def _job_environment(job_definition: JobDefinition, overrides: dict[str, Any]) -> dict[str, str]:
    if batch_pods.is_eks(job_definition):  # the node's pod: batch_pods
        return batch_pods.environment(job_definition, overrides)
    node_ranges = (job_definition.node_properties or {}).get("nodeRangeProperties", [])
    env = {e["name"]: e["value"] for r in node_ranges
           for e in r.get("container", {}).get("environment", [])}
    for override in overrides.get("nodePropertyOverrides", []):
        for item in override.get("containerOverrides", {}).get("environment", []):
            env[item["name"]] = item["value"]
    return env


def _container_value(job_definition: JobDefinition, overrides: dict[str, Any],
                     name: str) -> Any:
    """A container property as the job runs it: the override's, else the definition's."""
    if batch_pods.is_eks(job_definition):
        return batch_pods.value(job_definition, overrides, name)
    for override in overrides.get("nodePropertyOverrides", []):
        if (found := override.get("containerOverrides", {}).get(name)) is not None:
            return found
    for node_range in (job_definition.node_properties or {}).get("nodeRangeProperties", []):
        if (found := node_range.get("container", {}).get(name)) is not None:
            return found
    return None


# --- state-change events ------------------------------------------------------------------

# Events the lost-events fault has dropped: a fresh count each session (undone on close).
DROPPED_EVENTS = {"count": 0}


def announce(job: Job) -> None:
    """Send one state-change event for each status the job reached since the last event."""
    simulated = SIMULATED.of(job)
    job.status  # noqa: B018 - brings the job up to date
    with simulated.lock:
        path = simulated.path()
        new, simulated.announced = path[simulated.announced:], len(path)
    described = job.describe()
    for status in new:
        if fault_injection.CURRENT.on("lost-events"):
            DROPPED_EVENTS["count"] += 1
            continue
        detail = dict(described, status=status)
        if status not in ("SUCCEEDED", "FAILED"):
            for key in ("stoppedAt", "statusReason", "attempts"):
                detail.pop(key, None)
        backend = job.backend
        events.emit(backend.account_id, backend.region_name, "aws.batch",
                    "Batch Job State Change", detail, [job.arn])


def _announce_changes(job: Job) -> None:
    for _, moment in SIMULATED.of(job).schedule():
        ALARMS.at(moment, lambda: announce(job))


def training_seconds(environment: dict[str, str]) -> float:
    """How long the job trains: TRAINING_SECONDS for the reference epochs, in proportion."""
    try:
        epochs = float(environment.get("EPOCHS") or REFERENCE_EPOCHS)
    except ValueError:
        epochs = REFERENCE_EPOCHS
    return TRAINING_SECONDS * epochs / REFERENCE_EPOCHS


# --- moto hooks -------------------------------------------------------------------------


def _register_without_finishing(self: BatchSimpleBackend, include_start_attempt: bool,
                                job: Job) -> None:
    self.backend._jobs[job.job_id] = job


def _submitjob(previous: Any) -> Any:
    def submitjob(self: BatchResponse) -> str:
        result = previous(self)
        job_id = json.loads(result)["jobId"]
        job = self.batch_backend.get_job_by_id(job_id)
        if job is None:  # moto registers the job it has just submitted
            raise LookupError(f"moto did not register the job it submitted, {job_id}")
        overrides = self._get_param("nodeOverrides") or {}
        environment = _job_environment(job.job_definition, overrides)
        node_properties = job.job_definition.node_properties or {}
        definition = job.job_definition
        instance_type = _container_value(definition, overrides, "instanceType")
        requirements = _container_value(definition, overrides, "resourceRequirements")
        num_nodes = int(overrides.get("numNodes", node_properties.get("numNodes", 1)))
        command = list(_container_value(definition, overrides, "command") or [])
        linux = _container_value(definition, overrides, "linuxParameters") or {}
        faults, run = fault_injection.CURRENT, environment.get("TRAINGRID_RUN") or job.job_name
        over_quota = (faults.on("vcpu-quota")
                      and num_nodes * instances.instance_vcpus(instance_type) > VCPU_LIMIT)
        no_capacity = (faults.on("stuck-runnable") or over_quota
                       or (faults.on("capacity-8-nodes") and num_nodes > CAPACITY_NODES))
        simulated = SIMULATED.set(job, SimulatedJob(
            submitted_at=CLOCK.now(),
            environment=environment,
            num_nodes=num_nodes,
            instance_type=instance_type,
            command=command,
            bus_error=workload.shared_memory_shortfall(
                environment, command, num_nodes,
                int(linux.get("sharedMemorySize") or workload.DOCKER_SHM_MIB)),
            stuck=no_capacity or not instances.fits_a_node(instance_type, requirements),
            fails=faults.on("batch-job-failed"),
            lost=faults.loses_host(environment.get("TRAINGRID_RUN") or job.job_name),
            worker_lost=faults.first_job_of("worker-lost", run),
            hangs=faults.first_job_of("hung-job", run),
            slow_node=faults.first_job_of("slow-node", run),
            training_seconds=training_seconds(environment),
            mount_error=workload.mount_refusal(self.batch_backend.account_id,
                                               self.batch_backend.region_name, environment),
        ))
        if no_capacity:  # EC2 says so to the compute environment's group, as on AWS
            capacity.no_capacity(job, simulated.runnable_at(), instance_type, num_nodes,
                                 vcpu_limit=VCPU_LIMIT if over_quota else None)
        _announce_changes(job)
        training_curves.follow(job, simulated)
        return result

    return submitjob


def _terminate_job(previous: Any) -> Any:
    def terminate_job(self: BatchBackend, job_id: str, reason: str) -> None:
        previous(self, job_id, reason)
        job = self._jobs.get(job_id)
        if job is not None and SIMULATED.on(job):
            ALARMS.at(CLOCK.now(), lambda: announce(job))

    return terminate_job


# While a session closes, moto's reset reads every job's status: a job must not advance then
# (finishing would write its outputs to services already reset). Set by freeze(), through the
# patches, so the session's close puts it back.
FROZEN = False


def freeze() -> None:
    """Jobs stop advancing until the emulator's patches are undone (as the session closes)."""
    PATCHES.replace(sys.modules[__name__], "FROZEN", True)


def _status(self: Job) -> str | None:
    simulated = SIMULATED.get(self)
    if simulated is None:
        return super(Job, self).status  # ManagedState's, below the property we put on Job
    if FROZEN:
        found: str | None = self.__dict__.get("_status")
        return found
    return simulated.advance(self)


def _set_status(self: Job, value: str) -> None:
    self._status = value


def _describe(previous: Any) -> Any:
    def describe(self: Job) -> dict[str, Any]:
        base = previous(self)
        simulated = SIMULATED.get(self)
        return base if simulated is None else simulated.describe(self, base)

    return describe


def _job_definition_describe(previous: Any) -> Any:
    def job_definition_describe(self: JobDefinition) -> dict[str, Any]:
        out = previous(self)
        if self.node_properties is not None:
            out["nodeProperties"] = self.node_properties
        return out

    return job_definition_describe


def apply() -> None:
    PATCHES.replace(sys.modules[__name__], "DROPPED_EVENTS", {"count": 0})
    PATCHES.replace(BatchSimpleBackend, "_mark_job_as_finished", _register_without_finishing)
    PATCHES.wrap(BatchResponse, "submitjob", _submitjob)
    PATCHES.replace(Job, "status", property(_status, _set_status))
    PATCHES.wrap(Job, "describe", _describe)
    PATCHES.wrap(JobDefinition, "describe", _job_definition_describe)
    PATCHES.wrap(BatchBackend, "describe_jobs",
                 lambda previous: batch_nodes.describe_jobs(previous, SIMULATED.get))
    PATCHES.wrap(BatchBackend, "terminate_job", _terminate_job)
