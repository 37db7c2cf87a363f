"""FSx for Lustre file systems that hydrate over simulated time, hold files and export them to
their data repository with data repository tasks."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError
from moto.fsx.models import fsx_backends

from traingrid_local.emulator import fsx
from traingrid_local.emulator.clock import CLOCK
from traingrid_local.emulator.session import ACCOUNT_ID, Emulator

from .conftest import StartEmulator
from .helpers import create_lustre, create_network, wait_until

REPOSITORY = {"ImportPath": "s3://training-data/data/", "ExportPath": "s3://training-data"}
# Simulated seconds per real second: hydration (480 s) takes about a quarter of a real second.
SLOW = 2000.0

FILES = {
    "runs/r1/metrics.json": b'{"top1": 0.76}',
    "runs/r1/model/final.ckpt": b"weights",
    "runs/r10/metrics.json": b"another run",
    "datasets/imagenet/train-0001.tar": b"input",
}


def _describe(emulator: Emulator, fs_id: str) -> dict[str, Any]:
    systems = emulator.client("fsx").describe_file_systems(FileSystemIds=[fs_id])["FileSystems"]
    return systems[0]


def _wait_for_lifecycle(emulator: Emulator, fs_id: str, *states: str) -> dict[str, Any]:
    return wait_until(lambda: (d := _describe(emulator, fs_id))["Lifecycle"] in states and d,
                      what=f"{fs_id} to be {'/'.join(states)}")


def _task(emulator: Emulator, task_id: str) -> dict[str, Any]:
    return emulator.client("fsx").describe_data_repository_tasks(
        TaskIds=[task_id])["DataRepositoryTasks"][0]


def _wait_for_task(emulator: Emulator, task_id: str) -> dict[str, Any]:
    return wait_until(
        lambda: (t := _task(emulator, task_id))["Lifecycle"] in ("SUCCEEDED", "FAILED") and t,
        what=f"task {task_id} to end",
    )


def _export(emulator: Emulator, fs_id: str, paths: list[str]) -> dict[str, Any]:
    return emulator.client("fsx").create_data_repository_task(
        FileSystemId=fs_id, Type="EXPORT_TO_REPOSITORY", Paths=paths,
        Report={"Enabled": False},
    )["DataRepositoryTask"]


def _file_system_with_files(emulator: Emulator) -> str:
    emulator.client("s3").create_bucket(Bucket="training-data")
    fs_id = create_lustre(emulator, create_network(emulator).subnet_id,
                          **REPOSITORY)["FileSystemId"]
    fsx_backends[ACCOUNT_ID][emulator.region].file_systems[fs_id].files.update(FILES)
    return fs_id


def _exported_keys(emulator: Emulator) -> list[str]:
    listing = emulator.client("s3").list_objects_v2(Bucket="training-data")
    return sorted(o["Key"] for o in listing.get("Contents", []))


def test_a_file_system_hydrates_then_becomes_available(start_emulator: StartEmulator) -> None:
    emulator = start_emulator(speed=SLOW)
    created = create_lustre(emulator, create_network(emulator).subnet_id, **REPOSITORY)

    assert created["Lifecycle"] == "CREATING"
    assert _describe(emulator, created["FileSystemId"])["Lifecycle"] == "CREATING"

    available = _wait_for_lifecycle(emulator, created["FileSystemId"], "AVAILABLE", "FAILED")

    assert available["Lifecycle"] == "AVAILABLE"
    hydrated_after = (CLOCK.now() - available["CreationTime"].astimezone(UTC)).total_seconds()
    assert hydrated_after >= fsx.HYDRATE_SECONDS
    assert "FailureDetails" not in available


def test_the_lustre_configuration_echoes_the_data_repository(emulator: Emulator) -> None:
    created = create_lustre(emulator, create_network(emulator).subnet_id, **REPOSITORY)
    described = _describe(emulator, created["FileSystemId"])

    for file_system in (created, described):
        lustre = file_system["LustreConfiguration"]
        repository = lustre["DataRepositoryConfiguration"]
        assert repository["ImportPath"] == "s3://training-data/data/"
        assert repository["ExportPath"] == "s3://training-data"
        assert lustre["DeploymentType"] == "SCRATCH_2"
        assert lustre["MountName"]
        assert "ImportPath" not in lustre
    assert described["LustreConfiguration"]["MountName"] == (
        created["LustreConfiguration"]["MountName"]
    )
    assert described["OwnerId"] == ACCOUNT_ID
    assert isinstance(described["CreationTime"], datetime)


def test_a_repeated_client_request_token_returns_the_same_file_system(
    emulator: Emulator,
) -> None:
    subnet = create_network(emulator).subnet_id
    client = emulator.client("fsx")

    def create(token: str) -> str:
        return client.create_file_system(
            FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet],
            ClientRequestToken=token, LustreConfiguration={"DeploymentType": "SCRATCH_2"},
        )["FileSystem"]["FileSystemId"]

    first, again, other = create("run-1-attempt"), create("run-1-attempt"), create("run-2")

    assert again == first
    assert other != first
    listed = [f["FileSystemId"] for f in client.describe_file_systems()["FileSystems"]]
    assert sorted(listed) == sorted([first, other])


def test_fault_fsx_create_failed_ends_failed_with_details(start_emulator: StartEmulator) -> None:
    emulator = start_emulator(faults={"fsx-create-failed"})
    created = create_lustre(emulator, create_network(emulator).subnet_id, **REPOSITORY)

    failed = _wait_for_lifecycle(emulator, created["FileSystemId"], "AVAILABLE", "FAILED")

    assert failed["Lifecycle"] == "FAILED"
    assert "fsx-create-failed" in failed["FailureDetails"]["Message"]


def test_an_export_task_copies_the_selected_paths_to_s3(start_emulator: StartEmulator) -> None:
    emulator = start_emulator(speed=SLOW)
    fs_id = _file_system_with_files(emulator)

    task = _export(emulator, fs_id, ["runs/r1"])

    assert task["Lifecycle"] in ("PENDING", "EXECUTING")
    assert task["Type"] == "EXPORT_TO_REPOSITORY"
    assert task["FileSystemId"] == fs_id
    assert _exported_keys(emulator) == []

    done = _wait_for_task(emulator, task["TaskId"])

    assert done["Lifecycle"] == "SUCCEEDED"
    assert done["Status"]["SucceededCount"] == 2
    assert done["Status"]["FailedCount"] == 0
    assert _exported_keys(emulator) == ["runs/r1/metrics.json", "runs/r1/model/final.ckpt"]
    body = emulator.client("s3").get_object(Bucket="training-data",
                                            Key="runs/r1/model/final.ckpt")["Body"].read()
    assert body == b"weights"


def test_an_export_path_with_a_prefix_keeps_the_file_system_layout(emulator: Emulator) -> None:
    emulator.client("s3").create_bucket(Bucket="archive")
    fs_id = create_lustre(emulator, create_network(emulator).subnet_id,
                          ExportPath="s3://archive/exports/")["FileSystemId"]
    fsx_backends[ACCOUNT_ID][emulator.region].file_systems[fs_id].files.update(FILES)

    done = _wait_for_task(emulator, _export(emulator, fs_id, ["/runs/r10/"])["TaskId"])

    assert done["Status"]["SucceededCount"] == 1
    keys = [o["Key"] for o in emulator.client("s3").list_objects_v2(Bucket="archive")["Contents"]]
    assert keys == ["exports/runs/r10/metrics.json"]


def test_a_second_task_while_one_runs_is_refused(start_emulator: StartEmulator) -> None:
    emulator = start_emulator(speed=SLOW)
    fs_id = _file_system_with_files(emulator)
    running = _export(emulator, fs_id, ["runs/r1"])

    with pytest.raises(ClientError) as refused:
        _export(emulator, fs_id, ["runs/r10"])

    assert refused.value.response["Error"]["Code"] == "DataRepositoryTaskExecuting"
    assert running["TaskId"] in refused.value.response["Error"]["Message"]
    tasks = emulator.client("fsx").describe_data_repository_tasks()["DataRepositoryTasks"]
    assert [t["TaskId"] for t in tasks] == [running["TaskId"]]


def test_fault_export_failed_ends_failed_and_exports_nothing(
    start_emulator: StartEmulator,
) -> None:
    emulator = start_emulator(faults={"export-failed"})
    fs_id = _file_system_with_files(emulator)

    done = _wait_for_task(emulator, _export(emulator, fs_id, ["runs/r1"])["TaskId"])

    assert done["Lifecycle"] == "FAILED"
    assert "export-failed" in done["FailureDetails"]["Message"]
    assert "Status" not in done
    assert _exported_keys(emulator) == []


def test_an_export_to_a_deleted_bucket_ends_failed(emulator: Emulator) -> None:
    fs_id = _file_system_with_files(emulator)
    emulator.client("s3").delete_bucket(Bucket="training-data")

    done = _wait_for_task(emulator, _export(emulator, fs_id, ["runs/r1"])["TaskId"])

    assert done["Lifecycle"] == "FAILED"
    assert done["FailureDetails"]["Message"]


def test_an_export_needs_a_data_repository(emulator: Emulator) -> None:
    fs_id = create_lustre(emulator, create_network(emulator).subnet_id)["FileSystemId"]

    with pytest.raises(ClientError):
        _export(emulator, fs_id, ["runs/r1"])


def test_describing_an_unknown_task_fails(emulator: Emulator) -> None:
    with pytest.raises(ClientError) as missing:
        emulator.client("fsx").describe_data_repository_tasks(TaskIds=["task-0123456789abcdef0"])

    assert missing.value.response["Error"]["Code"] == "DataRepositoryTaskNotFound"


def test_tasks_can_be_selected_by_file_system_and_lifecycle(
    start_emulator: StartEmulator,
) -> None:
    emulator = start_emulator(speed=SLOW)
    first = _file_system_with_files(emulator)
    second = create_lustre(emulator, create_network(emulator).subnet_id,
                           **REPOSITORY)["FileSystemId"]
    done = _wait_for_task(emulator, _export(emulator, first, ["runs/r1"])["TaskId"])
    other = _export(emulator, second, ["runs"])
    fsx_client = emulator.client("fsx")

    def ids(*filters: dict[str, Any]) -> list[str]:
        tasks = fsx_client.describe_data_repository_tasks(Filters=list(filters))
        return [t["TaskId"] for t in tasks["DataRepositoryTasks"]]

    assert ids({"Name": "file-system-id", "Values": [first]}) == [done["TaskId"]]
    assert ids({"Name": "file-system-id", "Values": [first, second]}) == [
        done["TaskId"], other["TaskId"]]
    assert ids({"Name": "file-system-id", "Values": [first, second]},
               {"Name": "task-lifecycle", "Values": ["SUCCEEDED"]}) == [done["TaskId"]]
    with pytest.raises(ClientError, match="file-system-id"):
        ids({"Name": "data-repository-association-id", "Values": ["dra-1"]})


def test_a_deleted_file_system_keeps_a_record_of_its_files_and_tags(emulator: Emulator) -> None:
    fs_id = _file_system_with_files(emulator)
    fsx_client = emulator.client("fsx")
    arn = _describe(emulator, fs_id)["ResourceARN"]
    fsx_client.tag_resource(ResourceARN=arn, Tags=[{"Key": "traingrid:run", "Value": "r1"}])

    fsx_client.delete_file_system(FileSystemId=fs_id)

    record = fsx.deleted(fsx_backends[ACCOUNT_ID][emulator.region])[fs_id]
    assert record["files"] == FILES and record["tags"] == {"traingrid:run": "r1"}
    assert fsx_client.describe_file_systems()["FileSystems"] == []


def test_capacity_and_throughput_are_checked_against_the_deployment_type(
    emulator: Emulator,
) -> None:
    subnet = create_network(emulator).subnet_id
    client = emulator.client("fsx")

    def create(capacity: int, **lustre: Any) -> None:
        client.create_file_system(FileSystemType="LUSTRE", StorageCapacity=capacity,
                                  SubnetIds=[subnet], LustreConfiguration=lustre)

    create(100_800, DeploymentType="SCRATCH_2", ImportPath="s3://data/imagenet/")
    create(4800, DeploymentType="PERSISTENT_1", PerUnitStorageThroughput=200)
    refused = {
        "not valid for SCRATCH_2": (3600, {"DeploymentType": "SCRATCH_2"}),
        "not supported for SCRATCH_2": (1200, {"DeploymentType": "SCRATCH_2",
                                               "PerUnitStorageThroughput": 200}),
        "PERSISTENT_1 needs PerUnitStorageThroughput": (1200, {
            "DeploymentType": "PERSISTENT_1", "PerUnitStorageThroughput": 125}),
        "data repository association": (2400, {
            "DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 1000,
            "ImportPath": "s3://data/imagenet/"}),
    }
    for message, (capacity, lustre) in refused.items():
        with pytest.raises(ClientError, match=message) as raised:
            create(capacity, **lustre)
        assert raised.value.response["Error"]["Code"] == "BadRequest"


def test_the_lustre_version_is_recorded_and_defaults_to_fsxs_2_10(emulator: Emulator) -> None:
    subnet = create_network(emulator).subnet_id
    asked = create_lustre(emulator, subnet, "2.15", **REPOSITORY)
    omitted = create_lustre(emulator, subnet, None, **REPOSITORY)

    assert asked["FileSystemTypeVersion"] == "2.15"
    assert _describe(emulator, asked["FileSystemId"])["FileSystemTypeVersion"] == "2.15"
    # botocore: "Default value is 2.10, except for [PERSISTENT_2]".
    assert _describe(emulator, omitted["FileSystemId"])["FileSystemTypeVersion"] == "2.10"
    # ImportPath and ExportPath still link the bucket at 2.15.
    repository = _describe(emulator, asked["FileSystemId"])["LustreConfiguration"][
        "DataRepositoryConfiguration"]
    assert repository["ImportPath"] == REPOSITORY["ImportPath"]
    assert repository["ExportPath"] == REPOSITORY["ExportPath"]


def test_lustre_versions_fsx_refuses_are_refused(emulator: Emulator) -> None:
    subnet = create_network(emulator).subnet_id
    client = emulator.client("fsx")

    def create(version: str, **lustre: Any) -> None:
        client.create_file_system(FileSystemType="LUSTRE", StorageCapacity=2400,
                                  SubnetIds=[subnet], FileSystemTypeVersion=version,
                                  LustreConfiguration=lustre)

    create("2.12", DeploymentType="PERSISTENT_2", PerUnitStorageThroughput=125)
    for message, version, lustre in [
        ("FileSystemTypeVersion 2.16 is not valid", "2.16", {"DeploymentType": "SCRATCH_2"}),
        ("2.10 is not supported for PERSISTENT_2", "2.10", {
            "DeploymentType": "PERSISTENT_2", "PerUnitStorageThroughput": 125}),
    ]:
        with pytest.raises(ClientError, match=message) as raised:
            create(version, **lustre)
        assert raised.value.response["Error"]["Code"] == "BadRequest"
