"""A TrainingRun's nodes' points, as ``runs.metrics`` bins them: read from the files the nodes
write as they train (``runs/<run>/outputs/metrics/node-<k>.jsonl``, ``traingrid_node.series``).

The job writes these files, and so can any job that writes under ``runs/``: nothing in them is
trusted, and what the API function (512 MB, 29 s) reads of them is bounded.

- Only the run's own nodes' files are read: ``node-0`` to ``node-<n-1>`` for the ``n`` nodes
  its request asked for (at most MAX_NODES; its attempts never have more). A file of any other
  name under the folder is never listed nor read, so a planted node cannot make the run's own
  read as stragglers.
- Of each file, its newest bytes: at most MAX_NODE_BYTES, and a node's share of READ_BYTES over
  all of them; of those, its newest lines: a node's share of READ_LINES (short lines would
  otherwise make millions of them of a few MiB). A line over MAX_LINE characters is not a point.
- A point's time ``t`` is within the run's lifetime (its start to now, CLOCK_SLACK_S either
  side for the nodes' clocks); each value is a finite number, at most MAGNITUDE in size and,
  but for the loss, not negative (so that sums over every node and bin stay finite and short).

What is left out is counted in ``Read.notes``, which the answer carries as ``ignored``.
"""

from __future__ import annotations

import json
import math
from array import array
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from traingrid.aws import s3
from traingrid.errors import TrainGridError

FIELDS = ("loss", "lr", "images_per_s", "step_s", "input_s", "gpu_util", "gpu_mem_mib")
SIGNED = {"loss"}  # every other value is a rate, a time, a count or a size
MAX_NODES = 500  # run_request.TrainingRunRequest.nodes: le=500
MAX_NODE_BYTES = 16 * 1024**2
# About 200,000 points of ~165 bytes, parsed and binned in a few CPU-seconds: 500 nodes' newest
# 64 KiB each (about 400 points), 20 nodes' 1.6 MiB.
READ_BYTES = 32 * 1024**2
READ_LINES = 200_000  # as many as READ_BYTES holds of real points
READERS = 10  # GETs in flight: botocore's pool keeps 10 connections
MAX_LINE = 2048  # a point is about 200 characters
MAGNITUDE = 1e12
CLOCK_SLACK_S = 600.0
NOTE_CHARS = 300


@dataclass
class NodePoints:
    """One node's points: each field's times and values (compact: a run's files hold hundreds
    of thousands of points), and its newest point."""

    series: dict[str, tuple[array[float], array[float]]] = field(default_factory=lambda: {
        name: (array("d"), array("d")) for name in FIELDS})
    latest: dict[str, float] | None = None

    def add(self, point: dict[str, float]) -> None:
        t = point["t"]
        for name, (times, values) in self.series.items():
            value = point.get(name)
            if value is not None:
                times.append(t)
                values.append(value)
        if self.latest is None or (t, point.get("step", 0)) >= (
                self.latest["t"], self.latest.get("step", 0)):
            self.latest = point


@dataclass
class Read:
    """Every node's points, and what was left out (counted, never echoed)."""

    nodes: dict[str, NodePoints] = field(default_factory=dict)
    values: Counter[str] = field(default_factory=Counter)  # left out, by field
    untimely: int = 0  # points timed outside the run's lifetime
    not_points: int = 0  # lines that are not a point (torn, not JSON, too long, no time)
    cut: int = 0  # files longer than what was read of them
    cut_lines: int = 0  # files with more lines than a node's share of READ_LINES
    unread: list[str] = field(default_factory=list)  # why each file that was not read

    def notes(self, share: int, lifetime: tuple[float, float]) -> list[str]:
        found = []
        if self.untimely:
            found.append(f"{self.untimely} point(s) timed outside the run's lifetime "
                         f"({_moment(lifetime[0])} to {_moment(lifetime[1])}) left out")
        if self.values:
            named = ", ".join(f"{name} ×{count}" for name, count in sorted(self.values.items()))
            found.append(f"{sum(self.values.values())} value(s) not a finite number, over "
                         f"{MAGNITUDE:.0e} or negative left out: {named}")
        if self.not_points:
            found.append(f"{self.not_points} line(s) that are not points skipped (not a JSON "
                         f"object with a numeric t, or over {MAX_LINE} characters)")
        if self.cut:
            found.append(f"{self.cut} node file(s) larger than a node's share ({share:,} "
                         "bytes): only the newest part of each read")
        if self.cut_lines:
            found.append(f"{self.cut_lines} node file(s) with more lines than a node's share: "
                         "only the newest lines read")
        if self.unread:
            found.append(f"{len(self.unread)} node file(s) not read: {self.unread[0]}"
                         [:NOTE_CHARS])
        return found


def _moment(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="seconds")


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer of hundreds of digits
        return None
    return number if math.isfinite(number) else None


# Each value a point may hold, and the least it may be.
LEAST = {name: -MAGNITUDE if name in SIGNED else 0.0 for name in ("step", "epoch", *FIELDS)}


def _line(line: str) -> tuple[float, dict[str, Any]] | None:
    """A line's time and JSON object; None when it is not a point."""
    if not line.startswith("{") or len(line) > MAX_LINE:
        return None
    try:
        found = json.loads(line)
    except (ValueError, RecursionError):
        return None
    t = _number(found.get("t")) if isinstance(found, dict) else None
    return None if t is None else (t, found)


def parse_into(read: Read, node: str, text: str, lifetime: tuple[float, float],
               wanted: tuple[float, float], max_lines: int = READ_LINES) -> None:
    """The points of the newest ``max_lines`` lines of ``text`` (a node's file) timed within
    ``lifetime`` and ``wanted`` into ``read``: a value out of bounds is left out of its point,
    what is not a point skipped."""
    points = read.nodes.setdefault(node, NodePoints())
    lines = text.rstrip("\n").rsplit("\n", max(max_lines, 1))  # splits no more than that
    if len(lines) > max_lines:
        read.cut_lines += 1
        lines = lines[1:]
    for line in lines:
        parsed = _line(line)
        if parsed is None:
            read.not_points += bool(line.strip())
            continue
        t, found = parsed
        if not lifetime[0] <= t <= lifetime[1]:
            read.untimely += 1
            continue
        if not wanted[0] <= t <= wanted[1]:
            continue
        point = {"t": t}
        for name, least in LEAST.items():
            if name in found:
                value = found[name]
                kind = type(value)  # bool is not a number here
                # NaN and infinities fail the comparison; an int of any size compares exactly.
                if (kind is float or kind is int) and least <= value <= MAGNITUDE:
                    point[name] = float(value)
                else:
                    read.values[name] += 1
        points.add(point)
    if points.latest is None:
        del read.nodes[node]


def node_names(count: int) -> list[str]:
    """The run's nodes' names (``traingrid_node.series.node_name``), MAX_NODES at most."""
    return [f"node-{k}" for k in range(min(max(count, 0), MAX_NODES))]


def share(nodes: int) -> int:
    """The bytes read of each of ``nodes`` files at most."""
    return min(MAX_NODE_BYTES, READ_BYTES // max(nodes, 1))


def run_lifetime(started: datetime, now: datetime) -> tuple[float, float]:
    """The times a run's points may have: from its start to now, with the nodes' clocks'
    slack either side."""
    return started.timestamp() - CLOCK_SLACK_S, now.timestamp() + CLOCK_SLACK_S


def read_nodes(bucket: str, prefix: str, nodes: int, lifetime: tuple[float, float],
               wanted: tuple[float, float]) -> Read:
    """Each of the run's ``nodes`` files under ``prefix`` that exists, read within the bounds
    above (several at once), its points parsed as each arrives."""
    names, most = node_names(nodes), share(nodes)
    lines = READ_LINES // max(len(names), 1)
    read = Read()

    def tail(name: str) -> s3.Tail | str | None:
        try:
            return s3.read_tail(bucket, f"{prefix}{name}.jsonl", most)
        except TrainGridError as error:
            return f"{name}'s: {error}"

    with ThreadPoolExecutor(READERS) as pool:
        for name, got in zip(names, pool.map(tail, names), strict=True):
            if isinstance(got, str):
                read.unread.append(got)
            elif got is not None:
                data = got.data
                if got.size > len(data):  # read from within a line: that part is no point
                    read.cut += 1
                    data = data[data.find(b"\n") + 1:] if b"\n" in data else b""
                parse_into(read, name, data.decode("utf-8", "replace"), lifetime, wanted,
                           lines)
    return read


def parse_all(texts: Mapping[str, str], lifetime: tuple[float, float] = (0.0, 4102444800.0),
              wanted: tuple[float, float] = (-math.inf, math.inf)) -> Read:
    """``texts`` (node → its file) parsed as ``read_nodes`` parses what it reads."""
    read = Read()
    for node, text in texts.items():
        parse_into(read, node, text, lifetime, wanted, READ_LINES // max(len(texts), 1))
    return read
