"""``traingrid cancel`` and ``traingrid rerun``: acting on a run the API already holds."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from traingrid_local.api.client import DEFAULT_ENDPOINT, ApiClient
from traingrid_local.cli.runs import (
    AsJson,
    Endpoint,
    Region,
    Stack,
    call,
    connect,
    ended,
    fail,
    follow,
    run_path,
    show_run,
)
from traingrid_local.cli.terminal import cell, stdout

commands = typer.Typer()


def _acted(command: str, client: ApiClient, name: str, tail: str,
           headers: dict[str, str] | None = None) -> Any:
    return call(command, client, "POST", run_path(command, name, tail), {}, headers=headers,
                missing=f"no run is named {name!r}: traingrid runs lists recent runs")


@commands.command()
def cancel(
    name: Annotated[str, typer.Argument(help="The run's name.")],
    endpoint: Endpoint = DEFAULT_ENDPOINT, stack: Stack = None, region: Region = None,
    as_json: AsJson = False,
) -> None:
    """Cancel a running run: its job is stopped, what it wrote archived, its file system
    deleted; `status` shows who cancelled it and when.

    A run that has already ended is left as it is (exit 1, saying how it ended).
    """
    client = connect("cancel", endpoint, stack, region)
    answer = _acted("cancel", client, name, "/cancel")
    if as_json:
        print(json.dumps(answer, indent=2))
        return
    who = answer["cancelled"]
    stdout.print(cell(f"{answer['name']} CANCELLED by {who['by']} at {who['at']}; its job is "
                      "stopped, its outputs archived and its file system deleted"),
                 soft_wrap=True)


@commands.command()
def rerun(
    name: Annotated[str, typer.Argument(help="The ended run's name.")],
    wait: Annotated[bool, typer.Option(help="Follow the new run until it ends.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds --wait waits at most.")] = 3600,
    idempotency_key: Annotated[str | None, typer.Option(
        help="Start one run for this key, however often sent.")] = None,
    endpoint: Endpoint = DEFAULT_ENDPOINT, stack: Stack = None, region: Region = None,
    as_json: AsJson = False,
) -> None:
    """Start an ended TrainingRun's request again, as `NAME-r2` (the next free `-rN`); its
    `status` names the run it re-runs.
    """
    client = connect("rerun", endpoint, stack, region)
    headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
    submitted = _acted("rerun", client, name, "/rerun", headers=headers)
    if not wait:
        if as_json:
            print(json.dumps(submitted, indent=2))
        else:
            verb = "started" if submitted["started"] else "exists"
            stdout.print(cell(f"{submitted['name']} {verb} ({submitted['status']}), a re-run "
                              f"of {name}"))
            stdout.print(cell(submitted["console_url"]), soft_wrap=True)
        return
    run = follow("rerun", client, submitted["name"], timeout)
    show_run(run, as_json)
    if run["status"] == "RUNNING":
        raise fail("rerun", f"{run['name']} still RUNNING after {timeout:g} s")
    ended("rerun", run)
