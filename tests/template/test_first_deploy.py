"""What a first deploy into a fresh account meets: the nodes' network, EFA on the hosts and in
the image, the database's reach from the functions, FSx's service-linked roles."""

from __future__ import annotations

import re
from typing import Any

from tests.iam_actions import as_list, statements
from traingrid.training.attempts import FailureKind, classify
from traingrid_local.templates import TEMPLATE

DOCKERFILE = TEMPLATE.parent / "containers" / "mnp" / "Dockerfile"
EFA_TEMPLATES = ("TrainingLaunchTemplateP3dn", "TrainingLaunchTemplateP4d",
                 "TrainingLaunchTemplateP5")


def _user_data(template: dict[str, Any], logical_id: str) -> str:
    data = template["Resources"][logical_id]["Properties"]["LaunchTemplateData"]["UserData"]
    return data["Fn::Base64"]


def _dockerfile_arg(name: str) -> str:
    found = re.search(rf"^ARG {name}=(\S+)$", DOCKERFILE.read_text(), re.M)
    assert found, name
    return found.group(1)


def test_security_groups_are_on_the_environment_or_on_the_interfaces_never_both(template):
    """Batch refuses an environment's groups beside launch-template interfaces; EC2 refuses
    instance-level groups beside interfaces. Types without EFA: the environment names the
    training group (Batch gives it to the multi-node tasks' interfaces). EFA types: every
    interface carries it, with the subnet, and their environment names none."""
    resources = template["Resources"]
    plain = resources["TrainingComputeEnvironmentWithoutEfa"]["Properties"]["ComputeResources"]
    assert plain["SecurityGroupIds"] == [{"Ref": "TrainingSecurityGroup"}]
    assert "Overrides" not in plain["LaunchTemplate"]
    efa = resources["TrainingComputeEnvironment"]["Properties"]["ComputeResources"]
    assert "SecurityGroupIds" not in efa
    assert efa["PlacementGroup"] == plain["PlacementGroup"]
    subnet = {"Fn::Select": [0, {"Ref": "TrainingSubnetIds"}]}
    assert efa["Subnets"] == plain["Subnets"] == [subnet]
    for logical_id in EFA_TEMPLATES:
        data = resources[logical_id]["Properties"]["LaunchTemplateData"]
        assert "SecurityGroupIds" not in data
        assert all(i["Groups"] == [{"Ref": "TrainingSecurityGroup"}] and i["SubnetId"] == subnet
                   for i in data["NetworkInterfaces"]), logical_id
    order = resources["TrainingJobQueue"]["Properties"]["ComputeEnvironmentOrder"]
    assert [o["Fn::If"][1]["ComputeEnvironment"]["Ref"] for o in order] == [
        "TrainingComputeEnvironment", "TrainingComputeEnvironmentWithoutEfa"]


def test_efa_nodes_tasks_in_the_vpcs_default_group_reach_the_file_systems(template):
    """Without the environment's groups, a multi-node task's interface gets the VPC's default
    group: it may reach the training group (the file systems') on Lustre's ports, and back."""
    resources = template["Resources"]
    default = {"Ref": "VpcDefaultSecurityGroupId"}
    training = {"Ref": "TrainingSecurityGroup"}
    rules = {(r["Type"].rsplit("::", 1)[1], r["Properties"]["GroupId"]["Ref"],
              r["Properties"]["FromPort"], r["Properties"]["ToPort"])
             for r in resources.values() if r.get("Condition") == "EfaTasksOnEcs"}
    assert rules == {(kind, group, low, high)
                     for kind, group in (("SecurityGroupIngress", "TrainingSecurityGroup"),
                                         ("SecurityGroupEgress", "TrainingSecurityGroup"),
                                         ("SecurityGroupIngress", "VpcDefaultSecurityGroupId"))
                     for low, high in ((988, 988), (1018, 1023))}
    for resource in resources.values():
        if resource.get("Condition") == "EfaTasksOnEcs":
            properties = resource["Properties"]
            other = (properties.get("SourceSecurityGroupId")
                     or properties.get("DestinationSecurityGroupId"))
            assert {properties["GroupId"]["Ref"], other["Ref"]} == {
                default["Ref"], training["Ref"]}
    # The group EFA needs: all traffic in and out within itself.
    assert resources["TrainingSecurityGroupSelfIngress"]["Properties"]["IpProtocol"] == "-1"
    assert resources["TrainingSecurityGroupSelfEgress"]["Properties"]["IpProtocol"] == "-1"


def test_efa_hosts_install_the_efa_driver_the_image_was_built_for(template):
    version = _dockerfile_arg("EFA_INSTALLER_VERSION")
    digest = _dockerfile_arg("EFA_INSTALLER_SHA256")
    for logical_id in EFA_TEMPLATES:
        script = _user_data(template, logical_id)
        assert f"EFA_INSTALLER_VERSION={version}" in script, logical_id
        assert f"EFA_INSTALLER_SHA256={digest}" in script, logical_id
        assert "sha256sum -c -" in script and "./efa_installer.sh -y" in script
        assert "--skip-kmod" not in script  # the host is where the kernel driver goes
        assert "dnf install -y lustre-client" in script  # and still the Lustre client
    # Instance types without EFA need no driver.
    assert "efa_installer" not in _user_data(template, "TrainingLaunchTemplate")


def test_the_node_image_builds_efa_as_documented_with_one_nccl_plugin():
    text = DOCKERFILE.read_text()
    flags = re.search(r"\./efa_installer\.sh ([^\\\n]+)", text)
    assert flags
    documented = {"-y", "--skip-kmod", "--skip-limit-conf", "--no-verify", "--mpi=openmpi4"}
    assert set(flags.group(1).split()) <= documented
    assert re.fullmatch(r"[0-9a-f]{64}", _dockerfile_arg("EFA_INSTALLER_SHA256"))
    assert 'sha256sum -c -' in text
    # The installer's aws-ofi-nccl is the only one: none is built besides it.
    assert "github.com/aws/aws-ofi-nccl" not in text and "./configure" not in text
    # MOFED's verbs and HPC-X's Open MPI go before the installer brings its own.
    removal = text.index("libmlx5-1 ibverbs-utils libibverbs-dev libibverbs1")
    assert removal < text.index("./efa_installer.sh")
    assert "rm -rf /opt/hpcx/ompi /usr/local/mpi" in text
    assert "OPAL_PREFIX=/opt/amazon/openmpi" in text


def test_a_node_without_its_efa_devices_is_retried_on_another_attempt():
    failure = classify({"exit_code": 70, "status_reason": "Essential container in task exited"})
    assert failure.kind is FailureKind.INFRASTRUCTURE
    assert "EFA" in failure.summary


def test_the_functions_reach_the_database_whatever_the_vpcs_addresses(template):
    resources = template["Resources"]
    client = resources["DatabaseClientSecurityGroup"]["Properties"]
    assert all(rule.get("CidrIp") != "10.0.0.0/8" for rule in client["SecurityGroupEgress"])
    to_database = resources["DatabaseClientToDatabase"]
    assert to_database["Condition"] == "CreateDatabase"
    assert to_database["Properties"]["DestinationSecurityGroupId"] == {
        "Ref": "DatabaseSecurityGroup"}
    assert to_database["Properties"]["GroupId"] == {"Ref": "DatabaseClientSecurityGroup"}
    assert (to_database["Properties"]["FromPort"], to_database["Properties"]["ToPort"]) == (
        5432, 5432)
    external = resources["DatabaseClientToExternalDatabase"]
    assert external["Properties"]["CidrIp"] == {"Ref": "ExternalDatabaseCidr"}
    rule = template["Rules"]["ExternalDatabaseIsReachable"]
    assert rule["Assertions"][0]["Assert"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "ExternalDatabaseCidr"}, ""]}]}


def test_the_first_file_system_of_an_account_can_create_fsxs_service_linked_roles(translated):
    role = translated["Resources"]["TrainingRunStateMachineRole"]
    creating = [s for s in statements(role)
                if "iam:CreateServiceLinkedRole" in as_list(s["Action"])]
    assert len(creating) == 1
    [statement] = creating
    assert as_list(statement["Action"]) == ["iam:CreateServiceLinkedRole"]
    services = statement["Condition"]["StringEquals"]["iam:AWSServiceName"]
    assert sorted(services) == ["fsx.amazonaws.com", "s3.data-source.lustre.fsx.amazonaws.com"]
    resources = " ".join(str(r) for r in as_list(statement["Resource"]))
    for service in services:
        assert f"role/aws-service-role/{service}/*" in resources


def test_efa_user_data_stays_mime_multipart_as_batch_wants(template):
    # Batch merges a launch template's user data with its own only when it is MIME multi-part.
    for logical_id in EFA_TEMPLATES:
        script = _user_data(template, logical_id)
        assert script.startswith("MIME-Version: 1.0\n"), logical_id
        assert script.count('Content-Type: text/x-shellscript; charset="us-ascii"') == 2
        assert script.rstrip().endswith("--==TRAINGRID==--")
