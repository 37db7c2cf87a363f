"""State machines created by a CloudFormation stack: served and executed by the Step Functions
API, with the definition read from S3 and its DefinitionSubstitutions applied."""

from __future__ import annotations

import json
from typing import Any

import pytest

from traingrid_local.emulator.session import Emulator
from traingrid_local.emulator.sfn_stack import substitute

from .helpers import create_role, run_execution

DEFINITION = {
    "Comment": "Greets; ${Missing} has no substitution",
    "StartAt": "Greet",
    "States": {
        "Greet": {
            "Type": "Pass",
            "Result": {"greeting": "${Greeting}", "times": "${Times}"},
            "ResultPath": "$.greeted",
            "Next": "Context",
        },
        "Context": {
            "Type": "Pass",
            "Parameters": {
                "greeting.$": "$.greeted.greeting",
                "times.$": "$.greeted.times",
                "execution.$": "$$.Execution.Id",
                "state.$": "$$.State.Name",
            },
            "End": True,
        },
    },
}


def test_substitute_replaces_known_placeholders() -> None:
    text = '{"a": "${Greeting}", "b": "${Greeting}-${Times}", "c": ${Times}}'

    assert substitute(text, {"Greeting": "hi", "Times": 3}) == '{"a": "hi", "b": "hi-3", "c": 3}'


@pytest.mark.parametrize("text", [
    "${Unknown}",
    "arn:${Partition}:states:::aws-sdk:fsx:createFileSystem",
    '{"Execution.$": "$$.Execution.Id", "Input.$": "$.input"}',
    "no placeholders",
    "",
])
def test_substitute_leaves_unknown_names_and_context_paths(text: str) -> None:
    assert substitute(text, {"Greeting": "hi"}) == text


def test_substitute_with_adjacent_and_mixed_placeholders() -> None:
    result = substitute("${A}${B}/${C}", {"A": "x", "B": "y"})

    assert result == "xy/${C}"


def _stack(emulator: Emulator, template: dict[str, Any], name: str = "greeter-stack") -> None:
    cfn = emulator.client("cloudformation")
    cfn.create_stack(StackName=name, TemplateBody=json.dumps(template))
    stack = cfn.describe_stacks(StackName=name)["Stacks"][0]
    assert stack["StackStatus"] == "CREATE_COMPLETE", stack.get("StackStatusReason")


def _machine_template(role: str, definition: dict[str, Any]) -> dict[str, Any]:
    return {
        "Resources": {
            "Greeter": {
                "Type": "AWS::StepFunctions::StateMachine",
                "Properties": {
                    "StateMachineName": "greeter",
                    "RoleArn": role,
                    **definition,
                    "DefinitionSubstitutions": {"Greeting": "hello", "Times": 3},
                },
            },
        },
        "Outputs": {"Arn": {"Value": {"Ref": "Greeter"}}},
    }


@pytest.fixture
def s3_stack(emulator: Emulator) -> Emulator:
    s3 = emulator.client("s3")
    s3.create_bucket(Bucket="artifacts")
    s3.put_object(Bucket="artifacts", Key="greeter/definition.asl.json",
                  Body=json.dumps(DEFINITION).encode())
    role = create_role(emulator, "greeter", "states.amazonaws.com")
    location = {"DefinitionS3Location": {"Bucket": "artifacts",
                                         "Key": "greeter/definition.asl.json"}}
    _stack(emulator, _machine_template(role, location))
    return emulator


def test_the_stacks_state_machine_is_listed(s3_stack: Emulator) -> None:
    machines = s3_stack.client("stepfunctions").list_state_machines()["stateMachines"]
    outputs = s3_stack.client("cloudformation").describe_stacks(
        StackName="greeter-stack")["Stacks"][0]["Outputs"]

    assert [m["name"] for m in machines] == ["greeter"]
    assert outputs == [{"OutputKey": "Arn", "OutputValue": machines[0]["stateMachineArn"]}]


def test_the_definition_from_s3_has_its_substitutions_applied(s3_stack: Emulator) -> None:
    sfn = s3_stack.client("stepfunctions")
    arn = sfn.list_state_machines()["stateMachines"][0]["stateMachineArn"]

    definition = json.loads(sfn.describe_state_machine(stateMachineArn=arn)["definition"])

    assert definition["States"]["Greet"]["Result"] == {"greeting": "hello", "times": "3"}
    assert definition["States"]["Context"]["Parameters"]["execution.$"] == "$$.Execution.Id"
    assert definition["Comment"] == "Greets; ${Missing} has no substitution"


def test_an_execution_runs_the_substituted_definition(s3_stack: Emulator) -> None:
    sfn = s3_stack.client("stepfunctions")
    arn = sfn.list_state_machines()["stateMachines"][0]["stateMachineArn"]

    execution = run_execution(s3_stack, arn, {"who": "world"}, name="greet-1")

    assert execution["status"] == "SUCCEEDED", execution.get("cause")
    assert json.loads(execution["output"]) == {
        "greeting": "hello",
        "times": "3",
        "execution": execution["executionArn"],
        "state": "Context",
    }
    assert execution["executionArn"].endswith(":greeter:greet-1")


def test_an_inline_definition_string_is_substituted_too(emulator: Emulator) -> None:
    role = create_role(emulator, "greeter", "states.amazonaws.com")
    _stack(emulator, _machine_template(role, {"DefinitionString": json.dumps(DEFINITION)}))
    sfn = emulator.client("stepfunctions")
    arn = sfn.list_state_machines()["stateMachines"][0]["stateMachineArn"]

    execution = run_execution(emulator, arn, name="inline-1")

    assert execution["status"] == "SUCCEEDED", execution.get("cause")
    assert json.loads(execution["output"])["greeting"] == "hello"


def test_deleting_the_stack_deletes_its_state_machine(s3_stack: Emulator) -> None:
    s3_stack.client("cloudformation").delete_stack(StackName="greeter-stack")

    assert s3_stack.client("stepfunctions").list_state_machines()["stateMachines"] == []
