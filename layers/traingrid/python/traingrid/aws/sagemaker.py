"""SageMaker training jobs, in whichever region the data is."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from traingrid.aws.clients import client
from traingrid.aws.errors import translated
from traingrid.errors import TrainGridError


class CapacityUnavailable(TrainGridError):
    """The region cannot run the job now (quota or capacity); another region may."""


CAPACITY_CODES = frozenset({"ResourceLimitExceeded", "CapacityError", "InsufficientCapacity"})


def create_training_job(region: str, request: dict[str, Any]) -> str:
    """Start the job; its ARN. Raises CapacityUnavailable for quota and capacity refusals."""
    try:
        return client("sagemaker", region).create_training_job(**request)["TrainingJobArn"]
    except ClientError as error:
        code = error.response["Error"]["Code"]
        if code in CAPACITY_CODES:
            raise CapacityUnavailable(f"{code}: {error.response['Error']['Message']}") from None
        with translated("SageMaker", "CreateTrainingJob"):
            raise


def describe_training_job(region: str, name: str) -> dict[str, Any]:
    with translated("SageMaker", "DescribeTrainingJob"):
        return client("sagemaker", region).describe_training_job(TrainingJobName=name)
