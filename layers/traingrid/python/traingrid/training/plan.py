"""Plan a training run: from a validated request and the dataset's size to everything the
state machine needs (file system, job environment, archive location, limits, cost).

Pure: no AWS calls. The caller measures the dataset and passes the time.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from traingrid.clock import iso
from traingrid.errors import RequestInvalid
from traingrid.training.attempts import first_attempt
from traingrid.training.job_shape import (
    DEFAULT_BACKEND,
    Backend,
    backend_environment,
    launcher_for,
    pod_shape,
)
from traingrid.training.sizing import (
    CAPACITY_HEADROOM,
    GIB,
    DatasetSize,
    Sizing,
    epoch_times,
    lustre_throughput,
    size_file_system,
)
from traingrid.vocabulary.catalog import (
    FSX_DEFAULT_STORAGE_QUOTA_GIB,
    INSTANCE_TYPES,
    LUSTRE_VERSION,
    is_valid_capacity,
    preflight_thresholds,
    resource_requirements,
    round_up_capacity,
)
from traingrid.vocabulary.training_run import ARCHIVE_ROOT, PlanLimits, PlanReads, RunPlan

if TYPE_CHECKING:
    from traingrid.training.run_request import TrainingRunRequest

FSX_MOUNT_POINT = "/fsx"
SCRATCH_DIR = "/scratch"
# The job's outputs folder, on the file system and below the run's prefix in S3. The file
# system's root is exported to the run's own prefix (ExportPath), so whatever the job writes
# anywhere on it can only reach S3 under runs/<run>/: never a dataset, another run, or a
# manifest that would start a run.
OUTPUTS_DIR = "outputs"
# Both the name of a run request under a dataset prefix and of a run's archive manifest.
MANIFEST_NAME = "manifest.json"
# After its limits, a file system is overdue: the janitor may release it.
EXPIRY_MARGIN = timedelta(hours=1)
ATTEMPT_MARGIN = timedelta(minutes=15)
# What every node runs unless a request names its own command: the image's trainer, which
# reads the run's fields from the job's environment (EPOCHS, BATCH_SIZE, ...). The job
# definition's Command is this too.
DEFAULT_TRAIN_COMMAND = ("python3", "-m", "traingrid_trainer")


def archive_prefix(run: str) -> str:
    """The run's own prefix in the data bucket: its file system's export root, and the home
    of its archive manifest."""
    return f"{ARCHIVE_ROOT}/{run}/"


def outputs_prefix(run: str) -> str:
    """Where the job's outputs (``OUTPUT_DIR`` on the file system) reach S3."""
    return f"{archive_prefix(run)}{OUTPUTS_DIR}/"


def storage_capacity_gib(request: TrainingRunRequest, dataset: DatasetSize,
                         quota_gib: int = FSX_DEFAULT_STORAGE_QUOTA_GIB) -> int:
    """The file system's capacity: the request's own, checked, or sized for the dataset and
    the job's reads within the account's FSx storage quota (``sizing.size_file_system``)."""
    deployment_type = request.fsx.deployment_type
    needed_gib = dataset.bytes * CAPACITY_HEADROOM / GIB
    requested = request.fsx.storage_capacity_gib
    if requested is None:
        return size_file_system(request, dataset, quota_gib).choice.capacity_gib
    problems = []
    if not is_valid_capacity(deployment_type, requested):
        problems.append(
            f"{requested} GiB is not a valid {deployment_type} capacity; the nearest valid "
            f"one above is {round_up_capacity(deployment_type, requested)} GiB"
        )
    if requested < needed_gib:
        problems.append(
            f"{requested} GiB cannot hold the dataset ({dataset.bytes / GIB:.1f} GiB plus "
            f"{CAPACITY_HEADROOM - 1:.0%} headroom); use at least "
            f"{round_up_capacity(deployment_type, needed_gib)} GiB"
        )
    if problems:
        raise RequestInvalid(
            [{"pointer": "/fsx/storage_capacity_gib", "message": m} for m in problems]
        )
    return requested


def lustre_configuration(request: TrainingRunRequest, run: str, sizing: Sizing
                         ) -> dict[str, Any]:
    """The CreateFileSystem LustreConfiguration: the sized deployment type and throughput,
    hydrated from the dataset, exported to the run's own prefix."""
    config: dict[str, Any] = {
        "DeploymentType": sizing.choice.tier.deployment_type,
        "ImportPath": request.dataset,
        # Export maps the file system's root to runs/<run>/: outputs/ on the file system is
        # archived to s3://<bucket>/runs/<run>/outputs/, and nothing the job writes, or
        # exports with lfs hsm_archive, can land anywhere else in the bucket.
        "ExportPath": f"s3://{request.bucket}/{archive_prefix(run)}",
    }
    return config | lustre_throughput(sizing.choice)


def plan_reads(sizing: Sizing, dataset: DatasetSize) -> PlanReads:
    """What the job reads and what the file system gives, for the plan and its readers."""
    times = epoch_times(sizing, dataset)
    demand, choice = sizing.demand, sizing.choice
    return {
        "images_per_s": demand.images_per_s,
        "images_per_s_source": demand.images_per_s_source,
        "record_bytes": demand.record_bytes,
        "record_bytes_source": demand.record_bytes_source,
        "records": demand.records,
        "required_mb_s": round(demand.required_mb_s, 1),
        "throughput_mb_s": round(choice.throughput_mb_s, 1),
        "burst_mb_s": None if choice.burst_mb_s is None else round(choice.burst_mb_s, 1),
        "meets": sizing.meets,
        "epoch_s": round(times.epoch_s, 1),
        "compute_epoch_s": round(times.compute_s, 1),
        "first_epoch_lazy_s": round(times.first_epoch_lazy_s, 1),
        "preload_s": round(times.preload_s, 1),
        "first_epoch_preloaded_s": round(times.first_epoch_preloaded_s, 1),
        "notes": list(sizing.notes),
        "warnings": list(sizing.warnings),
    }


def job_environment(request: TrainingRunRequest, run: str, mpi_gpus: int,
                    backend: Backend = DEFAULT_BACKEND) -> dict[str, str]:
    """Values of the container environment the state machine passes to every node."""
    instance = INSTANCE_TYPES[request.instance_type]
    output_dir = f"{FSX_MOUNT_POINT}/{OUTPUTS_DIR}"
    return {
        "JOB_DIR": FSX_MOUNT_POINT,
        "SCRATCH_DIR": SCRATCH_DIR,
        "OUTPUT_DIR": output_dir,
        # The main node exports the outputs to S3 before the job ends (``lfs hsm_archive``),
        # so the file system can be deleted as soon as the archive is verified.
        "TRAINGRID_EXPORT_DIR": output_dir,
        "BATCH_SIZE": str(request.batch_size),
        "MPI_GPUS": str(mpi_gpus),
        "EPOCHS": str(request.epochs),
        # auto: the trainer scales the warmup with the global batch (its schedule.recipe).
        "WARMUP_EPOCHS": "auto" if request.warmup_epochs is None else str(request.warmup_epochs),
        "LR_DECAY_MODE": request.lr_decay_mode,
        "EXTRA_MPI_PARAMS": request.extra_mpi_params,
        # mpirun from the main node, or torchrun on every node (elastic: the default on ECS
        # where the run may shrink, so a lost worker node is recovered in the same job).
        "TRAINGRID_LAUNCHER": launcher_for(backend, request.launcher, nodes=request.nodes,
                                           min_nodes=request.min_nodes,
                                           mpi_options="extra_mpi_params"
                                           in request.model_fields_set),
        "FSX_MOUNT_POINT": FSX_MOUNT_POINT,
        "TRAINGRID_RUN": run,
        # The node entrypoint sets libfabric and NCCL for EFA from these (0: TCP only).
        "TRAINGRID_EFA_DEVICES": str(instance.efa_interfaces),
        "TRAINGRID_EFA_RDMA": "1" if instance.efa_rdma else "0",
        # torchrun's elastic range (--nnodes=MIN:MAX) and which attempt this job is.
        "TRAINGRID_MIN_NODES": str(min_nodes(request)),
        "TRAINGRID_ATTEMPT": "1",
        # The trainer's pre-flight check and its thresholds for the instance type.
        "TRAINGRID_PREFLIGHT": json.dumps(preflight_thresholds(instance), sort_keys=True),
    } | ({"TRAINGRID_PRELOAD_DIR": FSX_MOUNT_POINT} if request.fsx.preload else {}
         ) | backend_environment(backend)


def min_nodes(request: TrainingRunRequest) -> int:
    return request.nodes if request.min_nodes is None else request.min_nodes


def client_request_token(run: str) -> str:
    """Idempotency token for CreateFileSystem (≤ 63 chars), so a retried call creates one."""
    return run[:63]


def plan_run(
    request: TrainingRunRequest,
    *,
    run: str,
    execution_arn: str,
    dataset: DatasetSize,
    now: datetime,
    backend: Backend = DEFAULT_BACKEND,
    fsx_quota_gib: int = FSX_DEFAULT_STORAGE_QUOTA_GIB,
) -> RunPlan:
    instance = INSTANCE_TYPES[request.instance_type]
    mpi_gpus = request.nodes * instance.gpus
    # Refuses an invalid explicit capacity.
    capacity = storage_capacity_gib(request, dataset, fsx_quota_gib)
    sizing = size_file_system(request, dataset, fsx_quota_gib)
    limits: PlanLimits = {
        "hydrate_s": request.timeouts.hydrate_minutes * 60,
        "runnable_s": request.timeouts.runnable_minutes * 60,
        "training_s": int(request.timeouts.training_hours * 3600),
        "archive_s": request.timeouts.archive_minutes * 60,
    }
    one_attempt_s = (limits["hydrate_s"] + limits["runnable_s"] + limits["training_s"]
                     + limits["archive_s"])
    # Every attempt may wait for capacity and train; the file system outlives them all.
    total_s = one_attempt_s + (request.max_attempts - 1) * (limits["runnable_s"]
                                                           + limits["training_s"])
    expires_at = now + timedelta(seconds=total_s) + EXPIRY_MARGIN
    compute_per_hour = request.nodes * instance.usd_per_hour
    fsx_per_hour = sizing.choice.usd_per_hour
    return {
        "run": run,
        "dataset": {
            "uri": request.dataset,
            "bucket": request.bucket,
            "prefix": request.prefix,
            "objects": dataset.objects,
            "bytes": dataset.bytes,
        },
        "file_system": {
            "file_system_type_version": LUSTRE_VERSION,
            "storage_capacity_gib": capacity,
            "lustre_configuration": lustre_configuration(request, run, sizing),
            "client_request_token": client_request_token(run),
            "tags": [
                {"Key": "Name", "Value": f"traingrid-{run}"},
                {"Key": "traingrid:run", "Value": run},
                {"Key": "traingrid:execution", "Value": execution_arn},
                {"Key": "traingrid:expires-at", "Value": iso(expires_at)},
            ],
        },
        "job": {
            "name": run,
            "nodes": request.nodes,
            "instance_type": instance.name,
            "gpus_per_node": instance.gpus,
            "mpi_gpus": mpi_gpus,
            "vcpus": instance.vcpus,
            "resource_requirements": resource_requirements(instance),
            # Batch's own limit, a safety net should the state machine stop watching.
            "attempt_duration_s": limits["training_s"] + int(ATTEMPT_MARGIN.total_seconds()),
            "environment": job_environment(request, run, mpi_gpus, backend),
            "command": list(request.command or DEFAULT_TRAIN_COMMAND),
            "requested_nodes": request.nodes,
            "min_nodes": min_nodes(request),
            "max_attempts": request.max_attempts,
            "attempts": [first_attempt(request.nodes)],
            "trained": False,
            "resubmit": False,
            "decision": f"attempt 1 of {request.max_attempts} on {request.nodes} nodes",
            # Which SubmitJob state the state machine takes (training.job_shape).
            "backend": str(backend),
            **({"pod": dict(pod_shape(instance))} if backend is Backend.EKS else {}),  # type: ignore[typeddict-item]
        },
        "archive": {
            "bucket": request.bucket,
            "prefix": archive_prefix(run),
            "outputs_prefix": outputs_prefix(run),
            "file_system_path": OUTPUTS_DIR,
        },
        "limits": limits,
        "reads": plan_reads(sizing, dataset),
        "estimate": {
            "compute_usd_per_hour": round(compute_per_hour, 2),
            "fsx_usd_per_hour": round(fsx_per_hour, 2),
            "max_usd": round(
                compute_per_hour * request.timeouts.training_hours
                + fsx_per_hour * one_attempt_s / 3600,
                2,
            ),
        },
    }


# What a dry run is named when the request names no run: nothing is started under it.
DRY_RUN = "dry-run"


def plan_view(plan: RunPlan) -> dict[str, Any]:
    """A plan as ``traingrid plan`` and ``POST /plans`` show it: the job's shape, what it
    reads, the file system that feeds it, an epoch's time and the cost."""
    job, fs, estimate = plan["job"], plan["file_system"], plan["estimate"]
    reads = plan["reads"]
    lustre = fs["lustre_configuration"]
    return {
        "run": plan["run"],
        "dataset": plan["dataset"],
        "job": {
            "nodes": job["nodes"],
            "instance_type": job["instance_type"],
            "gpus": job["mpi_gpus"],
            "images_per_s": reads["images_per_s"],
            "images_per_s_source": reads["images_per_s_source"],
            "epoch_s": reads["epoch_s"],
            "compute_epoch_s": reads["compute_epoch_s"],
            "epochs": int(job["environment"]["EPOCHS"]),
        },
        "input": {
            "record_bytes": reads["record_bytes"],
            "record_bytes_source": reads["record_bytes_source"],
            "records": reads["records"],
            "required_mb_s": reads["required_mb_s"],
        },
        "fsx": {
            "deployment_type": lustre["DeploymentType"],
            "storage_capacity_gib": fs["storage_capacity_gib"],
            "per_unit_storage_throughput": lustre.get("PerUnitStorageThroughput"),
            "throughput_mb_s": reads["throughput_mb_s"],
            "burst_mb_s": reads["burst_mb_s"],
            "meets_reads": reads["meets"],
            "preload": "TRAINGRID_PRELOAD_DIR" in job["environment"],
            "first_epoch_lazy_s": reads["first_epoch_lazy_s"],
            "preload_s": reads["preload_s"],
            "first_epoch_preloaded_s": reads["first_epoch_preloaded_s"],
        },
        "cost": {
            "compute_usd_per_hour": estimate["compute_usd_per_hour"],
            "fsx_usd_per_hour": estimate["fsx_usd_per_hour"],
            "usd_per_hour": round(estimate["compute_usd_per_hour"]
                                  + estimate["fsx_usd_per_hour"], 2),
            "max_usd": estimate["max_usd"],
            "training_hours": plan["limits"]["training_s"] / 3600,
        },
        "notes": reads["notes"],
        "warnings": reads["warnings"],
    }
