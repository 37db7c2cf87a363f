"""``traingrid watch NAME``: a run's training curves live in the terminal (GET
/runs/{name}/metrics): the loss and images/s in total and per node as sparklines, the latest
point, each straggler in red with why; it ends with the run (exit 0 when it succeeded)."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.live import Live

from traingrid_local.api.client import DEFAULT_ENDPOINT
from traingrid_local.cli.runs import (
    INVALID,
    RUN_FAILED,
    TERMINAL,
    Endpoint,
    Region,
    Stack,
    connect,
    fail,
    get_run,
)
from traingrid_local.cli.terminal import DataTable, cell, stdout

commands = typer.Typer()
BARS = "▁▂▃▄▅▆▇█"
WIDTH = 32  # a sparkline's points, the newest


def sparkline(series: list[list[float]] | None, width: int = WIDTH) -> str:
    values = [v for _, v in (series or [])][-width:]
    if not values:
        return ""
    low, high = min(values), max(values)
    span = (high - low) or 1.0
    return "".join(BARS[min(len(BARS) - 1, int((v - low) / span * len(BARS)))] for v in values)


def _last(series: list[list[float]] | None, digits: int) -> str:
    return f"{series[-1][1]:,.{digits}f}" if series else "-"


def picture(answer: dict[str, Any]) -> Group:
    """The run's curves as a table: the total, then each node (stragglers in red)."""
    latest = answer.get("latest") or {}
    head = cell(f"{answer['name']} {answer['status']}", "bold")
    if latest:
        head.append(f"  step {int(latest.get('step', 0)):,}, epoch {latest.get('epoch', 0):.2f}"
                    f", loss {latest.get('loss', 0):.4f}, lr {latest.get('lr', 0):.4g}")
    table = DataTable(box=None, pad_edge=False)
    for column in ("", "images/s", "", "loss", "", "step s", "input s"):
        table.add_column(column, justify="left" if column in ("", "loss") else "right")
    table.add_row("total", _last(answer.get("images_per_s"), 0),
                  sparkline(answer.get("images_per_s")), _last(answer.get("loss"), 4),
                  sparkline(answer.get("loss")), _last(answer.get("step_s"), 3),
                  _last(answer.get("input_s"), 3), style="bold")
    stragglers = answer.get("stragglers") or {}
    for node, curves in answer.get("nodes", {}).items():
        # A node's name is a part of an S3 key the job wrote: data, like its curves.
        table.add_row(node + (" (straggler)" if node in stragglers else ""),
                      _last(curves.get("images_per_s"), 0), sparkline(curves.get("images_per_s")),
                      _last(curves.get("loss"), 4), sparkline(curves.get("loss")),
                      _last(curves.get("step_s"), 3), _last(curves.get("input_s"), 3),
                      style="red" if node in stragglers else None)
    lines: list[Any] = [head, table]
    lines += [cell(f"straggler {node}: {why}", "red") for node, why in stragglers.items()]
    if not answer.get("nodes"):
        lines.append(cell(answer.get("note") or "No curves yet: the job has not trained.",
                          "dim"))
    return Group(*lines)


@commands.command()
def watch(
    name: Annotated[str, typer.Argument(help="The run's name.")],
    interval: Annotated[float, typer.Option(help="Seconds between looks.")] = 2.0,
    timeout: Annotated[float, typer.Option(help="Seconds to watch at most.")] = 7 * 24 * 3600,
    endpoint: Endpoint = DEFAULT_ENDPOINT, stack: Stack = None, region: Region = None,
) -> None:
    """Watch a run's training curves live: loss and images/s in total and per node, with any
    straggler in red; ends with the run (exit 0 when it succeeded, 1 otherwise)."""
    if interval <= 0:
        raise fail("watch", "--interval must be positive", INVALID)
    client = connect("watch", endpoint, stack, region)
    deadline = time.monotonic() + timeout
    answer = get_run("watch", client, name, "/metrics")
    with Live(picture(answer), console=stdout, refresh_per_second=4,
              auto_refresh=stdout.is_terminal) as live:
        while answer["status"] not in TERMINAL and time.monotonic() < deadline:
            time.sleep(interval)
            answer = get_run("watch", client, name, "/metrics")
            live.update(picture(answer), refresh=True)
    if answer["status"] not in ("SUCCEEDED", "RUNNING"):
        raise fail("watch", f"{answer['name']} {answer['status']}", RUN_FAILED)
