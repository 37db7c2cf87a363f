"""The job's ``metrics.json``, read once for the run's goodput (``costs.goodput``): the in-job
recoveries it reports, as node-seconds by cause, and every value left out, with why.

The job's ``metrics.json`` (among its outputs; the trainer's contract,
``traingrid_node.metrics``) lists each recovery of that attempt: a worker node lost, the ranks
left restarted by elastic torchrun and gone on from the newest checkpoint. Each says the nodes
before and after, ``recovery_s`` (the last step before the loss to the first one after it:
the collectives' timeout, the re-rendezvous, the checkpoint's load) and ``lost_work_s`` (the
steps since that checkpoint, trained again). The recovery is paid on the nodes left (the lost
one is paid to its loss only: ``costs.node_time``); the lost work on every node the job had.

The job writes this file, and so can any job that writes under ``runs/``: nothing in it is
trusted. A recovery with a value of the wrong type, negative, not finite, or beyond what the
attempt had (more nodes than it ran on, more after than before, a recovery or lost work
longer than it ran, recoveries adding up to more than it ran) is left out and named in
``ignored``, which the receipt's goodput shows; it is never clamped into the figures, so a
forged file can neither stop the archive nor turn the goodput into 0 %. Pure: tested without
AWS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

METRICS_FILE = "metrics.json"  # traingrid_node.metrics.METRICS_FILE, the job's side
METRICS_MAX_BYTES = 1024 * 1024
# The notes ride in the run's state (256 KiB in all) and its receipt: the first few, then a
# count; each cut to a line.
MAX_NOTES = 20
NOTE_CHARS = 300


@dataclass(frozen=True)
class Bounds:
    """What the attempt had: its nodes, and the seconds it ran (or could run at most)."""

    nodes: int
    seconds: int


@dataclass(frozen=True)
class Reported:
    """Node-seconds by cause (empty when no recovery was read), and each value left out."""

    phases: dict[str, int] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)


def shown(value: Any) -> str:
    """A value the job wrote, as a note may show it: short, whatever it is."""
    if isinstance(value, bool) or value is None:
        return "true" if value is True else "false" if value is False else "null"
    if isinstance(value, int):
        return str(value) if abs(value) < 10**15 else "an integer too large"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, str):
        return "text"
    return "a list" if isinstance(value, list) else "an object" if isinstance(
        value, dict) else "a value"


def _number(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and (not isinstance(value, float) or math.isfinite(value)))


def _nodes_problem(value: Any, most: int, of: str) -> str | None:
    if not isinstance(value, int) or isinstance(value, bool):
        return "is not a whole number of nodes"
    if not 1 <= value <= most:
        return f"is not from 1 to {of} ({most})"
    return None


def _seconds_problem(value: Any, most: int) -> str | None:
    if not _number(value):
        return "is not a finite number of seconds"
    if value < 0:
        return "is negative"
    if value > most:
        return f"is longer than the attempt ran ({most} s)"
    return None


def _entry(entry: Any, where: str, bounds: Bounds, notes: list[str]
           ) -> tuple[int, int, float, float] | None:
    """(nodes before, after, recovery_s, lost_work_s) of one recovery; None, with a note for
    each value wrong, when it is left out."""
    if not isinstance(entry, dict):
        notes.append(f"{where}: {shown(entry)}, not a recovery; left out")
        return None
    before: Any = entry.get("nodes_before")
    after: Any = entry.get("nodes_after")
    took: Any = entry.get("recovery_s")
    redone: Any = entry.get("lost_work_s")
    wrong = {
        "nodes_before": _nodes_problem(before, bounds.nodes, "the attempt's nodes"),
        "recovery_s": _seconds_problem(took, bounds.seconds),
        "lost_work_s": _seconds_problem(redone, bounds.seconds),
    }
    wrong["nodes_after"] = (_nodes_problem(after, before, "nodes_before")
                            if isinstance(before, int) and wrong["nodes_before"] is None
                            else _nodes_problem(after, bounds.nodes, "the attempt's nodes"))
    found = [f"{where}/{name}: {shown(entry.get(name))} {why}; the recovery is left out"
             for name, why in wrong.items() if why is not None]
    if found:
        notes.extend(found)
        return None
    return before, after, float(took), float(redone)


def read(document: Any, bounds: Bounds) -> Reported:
    """The recoveries ``document`` (a metrics.json) reports, within ``bounds``: their
    node-seconds of recovery and lost work, and a note for every value left out."""
    if not isinstance(document, dict):
        return Reported(ignored=[f"metrics.json is {shown(document)}, not an object; no "
                                 "recoveries read"])
    listed = document.get("recoveries")
    if listed is None:
        return Reported()
    if not isinstance(listed, list):
        return Reported(ignored=[f"/recoveries: {shown(listed)}, not a list; no recoveries "
                                 "read"])
    notes: list[str] = []
    recovery = lost_work = spent = 0.0
    kept = 0
    for index, entry in enumerate(listed):
        where = f"/recoveries/{index}"
        read_entry = _entry(entry, where, bounds, notes)
        if read_entry is None:
            continue
        before, after, took, redone = read_entry
        # Recovering and training again both take the attempt's time: together never more.
        if spent + took + redone > bounds.seconds:
            notes.append(f"{where}: with the recoveries before it, {spent + took + redone:.0f} s "
                         f"of recovery and lost work, more than the attempt ran "
                         f"({bounds.seconds} s); the recovery is left out")
            continue
        spent += took + redone
        kept += 1
        recovery += after * took
        lost_work += before * redone
    phases = {"recovery": round(recovery), "lost_work": round(lost_work)} if kept else {}
    return Reported(phases, bounded(notes))


def bounded(notes: list[str]) -> list[str]:
    """The first MAX_NOTES notes, each cut to a line, and how many more there were."""
    kept = [n if len(n) <= NOTE_CHARS else n[:NOTE_CHARS - 1] + "…" for n in notes[:MAX_NOTES]]
    if len(notes) > MAX_NOTES:
        kept.append(f"and {len(notes) - MAX_NOTES} more value(s) left out")
    return kept
