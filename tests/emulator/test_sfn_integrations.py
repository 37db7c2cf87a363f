"""Step Functions service integrations take PascalCase parameters, return PascalCase results
and name aws-sdk errors after the service (``FSx.…``, ``Batch.…``)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from moto.fsx.models import fsx_backends

from traingrid_local.emulator import batch
from traingrid_local.emulator.session import ACCOUNT_ID, Emulator

from .helpers import (
    BatchSetup,
    create_batch,
    create_lustre,
    create_state_machine,
    describe_job,
    run_execution,
    wait_for_job,
)


def _single_task(resource: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "StartAt": "Call",
        "States": {
            "Call": {
                "Type": "Task",
                "Resource": resource,
                "Parameters": parameters,
                "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error",
                           "Next": "Failed"}],
                "End": True,
            },
            "Failed": {"Type": "Pass", "End": True},
        },
    }


@pytest.fixture
def setup(emulator: Emulator) -> BatchSetup:
    return create_batch(emulator, num_nodes=20)


def test_batch_submit_job_takes_pascal_case_node_overrides(
    emulator: Emulator, setup: BatchSetup, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(batch, "TRAINING_SECONDS", 600)
    fs = create_lustre(emulator, setup.network.subnet_id)
    machine = create_state_machine(emulator, "submit", _single_task(
        "arn:aws:states:::aws-sdk:batch:submitJob",
        {
            "JobName.$": "$.run",
            "JobQueue": setup.job_queue_arn,
            "JobDefinition": setup.job_definition_arn,
            "NodeOverrides": {
                "NumNodes": 2,
                "NodePropertyOverrides": [{
                    "TargetNodes": "0:",
                    "ContainerOverrides": {"Environment": [
                        {"Name": "FSX_DNS_NAME", "Value": fs["DNSName"]},
                        {"Name": "OUTPUT_DIR", "Value": "/fsx/runs/run-42"},
                        {"Name": "EPOCHS", "Value": "7"},
                    ]},
                }],
            },
        },
    ), setup.role_arn)

    execution = run_execution(emulator, machine, {"run": "run-42"}, name="submit-1")

    assert execution["status"] == "SUCCEEDED", execution.get("cause")
    output = json.loads(execution["output"])
    assert "error" not in output, output.get("error")
    assert set(output) == {"JobArn", "JobId", "JobName"}
    assert output["JobName"] == "run-42"
    job = describe_job(emulator, output["JobId"])
    assert job["jobName"] == "run-42"
    assert job["jobArn"] == output["JobArn"]
    assert job["nodeProperties"]["numNodes"] == 2
    # The overridden environment reached the job: its outputs land where OUTPUT_DIR says,
    # written with the overridden epochs.
    assert wait_for_job(emulator, output["JobId"])["status"] == "SUCCEEDED"
    files = fsx_backends[ACCOUNT_ID][emulator.region].file_systems[fs["FileSystemId"]].files
    assert "epochs 7," in files["runs/run-42/logs/main-node.log"].decode()


def test_fsx_errors_are_named_after_the_service(emulator: Emulator, setup: BatchSetup) -> None:
    machine = create_state_machine(emulator, "delete", _single_task(
        "arn:aws:states:::aws-sdk:fsx:deleteFileSystem",
        {"FileSystemId": "fs-0123456789abcdef0"},
    ), setup.role_arn)

    execution = run_execution(emulator, machine, name="delete-1")

    assert execution["status"] == "SUCCEEDED", execution.get("cause")
    error = json.loads(execution["output"])["error"]
    assert error["Error"].startswith("FSx.")
    assert "FileSystemNotFound" in error["Error"]
    assert "fs-0123456789abcdef0" in error["Cause"]


def test_batch_errors_are_named_after_the_service(emulator: Emulator, setup: BatchSetup) -> None:
    machine = create_state_machine(emulator, "bad-queue", _single_task(
        "arn:aws:states:::aws-sdk:batch:submitJob",
        {"JobName": "run-1", "JobQueue": "no-such-queue",
         "JobDefinition": setup.job_definition_arn},
    ), setup.role_arn)

    execution = run_execution(emulator, machine, name="bad-queue-1")

    error = json.loads(execution["output"])["error"]
    assert error["Error"].startswith("Batch.")
    assert "no-such-queue" in error["Cause"]


def _create_file_system_task(subnet_id: str, **task: Any) -> dict[str, Any]:
    definition = _single_task("arn:aws:states:::aws-sdk:fsx:createFileSystem", {
        "FileSystemType": "LUSTRE",
        "StorageCapacity": 1200,
        "SubnetIds": [subnet_id],
        "LustreConfiguration": {"DeploymentType": "SCRATCH_2",
                                "ImportPath": "s3://datasets/imagenet/"},
    })
    definition["States"]["Call"].update(task)
    return definition


def test_fsx_results_come_back_in_pascal_case(emulator: Emulator, setup: BatchSetup) -> None:
    machine = create_state_machine(emulator, "create", _create_file_system_task(
        setup.network.subnet_id,
        ResultSelector={"id.$": "$.FileSystem.FileSystemId",
                        "arn.$": "$.FileSystem.ResourceArn",
                        "dns.$": "$.FileSystem.DnsName",
                        "lustre.$": "$.FileSystem.LustreConfiguration"},
    ), setup.role_arn)

    execution = run_execution(emulator, machine, name="create-1")

    output = json.loads(execution["output"])
    assert "error" not in output, output.get("error")
    assert output["id"].startswith("fs-")
    assert output["arn"].endswith(f":file-system/{output['id']}")
    assert output["dns"].startswith(output["id"])
    assert output["lustre"]["DataRepositoryConfiguration"]["ImportPath"] == (
        "s3://datasets/imagenet/"
    )


def test_aws_sdk_timestamps_come_back_as_strings(emulator: Emulator, setup: BatchSetup) -> None:
    machine = create_state_machine(emulator, "create-raw", _create_file_system_task(
        setup.network.subnet_id), setup.role_arn)

    execution = run_execution(emulator, machine, name="create-raw-1")

    assert execution["status"] == "SUCCEEDED", execution.get("cause")
    created = json.loads(execution["output"])["FileSystem"]
    assert isinstance(created["CreationTime"], str)
    parsed = datetime.fromisoformat(created["CreationTime"])
    assert parsed.tzinfo is not None and parsed.utcoffset() == timedelta(0)
