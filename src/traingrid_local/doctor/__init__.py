"""``traingrid doctor``: what an AWS account lacks for a TrainGrid stack, before it deploys
or when its runs do not start, and what to do about each (as AWS ParallelCluster validates a
cluster's configuration before it creates anything).

:mod:`.needs` reads what the stack needs; :mod:`.checks` compares it with the account.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from traingrid.campaigns.sagemaker_job import GPUS_PER_HOST
from traingrid.vocabulary.campaign_fanout import (
    DEFAULT_CAMPAIGN_INSTANCE_COUNT,
    DEFAULT_CAMPAIGN_INSTANCE_TYPE,
)
from traingrid.vocabulary.catalog import DEFAULT_NODES, INSTANCE_TYPES
from traingrid_local.doctor.checks import run_checks
from traingrid_local.doctor.eks import eks_findings
from traingrid_local.doctor.findings import BLOCKER, WARNING, Aws, AwsError, Finding
from traingrid_local.doctor.needs import (
    ConfigurationError,
    Needs,
    parse_pairs,
    read_template,
    samconfig_overrides,
    template_defaults,
)
from traingrid_local.templates import TEMPLATE, TemplateError, flatten, parse_template

REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d$")


class CannotRead(Exception):
    """The account or the stack cannot be read at all (no credentials, no such stack)."""


@dataclass
class Options:
    region: str
    stack: str | None = None
    template: Path | None = None
    samconfig: Path | None = None
    parameters: tuple[str, ...] = ()  # Key=Value
    instance_types: str | None = None
    nodes: int | None = None
    campaign_regions: str | None = None
    campaign_instance_type: str | None = None
    campaign_instance_count: int | None = None

    def problems(self) -> list[str]:
        problems = [f"{flag} {region!r} is not a region code (e.g. us-east-1)"
                    for flag, given in (("--region", self.region),
                                        ("--campaign-regions", self.campaign_regions or ""))
                    for region in given.split(",")
                    if region.strip() and not REGION.match(region.strip())]
        if self.nodes is not None and not 1 <= self.nodes <= 500:
            problems.append(f"--nodes {self.nodes} must be 1-500 (as a run's nodes)")
        unknown = [t for t in (self.instance_types or "").split(",")
                   if t.strip() and t.strip() not in INSTANCE_TYPES]
        if unknown:
            problems.append(f"--instance-types: {', '.join(unknown)} not in the catalog "
                            f"({', '.join(INSTANCE_TYPES)})")
        if self.campaign_instance_type and self.campaign_instance_type not in GPUS_PER_HOST:
            problems.append(f"--campaign-instance-type {self.campaign_instance_type}: one of "
                            f"{', '.join(GPUS_PER_HOST)}")
        if self.campaign_instance_count is not None and self.campaign_instance_count < 1:
            problems.append("--campaign-instance-count must be at least 1")
        if self.template is not None and not self.template.exists():
            problems.append(f"--template {self.template} does not exist")
        try:
            parse_pairs(list(self.parameters), "--parameter")
        except ConfigurationError as error:
            problems.append(str(error))
        return problems


@dataclass
class Report:
    region: str
    stack: str | None
    identity: str
    sources: list[str]
    findings: list[Finding]

    @property
    def blockers(self) -> list[Finding]:
        return [f for f in self.findings if f.status == BLOCKER]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.status == WARNING]

    def as_dict(self) -> dict[str, Any]:
        return {"region": self.region, "stack": self.stack, "identity": self.identity,
                "read_from": self.sources, "findings": [f.as_dict() for f in self.findings],
                "blockers": len(self.blockers), "warnings": len(self.warnings),
                "ok": not self.blockers}


def _deployed(aws: Aws, stack: str) -> tuple[dict[str, Any], dict[str, tuple[str, str]]]:
    """A deployed stack's template as written, read through its nested stacks' (as
    :func:`traingrid_local.templates.load_template` reads the files), and its resources
    (logical id → type, physical id) over them all."""
    body = aws.call("cloudformation", "get_template", StackName=stack,
                    TemplateStage="Original")["TemplateBody"]
    template = body if isinstance(body, dict) else parse_template(body)
    resources: dict[str, tuple[str, str]] = {}
    nested: dict[str, dict[str, Any]] = {}
    for listed in aws.pages("cloudformation", "list_stack_resources",
                            "StackResourceSummaries", StackName=stack):
        logical_id, kind = listed.get("LogicalResourceId"), listed["ResourceType"]
        if not logical_id:
            continue
        resources[logical_id] = (kind, listed["PhysicalResourceId"])
        if kind == "AWS::CloudFormation::Stack":
            nested[logical_id], inner = _deployed(aws, listed["PhysicalResourceId"])
            resources |= inner
    return flatten(template, list(nested), nested.__getitem__), resources


def read_needs(options: Options, aws: Aws) -> Needs:
    template_path = options.template or TEMPLATE
    resources: dict[str, tuple[str, str]] = {}
    if options.stack is None:
        template = read_template(template_path)
        samconfig = options.samconfig or template_path.parent / "samconfig.toml"
        overrides = samconfig_overrides(samconfig)
        parameters = template_defaults(template) | overrides
        sources = [str(template_path)] + ([f"{samconfig} parameter_overrides"]
                                          if overrides else [])
    else:
        try:
            stack = aws.call("cloudformation", "describe_stacks",
                             StackName=options.stack)["Stacks"][0]
            template, resources = _deployed(aws, options.stack)
        except AwsError as error:
            raise CannotRead(f"cannot read stack {options.stack} in {options.region}: "
                             f"{error.code}: {error.message}") from None
        except TemplateError as error:
            raise CannotRead(f"cannot read stack {options.stack}'s template: {error}") from None
        parameters = template_defaults(template) | {
            p["ParameterKey"]: p.get("ResolvedValue", p.get("ParameterValue", ""))
            for p in stack.get("Parameters", [])}
        sources = [f"stack {options.stack}"]
    flags = parse_pairs(list(options.parameters), "--parameter")
    if options.instance_types:
        flags["TrainingInstanceTypes"] = options.instance_types
    if flags:
        sources.append("flags")
    return Needs(
        region=options.region, stack=options.stack, template=template,
        parameters=parameters | flags,
        nodes=options.nodes or DEFAULT_NODES,
        campaign_regions=[r.strip() for r in (options.campaign_regions or options.region)
                          .split(",") if r.strip()],
        campaign_instance_type=options.campaign_instance_type or DEFAULT_CAMPAIGN_INSTANCE_TYPE,
        campaign_instance_count=(options.campaign_instance_count
                                 or DEFAULT_CAMPAIGN_INSTANCE_COUNT),
        resources=resources, sources=sources)


def diagnose(options: Options) -> Report:
    """Read what the stack needs and check the account; CannotRead if neither can be read,
    ConfigurationError for a configuration that does not parse."""
    aws = Aws(options.region)
    try:
        identity = aws.call("sts", "get_caller_identity")["Arn"]
    except AwsError as error:
        raise CannotRead(f"cannot read the AWS account in {options.region} ({error.code}: "
                         f"{error.message}): aws configure, or AWS_PROFILE") from None
    needs = read_needs(options, aws)
    return Report(options.region, options.stack, identity, needs.sources,
                  run_checks(needs, aws) + eks_findings(needs, aws))


def to_json(report: Report) -> str:
    return json.dumps(report.as_dict(), indent=2)
