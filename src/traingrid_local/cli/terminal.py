"""What the API's answers look like in a terminal: a run's timeline (like the console's graph),
lists of runs and campaigns, problems, progress while waiting.

Whatever the API, a log or S3 brings is data: it reaches the terminal through ``plain`` (as a
``cell``, in a ``DataTable``, or printed with ``markup=False``), never as Rich markup or a
control sequence."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, RenderableType
from rich.style import StyleType
from rich.table import Table
from rich.text import Text

from traingrid.runs.timeline import SEVERITY, worst

# Logs and pipes are read later, in wide windows: don't squeeze the report into 80 columns.
stdout = Console(width=None if sys.stdout.isatty() else 120)
stderr = Console(stderr=True, width=None if sys.stderr.isatty() else 120)

OUTCOME_STYLES = {"succeeded": "green", "retried": "yellow", "caught": "red",
                  "failed": "bold red", "running": "cyan"}
STATUS_STYLES = {"SUCCEEDED": "green", "RUNNING": "cyan", "FAILED": "red", "TIMED_OUT": "red",
                 "ABORTED": "red"}
BAR_WIDTH = 24


def plain(value: object, keep: str = "") -> str:
    """``value`` as text a terminal shows and never acts on: every character that is not
    printable (C0 and C1 controls, ESC, DEL, bidi overrides, zero-width and other format
    characters, line separators, lone surrogates) spelled out as its escape (``\\x1b``,
    ``\\u202e``), except those in ``keep``. Brackets stay: show it with ``cell``, or print it
    with ``markup=False``."""
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in text)


def cell(value: object, style: str = "") -> Text:
    """``value`` as a ``Text``: literal in a table, a title or a line, never read as markup."""
    return Text(plain(value), style=style)


class DataTable(Table):
    """A table of data: a ``str`` title, header or cell is shown as a ``cell``, never read as
    markup; a ``Text`` given is the caller's, built from ``plain``."""

    def __init__(self, *headers: Any, title: str | Text | None = None, **options: Any) -> None:
        super().__init__(*headers, title=cell(title) if isinstance(title, str) else title,
                         **options)

    def add_column(self, header: RenderableType = "", *args: Any, **options: Any) -> None:
        super().add_column(cell(header) if isinstance(header, str) else header, *args,
                           **options)

    def add_row(self, *renderables: RenderableType | None, style: StyleType | None = None,
                end_section: bool = False) -> None:
        super().add_row(*(cell(r) if isinstance(r, str) else r for r in renderables),
                        style=style, end_section=end_section)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def status_text(status: str) -> Text:
    return cell(status, STATUS_STYLES.get(status, ""))


def step_of(state: str) -> str:
    """A loop's states (WaitForX, CheckX, AwaitX, X?) are one step, X."""
    name = state.removeprefix("WaitFor").removeprefix("Check").removeprefix("Await").rstrip("?")
    return name.removesuffix("Available").removesuffix("Done") or state


@dataclass
class Step:
    name: str
    offset_s: float
    end_s: float
    visits: int = 0
    outcomes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def outcome(self) -> str:
        # One the API's vocabulary lacks is shown as it is, not ranked.
        unknown = [outcome for outcome in self.outcomes if outcome not in SEVERITY]
        return unknown[0] if unknown else worst(self.outcomes)


def steps(states: list[dict[str, Any]]) -> list[Step]:
    """Consecutive visits of one poll loop folded into one step; other states one each."""
    found: list[Step] = []
    for visit in states:
        name = step_of(visit["state"])
        end = visit["offset_s"] + visit["duration_s"]
        if not found or found[-1].name != name:
            found.append(Step(name, visit["offset_s"], end))
        step = found[-1]
        step.end_s = max(step.end_s, end)
        step.visits += 1
        step.outcomes.append(visit["outcome"])
        step.errors += visit.get("errors", [])
    return found


def _bar(start: float, end: float, total: float) -> Text:
    if total <= 0:
        return Text("")
    first = min(int(start / total * BAR_WIDTH), BAR_WIDTH - 1)
    length = max(1, round((end - start) / total * BAR_WIDTH))
    return Text(" " * first + "█" * min(length, BAR_WIDTH - first))


def timeline(run: dict[str, Any], every_visit: bool = False) -> DataTable:
    """One row per step (or per state visit): start offset, duration, a bar on the run's own
    time axis, the outcome and any errors."""
    total = max(run.get("duration_s") or 0, *(s["offset_s"] + s["duration_s"]
                                              for s in run["states"]), 0.001)
    shown = "CANCELLED" if run.get("cancelled") else run["status"]
    table = DataTable(title=f"{run['name']} · {run['pipeline']} · {shown}",
                      title_justify="left")
    for column, justify in (("state", "left"), ("start", "right"), ("duration", "right"),
                            ("", "left"), ("outcome", "left")):
        table.add_column(column, justify=justify)
    rows = ([Step(v["state"], v["offset_s"], v["offset_s"] + v["duration_s"], 1,
                  [v["outcome"]], v.get("errors", [])) for v in run["states"]]
            if every_visit else steps(run["states"]))
    for step in rows:
        label = step.name if step.visits == 1 else f"{step.name} ×{step.visits}"
        outcome = cell(step.outcome, OUTCOME_STYLES.get(step.outcome, ""))
        if step.errors:
            outcome.append(plain(f" ({', '.join(dict.fromkeys(step.errors))})"))
        table.add_row(label, f"+{duration(step.offset_s)}", duration(step.end_s - step.offset_s),
                      _bar(step.offset_s, step.end_s, total), outcome)
    return table


def money(usd: float | None) -> str:
    return "-" if usd is None else f"${usd:,.2f}"


def cost_line(cost: dict[str, Any] | None) -> str | None:
    """A run's receipt in one line (plain): its total by part, beside what its plan
    estimated."""
    if not cost:
        return None
    actual, estimate = cost["actual"], cost.get("estimate") or {}
    parts = ", ".join(f"{part.replace('_', ' ')} {money(actual[part])}"
                      for part in ("compute", "file_system", "orchestration", "staging"))
    so_far = " so far" if cost.get("in_flight") else ""
    planned = (f"; estimated at most {money(estimate['max_usd'])}" if "max_usd" in estimate
               else f"; estimated {money(estimate['estimated_usd'])}"
               if "estimated_usd" in estimate else "")
    return plain(f"cost{so_far}: {money(actual['total'])} ({parts}){planned} · prices "
                 f"{cost['prices_version']}{goodput_text(cost.get('goodput'))}")


def goodput_text(goodput: dict[str, Any] | None) -> str:
    """`` · goodput 93% (…)``: productive over paid node-hours and the largest losses."""
    if not goodput or goodput.get("goodput") is None:
        return ""
    lost = sorted(((hours, cause) for cause, hours in goodput["lost_node_hours"].items()
                   if hours), reverse=True)
    where = ", ".join(f"{cause.replace('_', ' ')} {hours:.2f}" for hours, cause in lost)
    return (f" · goodput {goodput['goodput']:.1%} ({goodput['productive_node_hours']:.2f} of "
            f"{goodput['paid_node_hours']:.2f} node-hours productive"
            f"{'; lost: ' + where if where else ''})")


def runs_table(runs: list[dict[str, Any]]) -> DataTable:
    table = DataTable()
    for column in ("run", "pipeline", "status", "started", "duration"):
        table.add_column(column, overflow="fold")
    for run in runs:
        table.add_row(run["name"], run["pipeline"], status_text(run["status"]),
                      run["started_at"], duration(run["duration_s"]))
    return table


def campaign_table(campaign: dict[str, Any]) -> DataTable:
    last = campaign.get("last_run") or {}
    table = DataTable(title=f"{campaign['id']} · last run: {last.get('name', 'none')} "
                            f"{last.get('status', '')}", title_justify="left")
    for column in ("region", "dataset", "objects", "bytes", "registered"):
        table.add_column(column, overflow="fold")
    for dataset in campaign["datasets"]:
        table.add_row(dataset["region"], dataset["s3_uri"], str(dataset["objects"]),
                      str(dataset["bytes"]), str(dataset["registered_at"]))
    return table


def error_line(run: dict[str, Any]) -> Text:
    """``Error: cause`` of a run that ended badly, the error in bold red."""
    return Text.assemble(cell(run["error"], "bold red"), ": ", plain(run.get("cause") or ""))


def problems_lines(problems: list[dict[str, str]]) -> list[str]:
    """Each problem on a line of its own, as plain text (print it with ``markup=False``)."""
    return [plain(f"  {p['pointer'] or '/'}: {p['message']}") for p in problems]


def progress_line(run: dict[str, Any]) -> Text:
    state = run.get("current_state") or "starting"
    return cell(f"{run['name']}: {run['status']} · {step_of(state)} · "
                f"{duration(run['duration_s'])}")


class Changes:
    """Calls ``emit`` with a run's progress line only when its step or status changes."""

    def __init__(self, emit: Callable[[Text], None]) -> None:
        self.emit = emit
        self.last: tuple[str, str] | None = None

    def __call__(self, run: dict[str, Any]) -> None:
        now = (run["status"], step_of(run.get("current_state") or ""))
        if now != self.last:
            self.last = now
            self.emit(progress_line(run))
