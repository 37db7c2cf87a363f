"""What a first deploy into a fresh account meets: the nodes' network, EFA on the hosts and in
the image, the database's reach from the functions, FSx's service-linked roles."""

from __future__ import annotations

import re
from typing import Any

from tests.iam_actions import as_list, statements
from traingrid.training.attempts import FailureKind, classify
from traingrid_local.emulator.deploy import TEMPLATE

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


def test_multi_node_tasks_get_the_training_security_group(template):
    """Batch gives a multi-node job's task interfaces the compute environment's groups, else
    the VPC's default group, in which the nodes cannot meet."""
    resources = template["Resources"]["TrainingComputeEnvironment"]["Properties"][
        "ComputeResources"]
    assert resources["SecurityGroupIds"] == [{"Ref": "TrainingSecurityGroup"}]


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
