"""p3 types on a stack: Batch's ECS_AL2023_NVIDIA AMI "doesn't support p3 and g3 instance types"
(AWS Batch API Reference, Ec2Configuration.imageType). A stack that lets its compute environment
launch them deploys only with an AMI of its own (ImageIdOverride), and then trains on them."""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import finish
from traingrid_local.demo.runner import DEFAULT_KEY, SCENARIOS, manifest_body, upload_sample_dataset
from traingrid_local.emulator.session import Emulator
from traingrid_local.stack.environment import DEMO_BUCKET, deploy_traingrid

P3_TYPES = {"TrainingInstanceTypes": "p3.16xlarge,p4d.24xlarge"}
OWN_AMI = {"ImageIdOverride": "ami-0123456789abcdef0", "ImageIdOverrideType": "ECS_AL2_NVIDIA"}


def test_a_stack_of_p3_types_on_batchs_ami_does_not_deploy(tmp_path):
    # The emulated CloudFormation answers the resource's refusal as the create call's error.
    with Emulator() as emulator, pytest.raises(Exception, match=(
            r"ClientException.*ECS_AL2023_NVIDIA doesn.{1,3}t support p3 and g3 "
            r"instance types \(p3\.16xlarge\)")):
        deploy_traingrid(emulator, database_url=f"sqlite:///{tmp_path / 'db.sqlite'}",
                         parameters=P3_TYPES)


def test_a_stack_with_its_own_ami_trains_on_p3(emulated):
    emulator, deployment = emulated("happy", parameters=P3_TYPES | OWN_AMI)
    batch = emulator.client("batch")
    # p3.16xlarge (no EFA) and p4d.24xlarge (EFA) are in environments of their own: both
    # launch the stack's AMI.
    environments = batch.describe_compute_environments()["computeEnvironments"]
    assert sorted(t for e in environments for t in e["computeResources"]["instanceTypes"]) == [
        "p3.16xlarge", "p4d.24xlarge"]
    for environment in environments:
        assert environment["computeResources"]["ec2Configuration"] == [
            {"imageType": "ECS_AL2_NVIDIA", "imageIdOverride": "ami-0123456789abcdef0"}]

    upload_sample_dataset(emulator)
    body = json.loads(manifest_body(SCENARIOS["happy"], None))
    emulator.client("s3").put_object(Bucket=DEMO_BUCKET, Key=DEFAULT_KEY, Body=json.dumps(
        body | {"instance_type": "p3.16xlarge", "nodes": 2}).encode())
    outcome = finish(emulator, deployment, "TrainingRunStateMachineArn")
    assert outcome.report["rejected_manifests"] == []
    (execution,) = outcome.report["executions"]
    assert execution["status"] == "SUCCEEDED", execution
    assert outcome.record["instance_type"] == "p3.16xlarge"
