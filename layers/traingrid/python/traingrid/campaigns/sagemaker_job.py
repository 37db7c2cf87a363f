"""A region's SageMaker training job: how it reads its data, and its CreateTrainingJob request
(its name is ``traingrid.naming.job_name``).

MPI-launched PyTorch DDP (Horovod's role) through SageMaker's own MPI support: one process per
GPU on every host, each running the image's entry point (``containers/sagemaker``: the Batch
nodes' trainer), whose log lines SageMaker reads as metrics.
"""

from __future__ import annotations

import math
from typing import Any

from traingrid.vocabulary.campaign_fanout import DataInput, InputMode, RegionJob

GPUS_PER_HOST = {
    "ml.p3.2xlarge": 1, "ml.p3.8xlarge": 4, "ml.p3.16xlarge": 8, "ml.p3dn.24xlarge": 8,
    "ml.p4d.24xlarge": 8, "ml.p4de.24xlarge": 8, "ml.p5.48xlarge": 8, "ml.g5.48xlarge": 8,
    "ml.g5.12xlarge": 4,
}
# Only what the trainer's NCCL reads (no HOROVOD_* setting: nothing in the image reads one).
# No MCA parameter the toolkit's own mpirun line sets (btl_vader_single_copy_mechanism, ...):
# Open MPI refuses to start when one is named twice.
CUSTOM_MPI_OPTIONS = "-x NCCL_MIN_NRINGS=8 -x NCCL_LAUNCH_MODE=PARALLEL"
# No warmup_epochs: the trainer scales the warmup with the global batch unless a campaign says.
DEFAULT_HYPERPARAMETERS = {"num_epochs": "90", "batch_size": "256", "lr_decay_mode": "poly"}
# The image's script (containers/sagemaker/traingrid_train.py, in /opt/ml/code).
ENTRY_POINT = "traingrid_train.py"
# What SageMaker scrapes from the trainer's log (traingrid_node.metrics.LOG_METRICS, which says
# why, tested): the first rank's window line only, whole, after the tag the toolkit's mpirun
# gives each line; nothing else a job prints reads as a loss. botocore's
# MetricDefinition.Regex "searches the output of a training job" (at most 500 characters).
_WINDOW = (r"^(?:\[[0-9]+,(?:mpirank:)?0(?:,algo-[0-9]+)?\]<stdout>: ?)?"
           r"\[trainer rank 0/[0-9]+\] epoch [0-9]+/[0-9]+ "
           r"step [0-9]+/[0-9]+ loss {loss} lr [0-9.]+ images/s {rate} \([0-9.]+ per GPU\)$")
METRIC_DEFINITIONS = [
    {"Name": "train:loss", "Regex": _WINDOW.format(loss="([0-9.]+)", rate="[0-9.]+")},
    {"Name": "train:images_per_second",
     "Regex": _WINDOW.format(loss="[0-9.]+", rate="([0-9.]+)")},
]
# Where the trainer writes its TensorBoard event files under SageMaker
# (traingrid_trainer.watch.SAGEMAKER_TENSORBOARD, tested), which SageMaker uploads.
TENSORBOARD_LOCAL_PATH = "/opt/ml/output/tensorboard"
MAX_RUNTIME_S = 5 * 24 * 3600

GB, GIB = 10**9, 1024**3
# File mode copies the whole channel onto every instance before the first step. Up to this
# much, that copy takes minutes (a few hundred MB/s per instance) and all 90 epochs then read
# local disk; beyond it, the fleet idles and bills through the copy and the volume grows with
# the data (a multi-terabyte campaign would not fit at all), while FastFile starts at once and
# streams each rank's share from S3 through a POSIX view at the same channel path.
FILE_MODE_MAX_BYTES = 100 * GB
# The volume besides the data: the trainer's checkpoints (/opt/ml/checkpoints, kept for
# managed spot), the model (/opt/ml/model) and logs, room for a few checkpoints of a model of
# a few GB with its optimizer state.
CHECKPOINTS_AND_MODEL_GB = 30
DATA_MARGIN = 0.2  # of the data in File mode: the file system's overhead and growth
MIN_VOLUME_GB = 50
# gp2's largest volume. Instance types with NVMe storage (p3dn, p4d, p5, g5) get no EBS
# volume: SageMaker refuses a size over their local storage, which every size asked here is
# under (at most FILE_MODE_MAX_BYTES with its margin plus CHECKPOINTS_AND_MODEL_GB).
MAX_VOLUME_GB = 16_384
# FastFile fetches each object from S3 as it is first opened: small files read slowly.
SMALL_OBJECT_BYTES = 1024**2


def image_uri(account: str, region: str, repository: str) -> str:
    """The same repository name in every region's ECR."""
    return f"{account}.dkr.ecr.{region}.amazonaws.com/{repository}"


def with_tag(repository: str, tag: str | None) -> str:
    """``repository[:tag]`` with its tag replaced by ``tag`` (unchanged when None)."""
    return repository if tag is None else f"{repository.partition(':')[0]}:{tag}"


def size_text(size: float) -> str:
    """Bytes in words, decimal units as S3 and the plan's prices count them."""
    for unit, scale in (("TB", 10**12), ("GB", GB), ("MB", 10**6), ("KB", 10**3)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{int(size)} B"


def data_input(size: int, objects: int) -> DataInput:
    """How a region's job reads its ``size`` bytes of data in ``objects`` objects, the volume
    that takes, and why: File mode with room for the data while it fits comfortably, FastFile
    with room only for checkpoints and the model above that."""
    data = f"{size_text(size)} in {objects} object{'' if objects == 1 else 's'}"
    if size <= FILE_MODE_MAX_BYTES:
        volume = min(MAX_VOLUME_GB, max(MIN_VOLUME_GB, math.ceil(
            size / GIB * (1 + DATA_MARGIN) + CHECKPOINTS_AND_MODEL_GB)))
        return DataInput(
            input_mode=InputMode.FILE, volume_size_gb=volume, input_reason=(
                f"File: {data} is at most {size_text(FILE_MODE_MAX_BYTES)}, so each instance "
                f"copies it once before training and every epoch reads local disk; {volume} GB "
                f"volume: the data, {CHECKPOINTS_AND_MODEL_GB} GB for checkpoints and the "
                f"model, {DATA_MARGIN:.0%} margin (at least {MIN_VOLUME_GB} GB)"))
    reason = (f"FastFile: {data} is over {size_text(FILE_MODE_MAX_BYTES)}: copying it onto "
              "every instance would idle the fleet through the copy and need a volume as large "
              "as the data, so SageMaker streams the S3 objects through a POSIX view as the "
              f"ranks read them; {MIN_VOLUME_GB} GB volume for checkpoints and the model")
    if objects and size / objects < SMALL_OBJECT_BYTES:
        reason += (f"; its objects average {size_text(size / objects)} and FastFile fetches "
                   "each as it is first read: larger shards would read faster")
    return DataInput(input_mode=InputMode.FAST_FILE, volume_size_gb=MIN_VOLUME_GB,
                     input_reason=reason)


def planned_input(job: RegionJob) -> DataInput:
    """The input the plan chose for the job (a plan made before it chose one: chosen now)."""
    if "input_mode" in job and "volume_size_gb" in job:
        return DataInput(input_mode=job["input_mode"], volume_size_gb=job["volume_size_gb"],
                         input_reason=job.get("input_reason", ""))
    return data_input(int(job["bytes"]), int(job["objects"]))


def tensorboard_uri(output_path: str, name: str) -> str:
    """Where SageMaker uploads a job's TensorBoard files: under the output path."""
    return f"{output_path.rstrip('/')}/tensorboard/{name}/"


def create_request(job: RegionJob, *, name: str, region: str, s3_input: str,
                   output_path: str, role_arn: str, image: str, tags: dict[str, str],
                   spot: bool = False) -> dict[str, Any]:
    """The CreateTrainingJob request of one region's job."""
    gpus = GPUS_PER_HOST.get(job["instance_type"], 8)
    hyperparameters = DEFAULT_HYPERPARAMETERS | {
        k: str(v) for k, v in (job.get("hyperparameters") or {}).items()
    }
    hyperparameters |= {
        "sagemaker_program": ENTRY_POINT,
        "sagemaker_mpi_enabled": "true",
        "sagemaker_mpi_num_of_processes_per_host": str(gpus),
        "sagemaker_mpi_custom_mpi_options": CUSTOM_MPI_OPTIONS,
    }
    data = planned_input(job)
    request: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": image,
                                   "TrainingInputMode": data["input_mode"],
                                   "MetricDefinitions": METRIC_DEFINITIONS},
        "RoleArn": role_arn,
        "HyperParameters": hyperparameters,
        "InputDataConfig": [{
            "ChannelName": "train",
            "DataSource": {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3Uri": s3_input,
                "S3DataDistributionType": "FullyReplicated",
            }},
            "InputMode": data["input_mode"],
        }],
        "OutputDataConfig": {"S3OutputPath": output_path},
        "ResourceConfig": {"InstanceType": job["instance_type"],
                           "InstanceCount": int(job["instance_count"]),
                           "VolumeSizeInGB": data["volume_size_gb"]},
        "StoppingCondition": {"MaxRuntimeInSeconds": MAX_RUNTIME_S},
        # botocore's TensorBoardOutputConfig: S3OutputPath is required (an S3Uri, at most
        # 1,024 characters, "(https|s3)://([^/]+)/?(.*)"); LocalPath "defaults to
        # /opt/ml/output/tensorboard" (TENSORBOARD_LOCAL_PATH, where the trainer writes), left
        # to the default: a given /opt/ml path has been refused as reserved. The output path is
        # the fan-out's in that region, shared by its jobs there: the job's name keeps each
        # job's files apart, as the checkpoints' does.
        "TensorBoardOutputConfig": {"S3OutputPath": tensorboard_uri(output_path, name)},
        "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
    }
    if spot:
        request["EnableManagedSpotTraining"] = True
        request["StoppingCondition"]["MaxWaitTimeInSeconds"] = 2 * MAX_RUNTIME_S
        request["CheckpointConfig"] = {"S3Uri": f"{output_path.rstrip('/')}/checkpoints/{name}/"}
    return request
