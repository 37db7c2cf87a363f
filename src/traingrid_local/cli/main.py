"""TrainGrid from a terminal: both pipelines on the embedded emulator, or a deployed stack's runs.

Run `traingrid demo` to see both pipelines end to end on this machine, `traingrid serve` to use
the API and the web console locally, and `traingrid COMMAND --help` for what each command takes.
"""

from __future__ import annotations

import atexit
import gc
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.live import Live
from rich.text import Text
from typer.core import TyperGroup, TyperOption

from traingrid.vocabulary.campaign_fanout import RegionJobStatus
from traingrid_local.cli import (
    costs,
    doctor,
    faults,
    local,
    package,
    plan,
    run_actions,
    runs,
    watch,
)
from traingrid_local.cli.terminal import (
    DataTable,
    cell,
    error_line,
    plain,
    problems_lines,
    stderr,
    stdout,
    step_of,
)
from traingrid_local.demo.scenarios import DEFAULT_KEY, SCENARIOS
from traingrid_local.emulator.clock import DEFAULT_SPEED
from traingrid_local.emulator.fault_injection import FAULTS


def _hide_flag_types(params: Iterable[object]) -> None:
    """A flag takes no value, so its help shows no type (Typer's would be ``<bool>``)."""
    for param in params:
        if isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""


class _Commands(TyperGroup):
    """The commands, whose help (theirs and the group's) shows no type beside a flag."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            _hide_flag_types(command.get_params(ctx))  # with --help, made for this context
        return command

    def format_help(self, ctx: Any, formatter: Any) -> None:
        _hide_flag_types(self.get_params(ctx))
        super().format_help(ctx, formatter)


# Markdown: summaries wrap as paragraphs and `code` renders, in help and command lists alike.
app = typer.Typer(help=__doc__, cls=_Commands, rich_markup_mode="markdown", no_args_is_help=True,
                  add_completion=False)
app.add_typer(local.commands)
app.add_typer(runs.commands)
app.add_typer(run_actions.commands)
app.add_typer(faults.commands)
app.add_typer(doctor.commands)
app.add_typer(plan.commands)
app.add_typer(costs.commands)
app.add_typer(watch.commands)
app.add_typer(package.commands)


def _duration(seconds: float) -> str:
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def _progress_table(executions: list[dict[str, Any]]) -> DataTable:
    table = DataTable(title="TrainingRun executions (simulated time)", expand=False)
    for column in ("execution", "status", "state", "elapsed"):
        table.add_column(column)
    for e in executions:
        table.add_row(e["name"], e["status"], e["state"] or "-", _duration(e["simulated_seconds"]))
    return table


class ProgressLines:
    """Without a terminal, one line each time a run moves on to a new step."""

    def __init__(self) -> None:
        self.last: dict[str, str | None] = {}

    def __call__(self, executions: list[dict[str, Any]]) -> None:
        for e in executions:
            step = step_of(e["state"] or "Starting") if e["status"] == "RUNNING" \
                else e["status"]
            if self.last.get(e["name"]) != step:
                self.last[e["name"]] = step
                stderr.print(cell(f"[{_duration(e['simulated_seconds']):>7}] {e['name']}: "
                                  f"{step}"))


def _print_jobs(execution: dict[str, Any]) -> None:
    table = DataTable(title=f"{execution['name']}: regional jobs", title_justify="left")
    for column in ("data in", "trained in", "status", "why"):
        table.add_column(column, overflow="fold")
    for job in execution["jobs"]:
        moves = [a for a in job["attempts"] or [] if a["region"] != job["region"]]
        why = job["failure_cause"] or "; ".join(
            [job["placement_reason"] or ""] + [f"moved from {m['region']}: {m['reason']}"
                                               for m in moves])
        style = "green" if job["status"] == RegionJobStatus.COMPLETED else "red"
        table.add_row(job["requested_region"], job["region"], cell(job["status"], style), why)
    stdout.print(table)


def _print_report(result: dict[str, Any]) -> None:
    compute = "Batch on EKS" if result.get("backend") == "eks" else "Batch on ECS"
    stdout.rule(f"TrainGrid demo · {' + '.join(result['pipelines'])} · scenario "
                f"{result['scenario']} · {compute} · clock ×{result['clock_speed']:g}")
    table = DataTable(show_lines=False)
    for column in ("execution", "state machine", "status", "simulated", "transitions",
                   "history events", "recorded", "cost"):
        table.add_column(column)
    for e in result["executions"]:
        style = "green" if e["status"] == "SUCCEEDED" else "red"
        table.add_row(e["name"], e["state_machine"], cell(e["status"], style),
                      _duration(e["simulated_seconds"]), str(e["state_transitions"]),
                      str(e["history_events"]), _recorded(e), _cost(e))
    stdout.print(table)
    for e in result["executions"]:
        if e["error"]:
            stdout.print(error_line(e))
        if e.get("jobs"):
            _print_jobs(e)
    for rejected in result["rejected_manifests"]:
        stdout.print(Text.assemble(("manifest rejected", "bold red"),
                                   plain(f" {rejected['key']}:")))
        for line in problems_lines(rejected["problems"] or []):
            stdout.print(line, highlight=False, markup=False)
    _print_artifacts_and_resources(result)
    expected = ", ".join(f"{machine} {status}" for machine, status in result["expected"].items())
    verdict = "[green]as expected[/]" if result["ok"] else "[red]NOT as expected[/]"
    stdout.print(f"Expected {expected}: {verdict} ({result['wall_seconds']:.1f} s wall)")


def _cost(execution: dict[str, Any]) -> str:
    cost = execution.get("cost")
    if not cost:
        return "-"
    total, recorded = cost["actual"]["total"], cost.get("recorded_total")
    text = f"${total:,.2f}"
    if recorded is not None and round(recorded, 2) != round(total, 2):
        text += f" (recorded ${recorded:,.2f})"
    good = (cost.get("goodput") or {}).get("goodput")
    return text + (f" · goodput {good:.1%}" if good is not None else "")


def _recorded(execution: dict[str, Any]) -> str | Text:
    """What the campaign database holds of the run: its status, and who recorded it."""
    if execution["state_machine"] == "CampaignFanout":
        return "by region" if execution.get("jobs") else "-"
    record = execution.get("record")
    return f"{record['status']} (by the {record['recorded_by']})" if record else Text(
        "no", style="red")


def _print_artifacts_and_resources(result: dict[str, Any]) -> None:
    events = result.get("run_status_events", [])
    stdout.print(f"[bold]Run-status events[/] on EventBridge ({len(events)}):")
    for event in events:
        where = f" {event['region']}" if event.get("region") else ""
        stdout.print(cell(f"  {event['time']} {event['kind']} {event['name']}{where} "
                          f"{event['status']}"), soft_wrap=True)
    stdout.print(f"[bold]Artifacts[/] ({len(result['artifacts'])}):")
    for artifact in result["artifacts"]:
        # Unwrapped, so each URI can be copied whole.
        size = f"  ({artifact['size']} bytes)" if "size" in artifact else ""
        stdout.print(cell(f"  {artifact['uri']}{size}"), soft_wrap=True)
    for kept in result["retained_resources"]:
        stdout.print(Text.assemble(("Kept", "yellow"), plain(
            f" {kept['type']} {kept['id']} until {kept['expires_at']} (run {kept['run']}): its "
            "archive failed, its data is safe there.")))
    for action in result["janitor"]["actions"]:
        stdout.print(Text.assemble(("Janitor", "yellow"), plain(
            f" {action['action']} {action['type']} {action['id']}: {action['reason']}")))
    if result["leaked_resources"]:
        stdout.print(Text.assemble(("Leaked resources", "bold red"),
                                   plain(f": {result['leaked_resources']}")))
    else:
        stdout.print("Leaked resources: none (checked after the janitor ran)")


def _failure_reason(result: dict[str, Any]) -> str:
    if result["rejected_manifests"]:
        return "the manifest was rejected; nothing started"
    if not result["executions"]:
        return "no run started"
    if result["leaked_resources"]:
        return f"{len(result['leaked_resources'])} resource(s) leaked"
    wrong = [f"{e['name']} ended {e['status']}, expected {e['expected_status']}"
             for e in result["executions"] if e["status"] != e["expected_status"]]
    return "; ".join(wrong) or "a pipeline started no run"


@app.command()
def demo(
    pipeline: Annotated[str, typer.Option(
        help="all, training (TrainingRun) or campaign (CampaignFanout).")] = "all",
    scenario: Annotated[str, typer.Option(
        help="happy, or a fault: " + ", ".join(
            f"{k} ({v.description or FAULTS.get(k, '')})"
            for k, v in SCENARIOS.items() if k != "happy"),
    )] = "happy",
    fault_region: Annotated[str, typer.Option(
        help="The region where SageMaker faults act.")] = "us-west-2",
    manifest: Annotated[Path | None, typer.Option(
        help="Your own manifest (JSON request fields) to upload instead of {}.")] = None,
    key: Annotated[str, typer.Option(help="S3 key to upload the manifest under.")] = DEFAULT_KEY,
    uploads: Annotated[int, typer.Option(help="Upload the manifest N times.")] = 1,
    speed: Annotated[float, typer.Option(
        help="Simulated seconds per real second.")] = DEFAULT_SPEED,
    training_hours: Annotated[float, typer.Option(
        help="Simulated length of the training job.")] = 6.0,
    backend: Annotated[str, typer.Option(
        help="ecs, or eks: the TrainingRun on an (emulated) EKS cluster of yours, the stack "
             "deployed with EksClusterName (docs/eks.md).")] = "ecs",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Run both pipelines end to end on the embedded emulator and report what happened.

    It deploys the stack into an emulated account, starts a TrainingRun and a CampaignFanout
    as users do (`--pipeline` picks one), follows them, lets the janitor run, and reports how
    each run ended, what it cost and recorded, and any resource left behind. Exit code 0 when
    every run ends as its scenario expects and nothing leaked.
    """
    from traingrid_local.demo import runner as demo_runner  # the emulator: this command's alone

    options = demo_runner.DemoOptions(
        pipeline=pipeline, scenario=scenario, manifest=manifest, key=key, uploads=uploads,
        fault_region=fault_region, speed=speed, training_hours=training_hours, backend=backend,
    )
    try:
        options.validate()
    except ValueError as error:
        stderr.print(f"traingrid demo: {plain(error)}", markup=False,
                     soft_wrap=True, highlight=False)
        raise typer.Exit(2) from None
    # Collecting the emulated account's objects as the process ends takes seconds; the
    # process takes their memory with it anyway.
    atexit.register(gc.freeze)
    if as_json:
        result = demo_runner.run(options)
        print(json.dumps(result, indent=2, default=str))
    elif stderr.is_terminal:
        stderr.print(f"Deploying template.yaml into the emulated account; scenario {scenario}…")
        with Live(console=stderr, transient=True, refresh_per_second=8) as live:
            result = demo_runner.run(options, lambda runs: live.update(_progress_table(runs)))
        _print_report(result)
    else:
        stderr.print(f"Deploying template.yaml into the emulated account; scenario {scenario}…")
        result = demo_runner.run(options, ProgressLines())
        _print_report(result)
    if not result["ok"]:
        stderr.print(f"traingrid demo: {_failure_reason(result)}", markup=False,
                     soft_wrap=True, highlight=False)
        raise typer.Exit(1)


@app.command()
def scenarios() -> None:
    """List the demo's scenarios and the end state each pipeline must reach."""
    for name, scenario in SCENARIOS.items():
        what = scenario.description or (FAULTS.get(name, "no fault") if scenario.faults
                                        else "no fault")
        ends = ", ".join(f"{p} {s}" for p, s in scenario.expected.items())
        stdout.print(f"{name:21} {what}\n{'':21} → {ends}")
