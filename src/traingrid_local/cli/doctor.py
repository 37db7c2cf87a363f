"""``traingrid doctor``: what the AWS account lacks for TrainGrid, one line per problem with
what to do. Exit code 1 with any blocker (warnings do not fail), 2 for invalid options, 3
when the account or the stack cannot be read."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from traingrid.vocabulary.campaign_fanout import (
    DEFAULT_CAMPAIGN_INSTANCE_COUNT,
    DEFAULT_CAMPAIGN_INSTANCE_TYPE,
)
from traingrid.vocabulary.catalog import DEFAULT_NODES
from traingrid_local.cli.runs import INVALID, RUN_FAILED, UNREACHABLE, fail
from traingrid_local.cli.terminal import plain, stdout

if TYPE_CHECKING:
    from traingrid_local.doctor import Report

commands = typer.Typer()


def _print(report: Report) -> None:
    from traingrid_local.doctor.findings import BLOCKER, OK, WARNING

    marks = {OK: ("ok", "green"), WARNING: ("warning", "yellow"),
             BLOCKER: ("BLOCKER", "bold red")}
    where = f"stack {report.stack}" if report.stack else "before the first deploy"
    stdout.print(plain(f"traingrid doctor: {where} in {report.region}, as {report.identity} "
                       f"(read from {', '.join(report.sources)})"), highlight=False,
                 markup=False, soft_wrap=True)
    width = max(len(f.check) for f in report.findings) if report.findings else 0
    for finding in report.findings:
        mark, style = marks[finding.status]
        line = Text(f"{mark:8}", style=style)
        line.append(plain(f" {finding.check:{width}}  {finding.message}"))  # AWS's names
        stdout.print(line, highlight=False, soft_wrap=True)
    blockers, warnings = len(report.blockers), len(report.warnings)
    if blockers:
        before = "its next run" if report.stack else "deploying (docs/deploy.md: First deploy)"
        stdout.print(f"{blockers} blocker(s), {warnings} warning(s): fix the blockers before "
                     f"{before}", highlight=False)
    else:
        stdout.print(f"No blockers ({warnings} warning(s)).", highlight=False)


@commands.command()
def doctor(
    region: Annotated[str | None, typer.Option(
        envvar="AWS_REGION", help="The stack's (home) region.")] = None,
    stack: Annotated[str | None, typer.Option(
        help="A deployed stack: check for its own template and parameters. Without it, for "
             "template.yaml's defaults and samconfig.toml's parameter_overrides.")] = None,
    nodes: Annotated[int | None, typer.Option(
        help=f"Nodes of a run (default {DEFAULT_NODES}, a run's default).")] = None,
    instance_types: Annotated[str | None, typer.Option(
        help="TrainingInstanceTypes, comma-separated (default: the stack's).")] = None,
    campaign_regions: Annotated[str | None, typer.Option(
        help="Regions where campaigns train, comma-separated (default: --region).")] = None,
    campaign_instance_type: Annotated[str | None, typer.Option(
        help=f"A campaign's instance type (default {DEFAULT_CAMPAIGN_INSTANCE_TYPE}).")] = None,
    campaign_instance_count: Annotated[int | None, typer.Option(
        help=f"A campaign job's instances (default {DEFAULT_CAMPAIGN_INSTANCE_COUNT}).")
    ] = None,
    parameter: Annotated[list[str] | None, typer.Option(
        help="A stack parameter as Key=Value, over the others (repeatable), e.g. "
             "VpcId=vpc-0abc.")] = None,
    template: Annotated[Path | None, typer.Option(
        help="The template before deploy (default: the project's template.yaml).")] = None,
    samconfig: Annotated[Path | None, typer.Option(
        help="samconfig.toml (default: next to the template).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Check what the AWS account lacks for the stack, and what to do about each problem.

    It checks quotas, FSx's service-linked role, the images, the network and Lambda
    concurrency. Exit code 1 with any blocker (warnings do not fail), 2 for invalid options, 3
    when the account or the stack cannot be read.
    """
    # AWS's SDK: this command's alone.
    from traingrid_local.doctor import CannotRead, Options, diagnose, to_json
    from traingrid_local.doctor.needs import ConfigurationError

    options = Options(region=region or "", stack=stack, template=template, samconfig=samconfig,
                      parameters=tuple(parameter or ()), instance_types=instance_types,
                      nodes=nodes, campaign_regions=campaign_regions,
                      campaign_instance_type=campaign_instance_type,
                      campaign_instance_count=campaign_instance_count)
    problems = ([] if region else ["--region (or AWS_REGION) is needed"]) + options.problems()
    if problems:
        raise fail("doctor", "; ".join(problems), INVALID)
    try:
        report = diagnose(options)
    except CannotRead as error:
        raise fail("doctor", str(error), UNREACHABLE) from None
    except ConfigurationError as error:
        raise fail("doctor", str(error), INVALID) from None
    if as_json:
        print(to_json(report))
    else:
        _print(report)
    if report.blockers:
        raise typer.Exit(RUN_FAILED)
