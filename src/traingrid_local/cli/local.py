"""``traingrid serve`` and ``traingrid tick``: the API and the schedules of the embedded
emulator; ``traingrid console``: the web console of a deployed stack."""

from __future__ import annotations

import math
import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from traingrid_local.api.client import (
    DEFAULT_ENDPOINT,
    ENDPOINT_ENV,
    ApiClient,
    ApiError,
    Unreachable,
)
from traingrid_local.cli.runs import INVALID, UNREACHABLE, fail
from traingrid_local.cli.terminal import cell, plain, stderr, stdout
from traingrid_local.emulator.clock import DEFAULT_SPEED
from traingrid_local.emulator.fault_injection import FAULTS
from traingrid_local.stack.schedules import SCHEDULED_JOBS, TICK_PATH

if TYPE_CHECKING:
    from traingrid_local.api.server import RequestLog

commands = typer.Typer()


def _examples(url: str, bucket: str) -> str:
    dataset = f"s3://{bucket}/imagenet2012/resized/"
    return "\n".join([
        f"TrainGrid API on {url} (the embedded emulator; Ctrl-C stops it)",
        f"The console, every run and its graph: {url}/console",
        "",
        f"  echo '{{\"dataset\": \"{dataset}\", \"nodes\": 4}}' > run.json",
        f"  curl -s {url}/runs -H 'Content-Type: application/json' "
        "-H 'Idempotency-Key: my-first-run' -d @run.json",
        f"  curl -s {url}/runs/<name>",
        f"  curl -s {url}/runs",
        f"  curl -s {url}/campaigns/av-drive-2026-11/runs -H 'Content-Type: application/json' "
        "-d '{}'",
        "  traingrid status <name>      traingrid tick      traingrid runs",
        "",
    ])


@commands.command()
def serve(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0: any free port).")] = 8000,
    speed: Annotated[float, typer.Option(
        help="Simulated seconds per real second.")] = DEFAULT_SPEED,
    training_hours: Annotated[float, typer.Option(
        help="Simulated length of each training job.")] = 6.0,
    quiet: Annotated[bool, typer.Option(help="Do not log each request.")] = False,
    fault: Annotated[list[str] | None, typer.Option(
        help="A fault every run meets (repeatable): " + ", ".join(FAULTS))] = None,
) -> None:
    """Serve the API and the web console on 127.0.0.1 over the embedded emulator.

    The emulator is deployed and seeded as the demo's is; the console is at `/console`. It runs
    until Ctrl-C or SIGTERM.
    """
    faults = frozenset(fault or ())
    problems = [p for p in (
        *(f"--fault {name!r} is not a fault; there are {', '.join(FAULTS)}"
          for name in sorted(faults - FAULTS.keys())),
        None if 0 <= port <= 65535 else f"--port {port} is not a TCP port (0-65535)",
        None if math.isfinite(speed) and speed > 0 else f"--speed {speed} must be positive",
        None if math.isfinite(training_hours) and training_hours > 0
        else f"--training-hours {training_hours} must be positive",
    ) if p]
    if problems:
        stderr.print(f"traingrid serve: {'; '.join(problems)}", markup=False,
                     soft_wrap=True, highlight=False)
        raise typer.Exit(2)
    seconds = training_hours * 3600
    training = {"batch": seconds, "sagemaker": seconds}
    stderr.print("Deploying template.yaml into the emulated account…", highlight=False)
    from traingrid_local.demo.served import served  # the emulator: this command's alone
    from traingrid_local.stack.environment import DEMO_BUCKET

    _until_stopped("serve", port, lambda log: served(port=port, speed=speed, request_log=log,
                                                     faults=faults, training_seconds=training),
                   lambda api: _examples(api.url, DEMO_BUCKET), "the server and the emulator",
                   quiet)


def _until_stopped(command: str, port: int, start: Callable[[RequestLog | None], Any],
                   banner: Callable[[Any], str], what: str, quiet: bool) -> None:
    """Run the server ``start`` opens (a context manager) until Ctrl-C or SIGTERM."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set())
                for sig in (signal.SIGINT, signal.SIGTERM)}
    # A request line is the caller's text: shown as it is (escaped by the server), never markup.
    log = None if quiet else (lambda line: stderr.print(line, highlight=False, markup=False))
    try:
        with start(log) as server:
            stdout.print(banner(server), highlight=False, soft_wrap=True)
            while not stop.wait(0.5):
                pass
            stderr.print(f"Stopping: closing {what}…", highlight=False)
    except OSError as error:  # the port is taken, most likely
        stderr.print(f"traingrid {command}: cannot listen on 127.0.0.1:{port}: {error}")
        raise typer.Exit(1) from None
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    stderr.print(f"traingrid {command}: stopped", highlight=False)


@commands.command()
def console(
    stack: Annotated[str, typer.Option(help="The deployed stack whose runs to show.")],
    region: Annotated[str | None, typer.Option(
        envvar="AWS_REGION", help="The stack's region.")] = None,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0: any free port).")] = 8000,
    quiet: Annotated[bool, typer.Option(help="Do not log each request.")] = False,
) -> None:
    """Serve the web console of a deployed stack on 127.0.0.1.

    It shows the stack API's answers (requests signed with your AWS credentials), its state
    machines' graphs and links to the AWS console. Open the URL it prints: it carries this
    session's token.
    """
    from traingrid_local.console.remote import remote  # its server: this command's alone

    problems = [p for p in (
        None if region else "--region (or AWS_REGION) is needed",
        None if 0 <= port <= 65535 else f"--port {port} is not a TCP port (0-65535)",
    ) if p]
    if problems:
        raise fail("console", "; ".join(problems), INVALID)
    try:
        _until_stopped("console", port,
                       lambda log: remote(stack, str(region), port=port, request_log=log),
                       lambda server: f"The console of stack {stack} ({region}) on "
                                      f"{server.url_with_token('/console')} (the token is "
                                      "this session's; Ctrl-C stops it)",
                       "the console", quiet)
    except Unreachable as error:
        raise fail("console", str(error), UNREACHABLE) from None


def _say(line: str) -> None:
    stdout.print(cell(line))  # names and reasons from the API: text, never markup


def _print_janitor(result: dict[str, Any]) -> None:
    _say(f"janitor: {result['schedule']} fired for {result['scheduled_at']}")
    for entry in result["released"]:
        _say(f"  {entry['action']} {entry['type']} {entry['id']}: {entry['reason']}")
    for entry in result["waiting"]:
        _say(f"  waiting: {entry['type']} {entry['id']}: {entry['reason']}")
    for entry in result["runs_recorded"]:
        _say(f"  recorded {entry['execution_arn']} {entry['status']}")
    for error in result["errors"]:
        _say(f"  error: {error}")
    if not any(result[k] for k in ("released", "waiting", "runs_recorded", "errors")):
        _say("  nothing left behind")


def _print_fired(job: str, result: dict[str, Any]) -> None:
    if job == "janitor":
        _print_janitor(result)
        return
    _say(f"{job}: {result['schedule']} fired for {result['scheduled_at']} "
         f"(window {result.get('window')})")
    for entry in result.get("started", []):
        _say(f"  started {entry['name']} ({entry['new_datasets']} new dataset(s))")
    for entry in result.get("already_started", []):
        _say(f"  already started {entry['name']}: nothing new")
    for entry in result.get("skipped", []):
        _say(f"  skipped {entry['campaign']}: {entry['reason']}")
    if not any(result.get(k) for k in ("started", "already_started", "skipped")):
        _say("  no campaign has new data")


@commands.command()
def tick(
    jobs: Annotated[list[str] | None, typer.Argument(
        help=f"Scheduled jobs to fire: {', '.join(SCHEDULED_JOBS)} (default: all).")] = None,
    at: Annotated[str | None, typer.Option(
        help="The scheduled time, ISO 8601 UTC (default: when the schedule last came due on "
             "the emulator's clock).")] = None,
    endpoint: Annotated[str, typer.Option(
        envvar=ENDPOINT_ENV, help="The server `traingrid serve` runs.")] = DEFAULT_ENDPOINT,
) -> None:
    """Fire the scheduled jobs in the emulator behind `traingrid serve`.

    EventBridge schedules never fire there. Scheduled retraining (`retrain`) starts a fan-out
    for each campaign with new data; the janitor (`janitor`) releases what ended runs left
    behind.
    """
    try:
        answer = ApiClient(endpoint).call("POST", TICK_PATH, {"jobs": jobs or [], "at": at})
    except Unreachable as error:
        stderr.print(f"traingrid tick: {plain(error)}: start `traingrid serve` first, or give "
                     f"its URL with --endpoint (or {ENDPOINT_ENV})",
                     markup=False, soft_wrap=True, highlight=False)
        raise typer.Exit(1) from None
    except ApiError as error:
        stderr.print(f"traingrid tick: {plain(error.message)}", markup=False,
                     soft_wrap=True, highlight=False)
        raise typer.Exit(1) from None
    for job, result in answer.body["fired"].items():
        _print_fired(job, result)
