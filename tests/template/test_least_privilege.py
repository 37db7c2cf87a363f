"""Least privilege: every role grants what its code or its tasks call, and nothing else;
everything that holds data is encrypted; every checkov skip says why."""

from __future__ import annotations

import ast
import json
import re
import textwrap
from datetime import UTC, datetime
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest

from tests.iam_actions import LOG_DELIVERY_ACTIONS, allows, as_list, granted, with_attached
from tests.template.aws_calls import (
    Call,
    Sources,
    UnfollowedClient,
    asl_calls,
    function_calls,
    handler_calls,
    states,
)
from traingrid.training.plan import DatasetSize, plan_run
from traingrid.training.run_request import TrainingRunRequest
from traingrid.vocabulary.catalog import DeploymentType
from traingrid_local.templates import REGIONAL_TEMPLATE, TEMPLATE, load_template

ROOT = TEMPLATE.parent
TEMPLATES = {"template.yaml": TEMPLATE, "regional/template.yaml": REGIONAL_TEMPLATE}

# Managed policies a function's role may have, and the configuration that needs each.
LAMBDA_MANAGED_POLICIES = {
    # Its own log group: every function writes its logs there.
    "service-role/AWSLambdaBasicExecutionRole": lambda fn: True,
    # Tracing: Active sends trace segments to X-Ray.
    "AWSXrayWriteOnlyAccess": lambda fn: fn.get("Tracing") == "Active",
    # A function in a VPC manages its network interfaces.
    "service-role/AWSLambdaVPCAccessExecutionRole": lambda fn: "VpcConfig" in fn,
}
# What a function's configuration, not its code, makes its role do.
DEAD_LETTER_ACTIONS = {"SQS": "sqs:SendMessage", "SNS": "sns:Publish"}


@pytest.fixture(scope="module")
def code_calls(template) -> dict[str, set[Call]]:
    return function_calls(template)


def _function_properties(template: dict[str, Any], logical_id: str) -> dict[str, Any]:
    return template.get("Globals", {}).get("Function", {}) | (
        template["Resources"][logical_id]["Properties"])


def _configured_actions(properties: dict[str, Any]) -> set[str]:
    dead_letters = properties.get("DeadLetterQueue")
    return {DEAD_LETTER_ACTIONS[dead_letters["Type"]]} if dead_letters else set()


def _managed_policies(role: dict[str, Any]) -> set[str]:
    """The AWS managed policies a role has, by name (``service-role/…`` included)."""
    return {arn.split(":policy/")[1] for arn in role["Properties"].get("ManagedPolicyArns", [])}


def test_every_function_role_grants_what_its_code_calls_and_nothing_else(
        template, translated, code_calls):
    missing, extra = [], []
    for logical_id, calls in code_calls.items():
        allowed = granted(with_attached(translated, f"{logical_id}Role"))
        needed = {a for call in calls for a in call.actions()}
        needed |= _configured_actions(_function_properties(template, logical_id))
        for call in sorted(calls, key=lambda c: c.where):
            missing += [f"{logical_id} may not {a} ({call.operation} at {call.where})"
                        for a in sorted(call.actions()) if not allows(allowed, a)]
        extra += [f"{logical_id} may {a}, which nothing it runs calls"
                  for a in sorted(allowed) if not any(fnmatch(n, a) for n in needed)]
    assert not missing + extra, "\n".join(missing + extra)


def test_function_roles_have_only_the_managed_policies_their_configuration_needs(
        template, translated, code_calls):
    for logical_id in code_calls:
        properties = _function_properties(template, logical_id)
        expected = {name for name, needs in LAMBDA_MANAGED_POLICIES.items() if needs(properties)}
        assert _managed_policies(translated["Resources"][f"{logical_id}Role"]) == expected, \
            logical_id


def _state_machines(template: dict[str, Any]) -> dict[str, tuple[dict[str, Any], set[Call]]]:
    found = {}
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] == "AWS::Serverless::StateMachine":
            props = resource["Properties"]
            definition = (ROOT / props["DefinitionUri"]).read_text()
            found[logical_id] = (props, asl_calls(json.loads(definition)))
    return found


def test_state_machine_roles_grant_what_their_tasks_and_logging_need_and_nothing_else(
        template, translated):
    for logical_id, (props, calls) in _state_machines(template).items():
        needed = {a for call in calls for a in call.actions()}
        if props.get("Logging", {}).get("Destinations"):
            needed |= set(LOG_DELIVERY_ACTIONS)
        role = with_attached(translated, f"{logical_id}Role")
        allowed = granted(role)
        missing = sorted(a for a in needed if not allows(allowed, a))
        assert not missing, f"{logical_id} may not {missing}"
        extra = sorted(a for a in allowed if not any(fnmatch(n, a) for n in needed))
        assert not extra, f"{logical_id} may {extra}, which none of its tasks needs"
        traced = props.get("Tracing", {}).get("Enabled") is True
        assert _managed_policies(role) == ({"AWSXrayWriteOnlyAccess"} if traced else set())


# --- The collector finds what the code calls, however it holds its client ---------------------

RUNTIME_FILES = {
    "traingrid/__init__.py": "",
    "traingrid/aws/__init__.py": "",
    "traingrid/aws/clients.py": """
        def client(service, region=None):
            raise NotImplementedError
    """,
    "traingrid/aws/adapters.py": """
        from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

        from traingrid.aws.clients import client

        def direct(job_id):
            return client("batch").describe_jobs(jobs=[job_id])

        def bound(arn, token=None):
            sfn, events = client("stepfunctions"), []
            events += sfn.get_execution_history(
                executionArn=arn, **({"nextToken": token} if token else {}))
            return events

        def paged(bucket, region):
            return client("s3", region).get_paginator("list_objects_v2").paginate(Bucket=bucket)

        def versioned(bucket, key, version_id=None):
            version = {"VersionId": version_id} if version_id else {}
            return client("s3").get_object(Bucket=bucket, Key=key, **version)

        class Tags:
            def __init__(self):
                self._fsx = client("fsx")

            def tag(self, arn):
                self._fsx.tag_resource(ResourceARN=arn, Tags=[])

        def kept_by_a_library(table):
            return DynamoDBPersistenceLayer(table_name=table, boto3_client=client("dynamodb"))

        def never_called():
            client("sagemaker").delete_training_job(TrainingJobName="x")
    """,
    "traingrid/steps.py": """
        from traingrid.aws import adapters
        from traingrid.aws.adapters import Tags, bound, never_called

        def step(event):
            never_called = event.get("never_called")  # a variable, not the adapter
            adapters.direct(event["job"])
            bound(event["arn"])
            adapters.paged(event["bucket"], None)
            adapters.versioned(event["bucket"], event["key"])
            Tags().tag(event["arn"])
            return adapters.kept_by_a_library(event["table"]) or never_called
    """,
    "fn/app.py": """
        from traingrid import steps

        def lambda_handler(event, context):
            return steps.step(event)
    """,
}


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_the_collector_follows_every_way_the_code_holds_a_client(tmp_path):
    _write(tmp_path, RUNTIME_FILES)
    calls = handler_calls(tmp_path / "fn", sources=Sources(tmp_path))
    assert {c.operation for c in calls} == {
        "batch:DescribeJobs", "states:GetExecutionHistory", "s3:ListObjectsV2", "s3:GetObject",
        "fsx:TagResource", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
        "dynamodb:DeleteItem"}
    actions = {a for c in calls for a in c.actions()}
    assert {"s3:GetObjectVersion", "s3:ListBucket"} <= actions
    assert "s3:ListObjectsV2" not in actions and "sagemaker:DeleteTrainingJob" not in actions
    (history,) = [c for c in calls if c.operation == "states:GetExecutionHistory"]
    assert history.parameters == {"executionArn", "nextToken"}


@pytest.mark.parametrize(("name", "code"), [
    ("leak", "def leak():\n    return client('batch')\n"),
    ("handed", "def handed():\n    helper(client('batch'))\n"),
    ("typo", "def typo():\n    client('batch').describe_jobz(jobs=[])\n"),
    ("unnamed", "def unnamed(name):\n    client(name).list_jobs()\n"),
    ("kept", "BATCH = client('batch')\n\ndef kept():\n    BATCH.list_jobs()\n"),
    ("kept", "class Jobs:\n    batch = client('batch')\n\n"
             "    def list(self):\n        self.batch.list_jobs()\n\nkept = Jobs\n"),
])
def test_the_collector_refuses_a_client_it_cannot_follow(tmp_path, name, code):
    _write(tmp_path, RUNTIME_FILES | {
        "traingrid/aws/adapters.py": f"from traingrid.aws.clients import client\n\n{code}",
        "traingrid/steps.py": f"from traingrid.aws import adapters\n\n"
                              f"def step(event):\n    adapters.{name}()\n",
    })
    with pytest.raises(UnfollowedClient):
        handler_calls(tmp_path / "fn", sources=Sources(tmp_path))


CLIENT_MAKERS = ("boto3", "botocore.session")


def test_runtime_code_gets_its_clients_only_from_the_clients_module():
    """What the collector relies on: no other module can make a client of its own."""
    clients = ROOT / "layers/traingrid/python/traingrid/aws/clients.py"
    for path in [*ROOT.glob("layers/traingrid/python/**/*.py"), *ROOT.glob("functions/*/app.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                if name.startswith(CLIENT_MAKERS):
                    assert path == clients, f"{path.relative_to(ROOT)} imports {name}"


# --- Encryption --------------------------------------------------------------------------------

def _resources(kind: str) -> list[tuple[str, str, dict[str, Any]]]:
    return [(path, logical_id, resource.get("Properties", {}))
            for path, location in TEMPLATES.items()
            for logical_id, resource in load_template(location)["Resources"].items()
            if resource["Type"] == kind]


@pytest.mark.parametrize(("path", "bucket", "properties"), [
    pytest.param(*found, id=f"{found[0]}:{found[1]}") for found in _resources("AWS::S3::Bucket")])
def test_every_bucket_is_private_encrypted_and_tls_only(path, bucket, properties):
    resources = load_template(TEMPLATES[path])["Resources"]
    blocks = properties.get("PublicAccessBlockConfiguration", {})
    assert len(blocks) == 4 and all(blocks.values()), blocks
    (rule,) = properties["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] in ("AES256", "aws:kms")
    policies = [r["Properties"]["PolicyDocument"] for r in resources.values()
                if r["Type"] == "AWS::S3::BucketPolicy"
                and r["Properties"]["Bucket"] == {"Ref": bucket}]
    assert any(s["Effect"] == "Deny" and s["Principal"] == "*"
               and s["Condition"]["Bool"]["aws:SecureTransport"] == "false"
               for policy in policies for s in policy["Statement"]), bucket


def test_tables_and_queues_are_encrypted():
    tables = _resources("AWS::DynamoDB::Table")
    assert tables
    for _, logical_id, properties in tables:
        assert properties["SSESpecification"]["SSEEnabled"] is True, logical_id
    for _, logical_id, properties in _resources("AWS::SQS::Queue"):
        assert properties.get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in properties, \
            logical_id
    for _, logical_id, properties in _resources("AWS::SNS::Topic"):
        assert "KmsMasterKeyId" in properties, logical_id


def _rendered(value: Any, stack: str = "stack") -> str:
    """A ``!Sub`` string with the pseudo parameters of one deployment."""
    text = value["Fn::Sub"] if isinstance(value, dict) else value
    for name, actual in {"AWS::StackName": stack, "AWS::Partition": "aws",
                         "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012"}.items():
        text = text.replace("${" + name + "}", actual)
    return text


def test_log_groups_are_encrypted_with_a_rotated_key_only_they_can_use():
    groups = _resources("AWS::Logs::LogGroup")
    assert groups
    for path, logical_id, properties in groups:
        assert "KmsKeyId" in properties, f"{path} {logical_id} is not encrypted with a KMS key"
        key_id, attribute = properties["KmsKeyId"]["Fn::GetAtt"]
        key = load_template(TEMPLATES[path])["Resources"][key_id]["Properties"]
        assert attribute == "Arn" and key["EnableKeyRotation"] is True, key_id
        statements = key["KeyPolicy"]["Statement"]
        assert all(s["Principal"] != "*" and s["Principal"].get("AWS") != "*"
                   for s in statements), key_id
        (logs,) = [s for s in statements if s["Principal"].get("Service") == {
            "Fn::Sub": "logs.${AWS::Region}.amazonaws.com"}]
        assert not any(a in ("kms:*", "*") for a in as_list(logs["Action"])), key_id
        patterns = [_rendered(p) for p in as_list(
            logs["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"])]

        def arn(stack: str, name: Any = properties["LogGroupName"]) -> str:
            return f"arn:aws:logs:us-east-1:123456789012:log-group:{_rendered(name, stack)}"

        assert any(fnmatch(arn("stack"), p) for p in patterns), f"{logical_id}: {patterns}"
        for other in ("other", "stack-b"):  # another stack's groups may not use the key
            assert not any(fnmatch(arn(other), p) for p in patterns), f"{logical_id}: {other}"


# FSx for Lustre encrypts every file system at rest: scratch ones with keys FSx manages,
# persistent ones with the KmsKeyId given or else the account's aws/fsx key.
LUSTRE_ENCRYPTED_AT_REST = {"SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"}
LUSTRE_TAKES_KMS_KEY = {"PERSISTENT_1", "PERSISTENT_2"}


def _with_input(parameters: Any, document: dict[str, Any]) -> Any:
    """Step Functions' Parameters with their ``.$`` paths (plain ``$.a.b``) filled in."""
    if isinstance(parameters, list):
        return [_with_input(p, document) for p in parameters]
    if not isinstance(parameters, dict):
        return parameters
    filled = {}
    for key, value in parameters.items():
        if key.endswith(".$"):
            found: Any = document
            for part in value.removeprefix("$.").split("."):
                found = found[part]
            filled[key.removesuffix(".$")] = found
        else:
            filled[key] = _with_input(value, document)
    return filled


@pytest.mark.parametrize("deployment_type", list(DeploymentType))
def test_every_file_system_a_run_creates_is_encrypted_at_rest(template, deployment_type):
    (props, calls) = _state_machines(template)["TrainingRunStateMachine"]
    definition = json.loads((ROOT / props["DefinitionUri"]).read_text())
    creates = [s for s in states(definition).values()
               if s.get("Resource", "").endswith(":fsx:createFileSystem")]
    assert creates and "fsx:CreateFileSystem" in {c.operation for c in calls}
    request = TrainingRunRequest(dataset="s3://bucket/data/",
                                 fsx={"deployment_type": deployment_type})
    plan = plan_run(request, run="r", execution_arn="arn", dataset=DatasetSize(1, 10**9),
                    now=datetime(2026, 1, 1, tzinfo=UTC))
    for state in creates:
        sent = _with_input(state["Parameters"], {"plan": plan})
        assert sent["FileSystemType"] == "LUSTRE"
        lustre = sent["LustreConfiguration"]
        assert lustre["DeploymentType"] == str(deployment_type)
        assert lustre["DeploymentType"] in LUSTRE_ENCRYPTED_AT_REST
        if "KmsKeyId" in sent:
            assert lustre["DeploymentType"] in LUSTRE_TAKES_KMS_KEY
# --- checkov -----------------------------------------------------------------------------------

def test_every_checkov_skip_names_one_check_and_says_why():
    """``make security-check`` runs checkov; a finding is fixed or skipped in the resource's
    Metadata with the reason."""
    for path, location in TEMPLATES.items():
        for logical_id, resource in load_template(location)["Resources"].items():
            skips = resource.get("Metadata", {}).get("checkov", {}).get("skip", [])
            ids = [skip["id"] for skip in skips]
            assert len(ids) == len(set(ids)), f"{path} {logical_id}: {ids}"
            for skip in skips:
                assert re.fullmatch(r"CKV2?_AWS_\d+", skip["id"]), f"{path} {logical_id}"
                assert len(skip.get("comment", "").split()) >= 5, f"{path} {logical_id}: why?"
