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
    run_path,
)
from traingrid_local.cli.terminal import cell, stdout

commands = typer.Typer()


def _acted(command: str, client: ApiClient, name: str, tail: str, body: Any = None) -> Any:
    return call(command, client, "POST", run_path(command, name, tail), body,
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
