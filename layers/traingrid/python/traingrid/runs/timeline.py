"""An execution's states as a timeline, from its history: what the console's graph shows.

Each visit of a state is one entry (a poll loop visits its states many times): when it was
entered, how long it took, and how it ended — ``succeeded``, ``retried`` (failed, then a retry
succeeded), ``caught`` (failed and a Catch moved the run on, in a run that has not succeeded),
``failed`` (the execution failed in it), or ``running``; a visit that failed keeps its
``errors`` whatever its outcome. Pure: it reads events as GetExecutionHistory returns them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from traingrid import clock
from traingrid.vocabulary.statuses import RunStatus

# History event types that report a failure of the state they happen in.
FAILURE_EVENTS = ("Failed", "TimedOut", "Aborted")
SUCCESS_EVENTS = ("TaskSucceeded", "LambdaFunctionSucceeded", "MapStateSucceeded")
MAX_VISITS = 500
# How a state that was visited many times is summed up: its worst visit, in this order.
SEVERITY = ("failed", "caught", "running", "retried", "succeeded")


def worst(outcomes: list[str]) -> str:
    return min(outcomes, key=SEVERITY.index, default="succeeded")


@dataclass
class Visit:
    state: str
    kind: str  # Task, Choice, Wait, Pass, Map, Fail, Succeed, Parallel
    entered_at: datetime
    exited_at: datetime | None = None
    errors: list[str] = field(default_factory=list)
    last_attempt_failed: bool = False

    def outcome(self, execution_status: str) -> str:
        if self.exited_at is None:
            if self.kind == "Fail" or execution_status != RunStatus.RUNNING:
                return "failed"
            return "running"
        if not self.errors:
            return "succeeded"
        if not self.last_attempt_failed:
            return "retried"
        # In a run that succeeded, every Catch led on to that success: it was the state
        # machine's own way on (a wait that times out and waits again, a fallback), not a
        # warning. Its errors still show beside it.
        return "succeeded" if execution_status == RunStatus.SUCCEEDED else "caught"

    def as_dict(self, started_at: datetime, execution_status: str,
                ended_at: datetime) -> dict[str, Any]:
        end = self.exited_at or ended_at
        entry: dict[str, Any] = {
            "state": self.state,
            "type": self.kind,
            "entered_at": clock.iso(self.entered_at),
            "offset_s": round((self.entered_at - started_at).total_seconds(), 3),
            "duration_s": round(max(0.0, (end - self.entered_at).total_seconds()), 3),
            "outcome": self.outcome(execution_status),
        }
        if self.errors:
            entry["errors"] = self.errors
        return entry


def _failure_name(event: dict[str, Any]) -> str:
    for key, details in event.items():
        if key.endswith("EventDetails") and isinstance(details, dict) and details.get("error"):
            return str(details["error"])
    return event["type"]


def visits(events: list[dict[str, Any]]) -> list[Visit]:
    """Every state visit, in the order the states were entered."""
    found: list[Visit] = []
    open_visits: list[Visit] = []
    for event in events:
        kind = event["type"]
        if kind.endswith("StateEntered"):
            visit = Visit(event["stateEnteredEventDetails"]["name"],
                          kind.removesuffix("StateEntered"), event["timestamp"])
            found.append(visit)
            open_visits.append(visit)
        elif kind.endswith("StateExited"):
            name = event["stateExitedEventDetails"]["name"]
            exited = next((v for v in open_visits if v.state == name), None)
            if exited is not None:
                exited.exited_at = event["timestamp"]
                open_visits.remove(exited)
        elif open_visits and kind.startswith("Execution"):
            continue  # the execution's own end is not a state's failure
        elif open_visits and kind.endswith(FAILURE_EVENTS):
            open_visits[-1].errors.append(_failure_name(event))
            open_visits[-1].last_attempt_failed = True
        elif open_visits and kind in SUCCESS_EVENTS:
            open_visits[-1].last_attempt_failed = False
    return found


def by_state(found: list[Visit], status: str) -> dict[str, dict[str, Any]]:
    """Every state visited, over the whole run: how many times, and its worst outcome (what
    the console colours a state of the graph by)."""
    outcomes: dict[str, list[str]] = {}
    for visit in found:
        outcomes.setdefault(visit.state, []).append(visit.outcome(status))
    return {state: {"visits": len(seen), "outcome": worst(seen)}
            for state, seen in outcomes.items()}


def timeline(found: list[Visit], started_at: datetime, status: str,
             ended_at: datetime) -> tuple[list[dict[str, Any]], int]:
    """(the latest ``MAX_VISITS`` visits as JSON-ready dicts, how many earlier were left out)."""
    shown = found[-MAX_VISITS:]
    return ([v.as_dict(started_at, status, ended_at) for v in shown],
            len(found) - len(shown))
