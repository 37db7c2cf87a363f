"""FSx for Lustre: the file system and its export tasks, as TrainGrid reads them."""

from __future__ import annotations

from typing import Any

from traingrid.aws.client_errors import translated
from traingrid.aws.clients import client


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


def list_file_systems() -> list[dict[str, Any]]:
    """Every file system of the account in this region, with its tags."""
    found: list[dict[str, Any]] = []
    with translated("FSx", "DescribeFileSystems"):
        for page in client("fsx").get_paginator("describe_file_systems").paginate():
            found += page["FileSystems"]
    return found


def exports_of(file_system_id: str) -> list[dict[str, Any]]:
    """The file system's data repository tasks (exports), in any lifecycle."""
    with translated("FSx", "DescribeDataRepositoryTasks"):
        return client("fsx").describe_data_repository_tasks(
            Filters=[{"Name": "file-system-id", "Values": [file_system_id]}]
        )["DataRepositoryTasks"]


def start_export(file_system_id: str, paths: list[str]) -> str:
    """Export ``paths`` of the file system to its data repository; the task's id."""
    with translated("FSx", "CreateDataRepositoryTask"):
        return client("fsx").create_data_repository_task(
            FileSystemId=file_system_id, Type="EXPORT_TO_REPOSITORY", Paths=paths,
            Report={"Enabled": False},
        )["DataRepositoryTask"]["TaskId"]


def delete_file_system(file_system_id: str) -> str:
    """Delete the file system; its lifecycle (DELETING). ResourceNotFound if it is gone."""
    with translated("FSx", "DeleteFileSystem"):
        return client("fsx").delete_file_system(FileSystemId=file_system_id)["Lifecycle"]
