"""``traingrid faults``: the fault matrix on the embedded emulator."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from traingrid_local.cli.terminal import DataTable, plain, stderr, stdout
from traingrid_local.demo.scenarios import FAULT_KINDS, PIPELINES

if TYPE_CHECKING:
    from traingrid_local.demo.fault_matrix import CellResult

commands = typer.Typer()


def _progress(result: CellResult) -> None:
    cell = result.cell
    mark = "ok" if result.ok else "NOT AS EXPECTED"
    stderr.print(f"{cell.pipeline:8} {cell.state:22} {cell.fault:16} → {result.status} · "
                 f"{len(result.leaked)} leaked · {result.wall_s:4.1f} s · {mark}", highlight=False)


def _print(tables: dict[str, list[list[str]]], results: list[CellResult],
           wall_s: float) -> None:
    for pipeline, rows in tables.items():
        table = DataTable(title=f"{PIPELINES[pipeline][0]}: Task state × fault → end state, "
                                "resources leaked after the janitor", title_justify="left")
        table.add_column("state")
        for kind in FAULT_KINDS:
            table.add_column(kind)
        for row in rows:
            table.add_row(*row)
        stdout.print(table)
    failed = [r for r in results if not r.ok]
    for result in failed:
        cell = result.cell
        stdout.print(Text.assemble((f"✗ {cell.pipeline} {cell.state} {cell.fault}", "bold red"),
                                   plain(": " + "; ".join(result.problems))))
    stdout.print(f"{len(results) - len(failed)} of {len(results)} cells as expected, "
                 f"{sum(len(r.leaked) for r in results)} resources leaked "
                 f"({wall_s:.0f} s wall)", highlight=False)


@commands.command()
def faults(
    pipeline: Annotated[list[str] | None, typer.Option(
        help=f"Pipelines: {', '.join(PIPELINES)} (default: both).")] = None,
    state: Annotated[list[str] | None, typer.Option(
        help="Task states (default: every one).")] = None,
    fault: Annotated[list[str] | None, typer.Option(
        help=f"Faults: {', '.join(FAULT_KINDS)} (default: all).")] = None,
    backend: Annotated[str | None, typer.Option(
        help="Run the TrainingRun's cells on this backend's deployment: ecs or eks "
             "(default: each on the one that reaches its state).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Inject each fault at each Task state of both pipelines and check how each run ends.

    After each cell the janitor runs; then the end state, its cause, leaks, archived data and
    the recorded outcome are checked. Exit code 1 if any cell is not as expected.
    """
    from traingrid_local.demo import fault_matrix  # the emulator: this command's alone

    try:
        selected = fault_matrix.cells(pipeline or list(PIPELINES), state, fault or FAULT_KINDS,
                                      backend)
    except ValueError as error:
        stderr.print(f"error: {error}")
        raise typer.Exit(2) from None
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="traingrid-faults-") as workdir:
        results = fault_matrix.run(selected, database_dir=Path(workdir),
                                  progress=None if as_json else _progress)
    wall_s = time.monotonic() - started
    if as_json:
        print(json.dumps({"cells": [r.as_dict() for r in results],
                          "ok": all(r.ok for r in results), "wall_seconds": round(wall_s, 1)},
                         indent=2, default=str))
    else:
        _print(fault_matrix.table_rows(results), results, wall_s)
    if not all(r.ok for r in results):
        raise typer.Exit(1)
