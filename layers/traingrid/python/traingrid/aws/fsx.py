"""FSx for Lustre: the file system and its export tasks, as TrainGrid reads them."""

from __future__ import annotations

from typing import Any

from traingrid.aws.clients import client
from traingrid.aws.errors import translated


def describe_file_system(file_system_id: str) -> dict[str, Any]:
    with translated("FSx", "DescribeFileSystems"):
        response = client("fsx").describe_file_systems(FileSystemIds=[file_system_id])
    return response["FileSystems"][0]


def describe_export_task(task_id: str) -> dict[str, Any]:
    with translated("FSx", "DescribeDataRepositoryTasks"):
        response = client("fsx").describe_data_repository_tasks(TaskIds=[task_id])
    return response["DataRepositoryTasks"][0]


def tag_file_system(file_system_arn: str, tags: dict[str, str]) -> None:
    with translated("FSx", "TagResource"):
        client("fsx").tag_resource(
            ResourceARN=file_system_arn,
            Tags=[{"Key": k, "Value": v} for k, v in tags.items()],
        )
