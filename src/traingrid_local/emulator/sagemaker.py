"""Adaptation (moto 5.2.5): SageMaker training jobs that start, download, train, upload and end
over simulated time.

moto's ``FakeTrainingJob`` is Completed the moment it is created, with one Starting transition
and no artifact in S3; it accepts a duplicate ``TrainingJobName`` (replacing the job) and any
name, has no ``StopTrainingJob``, replaces the request's ``MetricDefinitions`` with its own, and
drops ``Environment``, ``RetryStrategy`` and the other newer request fields. Here:

- a job is InProgress through the secondary statuses Starting → Downloading → Training
  (``TRAINING_SECONDS``) → Uploading, then Completed, with ``SecondaryStatusTransitions``,
  ``TrainingStartTime``/``TrainingEndTime``/``LastModifiedTime`` on the clock and
  ``TrainingTimeInSeconds``/``BillableTimeInSeconds`` once it ends;
- on completion ``model.tar.gz`` is really written below ``OutputDataConfig.S3OutputPath``
  (``ModelArtifacts.S3ModelArtifacts``); the bucket must exist in the job's region, or the job
  fails with a ``ClientError:`` reason, as SageMaker's upload does;
- names are checked against SageMaker's pattern and are unique per account and region
  (``ValidationException``);
- ``StopTrainingJob`` moves an InProgress job to Stopping, then Stopped; a finished job cannot
  be stopped (``ValidationException``);
- ``ListTrainingJobs`` (``StatusEquals``) and ``Search`` see the same progression;
- every request field is kept and described (the MPI launch's hyperparameters included, unchecked).

Faults, each in the plan's fault region only and decided when the job is created:
``sagemaker-capacity`` (fails while Starting; ``sagemaker-capacity-5``: only a job of more than
5 instances does), ``sagemaker-job-failed`` (fails while Training)
and ``sagemaker-quota`` (``CreateTrainingJob`` refused with ``ResourceLimitExceeded``).
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import inspect
import io
import json
import re
import tarfile
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from botocore import xform_name
from moto.core.responses import ActionResult, EmptyResult
from moto.s3.exceptions import MissingBucket
from moto.s3.models import s3_backends
from moto.sagemaker.exceptions import SagemakerClientError, ValidationError
from moto.sagemaker.models import FakeTrainingJob, SageMakerModelBackend
from moto.sagemaker.responses import SageMakerResponse
from moto.utilities.utils import get_partition

from traingrid_local.emulator import fault_injection
from traingrid_local.emulator.attached import Attached
from traingrid_local.emulator.clock import CLOCK
from traingrid_local.emulator.patching import PATCHES

# Simulated seconds in each secondary status; Training lasts TRAINING_SECONDS.
STARTING_SECONDS = 4 * 60
DOWNLOADING_SECONDS = 6 * 60
TRAINING_SECONDS: float = 2 * 3600
UPLOADING_SECONDS = 3 * 60
STOPPING_SECONDS = 2 * 60
# Under the faults: how long into Starting, and into Training, the job fails.
CAPACITY_FAILS_AFTER_SECONDS = 3 * 60
LIMITED_CAPACITY_INSTANCES = 5  # all sagemaker-capacity-5 lets a job have
ALGORITHM_FAILS_AFTER_SECONDS = 25 * 60

NAME_PATTERN = r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}"
TERMINAL = ("Completed", "Failed", "Stopped")
MAX_FAILURE_REASON = 1024  # the API's limit
MESSAGES = {
    "Starting": "Preparing the instances for training",
    "Downloading": "Downloading input data",
    "Training": "Training image download completed. Training in progress.",
    "Uploading": "Uploading generated training model",
    "Stopping": "Stopping the training job",
    "Completed": "Training job completed",
    "Failed": "Training job failed",
    "Stopped": "Training job stopped",
}
CAPACITY_ERROR = ("CapacityError: Unable to provision requested ML compute capacity. "
                  "Please retry using a different ML instance type.")
_LOCK = threading.Lock()


class ResourceLimitExceeded(SagemakerClientError):
    code = "ResourceLimitExceeded"


def _naive(moment: datetime) -> datetime:
    """moto keeps naive UTC times (its ListTrainingJobs filters compare with them)."""
    return moment.astimezone(UTC).replace(tzinfo=None)


def _seconds(start: datetime, end: datetime) -> int:
    return int((end - start).total_seconds())


def _describe_as(job: FakeTrainingJob, **fields: Any) -> None:
    """Set fields of the job's description. moto describes a job by every attribute in its
    ``__dict__`` (``gen_response_object``: snake_case → PascalCase, None left out), more
    fields than ``FakeTrainingJob`` declares, and None where a field is not described yet."""
    vars(job).update(fields)


def _hyperparameter(job: FakeTrainingJob, name: str, default: str) -> str:
    """The SageMaker SDK JSON-encodes hyperparameter values (``"\\"train.py\\""``)."""
    value = (job.hyper_parameters or {}).get(name, default)
    try:
        decoded = json.loads(value)
    except (TypeError, ValueError):
        return str(value)
    return decoded if isinstance(decoded, str) else json.dumps(decoded)


def _instances(resource_config: dict[str, Any] | None) -> tuple[str, int]:
    """Instance type and count, from ``InstanceType`` or (heterogeneous) ``InstanceGroups``."""
    config = resource_config or {}
    groups = config.get("InstanceGroups") or [config]
    count = sum(int(group.get("InstanceCount", 1)) for group in groups)
    return str(groups[0].get("InstanceType", "ml.m5.xlarge")), count


def algorithm_error(job: FakeTrainingJob) -> str:
    """The reason SageMaker gives when the MPI launch's main process exits 1."""
    _, hosts = _instances(job.resource_config)
    per_host = _hyperparameter(job, "sagemaker_mpi_num_of_processes_per_host", "8")
    per_host = per_host if per_host.isdigit() else "8"  # not validated here, as on SageMaker
    options = _hyperparameter(job, "sagemaker_mpi_custom_mpi_options", "")
    program = _hyperparameter(job, "sagemaker_program", "train.py")
    host_list = ",".join(f"algo-{i}:{per_host}" for i in range(1, hosts + 1))
    command = (f"mpirun --host {host_list} -np {hosts * int(per_host)} --allow-run-as-root "
               f"{options} -x NCCL_DEBUG=INFO /opt/conda/bin/python {program}")
    reason = (
        f"AlgorithmError: mpirun exited with code 1 on algo-1 (rank 0): "
        f"ExecuteUserScriptError:\nExitCode 1\nErrorMessage \"RuntimeError: NCCL communicator "
        f"was aborted on rank 0. Original reason for failure was: NCCL error: unhandled system "
        f"error\"\nCommand \"{' '.join(command.split())}\", exit code: 1"
    )
    return reason[:MAX_FAILURE_REASON]


def model_archive(job_name: str, ran_seconds: int) -> bytes:
    """A small stand-in for the model the training container leaves in /opt/ml/model."""
    seed = hashlib.sha256(job_name.encode()).digest()
    members = {
        "model.pth": seed * 256,
        "training_summary.json": json.dumps(
            {"training_job": job_name, "training_seconds": ran_seconds}).encode(),
    }
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as compressed, \
            tarfile.open(fileobj=compressed, mode="w") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@dataclass
class Phase:
    status: str
    start: datetime
    end: datetime


@dataclass
class SimulatedTrainingJob:
    """One training job's simulated life, planned at creation."""

    account_id: str
    region: str
    created_at: datetime
    plan: list[tuple[str, float]]  # (secondary status, simulated seconds)
    failure_reason: str | None  # the planned failure, or None to complete
    stop_requested_at: datetime | None = None
    result: tuple[str, str | None] | None = None  # (final status, failure reason) once ended
    lock: threading.RLock = field(default_factory=threading.RLock)

    def phases(self) -> list[Phase]:
        """The secondary statuses the job goes through, cut short where it was stopped."""
        phases, start, stop = [], self.created_at, self.stop_requested_at
        for status, seconds in self.plan:
            end = start + timedelta(seconds=seconds)
            if stop is not None and stop < end:
                if stop > start:
                    phases.append(Phase(status, start, stop))
                return [*phases, Phase("Stopping", stop,
                                       stop + timedelta(seconds=STOPPING_SECONDS))]
            phases.append(Phase(status, start, end))
            start = end
        return phases

    def planned_end(self) -> tuple[str, str | None]:
        if self.stop_requested_at is not None:
            return "Stopped", None
        return ("Failed", self.failure_reason) if self.failure_reason else ("Completed", None)

    def advance(self, job: FakeTrainingJob) -> str:
        """Bring ``job``'s attributes up to the clock's present; returns its status."""
        with self.lock:
            now = CLOCK.now()
            phases = self.phases()
            ended = now >= phases[-1].end
            if ended and self.result is None:
                self.result = self.planned_end()
                if self.result[0] == "Completed":
                    self.result = self._upload(job, phases)
            self._describe(job, phases, now)
            return job.training_job_status

    def _upload(self, job: FakeTrainingJob, phases: list[Phase]) -> tuple[str, str | None]:
        uri = artifact_uri(job)
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        s3 = s3_backends[self.account_id][get_partition(self.region)]
        failed = f"ClientError: Failed to upload model artifacts to {uri}: "
        try:
            location = s3.get_bucket(bucket).region_name
        except MissingBucket:
            return "Failed", (failed + "An error occurred (NoSuchBucket) when calling the "
                              "PutObject operation: The specified bucket does not exist")
        if location != self.region:
            return "Failed", (failed + f"the bucket {bucket} is in {location}; the training job's "
                              f"S3 output must be in its own region, {self.region}")
        started = next(p.start for p in phases if p.status == "Downloading")
        s3.put_object(bucket, key, model_archive(job.training_job_name,
                                                 _seconds(started, phases[-1].end)))
        return "Completed", None

    def _describe(self, job: FakeTrainingJob, phases: list[Phase], now: datetime) -> None:
        seen = [p for p in phases if p.start <= now]
        transitions = [
            {"Status": p.status, "StartTime": _naive(p.start),
             **({"EndTime": _naive(p.end)} if p.end <= now else {}),
             "StatusMessage": MESSAGES[p.status]}
            for p in seen
        ]
        started = next((p.start for p in seen if p.status == "Downloading"), None)
        end = phases[-1].end
        status, reason = self.result or (
            "Stopping" if seen[-1].status == "Stopping" else "InProgress", None)
        if self.result:
            transitions.append({"Status": status, "StartTime": _naive(end),
                                "EndTime": _naive(end), "StatusMessage": MESSAGES[status]})
        trained = _seconds(started, end) if self.result is not None and started else None
        _describe_as(
            job, training_job_status=status, secondary_status=transitions[-1]["Status"],
            secondary_status_transitions=transitions,
            last_modified_time=transitions[-1]["StartTime"],
            training_start_time=_naive(started) if started else None,
            training_end_time=_naive(end) if trained is not None else None,
            training_time_in_seconds=trained, billable_time_in_seconds=trained,
            failure_reason=reason,
            model_artifacts={"S3ModelArtifacts": artifact_uri(job)} if (
                status == "Completed") else None)

    def stop(self, job: FakeTrainingJob) -> None:
        with self.lock:
            status = self.advance(job)
            if status in TERMINAL:
                raise ValidationError(message=f"The request was rejected because the training "
                                              f"job is in status {status}.")
            if self.stop_requested_at is None:
                self.stop_requested_at = CLOCK.now()
            self.advance(job)


def artifact_uri(job: FakeTrainingJob) -> str:
    output = job.output_data_config["S3OutputPath"].rstrip("/")
    return f"{output}/{job.training_job_name}/output/model.tar.gz"


def _plan(job: FakeTrainingJob, region: str) -> tuple[list[tuple[str, float]], str | None]:
    """Secondary statuses and their lengths, and the failure if a fault strikes this job."""
    _, count = _instances(job.resource_config)
    if fault_injection.CURRENT.on_in_region("sagemaker-capacity", region) or (
            fault_injection.CURRENT.on_in_region("sagemaker-capacity-5", region)
            and count > LIMITED_CAPACITY_INSTANCES):
        return [("Starting", CAPACITY_FAILS_AFTER_SECONDS)], CAPACITY_ERROR
    before_training = [("Starting", STARTING_SECONDS), ("Downloading", DOWNLOADING_SECONDS)]
    if fault_injection.CURRENT.on_in_region("sagemaker-job-failed", region):
        failing_after = min(ALGORITHM_FAILS_AFTER_SECONDS, TRAINING_SECONDS)
        return [*before_training, ("Training", failing_after)], algorithm_error(job)
    return [*before_training, ("Training", TRAINING_SECONDS),
            ("Uploading", UPLOADING_SECONDS)], None


# --- moto hooks -------------------------------------------------------------------------

# A job's simulated life, on the job; none on a job moto made on its own. In its ``__dict__``,
# moto's description would show it: response_object leaves it out.
SIMULATED: Attached[SimulatedTrainingJob] = Attached("simulated")

# FakeTrainingJob's own arguments; the rest of a request is kept as attributes of the job.
_MOTO_ARGUMENTS = [name for name in inspect.signature(FakeTrainingJob.__init__).parameters
                   if name not in ("self", "account_id", "region_name", "training_job_name")]
_FLAGS = ("enable_network_isolation", "enable_inter_container_traffic_encryption",
          "enable_managed_spot_training")


def _check_name(backend: SageMakerModelBackend, name: str) -> None:
    if not re.fullmatch(NAME_PATTERN, name or ""):
        raise ValidationError(message=(
            f"1 validation error detected: Value '{name}' at 'trainingJobName' failed to satisfy "
            f"constraint: Member must satisfy regular expression pattern: {NAME_PATTERN}"))
    if name in backend.training_jobs:
        arn = FakeTrainingJob.arn_formatter(name, backend.account_id, backend.region_name)
        raise ValidationError(message=(
            "Training job names must be unique within an AWS account and region, and a training "
            f"job with this name already exists ({arn})"))


def _check_quota(backend: SageMakerModelBackend, resource_config: dict[str, Any]) -> None:
    if fault_injection.CURRENT.on_in_region("sagemaker-quota", backend.region_name):
        instance_type, count = _instances(resource_config)
        raise ResourceLimitExceeded(
            f"The account-level service limit '{instance_type} for training job usage' is 0 "
            f"Instances, with current utilization of 0 Instances and a request delta of {count} "
            "Instances. Please use AWS Service Quotas to request an increase for this quota. If "
            "AWS Service Quotas is not available, contact AWS support to request an increase "
            "for this quota.")


def _create_training_job(self: SageMakerModelBackend, training_job_name: str,
                         **request: Any) -> FakeTrainingJob:
    arguments = {name: request.pop(name, None) for name in _MOTO_ARGUMENTS}
    for flag in _FLAGS:
        arguments[flag] = bool(arguments[flag])
    specification = arguments["algorithm_specification"]
    with _LOCK:
        _check_name(self, training_job_name)
        _check_quota(self, arguments["resource_config"])
        # moto replaces the request's MetricDefinitions with its own: give it a copy.
        job = FakeTrainingJob(account_id=self.account_id, region_name=self.region_name,
                              training_job_name=training_job_name,
                              **dict(arguments, algorithm_specification=copy.deepcopy(
                                  specification)))
        job.algorithm_specification = specification
        for name, value in request.items():  # Environment, RetryStrategy, …
            setattr(job, name, value)
        now = CLOCK.now()
        job.creation_time = _naive(now)
        _describe_as(job, final_metric_data_list=None)
        plan, failure = _plan(job, self.region_name)
        SIMULATED.set(job, SimulatedTrainingJob(self.account_id, self.region_name, now, plan,
                                                failure)).advance(job)
        self.training_jobs[training_job_name] = job
    return job


def _stop_training_job(self: SageMakerModelBackend, training_job_name: str) -> None:
    job = self.training_jobs.get(training_job_name)
    if job is None:
        arn = FakeTrainingJob.arn_formatter(training_job_name, self.account_id,
                                            self.region_name)
        raise ValidationError(message=f"Could not find training job '{arn}'.")
    simulated = SIMULATED.get(job)
    if simulated is None:  # made by moto itself: already Completed
        raise ValidationError(message="The request was rejected because the training job is "
                                      f"in status {job.training_job_status}.")
    simulated.stop(job)


def _advance_all(backend: SageMakerModelBackend) -> None:
    for job in list(backend.training_jobs.values()):
        if (simulated := SIMULATED.get(job)) is not None:
            simulated.advance(job)




def _response_object(previous: Any) -> Any:
    def response_object(self: FakeTrainingJob) -> dict[str, Any]:
        simulated = SIMULATED.get(self)
        if simulated is not None:
            simulated.advance(self)
        out = previous.fget(self)
        out.pop("Simulated", None)
        return out

    return response_object


def _list_training_jobs(previous: Any) -> Any:
    def list_training_jobs(self: SageMakerModelBackend, *args: Any, **kwargs: Any) -> Any:
        _advance_all(self)
        return previous(self, *args, **kwargs)

    return list_training_jobs


def _search(previous: Any) -> Any:
    def search(self: SageMakerModelBackend, *args: Any, **kwargs: Any) -> Any:
        _advance_all(self)
        return previous(self, *args, **kwargs)

    return search


def _response_create_training_job(self: SageMakerResponse) -> ActionResult:
    # Every request field, snake_cased (``RetryStrategy`` → ``retry_strategy``).
    request = {xform_name(key): value for key, value in self.params.items()}
    job = self.sagemaker_backend.create_training_job(**request)
    return ActionResult({"TrainingJobArn": job.arn})


def _response_stop_training_job(self: SageMakerResponse) -> EmptyResult:
    _stop_training_job(self.sagemaker_backend, self._get_param("TrainingJobName"))
    return EmptyResult()


def apply() -> None:
    PATCHES.replace(SageMakerModelBackend, "create_training_job", _create_training_job)
    PATCHES.add(SageMakerModelBackend, "stop_training_job", _stop_training_job)
    PATCHES.wrap(SageMakerModelBackend, "list_training_jobs", _list_training_jobs)
    PATCHES.wrap(SageMakerModelBackend, "search", _search)
    PATCHES.wrap(FakeTrainingJob, "response_object", lambda previous: property(
        _response_object(previous)))
    # moto routes X-Amz-Target operations to same-named response methods.
    PATCHES.replace(SageMakerResponse, "create_training_job", _response_create_training_job)
    PATCHES.add(SageMakerResponse, "stop_training_job", _response_stop_training_job)
