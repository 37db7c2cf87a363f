"""Batch compute environments' security groups as Batch takes them: named on the environment,
or carried by its launch templates' network interfaces, never both."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.emulator.helpers import client, create_instance_profile, create_network, create_role
from traingrid_local.emulator.batch_environments import GROUPS_BESIDE_INTERFACES
from traingrid_local.emulator.session import Emulator


def _efa_template(emulator: Emulator, group: str, subnet: str) -> str:
    ec2 = client(emulator, "ec2")
    return str(ec2.create_launch_template(LaunchTemplateName="efa", LaunchTemplateData={
        "NetworkInterfaces": [{"NetworkCardIndex": 0, "DeviceIndex": 0, "InterfaceType": "efa",
                               "SubnetId": subnet, "Groups": [group]}]},
    )["LaunchTemplate"]["LaunchTemplateId"])


def _resources(profile: str, network: Any, **more: Any) -> dict[str, Any]:
    return {"type": "EC2", "minvCpus": 0, "maxvCpus": 96, "desiredvCpus": 0,
            "instanceTypes": ["p4d.24xlarge"], "subnets": [network.subnet_id],
            "instanceRole": profile, **more}


@pytest.mark.parametrize("where", ["launch template", "override"])
def test_groups_beside_launch_template_interfaces_are_refused_as_batch_refuses_them(
        emulator: Emulator, where: str) -> None:
    network = create_network(emulator)
    efa = _efa_template(emulator, network.security_group_id, network.subnet_id)
    plain = client(emulator, "ec2").create_launch_template(
        LaunchTemplateName="plain", LaunchTemplateData={"SecurityGroupIds": [
            network.security_group_id]})["LaunchTemplate"]["LaunchTemplateId"]
    launch = ({"launchTemplateId": efa} if where == "launch template" else
              {"launchTemplateId": plain, "overrides": [
                  {"launchTemplateId": efa, "targetInstanceTypes": ["p4d.24xlarge"]}]})
    batch = client(emulator, "batch")
    role = create_role(emulator, "batch-service", "batch.amazonaws.com")
    profile = create_instance_profile(emulator)
    with pytest.raises(ClientError) as refused:
        batch.create_compute_environment(
            computeEnvironmentName="both", type="MANAGED", serviceRole=role,
            computeResources=_resources(profile, network, launchTemplate=launch,
                                        securityGroupIds=[network.security_group_id]))
    assert refused.value.response["Error"]["Code"] == "ClientException"
    assert GROUPS_BESIDE_INTERFACES in refused.value.response["Error"]["Message"]
    # Without the environment's groups it is created; its tasks' groups are the templates'.
    created = batch.create_compute_environment(
        computeEnvironmentName="interfaces", type="MANAGED", serviceRole=role,
        computeResources=_resources(profile, network, launchTemplate=launch))
    assert created["computeEnvironmentName"] == "interfaces"
    # An update that adds groups beside those interfaces is refused too.
    with pytest.raises(ClientError) as refused:
        batch.update_compute_environment(
            computeEnvironment="interfaces",
            computeResources={"securityGroupIds": [network.security_group_id]})
    assert GROUPS_BESIDE_INTERFACES in refused.value.response["Error"]["Message"]
    batch.update_compute_environment(computeEnvironment="interfaces",
                                     computeResources={"maxvCpus": 192})


def test_a_vpcs_default_group_lets_its_members_reach_each_other(emulator: Emulator) -> None:
    ec2 = client(emulator, "ec2")
    vpc = ec2.create_vpc(CidrBlock="10.50.0.0/16")["Vpc"]["VpcId"]
    (group,) = ec2.describe_security_groups(Filters=[
        {"Name": "vpc-id", "Values": [vpc]}, {"Name": "group-name", "Values": ["default"]}],
    )["SecurityGroups"]
    (rule,) = group["IpPermissions"]
    assert rule["IpProtocol"] == "-1"
    assert [p["GroupId"] for p in rule["UserIdGroupPairs"]] == [group["GroupId"]]
