"""What the TrainingRun's steps pass each other in the execution's state, typed.

The state machine carries these as JSON (``$.plan``, ``$.file_system``, ``$.export``…); the
keys here are the keys there, so the ASL's paths and these types describe the same thing.
Standard library only.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

from traingrid.vocabulary.statuses import (
    BatchJobStatus,
    FileSystemLifecycle,
    RunStatus,
    TaskLifecycle,
)

# Where runs archive their outputs in the data bucket (``runs/<run>/``): no dataset is there.
ARCHIVE_ROOT = "runs"


class StepFailure(TypedDict):
    """What a Catch puts at its ResultPath (``$.failure``, ``$.archive_failure``…)."""

    Error: str
    Cause: NotRequired[str]


class PollState(TypedDict):
    """A poll loop's progress (``waits.Poll``)."""

    attempt: int
    elapsed_s: int
    wait_s: int


class PlanDataset(TypedDict):
    uri: str
    bucket: str
    prefix: str
    objects: int
    bytes: int


class PlanFileSystem(TypedDict):
    """CreateFileSystem's parameters that the plan decides."""

    file_system_type_version: str  # catalog.LUSTRE_VERSION
    storage_capacity_gib: int
    lustre_configuration: dict[str, Any]
    client_request_token: str
    tags: list[dict[str, str]]


class Attempt(TypedDict):
    """One Batch job of the run: its nodes, why it was made, the checkpoint it resumed from;
    once it ended, its job and what happened (``attempts.next_attempt``)."""

    attempt: int
    nodes: int
    reason: str
    resumed_from: str | None
    job_id: NotRequired[str | None]
    outcome: NotRequired[str]
    ran_s: NotRequired[int]
    waited_s: NotRequired[int]  # its wait in the queue (RUNNABLE/STARTING), for the receipt


class PlanJob(TypedDict):
    """SubmitJob's overrides that the plan decides, for the attempt in progress, and the
    attempts so far."""

    name: str
    nodes: int
    instance_type: str
    gpus_per_node: int
    mpi_gpus: int
    vcpus: int
    resource_requirements: list[dict[str, str]]
    attempt_duration_s: int
    environment: dict[str, str]
    command: list[str]  # the container's arguments: what the node entrypoint launches
    requested_nodes: int
    min_nodes: int  # fewest nodes an attempt may shrink to after no capacity
    max_attempts: int
    attempts: list[Attempt]
    trained: bool  # an attempt ran on nodes: the file system holds outputs
    resubmit: bool  # the last decision: submit another attempt
    decision: str
    # The Batch backend the stack trains on, ecs or eks (absent from older plans: ecs), and
    # on eks the node's pod: instance_types, container resources (training.job_shape).
    backend: NotRequired[str]
    pod: NotRequired[dict[str, Any]]


class PlanArchive(TypedDict):
    bucket: str
    prefix: str  # runs/<run>/ in the bucket: the file system's export root, and the manifest
    outputs_prefix: NotRequired[str]  # runs/<run>/outputs/ (absent from older plans: prefix)
    file_system_path: str  # the job's outputs folder on the file system (outputs)


class PlanLimits(TypedDict):
    hydrate_s: int
    runnable_s: int
    training_s: int
    archive_s: int


class PlanReads(TypedDict):
    """What the job reads (images/s of records), what the file system gives, and how long an
    epoch takes at both (``plan.plan_reads``)."""

    images_per_s: int
    images_per_s_source: str
    record_bytes: int
    record_bytes_source: str
    records: int
    required_mb_s: float
    throughput_mb_s: float
    burst_mb_s: float | None
    meets: bool
    epoch_s: float
    compute_epoch_s: float
    first_epoch_lazy_s: float
    preload_s: float
    first_epoch_preloaded_s: float
    notes: list[str]
    warnings: list[str]


class PlanEstimate(TypedDict):
    compute_usd_per_hour: float
    fsx_usd_per_hour: float
    max_usd: float


class RunPlan(TypedDict):
    """The Plan step's output (``$.plan``)."""

    run: str
    dataset: PlanDataset
    file_system: PlanFileSystem
    job: PlanJob
    archive: PlanArchive
    limits: PlanLimits
    reads: NotRequired[PlanReads]  # absent from older plans
    estimate: PlanEstimate


class FileSystemState(TypedDict):
    """The hydrate loop's state (``$.file_system``); DNS and mount names once AVAILABLE."""

    id: str
    lifecycle: FileSystemLifecycle
    poll: PollState
    arn: NotRequired[str]
    dns_name: NotRequired[str]
    mount_name: NotRequired[str]
    hydrate_s: NotRequired[int]


class ExportState(TypedDict):
    """The export loop's state (``$.export``); how many files it exported once SUCCEEDED."""

    id: str
    lifecycle: TaskLifecycle
    poll: PollState
    exported: NotRequired[int]


class CheckFileSystemEvent(TypedDict):
    file_system: FileSystemState
    limit_s: int


class CheckExportEvent(TypedDict):
    export: ExportState
    plan: RunPlan
    file_system: FileSystemState  # passed, not read


class TrainingJobState(TypedDict):
    """The training wait's state (``$.job``, ``waits.JobState.as_output``). SubmitTrainingJob
    starts it with the job's id and name; every check of the job fills in the rest."""

    id: str
    name: str
    status: BatchJobStatus
    checks: int
    wait_s: int  # the timeout of the wait the execution is in (TimeoutSecondsPath)
    started: bool
    done: bool
    waiting_s: NotRequired[int]
    running_s: NotRequired[int]
    terminated: NotRequired[bool]
    error: NotRequired[str | None]  # an error of errors.py by name (TrainingJobStuck…)
    cause: NotRequired[str | None]
    exit_code: NotRequired[int | None]
    status_reason: NotRequired[str | None]
    capacity_code: NotRequired[str | None]
    # NextAttempt's addition: the pre-flight check's verdict, when the job failed it.
    preflight: NotRequired[str | None]


class Measuring(TypedDict):
    """Where sizing a dataset stands (``training.measure``): every key up to ``after``, in
    S3's order, counted; a few numbers and one key, however large the dataset."""

    objects: int
    bytes: int
    pages: int  # ListObjectsV2 calls, over every part
    parts: int  # calls that listed a part
    after: str  # the last key counted ("" before the first)


class MeasuringPlan(TypedDict):
    """Plan's output while the dataset is still being listed: the MeasureDataset loop
    passes it back."""

    measuring: Measuring


class PlanRunEvent(TypedDict):
    """Plan's input: the request as the execution's input holds it (anyone allowed to start
    an execution sends what they like: the Plan step validates it) and the execution; in the
    MeasureDataset loop, where the dataset's listing stands."""

    request: Any
    run: str  # the execution's name
    execution_arn: str
    measuring: NotRequired[Measuring]


class AwaitTrainingJobEvent(TypedDict):
    """AwaitTrainingJob's payload: the task token to park and what a check of the job needs."""

    token: str
    job: TrainingJobState
    plan_job: PlanJob
    limits: PlanLimits


class TrainingWaitCheck(TypedDict):
    """What one check of the training wait did (``outcome``: waiting, completed,
    stale-token) and the wait's state after it."""

    outcome: str
    job: TrainingJobState


class NextAttemptEvent(TypedDict):
    plan_job: PlanJob
    job: TrainingJobState
    archive: PlanArchive


class CheckArchiveEvent(TypedDict):
    """CheckArchive's input: before any export task."""

    plan: RunPlan
    job: TrainingJobState
    file_system: FileSystemState


class WriteManifestEvent(CheckArchiveEvent):
    """WriteManifest's input: after the export task."""

    export: ExportState


class ArchiveState(TypedDict):
    """CheckArchive's and WriteManifest's output (``$.archive``): the manifest once the
    archive is complete, else what the job's output index says is missing."""

    complete: bool
    indexed: NotRequired[int | None]  # files in the job's output index (None: no index)
    missing: NotRequired[int]
    archived_by: NotRequired[str]  # "training job" or "export task"
    manifest: NotRequired[str]  # s3:// URI of runs/<run>/manifest.json
    objects: NotRequired[int]
    bytes: NotRequired[int]
    # Node-seconds by cause the job's trainer reported (``training.recoveries``): its goodput.
    phases: NotRequired[dict[str, int]]
    # What of the job's metrics.json was left out of them, and why (a few lines at most).
    ignored: NotRequired[list[str]]


class RetainFileSystemEvent(TypedDict):
    file_system: FileSystemState
    plan: RunPlan


class Retained(TypedDict):
    """RetainFileSystem's output: the kept file system, its expiry, where the outputs are."""

    file_system_id: str
    expires_at: str
    where: str


class Explained(TypedDict):
    """ExplainFailure's output (``$.explained``): the Fail state's error and cause."""

    error: str
    cause: str


class TrainingRunState(TypedDict, total=False):
    """The execution's whole state as the record step sees it: whatever the run got to (a
    run that failed early has little of it), and the failures its Catches kept."""

    request: dict[str, Any]
    plan: RunPlan
    file_system: FileSystemState
    job: TrainingJobState
    archive: ArchiveState
    export: ExportState
    retained: Retained
    explained: Explained
    failure: StepFailure
    archive_failure: StepFailure


class ExplainFailureEvent(TypedDict):
    execution: TrainingRunState  # the execution's whole state


class RecordRunEvent(TypedDict):
    """RecordSuccess's and RecordFailure's input."""

    status: RunStatus  # SUCCEEDED or FAILED
    state: TrainingRunState
    execution_arn: str
    started_at: NotRequired[str]  # the execution's start, ISO 8601


class RecordedRun(TypedDict):
    """What the record step returns: the run as the campaign database now holds it."""

    execution_arn: str
    name: str
    status: RunStatus
    recorded_by: str
    artifacts: str | None
    error: str | None
