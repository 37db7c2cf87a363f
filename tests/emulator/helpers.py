"""Builders and waits shared by the emulator tests.

Everything here goes through the public AWS API of an emulator session (boto3 clients from
``Emulator.client``), so a test exercises what a deployed function or state machine would see.
"""

from __future__ import annotations

import io
import json
import time
import weakref
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from traingrid_local.emulator.session import Emulator

T = TypeVar("T")

TERMINAL_EXECUTION_STATES = {"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"}
# How long a test waits in real time for what it expects, however busy the machine: a wait
# ends as soon as its condition holds, so only a test that is failing pays for it.
DEADLINE_S = 120.0
TERMINAL_JOB_STATES = {"SUCCEEDED", "FAILED"}


_CLIENTS: weakref.WeakKeyDictionary[Emulator, dict[str, Any]] = weakref.WeakKeyDictionary()


def client(emulator: Emulator, service: str) -> Any:
    """The session's client for ``service``, created once (polling loops call this often)."""
    clients = _CLIENTS.setdefault(emulator, {})
    if service not in clients:
        clients[service] = emulator.client(service)
    return clients[service]


def wait_until(probe: Callable[[], T], timeout: float = DEADLINE_S, interval: float = 0.005,
               what: str = "the condition") -> T:
    """Poll ``probe`` until it returns something truthy; fail after ``timeout`` real seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(interval)
    value = probe()
    if value:
        return value
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def zip_files(files: Mapping[str, str | bytes]) -> bytes:
    """An in-memory zip archive of ``{path: content}``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, content in files.items():
            archive.writestr(path, content)
    return buffer.getvalue()


def create_role(emulator: Emulator, name: str, service: str = "lambda.amazonaws.com") -> str:
    trust = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"Service": service},
                       "Action": "sts:AssumeRole"}],
    }
    role = client(emulator, "iam").create_role(RoleName=name,
                                              AssumeRolePolicyDocument=json.dumps(trust))
    return role["Role"]["Arn"]


@dataclass(frozen=True)
class Network:
    vpc_id: str
    subnet_id: str
    security_group_id: str


def create_network(emulator: Emulator) -> Network:
    ec2 = client(emulator, "ec2")
    vpc = ec2.create_vpc(CidrBlock="10.30.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.30.1.0/24",
                               AvailabilityZone=f"{emulator.region}a")["Subnet"]["SubnetId"]
    group = ec2.create_security_group(GroupName="training", Description="training nodes",
                                      VpcId=vpc)["GroupId"]
    return Network(vpc, subnet, group)


def create_instance_profile(emulator: Emulator, name: str = "training-node") -> str:
    iam = client(emulator, "iam")
    profile = iam.create_instance_profile(InstanceProfileName=name)["InstanceProfile"]["Arn"]
    create_role(emulator, name, "ec2.amazonaws.com")
    iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=name)
    return profile


@dataclass(frozen=True)
class BatchSetup:
    network: Network
    compute_environment_arn: str
    job_queue_arn: str
    job_definition_arn: str
    role_arn: str


def create_batch(emulator: Emulator, num_nodes: int = 4,
                 environment: Mapping[str, str] | None = None) -> BatchSetup:
    """A managed EC2 compute environment of p4d.24xlarge, a queue and a multinode definition."""
    network = create_network(emulator)
    role = create_role(emulator, "batch-service", "batch.amazonaws.com")
    batch = client(emulator, "batch")
    compute_environment = batch.create_compute_environment(
        computeEnvironmentName="training-ce", type="MANAGED", state="ENABLED",
        computeResources={
            "type": "EC2", "minvCpus": 0, "maxvCpus": 1280, "desiredvCpus": 0,
            "instanceTypes": ["p4d.24xlarge"], "subnets": [network.subnet_id],
            "securityGroupIds": [network.security_group_id],
            "instanceRole": create_instance_profile(emulator),
        },
        serviceRole=role,
    )["computeEnvironmentArn"]
    queue = batch.create_job_queue(
        jobQueueName="training-queue", state="ENABLED", priority=1,
        computeEnvironmentOrder=[{"order": 1, "computeEnvironment": compute_environment}],
    )["jobQueueArn"]
    env = {"FSX_MOUNT_POINT": "/fsx", "MPI_GPUS": "32", **(environment or {})}
    definition = batch.register_job_definition(
        jobDefinitionName="training", type="multinode",
        nodeProperties={
            "numNodes": num_nodes, "mainNode": 0,
            "nodeRangeProperties": [{
                "targetNodes": "0:",
                "container": {
                    "image": "traingrid-mnp:latest", "vcpus": 96, "memory": 1120633,
                    "environment": [{"name": k, "value": v} for k, v in env.items()],
                },
            }],
        },
    )["jobDefinitionArn"]
    return BatchSetup(network, compute_environment, queue, definition, role)


def environment_override(env: Mapping[str, str]) -> dict[str, Any]:
    """``nodeOverrides`` setting ``env`` on every node."""
    return {"nodePropertyOverrides": [{
        "targetNodes": "0:",
        "containerOverrides": {"environment": [{"name": k, "value": v} for k, v in env.items()]},
    }]}


def describe_job(emulator: Emulator, job_id: str) -> dict[str, Any]:
    return client(emulator, "batch").describe_jobs(jobs=[job_id])["jobs"][0]


def wait_for_job(emulator: Emulator, job_id: str, timeout: float = DEADLINE_S) -> dict[str, Any]:
    return wait_until(
        lambda: (job := describe_job(emulator, job_id))["status"] in TERMINAL_JOB_STATES
        and job,
        timeout=timeout, what=f"job {job_id} to end",
    )


def create_lustre(emulator: Emulator, subnet_id: str, version: str | None = "2.15",
                  **lustre: Any) -> dict[str, Any]:
    """A SCRATCH_2 file system at Lustre ``version`` (the stack's; None: FSx's default)."""
    configuration = {"DeploymentType": "SCRATCH_2", **lustre}
    return client(emulator, "fsx").create_file_system(
        FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=[subnet_id],
        LustreConfiguration=configuration,
        **({"FileSystemTypeVersion": version} if version else {}),
    )["FileSystem"]


def create_state_machine(emulator: Emulator, name: str, definition: Mapping[str, Any],
                         role_arn: str) -> str:
    return client(emulator, "stepfunctions").create_state_machine(
        name=name, definition=json.dumps(definition), roleArn=role_arn
    )["stateMachineArn"]


def skipping_idle_time(probe: Callable[[], T]) -> Callable[[], T]:
    """``probe``, skipping the clock ahead before each look whenever every thread waits for
    it (``SimulatedClock.fast_forward``): simulated hours pass in the milliseconds of work
    they hold, on a slow clock whose running time adds little to what a test measures."""
    from traingrid_local.emulator.alarms import ALARMS
    from traingrid_local.emulator.clock import CLOCK

    def look() -> T:
        if CLOCK.fast_forward():
            ALARMS.wake()
        return probe()

    return look


def run_execution(emulator: Emulator, machine_arn: str, payload: Any = None,
                  name: str = "test-run", timeout: float = DEADLINE_S,
                  skip_idle_time: bool = False) -> dict[str, Any]:
    """Start an execution and wait until it ends (skipping the clock ahead meanwhile, if
    asked: ``skipping_idle_time``); returns its description."""
    sfn = client(emulator, "stepfunctions")
    execution = sfn.start_execution(stateMachineArn=machine_arn, name=name,
                                    input=json.dumps(payload or {}))["executionArn"]

    def ended() -> dict[str, Any] | bool:
        described = sfn.describe_execution(executionArn=execution)
        return described["status"] in TERMINAL_EXECUTION_STATES and described

    return wait_until(skipping_idle_time(ended) if skip_idle_time else ended,
                      timeout=timeout, what=f"execution {name} to end")


def history_types(emulator: Emulator, execution_arn: str) -> list[str]:
    events = client(emulator, "stepfunctions").get_execution_history(
        executionArn=execution_arn, maxResults=1000
    )["events"]
    return [event["type"] for event in events]
