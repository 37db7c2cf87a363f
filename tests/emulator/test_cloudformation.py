"""CloudFormation creates what TrainGrid's template declares, as AWS does: typed parameter
defaults, layer ARNs, EventBridge-enabled buckets, Batch compute environments without a
ServiceRole and multinode job definitions."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from moto.s3.models import s3_backends

from traingrid_local.emulator.session import ACCOUNT_ID, Emulator

from .helpers import (
    Network,
    create_instance_profile,
    create_network,
    create_role,
    create_state_machine,
    wait_until,
    zip_files,
)


def _create_stack(emulator: Emulator, name: str, template: dict[str, Any],
                  parameters: dict[str, str] | None = None) -> dict[str, str]:
    """Create the stack; return its outputs."""
    cfn = emulator.client("cloudformation")
    cfn.create_stack(
        StackName=name, TemplateBody=json.dumps(template),
        Parameters=[{"ParameterKey": k, "ParameterValue": v}
                    for k, v in (parameters or {}).items()],
    )
    stack = cfn.describe_stacks(StackName=name)["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE", stack.get("StackStatusReason")
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


def _compute_environment(network: Network, profile: str, **properties: Any) -> dict[str, Any]:
    return {
        "Type": "AWS::Batch::ComputeEnvironment",
        "Properties": {
            "Type": "MANAGED",
            "ComputeResources": {
                "Type": "EC2", "MinvCpus": 0, "DesiredvCpus": 0, "MaxvCpus": 1280,
                "InstanceTypes": ["p4d.24xlarge"], "Subnets": [network.subnet_id],
                "SecurityGroupIds": [network.security_group_id], "InstanceRole": profile,
            },
            **properties,
        },
    }


PARAMETERS_TEMPLATE = {
    "Parameters": {
        "InstanceTypes": {"Type": "CommaDelimitedList",
                          "Default": "p4d.24xlarge,p5.48xlarge,g5.48xlarge"},
        "NoTags": {"Type": "CommaDelimitedList", "Default": ""},
        # Defaults written as text, as YAML templates often do.
        "MaxVcpus": {"Type": "Number", "Default": "1280"},
        "Ratio": {"Type": "Number", "Default": "0.5"},
    },
    "Conditions": {
        "FullSize": {"Fn::Equals": [{"Ref": "MaxVcpus"}, 1280]},
        "Half": {"Fn::Equals": [{"Ref": "Ratio"}, 0.5]},
    },
    "Resources": {
        "Topic": {"Type": "AWS::SNS::Topic", "Properties": {"TopicName": "placeholder"}},
    },
    "Outputs": {
        "Joined": {"Value": {"Fn::Join": ["|", {"Ref": "InstanceTypes"}]}},
        "Second": {"Value": {"Fn::Select": [1, {"Ref": "InstanceTypes"}]}},
        "NoTags": {"Value": {"Fn::Join": ["|", {"Ref": "NoTags"}]}},
        "Size": {"Value": {"Fn::If": ["FullSize", "full", "reduced"]}},
        "Ratio": {"Value": {"Fn::If": ["Half", "half", "other"]}},
    },
}


def test_a_comma_delimited_list_default_is_a_list(emulator: Emulator) -> None:
    outputs = _create_stack(emulator, "params", PARAMETERS_TEMPLATE)

    assert outputs["Joined"] == "p4d.24xlarge|p5.48xlarge|g5.48xlarge"
    assert outputs["Second"] == "p5.48xlarge"
    assert outputs["NoTags"] == ""


def test_a_passed_list_is_used_instead_of_the_default(emulator: Emulator) -> None:
    outputs = _create_stack(emulator, "params", PARAMETERS_TEMPLATE,
                            {"InstanceTypes": "p3.2xlarge,p3.8xlarge"})

    assert outputs["Joined"] == "p3.2xlarge|p3.8xlarge"


@pytest.mark.parametrize("passed", [{}, {"MaxVcpus": "1280", "Ratio": "0.5"}])
def test_a_number_default_compares_like_a_passed_number(
    emulator: Emulator, passed: dict[str, str]
) -> None:
    outputs = _create_stack(emulator, "params", PARAMETERS_TEMPLATE, passed)

    assert (outputs["Size"], outputs["Ratio"]) == ("full", "half")


def test_parameter_defaults_feed_a_resource(emulator: Emulator) -> None:
    network = create_network(emulator)
    template = {
        "Parameters": PARAMETERS_TEMPLATE["Parameters"],
        "Resources": {"Compute": _compute_environment(network, create_instance_profile(emulator))},
    }
    compute = template["Resources"]["Compute"]["Properties"]["ComputeResources"]
    compute.update(MaxvCpus={"Ref": "MaxVcpus"}, InstanceTypes={"Ref": "InstanceTypes"})

    _create_stack(emulator, "compute", template)

    [environment] = emulator.client("batch").describe_compute_environments()[
        "computeEnvironments"]
    resources = environment["computeResources"]
    assert resources["maxvCpus"] == 1280
    assert resources["instanceTypes"] == ["p4d.24xlarge", "p5.48xlarge", "g5.48xlarge"]


def test_a_layer_refs_to_its_arn_and_the_function_keeps_its_layers(emulator: Emulator) -> None:
    s3 = emulator.client("s3")
    s3.create_bucket(Bucket="artifacts")
    s3.put_object(Bucket="artifacts", Key="layer.zip",
                  Body=zip_files({"python/greeting.py": "WORD = 'from the layer'\n"}))
    s3.put_object(Bucket="artifacts", Key="function.zip", Body=zip_files({
        "app.py": "import greeting\n\n\ndef handler(event, context):\n    return greeting.WORD\n",
    }))
    template = {
        "Resources": {
            "Runtime": {"Type": "AWS::Lambda::LayerVersion", "Properties": {
                "LayerName": "runtime", "CompatibleRuntimes": ["python3.11"],
                "Content": {"S3Bucket": "artifacts", "S3Key": "layer.zip"},
            }},
            "Greeter": {"Type": "AWS::Lambda::Function", "Properties": {
                "FunctionName": "greeter", "Runtime": "python3.11", "Handler": "app.handler",
                "Role": create_role(emulator, "greeter"),
                "Code": {"S3Bucket": "artifacts", "S3Key": "function.zip"},
                "Layers": [{"Ref": "Runtime"}],
            }},
        },
        "Outputs": {"Layer": {"Value": {"Ref": "Runtime"}}},
    }

    outputs = _create_stack(emulator, "functions", template)

    layer_arn = outputs["Layer"]
    assert layer_arn.startswith(f"arn:aws:lambda:{emulator.region}:{ACCOUNT_ID}:layer:")
    assert layer_arn.endswith(":1")
    lam = emulator.client("lambda")
    layers = lam.get_function(FunctionName="greeter")["Configuration"]["Layers"]
    assert [layer["Arn"] for layer in layers] == [layer_arn]
    assert json.loads(lam.invoke(FunctionName="greeter")["Payload"].read()) == "from the layer"


@pytest.mark.parametrize(("configuration", "enabled"), [
    ({"EventBridgeConfiguration": {"EventBridgeEnabled": True}}, True),
    ({"EventBridgeConfiguration": {"EventBridgeEnabled": "true"}}, True),
    ({"EventBridgeConfiguration": {"EventBridgeEnabled": False}}, False),
    (None, False),
])
def test_a_bucket_sends_events_to_eventbridge_when_enabled(
    emulator: Emulator, configuration: dict[str, Any] | None, enabled: bool
) -> None:
    properties: dict[str, Any] = {"BucketName": "training-data"}
    if configuration is not None:
        properties["NotificationConfiguration"] = configuration
    _create_stack(emulator, "data", {"Resources": {
        "Data": {"Type": "AWS::S3::Bucket", "Properties": properties},
    }})
    role = create_role(emulator, "start", "events.amazonaws.com")
    machine = create_state_machine(emulator, "on-upload", {
        "StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}, role)
    events = emulator.client("events")
    events.put_rule(Name="uploads", EventPattern=json.dumps({"source": ["aws.s3"]}))
    events.put_targets(Rule="uploads", Targets=[{"Id": "run", "Arn": machine, "RoleArn": role}])

    emulator.client("s3").put_object(Bucket="training-data", Key="a.json", Body=b"{}")

    bucket = s3_backends[ACCOUNT_ID]["aws"].buckets["training-data"]
    sfn = emulator.client("stepfunctions")
    if enabled:
        assert bucket.notification_configuration.event_bridge is not None
        assert wait_until(lambda: sfn.list_executions(stateMachineArn=machine)["executions"],
                          what="an execution")
    else:
        assert bucket.notification_configuration is None
        assert sfn.list_executions(stateMachineArn=machine)["executions"] == []


@pytest.fixture
def network(emulator: Emulator) -> Network:
    return create_network(emulator)


def test_a_compute_environment_without_service_role_uses_the_service_linked_role(
    emulator: Emulator, network: Network
) -> None:
    profile = create_instance_profile(emulator)

    _create_stack(emulator, "compute", {"Resources": {
        "Compute": _compute_environment(network, profile),
    }})

    [environment] = emulator.client("batch").describe_compute_environments()[
        "computeEnvironments"]
    assert environment["status"] == "VALID"
    assert environment["serviceRole"].startswith(
        f"arn:aws:iam::{ACCOUNT_ID}:role/aws-service-role/batch.amazonaws.com/")
    role_name = environment["serviceRole"].rsplit("/", 1)[1]
    role = emulator.client("iam").get_role(RoleName=role_name)["Role"]
    assert "batch.amazonaws.com" in json.dumps(role["AssumeRolePolicyDocument"])


def test_a_compute_environment_keeps_an_explicit_service_role(
    emulator: Emulator, network: Network
) -> None:
    role = create_role(emulator, "custom-batch", "batch.amazonaws.com")

    _create_stack(emulator, "compute", {"Resources": {
        "Compute": _compute_environment(network, create_instance_profile(emulator),
                                        ServiceRole=role),
    }})

    [environment] = emulator.client("batch").describe_compute_environments()[
        "computeEnvironments"]
    assert environment["serviceRole"] == role


def test_compute_environments_without_service_role_share_the_linked_role(
    emulator: Emulator, network: Network
) -> None:
    profile = create_instance_profile(emulator)
    _create_stack(emulator, "first", {"Resources": {
        "Compute": _compute_environment(network, profile)}})

    _create_stack(emulator, "second", {"Resources": {
        "Compute": _compute_environment(network, profile)}})

    environments = emulator.client("batch").describe_compute_environments()[
        "computeEnvironments"]
    assert len({e["serviceRole"] for e in environments}) == 1


def test_a_multinode_job_definition_keeps_its_type_and_nodes(emulator: Emulator) -> None:
    outputs = _create_stack(emulator, "jobs", {
        "Resources": {
            "Training": {"Type": "AWS::Batch::JobDefinition", "Properties": {
                "Type": "multinode",
                "PlatformCapabilities": ["EC2"],
                "RetryStrategy": {"Attempts": 1},
                "NodeProperties": {
                    "NumNodes": 20, "MainNode": 0,
                    "NodeRangeProperties": [{
                        "TargetNodes": "0:",
                        "Container": {
                            "Image": "traingrid-mnp:latest",
                            "InstanceType": "p3.16xlarge",
                            "ResourceRequirements": [{"Type": "GPU", "Value": "8"}],
                            "Environment": [{"Name": "MPI_GPUS", "Value": "160"}],
                        },
                    }],
                },
            }},
            "Probe": {"Type": "AWS::Batch::JobDefinition", "Properties": {
                "Type": "container",
                "ContainerProperties": {"Image": "busybox", "Vcpus": 1, "Memory": 128},
            }},
        },
        "Outputs": {"Training": {"Value": {"Ref": "Training"}},
                    "Probe": {"Value": {"Ref": "Probe"}}},
    })

    batch = emulator.client("batch")
    [training] = batch.describe_job_definitions(
        jobDefinitions=[outputs["Training"]])["jobDefinitions"]
    assert training["type"] == "multinode"
    assert training["retryStrategy"]["attempts"] == 1
    nodes = training["nodeProperties"]
    assert (nodes["numNodes"], nodes["mainNode"]) == (20, 0)
    [node_range] = nodes["nodeRangeProperties"]
    assert node_range["targetNodes"] == "0:"
    assert node_range["container"]["instanceType"] == "p3.16xlarge"
    assert node_range["container"]["environment"] == [{"name": "MPI_GPUS", "value": "160"}]
    # No RetryStrategy is fine too.
    [probe] = batch.describe_job_definitions(jobDefinitions=[outputs["Probe"]])["jobDefinitions"]
    assert probe["type"] == "container"
    assert probe["containerProperties"]["image"] == "busybox"


def test_a_compute_environment_takes_its_launch_template_s_security_groups(
    emulator: Emulator,
) -> None:
    network = create_network(emulator)
    compute = _compute_environment(network, create_instance_profile(emulator))
    resources = compute["Properties"]["ComputeResources"]
    del resources["SecurityGroupIds"]
    resources["LaunchTemplate"] = {
        "LaunchTemplateId": {"Ref": "Nodes"},
        "Version": {"Fn::GetAtt": ["Nodes", "LatestVersionNumber"]}}
    template = {"Resources": {"Compute": compute, "Nodes": {
        "Type": "AWS::EC2::LaunchTemplate",
        "Properties": {"LaunchTemplateData": {
            "SecurityGroupIds": [network.security_group_id],
            "MetadataOptions": {"HttpTokens": "required"}}}}}}

    _create_stack(emulator, "launch-template", template)

    [environment] = emulator.client("batch").describe_compute_environments()[
        "computeEnvironments"]
    assert environment["computeResources"]["securityGroupIds"] == [network.security_group_id]
    assert environment["computeResources"]["launchTemplate"]["launchTemplateId"].startswith("lt-")


def _physical_names(emulator: Emulator, stack: str) -> dict[str, str]:
    resources = emulator.client("cloudformation").list_stack_resources(StackName=stack)
    return {r["LogicalResourceId"]: r["PhysicalResourceId"]
            for r in resources["StackResourceSummaries"] if r["LogicalResourceId"]}


def _named_resources_template() -> dict[str, Any]:
    trust = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"},
        "Action": "sts:AssumeRole"}]}
    passing = json.dumps({"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}})
    return {"Resources": {
        "GreeterRole": {"Type": "AWS::IAM::Role",
                        "Properties": {"AssumeRolePolicyDocument": trust}},
        "GreeterFunction": {
            "Type": "AWS::Lambda::Function", "Properties": {
                "Runtime": "python3.11", "Handler": "app.handler",
                "Role": {"Fn::GetAtt": ["GreeterRole", "Arn"]},
                "Code": {"S3Bucket": "artifacts", "S3Key": "function.zip"}}},
        "PipelineStateMachine": {"Type": "AWS::StepFunctions::StateMachine", "Properties": {
            "DefinitionString": passing, "RoleArn": {"Fn::GetAtt": ["GreeterRole", "Arn"]}}},
        "NamedStateMachine": {"Type": "AWS::StepFunctions::StateMachine", "Properties": {
            "StateMachineName": "pipeline", "DefinitionString": passing,
            "RoleArn": {"Fn::GetAtt": ["GreeterRole", "Arn"]}}},
        "Probe": {"Type": "AWS::Batch::JobDefinition", "Properties": {
            "Type": "container",
            "ContainerProperties": {"Image": "busybox", "Vcpus": 1, "Memory": 128}}},
        "Runtime": {"Type": "AWS::Lambda::LayerVersion", "Properties": {
            "LayerName": "RuntimeLayer", "CompatibleRuntimes": ["python3.11"],
            "Content": {"S3Bucket": "artifacts", "S3Key": "function.zip"}}},
    }}


@pytest.mark.parametrize("stack", [
    "traingrid", "a-stack-whose-name-is-far-longer-than-most-people-would-choose"])
def test_unnamed_resources_get_the_physical_names_cloudformation_gives(
    emulator: Emulator, stack: str
) -> None:
    s3 = emulator.client("s3")
    s3.create_bucket(Bucket="artifacts")
    s3.put_object(Bucket="artifacts", Key="function.zip", Body=zip_files({
        "app.py": "def handler(event, context):\n    return 'hello'\n"}))

    _create_stack(emulator, stack, _named_resources_template())

    names = _physical_names(emulator, stack)
    # A state machine has no stack prefix: a policy naming `<stack>-<LogicalId>-*` never matches.
    machine = names["PipelineStateMachine"].rsplit(":", 1)[1]
    assert re.fullmatch(r"PipelineStateMachine-[A-Za-z0-9]{12}", machine), machine
    assert names["NamedStateMachine"].endswith(":stateMachine:pipeline")
    served = {m["stateMachineArn"] for m in
              emulator.client("stepfunctions").list_state_machines()["stateMachines"]}
    assert {names["PipelineStateMachine"], names["NamedStateMachine"]} <= served
    # Functions and roles: `<stack>-<LogicalId>-<random>`, both parts cut to fit 64.
    function = names["GreeterFunction"]
    role = names["GreeterRole"]
    assert re.fullmatch(r"[A-Za-z0-9-]+-[A-Za-z0-9]{12}", function) and len(function) <= 64
    assert re.fullmatch(r"[A-Za-z0-9-]+-[A-Z0-9]{12}", role) and len(role) <= 64
    if len(stack) < 20:
        assert function.startswith(f"{stack}-GreeterFunction-")
        assert role.startswith(f"{stack}-GreeterRole-")
    else:
        assert function.startswith(stack[:25]) and not function.startswith(f"{stack}-")
        assert "-GreeterFunction-" in function
    lam = emulator.client("lambda")
    assert lam.get_function(FunctionName=function)["Configuration"]["Role"].endswith(
        f":role/{role}")
    # Batch: `<LogicalId>-<16 random>`, no stack prefix.
    definition = names["Probe"].rsplit("/", 1)[1]
    assert re.fullmatch(r"Probe-[A-Za-z0-9]{16}:1", definition), definition
    # A given name is kept (moto named layers after the stack).
    assert names["Runtime"].endswith(":layer:RuntimeLayer:1")
