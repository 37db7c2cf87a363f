"""AWS Batch on Amazon EKS in the emulator: a node's container may ask only for the resources
Batch documents for EKS containers, in a job definition and in a submission's override."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from traingrid_local.emulator.session import Emulator

from .helpers import create_batch

EFA = "vpc.amazonaws.com/efa"


def _pod(limits: dict[str, str], defined: bool = True) -> dict[str, Any]:
    container = {"name": "node", "resources": {"limits": limits, "requests": dict(limits)}}
    if defined:
        container |= {"image": "traingrid-mnp:latest", "args": ["python3"]}
    return {"podProperties": {"containers": [container]}}


def _register(emulator: Emulator, limits: dict[str, str]) -> str:
    return emulator.client("batch").register_job_definition(
        jobDefinitionName="pods", type="multinode", nodeProperties={
            "numNodes": 2, "mainNode": 0, "nodeRangeProperties": [{
                "targetNodes": "0:", "instanceTypes": ["p4d.24xlarge"],
                "eksProperties": _pod(limits)}]},
    )["jobDefinitionArn"]


GPUS = {"cpu": "95", "memory": "1000000Mi", "nvidia.com/gpu": "8"}


def test_a_pod_asking_for_efa_interfaces_is_refused(emulator: Emulator) -> None:
    # Batch API, EksContainerResourceRequirements: "The supported resources include memory,
    # cpu, and nvidia.com/gpu".
    with pytest.raises(ClientError, match=f"resource '{EFA}' in limits is not supported") as raised:
        _register(emulator, {**GPUS, EFA: "4"})
    assert raised.value.response["Error"]["Code"] == "ClientException"

    setup = create_batch(emulator)
    definition = _register(emulator, GPUS)
    override = {"targetNodes": "0:",
                "eksPropertiesOverride": _pod({**GPUS, EFA: "4"}, defined=False)}
    with pytest.raises(ClientError, match="not supported for Amazon EKS resources"):
        emulator.client("batch").submit_job(
            jobName="efa", jobQueue=setup.job_queue_arn, jobDefinition=definition,
            nodeOverrides={"numNodes": 2, "nodePropertyOverrides": [override]})
    # The documented ones are taken.
    emulator.client("batch").submit_job(
        jobName="gpus", jobQueue=setup.job_queue_arn, jobDefinition=definition,
        nodeOverrides={"numNodes": 2, "nodePropertyOverrides": [
            {"targetNodes": "0:", "eksPropertiesOverride": _pod(GPUS, defined=False)}]})
