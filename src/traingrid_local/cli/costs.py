"""``traingrid costs``: what runs (TrainingRuns and CampaignFanouts) cost over a period, from
the campaign database."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated

import typer

from traingrid import clock
from traingrid.costs import prices
from traingrid.costs.receipt import PARTS
from traingrid.costs.summary import GROUPS, summarize
from traingrid_local.cli.runs import INVALID, UNREACHABLE, AsJson, fail
from traingrid_local.cli.terminal import money, stdout

commands = typer.Typer()


def _moment(option: str, text: str | None, problems: list[str]) -> datetime | None:
    if text is None:
        return None
    try:
        return clock.parse_iso(text, assume_utc=True)
    except ValueError:
        problems.append(f"--{option} {text!r} is not an ISO 8601 date or time")
        return None


@commands.command()
def costs(
    database_url: Annotated[str, typer.Option(
        envvar="TRAINGRID_DATABASE_URL",
        help="The campaign database (e.g. the demo's: sqlite:///.traingrid/campaigns.db).")],
    since: Annotated[str | None, typer.Option(help="Runs started at or after (ISO 8601, UTC "
                                                   "if no zone).")] = None,
    until: Annotated[str | None, typer.Option(help="Runs started before (ISO 8601).")] = None,
    by: Annotated[str, typer.Option(help=f"Group by: {', '.join(GROUPS)}.")] = "dataset",
    as_json: AsJson = False,
) -> None:
    """Sum what the runs started in a period cost, grouped, from their recorded receipts.

    TrainingRuns and campaign fan-outs alike, read from the campaign database.
    """
    problems: list[str] = []
    start, end = _moment("since", since, problems), _moment("until", until, problems)
    if by not in GROUPS:
        problems.append(f"--by {by!r}: one of {', '.join(GROUPS)}")
    if start and end and start >= end:
        problems.append(f"--since {since} is not before --until {until}")
    if problems:
        raise fail("costs", "; ".join(problems), INVALID)
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from traingrid.db.engine import transaction
    from traingrid.db.repositories import RunRepository, TrainingRunRepository

    try:
        with transaction(database_url) as session:
            runs = (TrainingRunRepository(session).costs(start, end)
                    + RunRepository(session).costs(start, end))
    except ArgumentError as error:
        raise fail("costs", f"{database_url!r} is not a database URL: {error}",
                   INVALID) from None
    except SQLAlchemyError as error:
        first = (str(error).splitlines() or [type(error).__name__])[0]
        raise fail("costs", f"cannot read the campaign database: {first}",
                   UNREACHABLE) from None
    rows = summarize(runs, by)
    total = round(sum(row["total"] for row in rows), 6)
    if as_json:
        print(json.dumps({"since": since, "until": until, "by": by, "currency": prices.CURRENCY,
                          "groups": rows, "total": total}, indent=2))
        return
    from rich.table import Table

    table = Table(title=f"Run costs by {by}"
                        f"{f' since {since}' if since else ''}{f' until {until}' if until else ''}",
                  title_justify="left")
    for column in (by, "runs", *(p.replace("_", " ") for p in PARTS), "total", "estimated max"):
        table.add_column(column, overflow="fold")
    for row in rows:
        fanouts = row["pipelines"].get("CampaignFanout", 0)
        runs_text = str(row["runs"]) + (f" ({fanouts} fan-out{'s' if fanouts > 1 else ''})"
                                        if fanouts and by != "pipeline" else "") + (
            f" ({row['unpriced_runs']} without a cost)" if row["unpriced_runs"] else "")
        table.add_row(row[by], runs_text, *(money(row[p]) for p in PARTS), money(row["total"]),
                      money(row["estimated_max"]))
    stdout.print(table)
    stdout.print(f"total: {money(total)} over {sum(r['runs'] for r in rows)} run(s)",
                 highlight=False)
    measured = [f"{row[by]} {row['goodput']:.1%} ({row['productive_node_hours']:.2f} of "
                f"{row['paid_node_hours']:.2f})" for row in rows if row["goodput"] is not None]
    if measured:
        stdout.print("goodput (productive of paid node-hours): " + "; ".join(measured),
                     highlight=False, soft_wrap=True)
