"""Deploy ``template.yaml`` into the emulated account exactly as it ships.

The same three steps as ``sam deploy``: package local code and definitions into an artifacts
bucket (what ``sam package`` does), transform the SAM template offline with
aws-sam-translator, and create the CloudFormation stack (moto CloudFormation, with the
adaptations in :mod:`traingrid_local.emulator.cloudformation` and ``sfn_stack``). Each nested
template (``stacks/``) is packaged and transformed the same way and uploaded, its address in
place of its path, as ``sam package`` does; CloudFormation then creates it as a stack of its
own, named after its parent, with the parameters its parent passes. The API
Gateway resources SAM generates are left out (:mod:`traingrid_local.emulator.api_gateway` says
why); ``traingrid serve`` stands in for them.

moto has no model for a few declared types (bucket policy, placement group, security-group
rules, Lambda permissions); it skips them. They change nothing the emulator executes, and
the template tests check them instead.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import logging
import os
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator

from traingrid_local.emulator.api_gateway import without_api_gateway
from traingrid_local.emulator.patching import Patches
from traingrid_local.emulator.session import Emulator
from traingrid_local.templates import (
    NESTED,
    PACKAGED,
    PROJECT_ROOT,
    TEMPLATE,
    load_template,
    nested_templates,
    read_template,
)

ARTIFACTS_BUCKET = "traingrid-emulator-artifacts"


class DeployError(RuntimeError):
    pass


@dataclass(frozen=True)
class Stack:
    name: str
    outputs: dict[str, str]
    resources: dict[str, str]  # logical id → physical id, over every nested stack too
    template: dict[str, Any]  # as translated; its Resources those of the nested stacks too
    # What the emulator could not create (logical ids, "Outputs.<key>"), see api_gateway.
    left_out: tuple[str, ...] = ()

    def state_machine_arn(self, logical_id: str) -> str:
        return self.resources[logical_id]

    def state_machine_names(self) -> dict[str, str]:
        """State machine ARN → the template's logical id (``TrainingRun``)."""
        return {
            arn: logical.removesuffix("StateMachine")
            for logical, arn in self.resources.items()
            if self.template["Resources"][logical]["Type"] == "AWS::StepFunctions::StateMachine"
        }


def stand_in_environment(template: dict[str, Any] | None = None) -> dict[str, str]:
    """Every environment variable the template gives any function, with a stand-in value: a
    parameter's default, a literal as written, ``x`` for what only a deployment knows. Enough
    for a handler's settings to validate when it is imported outside a stack."""
    template = template or load_template()
    parameters = template.get("Parameters", {})

    def value(declared: Any) -> str:
        if isinstance(declared, str | int | float | bool):
            return str(declared).lower() if isinstance(declared, bool) else str(declared)
        if isinstance(declared, dict) and "Ref" in declared:
            return str(parameters.get(declared["Ref"], {}).get("Default", "x"))
        if isinstance(declared, dict) and "Fn::If" in declared:  # the defaults' branch
            return value(declared["Fn::If"][2])
        return "x"

    found: dict[str, str] = {}
    functions = [template.get("Globals", {}).get("Function", {})] + [
        r["Properties"] for r in template["Resources"].values()
        if r["Type"] == "AWS::Serverless::Function"]
    for properties in functions:
        for name, declared in properties.get("Environment", {}).get("Variables", {}).items():
            found[name] = value(declared) or "x"
    return found


def _zip_folder(folder: Path) -> bytes:
    """Zip a code folder as `sam build` does: symbolic links are followed."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for root, dirs, files in os.walk(folder, followlinks=True):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                path = Path(root) / name
                archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()


Upload = Callable[[str, bytes], None]


def package(template: dict[str, Any], upload: Upload, root: Path = PROJECT_ROOT) -> dict[str, Any]:
    """Upload every local CodeUri/ContentUri/DefinitionUri; return the packaged template."""
    packaged = copy.deepcopy(template)
    for logical_id, resource in packaged["Resources"].items():
        prop = PACKAGED.get(resource["Type"])
        local = resource.get("Properties", {}).get(prop) if prop else None
        if not isinstance(local, str):
            continue
        path = root / local
        body = _zip_folder(path) if path.is_dir() else path.read_bytes()
        key = f"{logical_id}/{hashlib.sha256(body).hexdigest()}"
        upload(key, body)
        resource["Properties"][prop] = {"Bucket": ARTIFACTS_BUCKET, "Key": key}
    return packaged


def translate(template: dict[str, Any], region: str = "us-east-1") -> dict[str, Any]:
    """The SAM transform, offline: a session that only names the region, no managed-policy
    lookups (the template names managed policies by ARN)."""
    # Quiet while it translates, put back after (it also runs outside an emulator's session).
    quiet = Patches()
    # Offline there is no feature toggle configuration to read; the translator says so on
    # every Api with an OpenApiVersion, and goes on with the defaults, as sam deploy does.
    quiet.log_level("samtranslator.feature_toggle", logging.ERROR)
    # The translator's own usage metrics go nowhere offline.
    quiet.log_level("samtranslator.metrics.metrics", logging.ERROR)
    try:
        translator = Translator(None, Parser(), boto_session=boto3.Session(region_name=region))
        return translator.translate(
            copy.deepcopy(template), parameter_values={}, get_managed_policy_map=dict
        )
    finally:
        quiet.undo_all()


def _network(emulator: Emulator, region: str, declared: dict[str, Any]) -> dict[str, str]:
    """A VPC whose two private subnets, in two zones, route 0.0.0.0/0 to a NAT gateway (in a
    public subnet of its own): the training subnets, and the database's, which RDS wants in
    two zones at least; and its default security group, for templates that ask for it
    (VpcDefaultSecurityGroupId)."""
    ec2 = emulator.client("ec2", region)
    vpc = ec2.create_vpc(CidrBlock="10.20.0.0/16")["Vpc"]["VpcId"]
    subnets = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.20.{i}.0/24",
                          AvailabilityZone=f"{region}{zone}")["Subnet"]["SubnetId"]
        for i, zone in enumerate("ab")
    ]
    public = ec2.create_subnet(VpcId=vpc, CidrBlock="10.20.100.0/24",
                               AvailabilityZone=f"{region}a")["Subnet"]["SubnetId"]
    gateway = ec2.create_internet_gateway()["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=gateway, VpcId=vpc)
    nat = ec2.create_nat_gateway(SubnetId=public)["NatGateway"]["NatGatewayId"]
    private = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    ec2.create_route(RouteTableId=private, DestinationCidrBlock="0.0.0.0/0", NatGatewayId=nat)
    for subnet in subnets:
        ec2.associate_route_table(RouteTableId=private, SubnetId=subnet)
    values = {"VpcId": vpc, "TrainingSubnetIds": ",".join(subnets),
              "DatabaseSubnetIds": ",".join(subnets), "TrainingSubnetsHaveNatRoute": "true"}
    if "VpcDefaultSecurityGroupId" in declared:
        (default,) = ec2.describe_security_groups(Filters=[
            {"Name": "vpc-id", "Values": [vpc]},
            {"Name": "group-name", "Values": ["default"]}])["SecurityGroups"]
        values["VpcDefaultSecurityGroupId"] = default["GroupId"]
    return {k: v for k, v in values.items() if k in declared}


@dataclass
class _Prepared:
    template: dict[str, Any]  # ready for CloudFormation
    resources: dict[str, Any]  # its resources and its nested templates', as translated
    left_out: list[str]


def _prepared(path: Path, upload: Upload, region: str) -> _Prepared:
    """The template at ``path`` as ``sam deploy`` hands it to CloudFormation: each nested
    template prepared the same way and uploaded, its address in place of its path; its own code
    packaged; the SAM transform applied; the API Gateway resources left out."""
    template = read_template(path)
    resources: dict[str, Any] = {}
    left_out: list[str] = []
    for logical_id, child_path in nested_templates(template, path.parent).items():
        child = _prepared(child_path, upload, region)
        body = json.dumps(child.template).encode()
        key = f"{logical_id}/{hashlib.sha256(body).hexdigest()}.json"
        upload(key, body)
        resource = template["Resources"][logical_id]
        resource["Properties"][NESTED[resource["Type"]]] = (
            f"https://{ARTIFACTS_BUCKET}.s3.{region}.amazonaws.com/{key}")
        resources |= child.resources
        left_out += child.left_out + _forget_outputs(template, logical_id, child.left_out)
    if "Transform" in template:
        template = translate(package(template, upload, path.parent), region)
    template, mine = without_api_gateway(template)
    resources |= template["Resources"]
    return _Prepared(template, resources, left_out + mine)


def _forget_outputs(template: dict[str, Any], nested: str, left_out: list[str]) -> list[str]:
    """Take out of ``template`` its outputs that read an output the nested stack left out;
    the ones taken out, as ``Outputs.<key>``."""
    gone = {name.removeprefix("Outputs.") for name in left_out if name.startswith("Outputs.")}
    outputs = template.get("Outputs", {})
    dropped = [key for key, output in outputs.items() if _outputs_read(output, nested) & gone]
    for key in dropped:
        del outputs[key]
    return [f"Outputs.{key}" for key in dropped]


def _outputs_read(node: Any, nested: str) -> set[str]:
    """The outputs of nested stack ``nested`` that a template fragment reads (``Fn::GetAtt``
    in either form, or ``${<nested>.Outputs.<Name>}`` in a ``Fn::Sub``)."""
    if isinstance(node, list):
        return set().union(*(_outputs_read(item, nested) for item in node))
    if isinstance(node, str):
        return set(re.findall(rf"\$\{{{nested}\.Outputs\.(\w+)\}}", node))
    if not isinstance(node, dict):
        return set()
    attribute = node.get("Fn::GetAtt")
    if attribute is not None:
        target = attribute if isinstance(attribute, str) else ".".join(attribute)
        prefix = f"{nested}.Outputs."
        return {target.removeprefix(prefix)} if target.startswith(prefix) else set()
    return set().union(*(_outputs_read(value, nested) for value in node.values()))


def deploy(emulator: Emulator, stack_name: str = "traingrid",
           parameters: dict[str, str] | None = None, template_path: Path = TEMPLATE,
           region: str | None = None) -> Stack:
    """Package, translate (SAM templates) and create the stack and its nested stacks; raise
    DeployError with the reason if it fails. A VPC and subnets are made for templates that ask
    for them."""
    region = region or emulator.region
    s3 = emulator.client("s3", region)
    buckets: list[str] = []

    def upload(key: str, body: bytes) -> None:
        if not buckets:  # made on first use: a template without code or nesting needs none
            s3.create_bucket(Bucket=ARTIFACTS_BUCKET, **_location(region))
            buckets.append(ARTIFACTS_BUCKET)
        s3.put_object(Bucket=ARTIFACTS_BUCKET, Key=key, Body=body)

    prepared = _prepared(template_path, upload, region)
    template = prepared.template
    declared = template.get("Parameters", {})
    network = _network(emulator, region, declared) if "VpcId" in declared else {}
    values = network | (parameters or {})
    cfn = emulator.client("cloudformation", region)
    cfn.create_stack(
        StackName=stack_name,
        TemplateBody=json.dumps(template),
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in values.items()],
        Capabilities=["CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND"],
    )
    description = cfn.describe_stacks(StackName=stack_name)["Stacks"][0]
    if description["StackStatus"] != "CREATE_COMPLETE":
        raise DeployError(f"stack {stack_name}: {description['StackStatus']}: "
                          f"{description.get('StackStatusReason', '')}")
    outputs = {o["OutputKey"]: o["OutputValue"] for o in description.get("Outputs", [])}
    whole = template | {"Resources": prepared.resources}
    return Stack(stack_name, outputs, _physical_ids(cfn, stack_name), whole,
                 tuple(prepared.left_out))


def _physical_ids(cfn: Any, stack_name: str) -> dict[str, str]:
    """Logical id → physical id of every resource of the stack and of its nested stacks."""
    found: dict[str, str] = {}
    for summary in cfn.list_stack_resources(StackName=stack_name)["StackResourceSummaries"]:
        logical, physical = summary["LogicalResourceId"], summary["PhysicalResourceId"]
        if not logical:  # moto lists the types it skipped with empty ids
            continue
        if summary["ResourceType"] == "AWS::CloudFormation::Stack":
            nested = _physical_ids(cfn, physical)
            if clash := set(nested) & set(found):
                raise DeployError(f"logical ids in two nested stacks: {sorted(clash)}")
            found |= nested
        found[logical] = physical
    return found


def _location(region: str) -> dict[str, Any]:
    return {} if region == "us-east-1" else {
        "CreateBucketConfiguration": {"LocationConstraint": region}}
