"""A region's SageMaker training job: its name and its CreateTrainingJob request.

Horovod-style MPI through SageMaker's own support: one process per GPU on every host, with the
seed's custom MPI options, each running the image's entry point (``containers/sagemaker``: the
Batch nodes' trainer), whose log lines SageMaker reads as metrics.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from traingrid.campaigns.model import RegionJob

# SageMaker: ≤ 63 characters of [a-zA-Z0-9-], starting and ending alphanumeric.
MAX_JOB_NAME = 63
_NOT_NAME = re.compile(r"[^a-zA-Z0-9-]+")
GPUS_PER_HOST = {
    "ml.p3.2xlarge": 1, "ml.p3.8xlarge": 4, "ml.p3.16xlarge": 8, "ml.p3dn.24xlarge": 8,
    "ml.p4d.24xlarge": 8, "ml.p4de.24xlarge": 8, "ml.p5.48xlarge": 8, "ml.g5.48xlarge": 8,
    "ml.g5.12xlarge": 4,
}
CUSTOM_MPI_OPTIONS = (
    "-mca btl_vader_single_copy_mechanism none -x HOROVOD_HIERARCHICAL_ALLREDUCE=1 "
    "-x HOROVOD_FUSION_THRESHOLD=16777216 -x NCCL_MIN_NRINGS=8 -x NCCL_LAUNCH_MODE=PARALLEL"
)
DEFAULT_HYPERPARAMETERS = {
    "num_epochs": "90", "batch_size": "256", "lr_decay_mode": "poly", "warmup_epochs": "10",
}
# The image's script (containers/sagemaker/traingrid_train.py, in /opt/ml/code).
ENTRY_POINT = "traingrid_train.py"
# What SageMaker scrapes from the trainer's log (traingrid_node.metrics.LOG_METRICS, tested).
METRIC_DEFINITIONS = [
    {"Name": "train:loss", "Regex": r"loss ([0-9.]+) lr"},
    {"Name": "train:images_per_second", "Regex": r"images/s ([0-9.]+) \("},
]
MAX_RUNTIME_S = 5 * 24 * 3600
VOLUME_GB = 200


def short_region(region: str) -> str:
    """``eu-central-1`` → ``euc1``."""
    geo, area, number = region.split("-", 2)
    return f"{geo}{area[0]}{number.split('-')[-1]}"


def job_name(execution_name: str, region: str, attempt: int) -> str:
    """Unique per execution, data region (one branch each) and attempt, wherever the job
    trains; readable; within SageMaker's limits."""
    suffix = f"-{short_region(region)}-{attempt}"
    base = _NOT_NAME.sub("-", execution_name).strip("-") or "traingrid"
    if len(base) + len(suffix) > MAX_JOB_NAME:
        digest = hashlib.sha256(execution_name.encode()).hexdigest()[:8]
        base = base[: MAX_JOB_NAME - len(suffix) - len(digest) - 1].rstrip("-") + "-" + digest
    return re.sub("-{2,}", "-", base + suffix)


def image_uri(account: str, region: str, repository: str) -> str:
    """The same repository name in every region's ECR."""
    return f"{account}.dkr.ecr.{region}.amazonaws.com/{repository}"


def with_tag(repository: str, tag: str | None) -> str:
    """``repository[:tag]`` with its tag replaced by ``tag`` (unchanged when None)."""
    return repository if tag is None else f"{repository.partition(':')[0]}:{tag}"


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
    request: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingImage": image, "TrainingInputMode": "File",
                                   "MetricDefinitions": METRIC_DEFINITIONS},
        "RoleArn": role_arn,
        "HyperParameters": hyperparameters,
        "InputDataConfig": [{
            "ChannelName": "train",
            "DataSource": {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3Uri": s3_input,
                "S3DataDistributionType": "FullyReplicated",
            }},
        }],
        "OutputDataConfig": {"S3OutputPath": output_path},
        "ResourceConfig": {"InstanceType": job["instance_type"],
                           "InstanceCount": int(job["instance_count"]),
                           "VolumeSizeInGB": VOLUME_GB},
        "StoppingCondition": {"MaxRuntimeInSeconds": MAX_RUNTIME_S},
        "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
    }
    if spot:
        request["EnableManagedSpotTraining"] = True
        request["StoppingCondition"]["MaxWaitTimeInSeconds"] = 2 * MAX_RUNTIME_S
        request["CheckpointConfig"] = {"S3Uri": f"{output_path.rstrip('/')}/checkpoints/{name}/"}
    return request
