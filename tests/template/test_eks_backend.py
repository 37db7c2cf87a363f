"""The EKS backend's shapes, proven without a cluster: what the template registers and what the
state machine submits are valid Batch requests (botocore's service model), and the pods Batch
makes of them valid Kubernetes pods (the ``kubernetes`` client's models); the ECS shape stays
valid too, and both SubmitJob states pass the same environment."""

from __future__ import annotations

import copy
import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.eks_shapes import (
    batch_problems,
    pod_of,
    pod_problems,
    render,
    request_shape,
    to_api,
)
from traingrid.training.job_shape import (
    BATCH_EKS_RESOURCES,
    EKS_SSH_PORT,
    GPU_RESOURCE,
    Backend,
    backend_of,
    last_attempt_container,
    pod_memory_mib,
    pod_resources,
)
from traingrid.training.plan import DatasetSize, plan_run
from traingrid.training.run_request import TrainingRunRequest
from traingrid.validation import parse
from traingrid.vocabulary.catalog import INSTANCE_TYPES
from traingrid_local.templates import PROJECT_ROOT

ASL = PROJECT_ROOT / "statemachines" / "training_run.asl.json"

EXECUTION = "arn:aws:states:us-east-1:123456789012:execution:TrainingRun:run-1"
FILE_SYSTEM = {"id": "fs-0123456789abcdef0", "dns_name": "fs-0123.fsx.us-east-1.amazonaws.com",
               "mount_name": "abcdefgh", "lifecycle": "AVAILABLE"}
CLUSTER = "gpu-fleet"
PARAMETERS = {"EksClusterName": CLUSTER, "EksNamespace": "traingrid",
              "EksKubernetesVersion": "1.31", "VpcCidr": "10.20.0.0/16",
              "NodeSharedMemoryMiB": "12288", "TrainingImageUri": "", "NodeImageTag": "0.1.0",
              "MaxVcpus": 4096, "TrainingSubnetIds": ["subnet-0a", "subnet-0b"],
              "TrainingInstanceTypes": ["p3.16xlarge", "p4d.24xlarge"]}
CONDITIONS = {"UseEks": True, "UseEcs": False, "HasEksKubernetesVersion": True,
              "UseAccountImage": True, "AllowsP3dn": True,
              "AllowsP4d": True, "AllowsP5": False}


PSEUDO = {"AWS::Partition": "aws", "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012"}
NO_VALUE = object()


def resolve(node: Any) -> Any:
    """A template fragment with the EKS stack's parameters and conditions applied; other
    resources' attributes as stand-ins."""
    if isinstance(node, list):
        return [r for r in map(resolve, node) if r is not NO_VALUE]
    if not isinstance(node, dict):
        return node
    if node == {"Ref": "AWS::NoValue"}:
        return NO_VALUE
    if "Ref" in node:
        return PARAMETERS.get(node["Ref"], f"{node['Ref']}-ref")
    if "Fn::If" in node:
        condition, then, otherwise = node["Fn::If"]
        return resolve(then if CONDITIONS[condition] else otherwise)
    if "Fn::Sub" in node:
        return re.sub(r"\$\{([^}]+)\}", lambda m: str(PARAMETERS.get(
            m.group(1), PSEUDO.get(m.group(1), "x"))), node["Fn::Sub"])
    if "Fn::Select" in node:
        index, items = node["Fn::Select"]
        return resolve(items)[index]
    if "Fn::GetAtt" in node:
        return "arn:aws:iam::123456789012:role/stand-in"
    return {k: r for k, r in ((k, resolve(v)) for k, v in node.items()) if r is not NO_VALUE}


def eks_plan(**fields: Any) -> dict[str, Any]:
    request = parse(TrainingRunRequest, {"dataset": "s3://bkt/imagenet/", **fields})
    return dict(plan_run(request, run="run-1", execution_arn=EXECUTION,
                         dataset=DatasetSize(objects=1024, bytes=10**12),
                         now=datetime(2026, 11, 25, tzinfo=UTC), backend=Backend.EKS))


def submit_request(template: dict[str, Any], state: str, plan: dict[str, Any]
                   ) -> dict[str, Any]:
    definition = json.loads(ASL.read_text())
    parameters = copy.deepcopy(definition["States"][state]["Parameters"])
    rendered = render(parameters, {"plan": plan, "file_system": FILE_SYSTEM},
                      {"Execution": {"Id": EXECUTION}})
    return to_api(rendered, request_shape("SubmitJob"))


@pytest.fixture(scope="module")
def job_definition(template) -> dict[str, Any]:
    properties = resolve(template["Resources"]["TrainingEksJobDefinition"]["Properties"])
    return to_api({"JobDefinitionName": "TrainingEksJobDefinition", **properties},
                  request_shape("RegisterJobDefinition"))


def test_the_eks_job_definition_is_a_valid_register_job_definition(job_definition):
    assert batch_problems("RegisterJobDefinition", job_definition) == ""
    # Batch refuses these for EKS resources.
    assert "platformCapabilities" not in job_definition
    assert "propagateTags" not in job_definition


def test_the_eks_compute_environment_names_the_cluster_and_namespace(template):
    properties = resolve(template["Resources"]["TrainingComputeEnvironment"]["Properties"])
    request = to_api({"ComputeEnvironmentName": "training", **properties},
                     request_shape("CreateComputeEnvironment"))
    assert batch_problems("CreateComputeEnvironment", request) == ""
    assert request["eksConfiguration"] == {
        "eksClusterArn": f"arn:aws:eks:us-east-1:123456789012:cluster/{CLUSTER}",
        "kubernetesNamespace": "traingrid"}
    # EKS's AL2 node AMIs get no updates; Kubernetes 1.33 and later have none. The AMI is of
    # the cluster's Kubernetes version (Batch's default: the newest it supports).
    assert request["computeResources"]["ec2Configuration"] == [
        {"imageType": "EKS_AL2023_NVIDIA", "imageKubernetesVersion": "1.31"}]


def test_eks_nodes_may_send_dns_to_coredns_in_the_vpc_and_the_template_asks_for_it(template):
    rules = {name: resolve(template["Resources"][name]) for name in (
        "TrainingSecurityGroupDnsEgressUdp", "TrainingSecurityGroupDnsEgressTcp")}
    for protocol, rule in zip(("udp", "tcp"), rules.values(), strict=True):
        assert rule["Condition"] == "UseEks"
        assert rule["Properties"]["IpProtocol"] == protocol
        assert (rule["Properties"]["FromPort"], rule["Properties"]["ToPort"]) == (53, 53)
        assert rule["Properties"]["CidrIp"] == "10.20.0.0/16"
    assertions = template["Rules"]["EksNodesMatchTheCluster"]["Assertions"]
    assert [a["Assert"] for a in assertions] == [
        {"Fn::Not": [{"Fn::Equals": [{"Ref": name}, ""]}]}
        for name in ("EksKubernetesVersion", "VpcCidr")]


def test_eks_nodes_keep_the_amis_efa_driver():
    """EKS's accelerated AL2023 AMI has EFA's host components: the launch templates' EFA
    step installs only where the driver is missing (the ECS AMI)."""
    text = (PROJECT_ROOT / "stacks" / "batch.yaml").read_text()
    script = text[text.index("# The EFA driver and rdma-core on the host"):]
    guard, install = script.index("if modinfo efa"), script.index("./efa_installer.sh -y")
    assert guard < script.index("exit 0") < install


def test_the_job_definitions_pod_is_a_valid_pod_with_gpus_efa_shm_and_lustre(job_definition):
    (node_range,) = job_definition["nodeProperties"]["nodeRangeProperties"]
    pod = pod_of(node_range["eksProperties"]["podProperties"])
    assert pod_problems(pod) == []
    (container,) = pod["spec"]["containers"]
    assert container["securityContext"] == {"privileged": True}  # mount(2) of Lustre
    assert container["resources"]["limits"][GPU_RESOURCE] == "8"
    shm = next(v for v in pod["spec"]["volumes"] if v["name"] == "shm")
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "12288Mi"}
    assert {"name": "shm", "mountPath": "/dev/shm"} in container["volumeMounts"]
    # Sized as the plan sizes the instance type it names.
    instance = INSTANCE_TYPES[node_range["instanceTypes"][0]]
    assert container["resources"]["limits"]["memory"] == f"{pod_memory_mib(instance)}Mi"
    assert container["resources"] == {k.lower(): v for k, v in pod_resources(instance).items()}


@pytest.mark.parametrize("instance_type", ["p3.16xlarge", "p4d.24xlarge", "p5.48xlarge"])
def test_every_submit_of_an_eks_plan_is_valid_for_batch_and_kubernetes(template, job_definition,
                                                                      instance_type):
    plan = eks_plan(instance_type=instance_type, nodes=4)
    request = submit_request(template, "SubmitTrainingPods", plan)
    assert batch_problems("SubmitJob", request) == ""
    (override,) = request["nodeOverrides"]["nodePropertyOverrides"]
    assert "containerOverrides" not in override
    assert override["instanceTypes"] == [instance_type]
    (container,) = override["eksPropertiesOverride"]["podProperties"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["FSX_DNS_NAME"] == FILE_SYSTEM["dns_name"]
    assert container["args"] == ["python3", "-m", "traingrid_trainer"]  # after the entrypoint
    # Only the resources Batch documents for an EKS container (no vpc.amazonaws.com/efa:
    # the privileged container sees the host's EFA devices).
    for resources in container["resources"].values():
        assert set(resources) <= set(BATCH_EKS_RESOURCES)
    # The node program's sshd, on the host's network, keeps off the host's port 22.
    assert env["TRAINGRID_SSH_PORT"] == str(EKS_SSH_PORT) != "22"
    # The pod Batch runs: the definition's, with the override's container fields on top.
    (node_range,) = job_definition["nodeProperties"]["nodeRangeProperties"]
    properties = copy.deepcopy(node_range["eksProperties"]["podProperties"])
    (defined,) = properties["containers"]
    assert container["name"] == defined["name"]
    defined.update({k: v for k, v in container.items() if k != "env"})
    defined["env"] = [*defined.get("env", []), *container["env"]]
    assert pod_problems(pod_of(properties)) == []


def test_the_ecs_submit_stays_valid_and_both_states_pass_the_same_environment(template):
    request = parse(TrainingRunRequest, {"dataset": "s3://bkt/imagenet/"})
    ecs_plan = dict(plan_run(request, run="run-1", execution_arn=EXECUTION,
                             dataset=DatasetSize(objects=1024, bytes=10**12),
                             now=datetime(2026, 11, 25, tzinfo=UTC)))
    ecs = submit_request(template, "SubmitTrainingJob", ecs_plan)
    eks = submit_request(template, "SubmitTrainingPods", eks_plan())
    assert batch_problems("SubmitJob", ecs) == ""
    ecs_env = ecs["nodeOverrides"]["nodePropertyOverrides"][0]["containerOverrides"][
        "environment"]
    eks_env = eks["nodeOverrides"]["nodePropertyOverrides"][0]["eksPropertiesOverride"][
        "podProperties"]["containers"][0]["env"]
    assert [e["name"] for e in ecs_env] == [e["name"] for e in eks_env]
    assert ecs_plan["job"]["backend"] == "ecs" and "pod" not in ecs_plan["job"]


def test_the_state_machine_takes_the_plans_backend():
    definition = json.loads(ASL.read_text())
    choice = definition["States"]["SubmitOnBackend?"]
    assert choice["Default"] == "SubmitTrainingJob"
    assert choice["Choices"][0]["Next"] == "SubmitTrainingPods"
    submits = {name for name, state in definition["States"].items()
               if state.get("Resource", "").endswith(":batch:submitJob")}
    assert submits == {"SubmitTrainingJob", "SubmitTrainingPods"}
    for name in submits:  # the same wait, attempts and cleanup after either
        state = definition["States"][name]
        assert state["Next"] == "AwaitTrainingJob"
        assert state["Catch"] == definition["States"]["SubmitTrainingJob"]["Catch"]


def test_elastic_torchrun_by_default_on_eks_and_what_a_request_says_wins():
    env = eks_plan(nodes=8, min_nodes=4)["job"]["environment"]
    assert (env["TRAINGRID_LAUNCHER"], env["TRAINGRID_MIN_NODES"]) == ("torchrun", "4")
    assert eks_plan(launcher="mpirun")["job"]["environment"]["TRAINGRID_LAUNCHER"] == "mpirun"


def test_backend_names_and_exit_codes_of_either_backend():
    assert backend_of(None) is Backend.ECS and backend_of("EKS") is Backend.EKS
    with pytest.raises(ValueError, match="TRAINING_BACKEND"):
        backend_of("fargate")
    ecs = {"attempts": [{"container": {"exitCode": 1, "reason": "x"}}]}
    eks = {"attempts": [], "eksAttempts": [{"containers": [{"name": "node", "exitCode": 75}]}]}
    assert last_attempt_container(ecs)["exitCode"] == 1
    assert last_attempt_container(eks)["exitCode"] == 75
    assert last_attempt_container({}) == {}


def test_cfn_lint_is_clean_with_the_backend_on(tmp_path):
    """The root and the nested templates whose resources the backend chooses, each linted with
    the parameters it declares (the root's defaults for the rest, as it passes them)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from traingrid_local.templates import read_template

    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    given = {"EksClusterName": CLUSTER, "EksNamespace": "traingrid", "VpcId": "vpc-12345678",
             "EksKubernetesVersion": "1.31", "VpcCidr": "10.20.0.0/16",
             "TrainingSubnetIds": "subnet-12345678,subnet-87654321"}
    root = read_template(PROJECT_ROOT / "template.yaml")["Parameters"]
    for name in ("template.yaml", "stacks/batch.yaml", "stacks/network.yaml"):
        declared = read_template(PROJECT_ROOT / name)["Parameters"]
        values = {k: str(root.get(k, {}).get("Default", "x")) for k in declared} | {
            k: v for k, v in given.items() if k in declared}
        listed = tmp_path / f"{Path(name).stem}.json"  # a list parameter as a list
        listed.write_text(json.dumps([
            {"ParameterKey": k, "ParameterValue": v.split(",") if "List" in
             str(declared[k].get("Type")) else v} for k, v in values.items()]))
        result = subprocess.run([str(cfn_lint), str(PROJECT_ROOT / name), "--parameter-files",
                                 str(listed)], capture_output=True, text=True, check=False)
        assert result.returncode == 0, name + result.stdout + result.stderr
