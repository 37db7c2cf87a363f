"""The deployed stack's roles held against what really happens:

- :func:`missing_permissions`: every AWS call a function made is allowed by its role;
- :func:`dead_statements`: every Allow statement of every role the stacks create can match
  something the account really has or makes: each ``Resource`` pattern an ARN, its
  ``Condition`` the tags, trusted services or keys of a resource it covers. A pattern or a
  condition written against a guessed name (a state machine is ``<LogicalId>-<random>``,
  with no stack prefix) matches nothing on AWS; here it fails, named, with the values that
  were there to match.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from moto.fsx.models import fsx_backends

from tests.iam_actions import actions_of, allows, as_list, granted, with_attached
from traingrid_local.emulator import fsx
from traingrid_local.emulator.deploy import Stack
from traingrid_local.emulator.session import ACCOUNT_ID, Emulator
from traingrid_local.stack.environment import Deployment


def role_actions(stack: Stack, function_name: str) -> set[str]:
    logical = next(k for k, v in stack.resources.items() if v == function_name)
    return granted(with_attached(stack.template, f"{logical}Role"))


def missing_permissions(stack: Stack, calls: dict[str, set[str]]) -> list[str]:
    """``function: action`` for every recorded call that the function's role does not allow."""
    missing = []
    for function_name, operations in calls.items():
        allowed = role_actions(stack, function_name)
        for operation in sorted(operations):
            for action in sorted(actions_of(operation)):
                if not allows(allowed, action):
                    missing.append(f"{function_name}: {action}")
    return missing


# --- What the account has and makes --------------------------------------------------------

@dataclass(frozen=True)
class Found:
    """Something a statement may be about: its ARN, and the condition keys a request on it
    carries, with their values."""

    arn: str
    context: Mapping[str, frozenset[str]] = field(default_factory=dict)


def _tagged(arn: str, tags: Mapping[str, str]) -> Found:
    # Created with these tags: a request on it carries them as ResourceTag, its creation as
    # RequestTag.
    context = {f"aws:{kind}/{key}": frozenset({value})
               for key, value in tags.items() for kind in ("ResourceTag", "RequestTag")}
    context["aws:TagKeys"] = frozenset(tags)
    return Found(arn, context)


def _prefixes(keys: Iterable[str]) -> frozenset[str]:
    """The prefixes a ListBucket of these keys may be asked with: each folder, each key."""
    found = {""}
    for key in keys:
        found.add(key)
        parts = key.split("/")
        found.update("/".join(parts[:i]) + "/" for i in range(1, len(parts)))
    return frozenset(found)


def _pages(client: Any, operation: str, key: str, **kwargs: Any) -> Iterator[Any]:
    for page in client.get_paginator(operation).paginate(**kwargs):
        yield from page.get(key, [])


def _trusted_services(document: Any) -> frozenset[str]:
    document = json.loads(document) if isinstance(document, str) else document
    return frozenset(
        service for statement in as_list(document.get("Statement", []))
        for service in as_list(statement.get("Principal", {}).get("Service", [])))


def _sagemaker(emulator: Emulator, region: str) -> Iterator[Found]:
    sagemaker = emulator.client("sagemaker", region)
    jobs = sagemaker.list_training_jobs()["TrainingJobSummaries"]
    for job in jobs:
        tags = sagemaker.list_tags(ResourceArn=job["TrainingJobArn"])["Tags"]
        yield _tagged(job["TrainingJobArn"], {t["Key"]: t["Value"] for t in tags})
    if jobs:
        # What SageMaker makes for the jobs it runs, as the job's role: its log group and
        # streams, and its metrics' namespace.
        group = f"arn:aws:logs:{region}:{ACCOUNT_ID}:log-group:/aws/sagemaker/TrainingJobs"
        yield Found(group)
        for job in jobs:
            yield Found(f"{group}:log-stream:{job['TrainingJobName']}/algo-1-0")
        yield Found("", {"cloudwatch:namespace": frozenset({"/aws/sagemaker/TrainingJobs"})})


def _fsx(emulator: Emulator, region: str) -> Iterator[Found]:
    client = emulator.client("fsx", region)
    kept = {fs["FileSystemId"]: ({t["Key"]: t["Value"] for t in fs.get("Tags", [])})
            for fs in client.describe_file_systems()["FileSystems"]}
    gone = {fs_id: dict(entry["tags"])
            for fs_id, entry in fsx.deleted(fsx_backends[ACCOUNT_ID][region]).items()}
    linked = f"arn:aws:iam::{ACCOUNT_ID}:role/aws-service-role"
    for fs_id, tags in (gone | kept).items():
        yield _tagged(f"arn:aws:fsx:{region}:{ACCOUNT_ID}:file-system/{fs_id}", tags)
        # FSx creates its service-linked roles as the caller: its own on first use, and one
        # for each file system linked to S3.
        service = "s3.data-source.lustre.fsx.amazonaws.com"
        yield Found(f"{linked}/{service}/AWSServiceRoleForFSxS3Access_{fs_id}",
                    {"iam:AWSServiceName": frozenset({service})})
    if gone or kept:
        yield Found(f"{linked}/fsx.amazonaws.com/AWSServiceRoleForAmazonFSx",
                    {"iam:AWSServiceName": frozenset({"fsx.amazonaws.com"})})
    for task in client.describe_data_repository_tasks()["DataRepositoryTasks"]:
        yield Found(task["ResourceARN"])


def _batch(emulator: Emulator, region: str) -> Iterator[Found]:
    batch = emulator.client("batch", region)
    for environment in batch.describe_compute_environments()["computeEnvironments"]:
        yield Found(environment["computeEnvironmentArn"])
    for definition in batch.describe_job_definitions()["jobDefinitions"]:
        yield Found(definition["jobDefinitionArn"])
    for queue in batch.describe_job_queues()["jobQueues"]:
        yield Found(queue["jobQueueArn"])
        ids = [job["jobId"] for status in ("SUBMITTED", "PENDING", "RUNNABLE", "STARTING",
                                            "RUNNING", "SUCCEEDED", "FAILED")
               for job in batch.list_jobs(jobQueue=queue["jobQueueArn"],
                                          jobStatus=status)["jobSummaryList"]]
        for start in range(0, len(ids), 100):
            for job in batch.describe_jobs(jobs=ids[start:start + 100])["jobs"]:
                yield _tagged(job["jobArn"], job.get("tags", {}))


def _s3(emulator: Emulator) -> Iterator[Found]:
    s3 = emulator.client("s3")
    for bucket in s3.list_buckets()["Buckets"]:
        name = bucket["Name"]
        keys = [o["Key"] for o in _pages(s3, "list_objects_v2", "Contents", Bucket=name)]
        yield Found(f"arn:aws:s3:::{name}", {"s3:prefix": _prefixes(keys)})
        yield from (Found(f"arn:aws:s3:::{name}/{key}") for key in keys)


def _functions(emulator: Emulator, region: str) -> Iterator[Found]:
    lam = emulator.client("lambda", region)
    for function in _pages(lam, "list_functions", "Functions"):
        yield Found(function["FunctionArn"])
        yield Found(f"{function['FunctionArn']}:$LATEST")
    for layer in lam.list_layers()["Layers"]:
        for version in lam.list_layer_versions(LayerName=layer["LayerName"])["LayerVersions"]:
            yield Found(version["LayerVersionArn"])


def _home(emulator: Emulator, region: str) -> Iterator[Found]:
    yield from _functions(emulator, region)
    sfn = emulator.client("stepfunctions", region)
    for machine in sfn.list_state_machines()["stateMachines"]:
        yield Found(machine["stateMachineArn"])
        for execution in _pages(sfn, "list_executions", "executions",
                                stateMachineArn=machine["stateMachineArn"]):
            yield Found(execution["executionArn"])
    dynamodb = emulator.client("dynamodb", region)
    for table in dynamodb.list_tables()["TableNames"]:
        yield Found(dynamodb.describe_table(TableName=table)["Table"]["TableArn"])
    sqs = emulator.client("sqs", region)
    for url in sqs.list_queues().get("QueueUrls", []):
        yield Found(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
            "Attributes"]["QueueArn"])
    for secret in emulator.client("secretsmanager", region).list_secrets()["SecretList"]:
        yield Found(secret["ARN"])
    for key in emulator.client("kms", region).list_keys()["Keys"]:
        yield Found(key["KeyArn"])
    events = emulator.client("events", region)
    for bus in events.list_event_buses()["EventBuses"]:
        yield Found(bus["Arn"])
    for rule in events.list_rules()["Rules"]:
        yield Found(rule["Arn"])
    yield from _batch(emulator, region)
    yield from _fsx(emulator, region)


def _everywhere(emulator: Emulator, region: str) -> Iterator[Found]:
    logs = emulator.client("logs", region)
    for group in _pages(logs, "describe_log_groups", "logGroups"):
        arn = group["arn"].removesuffix(":*")
        yield Found(arn)
        yield Found(f"{arn}:*")
        for stream in _pages(logs, "describe_log_streams", "logStreams",
                             logGroupName=group["logGroupName"]):
            yield Found(f"{arn}:log-stream:{stream['logStreamName']}")
    for repository in emulator.client("ecr", region).describe_repositories()["repositories"]:
        yield Found(repository["repositoryArn"])
    yield from _sagemaker(emulator, region)


def account_contents(emulator: Emulator, deployment: Deployment) -> list[Found]:
    """Everything the account holds now, and what AWS makes on the stack's behalf."""
    home = emulator.region
    found = [*_home(emulator, home), *_s3(emulator)]
    for region in {home, *deployment.regional}:
        found.extend(_everywhere(emulator, region))
    iam = emulator.client("iam")
    for role in _pages(iam, "list_roles", "Roles"):
        found.append(Found(role["Arn"], {
            "iam:PassedToService": _trusted_services(role["AssumeRolePolicyDocument"])}))
    return found


# --- The roles' statements against it ------------------------------------------------------

def _pattern(pattern: str) -> re.Pattern[str]:
    """An IAM wildcard pattern (``*``, ``?``; case-sensitive) as a regular expression."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c)
                              for c in pattern), re.DOTALL)


_OPERATORS = {
    "StringEquals": lambda want, have: want == have,
    "StringLike": lambda want, have: _pattern(want).fullmatch(have) is not None,
    "ArnEquals": lambda want, have: want == have,
    "ArnLike": lambda want, have: _pattern(want).fullmatch(have) is not None,
}


def _operator(name: str) -> tuple[Any, bool, bool]:
    """(comparison, negated, if-exists) of a condition operator; KeyError if unknown."""
    base = name.split(":", 1)[-1]  # ForAnyValue:/ForAllValues: — one value at a time here
    if_exists = base.endswith("IfExists")
    base = base.removesuffix("IfExists")
    negated = "Not" in base
    return _OPERATORS[base.replace("Not", "")], negated, if_exists


def _holds(operator: str, key: str, wanted: list[str], found: Found) -> bool:
    compare, negated, if_exists = _operator(operator)
    have = found.context.get(key)
    if have is None:
        return if_exists or negated
    matched = any(compare(w, h) for w in wanted for h in have)
    return not matched if negated else matched


@dataclass(frozen=True)
class Statement:
    role: str
    policy: str
    index: int
    body: Mapping[str, Any]

    def __str__(self) -> str:
        sid = self.body.get("Sid") or f"statement {self.index}"
        actions = ", ".join(as_list(self.body.get("Action", [])))
        return f"{self.role} ({self.policy}) {sid} [{actions}]"


def _problems(statement: Statement, contents: list[Found]) -> list[str]:
    body = statement.body
    if "Resource" not in body:
        return [f"{statement}: NotResource is not evaluated here"]
    covered: list[Found] = []
    problems = []
    for resource in as_list(body["Resource"]):
        matching = [f for f in contents if _pattern(resource).fullmatch(f.arn)]
        if not matching:
            problems.append(f"{statement}: Resource {resource} matches nothing the stack "
                            "has or makes")
        covered += matching
    conditions = [(operator, key, [str(v) for v in as_list(values)])
                  for operator, tests in body.get("Condition", {}).items()
                  for key, values in tests.items()]
    unknown = [f"{statement}: condition operator {operator} is not evaluated here"
               for operator, _, _ in conditions if not _known(operator)]
    if unknown or not covered or not conditions:
        return problems + unknown
    if any(all(_holds(*c, found) for c in conditions) for found in covered):
        return problems
    alone = len(problems)
    for operator, key, wanted in conditions:
        if not any(_holds(operator, key, wanted, found) for found in covered):
            values = sorted({v for found in covered for v in found.context.get(key, ())})
            shown = ", ".join(values[:4]) + (f" (and {len(values) - 4} more)"
                                             if len(values) > 4 else "")
            problems.append(
                f"{statement}: Condition {operator} {key} {' or '.join(wanted)} holds for "
                f"none of the {len(covered)} resources it covers; "
                + (f"they carry {shown}" if values else "none carries the key"))
    if len(problems) == alone:
        problems.append(f"{statement}: its conditions hold together for none of the "
                        f"{len(covered)} resources it covers")
    return problems


def _known(operator: str) -> bool:
    try:
        _operator(operator)
    except KeyError:
        return False
    return True


def _document(document: Any) -> dict[str, Any]:
    if not isinstance(document, str):
        return dict(document)
    try:
        return dict(json.loads(document))
    except json.JSONDecodeError:
        # moto 5.2.5 stores a stack role's inline policy as the repr of its dict.
        return dict(ast.literal_eval(document))


def role_statements(emulator: Emulator, stacks: Mapping[str, Iterable[Stack]]
                    ) -> list[Statement]:
    """Every Allow statement of every role the stacks (by region) created, as deployed
    (inline and customer-managed policies; AWS managed policies are AWS's)."""
    iam = emulator.client("iam")
    found = []
    for region, stack in ((r, s) for r, listed in stacks.items() for s in listed):
        cfn = emulator.client("cloudformation", region)
        summaries = cfn.list_stack_resources(StackName=stack.name)["StackResourceSummaries"]
        for role in sorted(s["PhysicalResourceId"] for s in summaries
                           if s["ResourceType"] == "AWS::IAM::Role"):
            documents = [(name, iam.get_role_policy(RoleName=role, PolicyName=name)[
                "PolicyDocument"]) for name in iam.list_role_policies(RoleName=role)[
                "PolicyNames"]]
            for attached in iam.list_attached_role_policies(RoleName=role)[
                    "AttachedPolicies"]:
                if attached["PolicyArn"].startswith("arn:aws:iam::aws:"):
                    continue
                policy = iam.get_policy(PolicyArn=attached["PolicyArn"])["Policy"]
                documents.append((attached["PolicyName"], iam.get_policy_version(
                    PolicyArn=policy["Arn"], VersionId=policy["DefaultVersionId"])[
                    "PolicyVersion"]["Document"]))
            for name, document in documents:
                document = _document(document)
                found += [Statement(role, name, i, s)
                          for i, s in enumerate(as_list(document["Statement"]))
                          if s.get("Effect") == "Allow"]
    return found


def dead_statements(emulator: Emulator, deployment: Deployment,
                    extra: Iterable[Statement] = ()) -> list[str]:
    """Why each Allow statement that can match nothing the account has or makes cannot
    (``extra`` statements are held against the same account)."""
    contents = account_contents(emulator, deployment)
    stacks: dict[str, list[Stack]] = {emulator.region: [deployment.stack]}
    for region, regional in deployment.regional.items():
        stacks.setdefault(region, []).append(regional)
    return [problem for statement in [*role_statements(emulator, stacks), *extra]
            for problem in _problems(statement, contents)]
