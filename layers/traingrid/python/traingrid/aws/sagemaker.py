"""SageMaker training jobs, in whichever region the data is."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from traingrid.aws.client_errors import NO_ANSWER, translated
from traingrid.aws.clients import client
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
    except NO_ANSWER:
        with translated("SageMaker", "CreateTrainingJob"):
            raise


def describe_training_job(region: str, name: str) -> dict[str, Any]:
    with translated("SageMaker", "DescribeTrainingJob"):
        return client("sagemaker", region).describe_training_job(TrainingJobName=name)


def list_training_jobs(region: str, status: str) -> list[dict[str, Any]]:
    """The region's training jobs in one status (summaries)."""
    found: list[dict[str, Any]] = []
    with translated("SageMaker", "ListTrainingJobs"):
        for page in client("sagemaker", region).get_paginator("list_training_jobs").paginate(
                StatusEquals=status):
            found += page["TrainingJobSummaries"]
    return found


def training_jobs_named(region: str, name_contains: str) -> list[dict[str, Any]]:
    """The region's training jobs whose names contain ``name_contains`` (summaries)."""
    found: list[dict[str, Any]] = []
    with translated("SageMaker", "ListTrainingJobs"):
        for page in client("sagemaker", region).get_paginator("list_training_jobs").paginate(
                NameContains=name_contains):
            found += page["TrainingJobSummaries"]
    return found


def tags_of(region: str, arn: str) -> dict[str, str]:
    with translated("SageMaker", "ListTags"):
        tags = client("sagemaker", region).list_tags(ResourceArn=arn)["Tags"]
    return {t["Key"]: t["Value"] for t in tags}


def stop_training_job(region: str, name: str) -> bool:
    """Stop the job; False if it had ended already (SageMaker refuses to stop it then)."""
    try:
        client("sagemaker", region).stop_training_job(TrainingJobName=name)
    except ClientError as error:
        if error.response["Error"]["Code"] == "ValidationException" and (
                "status" in error.response["Error"]["Message"]):
            return False
        with translated("SageMaker", "StopTrainingJob"):
            raise
    except NO_ANSWER:
        with translated("SageMaker", "StopTrainingJob"):
            raise
    return True
