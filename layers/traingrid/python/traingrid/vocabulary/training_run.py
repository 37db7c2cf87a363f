"""What the TrainingRun's steps pass each other in the execution's state, typed.

The state machine carries these as JSON (``$.plan``, ``$.file_system``, ``$.export``…); the
keys here are the keys there, so the ASL's paths and these types describe the same thing.
Standard library only.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


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
    lifecycle: str  # a FileSystemLifecycle value
    poll: PollState
    arn: NotRequired[str]
    dns_name: NotRequired[str]
    mount_name: NotRequired[str]
    hydrate_s: NotRequired[int]


class ExportState(TypedDict):
    """The export loop's state (``$.export``); how many files it exported once SUCCEEDED."""

    id: str
    lifecycle: str  # a TaskLifecycle value
    poll: PollState
    exported: NotRequired[int]


class CheckFileSystemEvent(TypedDict):
    file_system: FileSystemState
    limit_s: int


class CheckExportEvent(TypedDict):
    export: ExportState
    plan: RunPlan


class NextAttemptEvent(TypedDict):
    plan_job: PlanJob
    job: dict[str, Any]  # the training wait's state (waits.JobState)
    archive: PlanArchive


class RetainFileSystemEvent(TypedDict):
    file_system: FileSystemState
    plan: RunPlan


class Retained(TypedDict):
    """RetainFileSystem's output: the kept file system, its expiry, where the outputs are."""

    file_system_id: str
    expires_at: str
    where: str
