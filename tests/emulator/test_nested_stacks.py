"""Nested stacks deploy as CloudFormation deploys them: each nested template packaged and
uploaded by the deploy, created as a stack named after its parent, with the parameters its parent
passes and the outputs its parent reads; what CloudFormation refuses fails here too."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from botocore.exceptions import ClientError

from traingrid_local.emulator.deploy import deploy
from traingrid_local.emulator.session import Emulator

QUEUE_TEMPLATE = {
    "Parameters": {"Prefix": {"Type": "String"}, "Zones": {"Type": "CommaDelimitedList"}},
    "Resources": {"Inbox": {"Type": "AWS::SQS::Queue"},
                  "Named": {"Type": "AWS::SQS::Queue",
                            "Properties": {"QueueName": {"Fn::Sub": "${Prefix}-named"}}}},
    "Outputs": {"InboxArn": {"Value": {"Fn::GetAtt": ["Inbox", "Arn"]}},
                "FirstZone": {"Value": {"Fn::Select": [0, {"Ref": "Zones"}]}}},
}


def _root(child: dict[str, Any], zones: Any, output: str = "InboxArn") -> dict[str, Any]:
    return {
        "Parameters": {"Zones": {"Type": "CommaDelimitedList", "Default": "a,b"}},
        "Resources": {
            "QueueStack": {"Type": "AWS::CloudFormation::Stack", "Properties": {
                "TemplateURL": "stacks/queue.yaml",
                "Parameters": {"Prefix": {"Ref": "AWS::StackName"}, "Zones": zones}}},
            "Reader": {"Type": "AWS::SQS::Queue", "Properties": {
                "Tags": [{"Key": "reads", "Value": {"Fn::GetAtt": ["QueueStack",
                                                                   f"Outputs.{output}"]}}]}},
        },
        "Outputs": {"InboxArn": {"Value": {"Fn::GetAtt": ["QueueStack", f"Outputs.{output}"]}},
                    "FirstZone": {"Value": {"Fn::GetAtt": ["QueueStack", "Outputs.FirstZone"]}}},
    }


def _write(folder: Path, root: dict[str, Any]) -> Path:
    (folder / "stacks").mkdir()
    (folder / "stacks" / "queue.yaml").write_text(yaml.safe_dump(QUEUE_TEMPLATE))
    (folder / "root.yaml").write_text(json.dumps(root))
    return folder / "root.yaml"


def test_a_nested_stack_is_named_after_its_parent_and_hands_back_its_outputs(
        emulator: Emulator, tmp_path: Path):
    path = _write(tmp_path, _root(QUEUE_TEMPLATE, {"Fn::Join": [",", {"Ref": "Zones"}]}))
    stack = deploy(emulator, "shop", template_path=path)
    cfn = emulator.client("cloudformation")
    nested = stack.resources["QueueStack"]
    # CloudFormation's names: <parent>-<LogicalId>-<13 upper-case letters and digits>.
    assert re.fullmatch(r"shop-QueueStack-[A-Z0-9]{13}", nested), nested
    assert cfn.describe_stacks(StackName=nested)["Stacks"][0]["StackStatus"] == "CREATE_COMPLETE"
    # The nested stack's unnamed resources carry its name; a named one keeps its name.
    inbox_url = stack.resources["Inbox"]
    assert inbox_url.rsplit("/", 1)[1].startswith(f"{nested}-Inbox-"), inbox_url
    assert stack.resources["Named"].endswith("/shop-named")  # the root's AWS::StackName passed
    # The parent reads the nested stack's outputs, in its own outputs and its resources.
    sqs = emulator.client("sqs")
    arn = sqs.get_queue_attributes(QueueUrl=inbox_url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    assert stack.outputs == {"InboxArn": arn, "FirstZone": "a"}
    assert sqs.list_queue_tags(QueueUrl=stack.resources["Reader"])["Tags"] == {"reads": arn}
    # The deployed template holds the nested stack's resources, as translated.
    assert {"Inbox", "Named", "Reader", "QueueStack"} <= set(stack.template["Resources"])


def test_a_list_passed_to_a_nested_stack_fails_the_deploy(emulator: Emulator, tmp_path: Path):
    """"You can't pass values of type CommaDelimitedList to a nested stack" (AWS Knowledge
    Center): the parent joins it."""
    path = _write(tmp_path, _root(QUEUE_TEMPLATE, {"Ref": "Zones"}))
    with pytest.raises(ClientError, match="Zones.*lists.*Fn::Join"):
        deploy(emulator, "shop", template_path=path)


def test_reading_an_output_the_nested_stack_lacks_fails_the_deploy(emulator: Emulator,
                                                                   tmp_path: Path):
    path = _write(tmp_path, _root(QUEUE_TEMPLATE, {"Fn::Join": [",", {"Ref": "Zones"}]},
                                  output="Missing"))
    with pytest.raises(ClientError, match="no output 'Missing'"):
        deploy(emulator, "shop", template_path=path)
