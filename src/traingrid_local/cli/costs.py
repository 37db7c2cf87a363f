"""``traingrid costs``: what runs (TrainingRuns and CampaignFanouts) cost over a period, from
their recorded receipts: through the API (``GET /costs``, the served one or a deployed stack's
with ``--stack``, whose database sits in private subnets), or straight from a campaign database
with ``--database-url``."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

import typer

from traingrid import clock
from traingrid.costs.period import MAX_PAGE_GROUPS
from traingrid.costs.receipt import PARTS
from traingrid.costs.summary import GROUPS
from traingrid_local.api.client import DEFAULT_ENDPOINT, ApiClient
from traingrid_local.cli.runs import (
    INVALID,
    UNREACHABLE,
    AsJson,
    Endpoint,
    Region,
    Stack,
    call,
    connect,
    fail,
)
from traingrid_local.cli.terminal import DataTable, money, plain, stdout

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
    endpoint: Endpoint = DEFAULT_ENDPOINT,
    stack: Stack = None,
    region: Region = None,
    database_url: Annotated[str | None, typer.Option(
        envvar="TRAINGRID_DATABASE_URL",
        help="Read a campaign database instead of the API (e.g. the demo's: "
             "sqlite:///.traingrid/campaigns.db).")] = None,
    since: Annotated[str | None, typer.Option(help="Runs started at or after (ISO 8601, UTC "
                                                   "if no zone).")] = None,
    until: Annotated[str | None, typer.Option(help="Runs started before (ISO 8601).")] = None,
    by: Annotated[str, typer.Option(help=f"Group by: {', '.join(GROUPS)}.")] = "dataset",
    as_json: AsJson = False,
) -> None:
    """Sum what the runs started in a period cost, grouped, from their recorded receipts.

    TrainingRuns and campaign fan-outs alike, through the API (GET /costs; --stack NAME for a
    deployed stack), or from a campaign database with --database-url.
    """
    problems: list[str] = []
    start, end = _moment("since", since, problems), _moment("until", until, problems)
    if by not in GROUPS:
        problems.append(f"--by {by!r}: one of {', '.join(GROUPS)}")
    if start and end and start >= end:
        problems.append(f"--since {since} is not before --until {until}")
    if problems:
        raise fail("costs", "; ".join(problems), INVALID)
    if database_url is None:
        client = connect("costs", endpoint, stack, region)
        query = {"by": by, "since": start and start.isoformat(),
                 "until": end and end.isoformat(), "limit": MAX_PAGE_GROUPS}
        found = _every_page(client, {k: v for k, v in query.items() if v is not None})
    else:
        found = _from_database(database_url, start, end, by)
    if as_json:
        print(json.dumps(found, indent=2))
        return
    show(found, since, until)


def _every_page(client: ApiClient, query: dict[str, Any]) -> dict[str, Any]:
    """GET /costs page after page (a page holds at most MAX_PAGE_GROUPS groups): the whole
    period as one answer, as the database gives it."""
    found = call("costs", client, "GET", "/costs", query=query)
    groups, seen = list(found["groups"]), set()
    while (token := found.pop("next_token", None)) is not None:
        if token in seen:
            raise fail("costs", "the API answered the same next_token twice", UNREACHABLE)
        seen.add(token)
        found = call("costs", client, "GET", "/costs", query={**query, "next_token": token})
        groups += found["groups"]
    return {**found, "groups": groups}


def _from_database(database_url: str, start: datetime | None, end: datetime | None,
                   by: str) -> dict[str, Any]:
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from traingrid.costs.period import period_costs

    try:
        return period_costs(database_url, start, end, by)
    except ArgumentError as error:
        raise fail("costs", f"{database_url!r} is not a database URL: {error}",
                   INVALID) from None
    except SQLAlchemyError as error:
        first = (str(error).splitlines() or [type(error).__name__])[0]
        raise fail("costs", f"cannot read the campaign database: {first}",
                   UNREACHABLE) from None


def show(found: dict[str, Any], since: str | None, until: str | None) -> None:
    """The costs as a table, then the period's total; a group's name (a dataset's prefix, an
    instance type) shown as text."""
    by, rows = found["by"], found["groups"]
    period = f"{f' since {since}' if since else ''}{f' until {until}' if until else ''}"
    table = DataTable(title=f"Run costs by {by}{period}", title_justify="left")
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
    stdout.print(f"total: {money(found['total'])} over {sum(r['runs'] for r in rows)} run(s)",
                 highlight=False)
    measured = [f"{row[by]} {row['goodput']:.1%} ({row['productive_node_hours']:.2f} of "
                f"{row['paid_node_hours']:.2f})" for row in rows if row["goodput"] is not None]
    if measured:
        stdout.print(plain("goodput (productive of paid node-hours): " + "; ".join(measured)),
                     highlight=False, soft_wrap=True, markup=False)
