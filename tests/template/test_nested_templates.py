"""The stack in nested templates, one a concern: their sizes, how the root passes them what
they need, and how every reader sees them as one template (traingrid_local.templates)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from traingrid_local.templates import (
    NESTED,
    TEMPLATE,
    TemplateError,
    declared_in,
    load_template,
    nested_templates,
    read_template,
    template_files,
)

ROOT = TEMPLATE.parent


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_the_root_is_under_500_lines_and_no_nested_template_over_700():
    files = template_files()
    assert len(files) >= 7, files  # the root and one nested template a concern
    assert _lines(TEMPLATE) < 500
    assert {f.name: _lines(f) for f in files[1:] if _lines(f) > 700} == {}


def test_the_root_nests_only_local_templates_and_declares_nothing_else():
    root = read_template(TEMPLATE)
    nested = nested_templates(root, ROOT)
    assert set(nested) == set(root["Resources"])
    assert all(path.is_file() and path.parent == ROOT / "stacks" for path in nested.values())


def test_a_list_is_joined_before_it_is_passed_to_a_nested_stack():
    """"You can't pass values of type CommaDelimitedList to a nested stack. Instead, use the
    Fn::Join intrinsic function in your parent stack" (AWS Knowledge Center,
    cloudformation-parameters-nested-stacks); the emulator refuses a list too."""
    root = read_template(TEMPLATE)
    lists = {name for name, p in root["Parameters"].items()
             if p["Type"] == "CommaDelimitedList" or p["Type"].startswith("List<")}
    for logical_id, resource in root["Resources"].items():
        for name, value in resource["Properties"].get("Parameters", {}).items():
            assert value != {"Ref": name} or name not in lists, (logical_id, name)


def test_each_nested_template_is_passed_exactly_the_parameters_it_declares():
    root = read_template(TEMPLATE)
    for logical_id, path in nested_templates(root, ROOT).items():
        declared = set(read_template(path).get("Parameters", {}))
        passed = set(root["Resources"][logical_id]["Properties"].get("Parameters", {}))
        assert passed == declared, (logical_id, declared ^ passed)


def test_read_as_one_the_stack_keeps_every_resource_where_its_template_declares_it():
    whole = load_template()
    files = declared_in()
    assert set(whole["Resources"]) == set(files)
    assert files["TrainingRunStateMachine"] == ROOT / "stacks" / "training-run.yaml"
    # A code path is relative to the template that names it, and read from the root's folder.
    assert whole["Resources"]["PlanRunFunction"]["Properties"]["CodeUri"] == "functions/plan_run/"
    assert read_template(files["PlanRunFunction"])["Resources"]["PlanRunFunction"][
        "Properties"]["CodeUri"] == "../functions/plan_run/"
    # No nested stack is left in it, and what the root passes is inlined where it is used.
    assert not any(r["Type"] in NESTED for r in whole["Resources"].values())
    environment = whole["Resources"]["RecordRunFunction"]["Properties"]["Environment"]
    assert environment["Variables"]["DATABASE_HOST"] == {"Fn::If": [
        "CreateDatabase", {"Fn::GetAtt": ["DatabaseCluster", "Endpoint.Address"]},
        {"Ref": "AWS::NoValue"}]}


# --- the reader, on templates of its own -----------------------------------------------------


def _stack(folder: Path, root: dict[str, Any], **children: dict[str, Any]) -> Path:
    (folder / "stacks").mkdir()
    for name, child in children.items():
        (folder / "stacks" / f"{name}.yaml").write_text(yaml.safe_dump(child))
    (folder / "template.yaml").write_text(json.dumps(root))
    return folder / "template.yaml"


def _nested(name: str, **parameters: Any) -> dict[str, Any]:
    return {"Type": "AWS::Serverless::Application",
            "Properties": {"Location": f"stacks/{name}.yaml", "Parameters": parameters}}


TABLE = {
    "Parameters": {"Owner": {"Type": "String"}},
    "Conditions": {"Named": {"Fn::Not": [{"Fn::Equals": [{"Ref": "Owner"}, ""]}]}},
    "Resources": {"Table": {"Type": "AWS::DynamoDB::Table", "Properties": {
        "TableName": {"Fn::If": ["Named", {"Fn::Sub": "${Owner}-table"},
                                 {"Ref": "AWS::NoValue"}]}}}},
    "Outputs": {"TableArn": {"Value": {"Fn::GetAtt": ["Table", "Arn"]}},
                "TableName": {"Value": {"Ref": "Table"}}},
}
READER = {
    "Parameters": {"TableArn": {"Type": "String"}, "TableName": {"Type": "String"},
                   "Zones": {"Type": "CommaDelimitedList"}, "Label": {"Type": "String"}},
    "Resources": {"Reader": {"Type": "AWS::Serverless::Function", "Properties": {
        "CodeUri": "../functions/reader/",
        "Environment": {"Variables": {
            "ARN": {"Fn::Sub": "${TableArn}/index/*"},
            "NAME": {"Fn::Sub": "table ${TableName} in ${AWS::Region}"},
            "LABEL": {"Fn::Sub": "${Label}!"},
            "ZONE": {"Fn::Select": [0, {"Ref": "Zones"}]}}}}}},
}


def test_a_nested_templates_parameters_become_what_its_parent_passes(tmp_path: Path):
    root = {"Parameters": {"Owner": {"Type": "String"},
                           "Zones": {"Type": "CommaDelimitedList"}},
            "Resources": {
                "TableStack": _nested("table", Owner={"Ref": "Owner"}),
                "ReaderStack": _nested(
                    "reader", TableArn={"Fn::GetAtt": ["TableStack", "Outputs.TableArn"]},
                    TableName={"Fn::GetAtt": ["TableStack", "Outputs.TableName"]},
                    Zones={"Fn::Join": [",", {"Ref": "Zones"}]},
                    Label={"Fn::Join": ["-", ["a", {"Ref": "Owner"}]]})},
            "Outputs": {"Arn": {"Value": {"Fn::GetAtt": ["TableStack", "Outputs.TableArn"]}}}}
    whole = load_template(_stack(tmp_path, root, table=TABLE, reader=READER))
    assert whole["Parameters"] == root["Parameters"]
    assert whole["Conditions"] == TABLE["Conditions"]
    assert whole["Resources"]["Table"]["Properties"]["TableName"] == {
        "Fn::If": ["Named", {"Fn::Sub": "${Owner}-table"}, {"Ref": "AWS::NoValue"}]}
    reader = whole["Resources"]["Reader"]["Properties"]
    assert reader["CodeUri"] == "functions/reader/"
    assert reader["Environment"]["Variables"] == {
        "ARN": {"Fn::Sub": "${Table.Arn}/index/*"},  # a sibling's output: what it names
        "NAME": {"Fn::Sub": "table ${Table} in ${AWS::Region}"},
        # Anything else becomes a variable of the Sub.
        "LABEL": {"Fn::Sub": ["${Label}!",
                              {"Label": {"Fn::Join": ["-", ["a", {"Ref": "Owner"}]]}}]},
        "ZONE": {"Fn::Select": [0, {"Ref": "Zones"}]},  # a joined list passed is the list
    }
    assert whole["Outputs"] == {"Arn": {"Value": {"Fn::GetAtt": ["Table", "Arn"]}}}


@pytest.mark.parametrize(("change", "problem"), [
    (lambda root: root["Resources"]["TableStack"]["Properties"]["Parameters"].clear(),
     "TableStack does not pass Owner"),
    (lambda root: root["Resources"]["TableStack"]["Properties"]["Parameters"].update(
        Colour={"Ref": "Owner"}), "TableStack passes Colour, which its template does not"),
    (lambda root: root["Outputs"].update(Gone={"Value": {"Fn::GetAtt": [
        "TableStack", "Outputs.Gone"]}}), "TableStack has no output Gone"),
    (lambda root: root["Resources"].update(Table={"Type": "AWS::SQS::Queue"}), None),
    (lambda root: root["Resources"]["TableStack"]["Properties"].update(
        Location="stacks/missing.yaml"), "TableStack: no template at"),
])
def test_templates_that_do_not_nest_into_one_say_why(tmp_path: Path, change: Any,
                                                     problem: str | None):
    root = {"Parameters": {"Owner": {"Type": "String"}},
            "Resources": {"TableStack": _nested("table", Owner={"Ref": "Owner"})},
            "Outputs": {}}
    change(root)
    path = _stack(tmp_path, root, table=TABLE)
    if problem is None:  # a logical id in the root and in a nested template
        with pytest.raises(TemplateError, match="Resources.Table of TableStack clashes"):
            load_template(path)
        return
    with pytest.raises(TemplateError, match=problem):
        load_template(path)
