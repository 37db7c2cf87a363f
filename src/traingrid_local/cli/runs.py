"""``traingrid submit | status | runs | logs | campaigns``: clients of the TrainGrid API.

By default they talk to the server ``traingrid serve`` runs (``--endpoint``, or
``TRAINGRID_ENDPOINT``); with ``--stack NAME --region R``, to a deployed stack's API (its
``ApiUrl`` output), signing each request with SigV4 and the default AWS credentials. Exit
code 0 when the command did what was asked (and a run it names succeeded or is running),
otherwise non-zero with a one-line reason on stderr.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.live import Live

from traingrid_local.api.client import (
    DEFAULT_ENDPOINT,
    ENDPOINT_ENV,
    ApiClient,
    ApiError,
    Unreachable,
    Unsendable,
    segment,
)
from traingrid_local.cli import terminal
from traingrid_local.cli.terminal import cell, plain, stderr, stdout

commands = typer.Typer()
TERMINAL = ("SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED")
# Exit codes: the run failed (or the API refused the request), the request was invalid,
# the API could not be reached.
RUN_FAILED, INVALID, UNREACHABLE = 1, 2, 3
# What to do when nothing answers at the endpoint.
UNREACHABLE_HINT = (f"start `traingrid serve`, or give the API's URL with --endpoint (or "
                    f"{ENDPOINT_ENV}), or pass --stack NAME --region R")

Endpoint = Annotated[str, typer.Option(
    envvar=ENDPOINT_ENV, help="The API (default: the one `traingrid serve` runs).")]
Stack = Annotated[str | None, typer.Option(
    help="A deployed stack: use its API (stack output ApiUrl), with SigV4.")]
Region = Annotated[str | None, typer.Option(
    envvar="AWS_REGION", help="The deployed stack's region.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print the API's JSON.")]


def fail(command: str, reason: object, code: int = RUN_FAILED) -> typer.Exit:
    # Plain text on one line: a reason quotes what the user typed or the API answered, which
    # may hold newlines, escapes or look like markup ("[/]").
    stderr.print(f"traingrid {command}: {plain(reason)}", highlight=False, soft_wrap=True,
                 markup=False)
    return typer.Exit(code)


def run_path(command: str, name: str, tail: str = "") -> str:
    if not name:
        raise fail(command, "name the run (traingrid runs lists them)", INVALID)
    if "/" in name or name in (".", ".."):  # never a run's name; a path once decoded
        raise fail(command, f"{name!r} is not a run name (traingrid runs lists them)", INVALID)
    return f"/runs/{segment(name)}{tail}"


def connect(command: str, endpoint: str, stack: str | None, region: str | None) -> ApiClient:
    if stack is None:
        return ApiClient(endpoint)
    if not region:
        raise fail(command, "--stack needs --region (or AWS_REGION)", INVALID)
    try:
        return ApiClient.for_stack(stack, region)
    except Unreachable as error:
        raise fail(command, str(error), UNREACHABLE) from None


def refused(command: str, problems: list[dict[str, str]], count: int) -> typer.Exit:
    """An invalid request: each problem on a line of its own, then their count (the API's
    message lists them again)."""
    for line in terminal.problems_lines(problems):
        stderr.print(line, highlight=False, soft_wrap=True, markup=False)
    listed = "" if count == len(problems) else f", the first {len(problems)} listed"
    return fail(command, f"invalid request: {count} problem{'' if count == 1 else 's'}"
                         f"{listed} above", INVALID)


def call(command: str, client: ApiClient, method: str, path: str, body: Any = None,
         query: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
         missing: str | None = None) -> Any:
    """The answer's body; any failure ends the command with its one-line reason (``missing``
    for a 404, when the caller knows better than the API what to do)."""
    try:
        return client.call(method, path, body, query, headers).body
    except Unreachable as error:
        raise fail(command, f"{error}: {UNREACHABLE_HINT}", UNREACHABLE) from None
    except Unsendable as error:
        raise fail(command, str(error), INVALID) from None
    except ApiError as error:
        if error.problems:  # a 400, or a 403 for a dataset outside the data bucket
            count = error.body.get("problem_count")
            raise refused(command, error.problems, count if isinstance(count, int)
                          else len(error.problems)) from None
        if error.status == 404 and missing:
            raise fail(command, missing) from None
        raise fail(command, error.message, INVALID if error.status == 400 else RUN_FAILED
                   ) from None


def get_run(command: str, client: ApiClient, name: str, tail: str = "") -> Any:
    """``GET /runs/{name}{tail}``; an unknown name says how to list the runs."""
    return call(command, client, "GET", run_path(command, name, tail),
                missing=f"no run is named {name!r}: traingrid runs lists recent runs")


def ended(command: str, run: dict[str, Any]) -> None:
    """Exit 0 for a run that succeeded or is running; otherwise say why it did not."""
    if run["status"] in ("SUCCEEDED", "RUNNING"):
        return
    reason = f"{run['name']} {run['status']}"
    if run.get("error"):
        reason += f": {run['error']}: {run.get('cause') or ''}".rstrip(": ")
    raise fail(command, reason)


def follow(command: str, client: ApiClient, name: str, timeout: float,
           interval: float = 1.0) -> dict[str, Any]:
    """Poll the run until it ends, showing where it is."""
    deadline = time.monotonic() + timeout
    if stderr.is_terminal:
        with Live(console=stderr, transient=True, refresh_per_second=4) as live:
            while True:
                run = get_run(command, client, name)
                live.update(terminal.progress_line(run))
                if run["status"] in TERMINAL or time.monotonic() > deadline:
                    return run
                time.sleep(interval)
    show = terminal.Changes(lambda line: stderr.print(line, highlight=False))
    while True:
        run = get_run(command, client, name)
        show(run)
        if run["status"] in TERMINAL or time.monotonic() > deadline:
            return run
        time.sleep(interval)


def request_body(file: Path | None, fields: dict[str, Any], command: str = "submit"
                 ) -> dict[str, Any]:
    """The file's JSON object with the flags given on top."""
    body: dict[str, Any] = {}
    if file is not None:
        try:
            body = json.loads(file.read_text())
        except (OSError, ValueError, RecursionError) as error:  # nested too deep: recursion
            raise fail(command, f"cannot read {file}: {error}", INVALID) from None
        if not isinstance(body, dict):
            raise fail(command, f"{file} must hold a JSON object", INVALID)
    return body | {k: v for k, v in fields.items() if v is not None}


@commands.command()
def submit(
    file: Annotated[Path | None, typer.Argument(
        help="A JSON request: a TrainingRun's, or with --campaign a fan-out's (their JSON "
             "Schemas are in schema/).")] = None,
    dataset: Annotated[str | None, typer.Option(help="S3 URI of the dataset prefix.")] = None,
    name: Annotated[str | None, typer.Option(help="Run name (derived when absent).")] = None,
    nodes: Annotated[int | None, typer.Option(help="Nodes of the multi-node job.")] = None,
    instance_type: Annotated[str | None, typer.Option(help="Instance type.")] = None,
    epochs: Annotated[int | None, typer.Option(help="Epochs to train.")] = None,
    batch_size: Annotated[int | None, typer.Option(help="Images per GPU in a step.")] = None,
    campaign: Annotated[str | None, typer.Option(
        help="Start this campaign's fan-out instead of a TrainingRun.")] = None,
    datasets: Annotated[str | None, typer.Option(
        help="With --campaign: new (since its last success) or all.")] = None,
    instance_count: Annotated[int | None, typer.Option(help="With --campaign.")] = None,
    idempotency_key: Annotated[str | None, typer.Option(
        help="Send it again with the same key: the same run, never a second one.")] = None,
    wait: Annotated[bool, typer.Option(help="Follow the run until it ends.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds --wait waits at most.")] = 3600,
    endpoint: Endpoint = DEFAULT_ENDPOINT, stack: Stack = None, region: Region = None,
    as_json: AsJson = False,
) -> None:
    """Submit a TrainingRun, or with `--campaign` a fan-out, from a file and flags.

    The flags given go over the file's fields. Exit code 0 when the run was submitted (and,
    with `--wait`, succeeded), 1 when it failed, 2 for an invalid request (every problem listed),
    3 when the API cannot be reached.
    """
    client = connect("submit", endpoint, stack, region)
    if campaign is None:
        body = request_body(file, {"dataset": dataset, "name": name, "nodes": nodes,
                                   "instance_type": instance_type, "epochs": epochs,
                                   "batch_size": batch_size})
        path = "/runs"
    else:
        body = request_body(file, {"name": name, "datasets": datasets,
                                   "instance_type": instance_type,
                                   "instance_count": instance_count})
        path = f"/campaigns/{segment(campaign)}/runs"
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
    submitted = call("submit", client, "POST", path, body, headers=headers)
    if not wait:
        if as_json:
            print(json.dumps(submitted, indent=2))
        else:
            verb = "started" if submitted["started"] else "exists"
            stdout.print(cell(f"{submitted['name']} {verb} ({submitted['status']})"))
            stdout.print(cell(submitted["console_url"]), soft_wrap=True)
        return
    run = follow("submit", client, submitted["name"], timeout)
    show_run(run, as_json)
    if run["status"] == "RUNNING":
        raise fail("submit", f"{run['name']} still RUNNING after {timeout:g} s")
    ended("submit", run)


@commands.command()
def status(
    name: Annotated[str, typer.Argument(help="The run's name.")],
    every_visit: Annotated[bool, typer.Option(
        "--every-visit", help="One row per state visit (poll loops unfolded).")] = False,
    wait: Annotated[bool, typer.Option(help="Follow the run until it ends.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds --wait waits at most.")] = 3600,
    endpoint: Endpoint = DEFAULT_ENDPOINT, stack: Stack = None, region: Region = None,
    as_json: AsJson = False,
) -> None:
    """Show a run's timeline: each state with its start, duration and outcome.

    Poll loops are folded into one row (`--every-visit` unfolds them); the run's console link,
    error and cause, artifacts and cost so far follow.
    """
    client = connect("status", endpoint, stack, region)
    run = follow("status", client, name, timeout) if wait else get_run("status", client, name)
    show_run(run, as_json, every_visit)
    ended("status", run)


def show_run(run: dict[str, Any], as_json: bool, every_visit: bool = False) -> None:
    """The run's timeline, console link, error, artifacts and cost (or its JSON)."""
    if as_json:
        print(json.dumps(run, indent=2))
        return
    stdout.print(terminal.timeline(run, every_visit))
    stdout.print(cell(f"console: {run['console_url']}"), soft_wrap=True)
    if run.get("rerun_of"):
        stdout.print(cell(f"re-run of: {run['rerun_of']}"), soft_wrap=True)
    if run.get("error"):
        stdout.print(terminal.error_line(run), soft_wrap=True)
    for artifact in run["artifacts"]:
        region_of = f" ({artifact['region']})" if artifact.get("region") else ""
        stdout.print(cell(f"artifacts{region_of}: {artifact['location']}"), soft_wrap=True)
    cost = terminal.cost_line(run.get("cost"))
    if cost:
        stdout.print(cost, highlight=False, soft_wrap=True, markup=False)


@commands.command()
def runs(
    limit: Annotated[int, typer.Option(help="Runs per page (1-100).")] = 20,
    pipeline: Annotated[str | None, typer.Option(help="training or campaign.")] = None,
    status: Annotated[str | None, typer.Option(help="RUNNING, SUCCEEDED, FAILED, …")] = None,
    next_token: Annotated[str | None, typer.Option(help="The page after a previous one.")] = None,
    endpoint: Endpoint = DEFAULT_ENDPOINT, stack: Stack = None, region: Region = None,
    as_json: AsJson = False,
) -> None:
    """List recent runs of both pipelines, newest first."""
    client = connect("runs", endpoint, stack, region)
    page = call("runs", client, "GET", "/runs", query={
        "limit": limit, "pipeline": pipeline, "status": status, "next_token": next_token})
    if as_json:
        print(json.dumps(page, indent=2))
        return
    stdout.print(terminal.runs_table(page["runs"]))
    if page["next_token"]:
        stdout.print(cell(f"more: traingrid runs --next-token {page['next_token']}"),
                     soft_wrap=True)


@commands.command()
def logs(
    name: Annotated[str, typer.Argument(help="The run's name.")],
    endpoint: Endpoint = DEFAULT_ENDPOINT, stack: Stack = None, region: Region = None,
    as_json: AsJson = False,
) -> None:
    """Show why a run ended as it did, and the tail of its training log.

    Exit code 0 when the run succeeded or is running, 1 when it did not (the last line says
    why).
    """
    client = connect("logs", endpoint, stack, region)
    found = get_run("logs", client, name, "/logs")
    if as_json:
        print(json.dumps(found, indent=2))
        ended("logs", found)
        return
    stdout.print(cell(f"{found['name']} · {found['pipeline']} · {found['status']}"))
    if found.get("error"):
        stdout.print(terminal.error_line(found), soft_wrap=True)
    log = found.get("log")
    if log:
        stdout.rule(cell(log["source"]))
        for line in log["lines"]:
            # A job writes its log: its tabs and line breaks stay, nothing else acts.
            print(plain(line, keep="\t\n"))
    else:
        stdout.print(cell(found.get("note") or "No training log yet."))
    ended("logs", found)


@commands.command()
def campaigns(
    database_url: Annotated[str | None, typer.Option(
        envvar="TRAINGRID_DATABASE_URL",
        help="Read a campaign database directly instead (e.g. the demo's: "
             "sqlite:///.traingrid/campaigns.db).")] = None,
    endpoint: Endpoint = DEFAULT_ENDPOINT, stack: Stack = None, region: Region = None,
    as_json: AsJson = False,
) -> None:
    """List the campaigns, their datasets by region and their last run."""
    if database_url is not None:
        from sqlalchemy.exc import ArgumentError, SQLAlchemyError

        from traingrid.db.engine import transaction
        from traingrid.db.repositories import CampaignRepository

        try:
            with transaction(database_url) as session:
                overview = CampaignRepository(session).overview()
        except ArgumentError as error:
            raise fail("campaigns", f"{database_url!r} is not a database URL: {error}",
                       INVALID) from None
        except SQLAlchemyError as error:
            first = (str(error).splitlines() or [type(error).__name__])[0]
            raise fail("campaigns", f"cannot read the campaign database: {first}",
                       UNREACHABLE) from None
    else:
        client = connect("campaigns", endpoint, stack, region)
        overview = call("campaigns", client, "GET", "/campaigns")["campaigns"]
    if as_json:
        print(json.dumps({"campaigns": overview}, indent=2, default=str))
        return
    for campaign in overview:
        stdout.print(terminal.campaign_table(campaign))
    if not overview:
        stdout.print("No campaigns.")
