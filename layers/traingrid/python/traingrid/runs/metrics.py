"""A run's training curves, as ``GET /runs/{name}/metrics`` answers: its nodes' points
(``runs.node_series``: the files the trainer's nodes write as they train, read within bounds)
in bins of ``step`` seconds within a time range, in total and per node, and the nodes that
stand out as stragglers.

In total a bin's ``images_per_s`` is the nodes' sum, ``step_s``, ``input_s`` and
``gpu_mem_mib`` their largest, the rest their mean. A straggler is a node whose median
``images_per_s`` is under ``SLOW_SHARE`` of the nodes' median (nodes that train apart), or
whose median wait for input is over ``INPUT_SHARE`` of a step and ``INPUT_FACTOR`` times the
nodes' median (in a synchronous job every node steps at the slowest's pace; the slow one is
the one not waiting for its peers but for its data).

The answer stays far below Lambda's 6 MB response (a larger one is API Gateway's 502) for
every run: the total's curves have at most MAX_ASKED_BINS bins, and each node's are binned at
``node_step`` (``step``, or a multiple of it) so that all the nodes' curves together hold at
most NODE_POINTS points: 500 nodes' 7 curves of about 20 points, under 3 MB with the longest
numbers a value may have. Every number in it is finite (``runs.node_series`` bounds them).

A fan-out's curves are its regions' SageMaker jobs' (``traingrid.runs.region_curves``).
"""

from __future__ import annotations

import json
import math
import statistics
from array import array
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from traingrid import clock
from traingrid.runs import node_series, region_curves
from traingrid.training.plan import outputs_prefix

SERIES_DIR = "metrics/"  # traingrid_node.series.SERIES_DIR
FIELDS = node_series.FIELDS
SUMMED, LARGEST = {"images_per_s"}, {"step_s", "input_s", "gpu_mem_mib"}
MAX_BINS = 300  # without a step, the range is cut into at most this many bins
MAX_ASKED_BINS = 1000  # with a step, at most this many: a finer step is widened
# Every node's curves together: at most 35 bytes a point ([t, value] with the longest value
# node_series lets through), 2.8 MB, beside the total's 7 curves of 1,000 points.
NODE_POINTS = 80_000
STRAGGLER_FIELDS = ("images_per_s", "input_s", "step_s")
SLOW_SHARE = 0.8
INPUT_SHARE, INPUT_FACTOR = 0.2, 2.0

Series = list[list[float]]  # [[t, value], ...], t in Unix seconds


class MetricsQuery(BaseModel):
    """``start`` and ``end`` (RFC 3339) bound the points' times; ``step`` is a bin's seconds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start: Annotated[datetime | None, BeforeValidator(clock.request_time)] = None
    end: Annotated[datetime | None, BeforeValidator(clock.request_time)] = None
    step: int | None = Field(default=None, ge=1, le=86_400)

    @model_validator(mode="after")
    def ordered(self) -> MetricsQuery:
        if self.start and self.end and _seconds(self.end) < _seconds(self.start):
            raise ValueError("end is before start")
        return self


def _moment(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _seconds(moment: datetime) -> float:
    return _moment(moment).timestamp()


def bin_seconds(span: float, wanted: MetricsQuery) -> int:
    """A bin's seconds for points over ``span`` seconds: the asked step (widened to at most
    MAX_ASKED_BINS bins), else the span in at most MAX_BINS bins."""
    return (max(wanted.step, math.ceil(span / MAX_ASKED_BINS)) if wanted.step
            else max(1, math.ceil(span / MAX_BINS)))


def node_factor(nodes: int, span: float, step: int) -> int:
    """How many of the total's bins a node's bin spans, so that ``nodes`` nodes' curves over
    ``span`` seconds hold at most NODE_POINTS points: a curve of bins ``width`` seconds wide
    has at most span / width + 2 of them (its first and last may be partial)."""
    room = max(NODE_POINTS / (max(nodes, 1) * len(FIELDS)) - 2, 1.0)
    return max(1, math.ceil(span / step / room))


Bins = tuple[dict[int, float], dict[int, int]]  # each bin's sum and count, by its start


def _bins(times: array[float], values: array[float], width: int) -> Bins:
    """The values' sum and count in each bin ``width`` seconds wide."""
    sums: dict[int, float] = {}
    counts: dict[int, int] = {}
    for t, v in zip(times, values, strict=True):
        start = int(t // width) * width
        if start in sums:
            sums[start] += v
            counts[start] += 1
        else:
            sums[start], counts[start] = v, 1
    return sums, counts


def _wider(bins: Bins, width: int) -> Bins:
    """``bins`` in bins ``width`` seconds wide, a whole number of theirs: the same as binning
    their points so (floor(floor(t / s) / k) is floor(t / (k s)))."""
    sums: dict[int, float] = {}
    counts: dict[int, int] = {}
    for start, total in bins[0].items():
        wide = start // width * width
        sums[wide] = sums.get(wide, 0.0) + total
        counts[wide] = counts.get(wide, 0) + bins[1][start]
    return sums, counts


def _means(bins: Bins) -> dict[int, float]:
    sums, counts = bins
    return {start: total / counts[start] for start, total in sums.items()}


def _series(bins: Mapping[int, float]) -> Series:
    return [[t, round(v, 6)] for t, v in sorted(bins.items())]


class _Total:
    """The nodes' bins combined, a node at a time: summed, the largest, or their mean."""

    def __init__(self) -> None:
        self.bins: dict[str, dict[int, list[float]]] = {}

    def add(self, name: str, means: Mapping[int, float]) -> None:
        into = self.bins.setdefault(name, {})
        for start, v in means.items():
            found = into.get(start)
            if found is None:
                into[start] = [v, 1]
            elif name in SUMMED:
                found[0] += v
            elif name in LARGEST:
                found[0] = max(found[0], v)
            else:
                found[0] += v
                found[1] += 1

    def curves(self) -> dict[str, Series]:
        return {name: _series({t: total / count for t, (total, count) in self.bins[name].items()})
                for name in FIELDS if self.bins.get(name)}


def stragglers(medians: Mapping[str, Mapping[str, float]]) -> dict[str, str]:
    """Each straggling node and why, from each node's medians of its bins (by field)."""
    found: dict[str, str] = {}
    if len(medians) < 2:
        return found
    rates = {n: m["images_per_s"] for n, m in medians.items() if "images_per_s" in m}
    inputs = {n: m["input_s"] for n, m in medians.items() if "input_s" in m}
    typical_rate = statistics.median(rates.values()) if rates else 0
    typical_input = statistics.median(inputs.values()) if inputs else 0
    for node in medians:
        rate, waited, step_s = rates.get(node), inputs.get(node), medians[node].get("step_s")
        if rate is not None and typical_rate and rate < SLOW_SHARE * typical_rate:
            found[node] = (f"{rate:.0f} images/s, {rate / typical_rate:.0%} of the nodes' "
                           f"median {typical_rate:.0f}")
        elif (waited is not None and step_s and waited > INPUT_SHARE * step_s
              and waited > INPUT_FACTOR * typical_input):
            found[node] = (f"waits {waited:.3f} s a step for its input ({waited / step_s:.0%} "
                           f"of a {step_s:.3f} s step; the nodes' median {typical_input:.3f} s)")
    return found


def _node_order(name: str) -> tuple[int, str]:
    return len(name), name  # node-2 before node-10


def curves(read: node_series.Read, wanted: MetricsQuery) -> dict[str, Any]:
    """The answer's curves from the nodes' points (``node_series``, within ``wanted``'s
    range): in total, per node, stragglers, the latest point, the bins' seconds."""
    nodes = {name: read.nodes[name] for name in sorted(read.nodes, key=_node_order)}
    ends = [(min(times), max(times)) for points in nodes.values()
            for times, _ in points.series.values() if times]
    span = max(e[1] for e in ends) - min(e[0] for e in ends) if ends else 0.0
    step = bin_seconds(span, wanted)
    node_step = step * node_factor(len(nodes), span, step)
    total = _Total()
    medians: dict[str, dict[str, float]] = {}
    per_node: dict[str, dict[str, Series]] = {}
    for node, points in nodes.items():
        bins = {name: _bins(times, values, step)
                for name, (times, values) in points.series.items() if times}
        fine = {name: _means(found) for name, found in bins.items()}
        for name, means in fine.items():
            total.add(name, means)
        medians[node] = {name: statistics.median(fine[name].values())
                         for name in STRAGGLER_FIELDS if name in fine}
        coarse = fine if node_step == step else {
            name: _means(_wider(found, node_step)) for name, found in bins.items()}
        per_node[node] = {name: _series(coarse[name]) for name in FIELDS if name in coarse}
    latest = max((p.latest for p in nodes.values() if p.latest), default=None,
                 key=lambda p: (p["t"], p.get("step", 0)))
    return {"step": step, "node_step": node_step, **total.curves(),
            "nodes": {node: found for node, found in per_node.items() if found},
            "stragglers": stragglers({n: m for n, m in medians.items() if per_node[n]}),
            "latest": None if latest is None else {k: round(v, 6) for k, v in latest.items()}}


def run_nodes(execution_input: str | None) -> int:
    """The most nodes a run had: its request's ``nodes`` (its attempts never have more), or
    the most any request may ask for where its input names none."""
    try:
        request = json.loads(execution_input or "null").get("request")
        nodes = request.get("nodes")
    except (ValueError, RecursionError, AttributeError):
        return node_series.MAX_NODES
    ok = isinstance(nodes, int) and not isinstance(nodes, bool)
    return nodes if ok and 1 <= nodes <= node_series.MAX_NODES else node_series.MAX_NODES


def training_run_curves(bucket: str, name: str, wanted: MetricsQuery, nodes: int,
                        started: datetime) -> dict[str, Any]:
    """A TrainingRun's curves: the files of its ``nodes`` nodes, the points within its
    lifetime (``started`` to now); what was left out of them in ``ignored``."""
    prefix = outputs_prefix(name) + SERIES_DIR
    lifetime = node_series.run_lifetime(started, clock.now())
    low = _seconds(wanted.start) if wanted.start else -math.inf
    high = _seconds(wanted.end) if wanted.end else math.inf
    read = node_series.read_nodes(bucket, prefix, nodes, lifetime, (low, high))
    notes = read.notes(node_series.share(nodes), lifetime)
    return {"source": f"s3://{bucket}/{prefix}", **curves(read, wanted)} | (
        {"ignored": notes} if notes else {})


def moment(seconds: float | None) -> str | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC).isoformat()


def fanout_curves(name: str, planned: Sequence[Mapping[str, Any]],
                  reported: Mapping[str, Mapping[str, Any]], wanted: MetricsQuery,
                  now: datetime, describe: region_curves.Describe,
                  list_named: region_curves.ListNamed,
                  metric_data: region_curves.MetricData) -> dict[str, Any]:
    """A fan-out's curves by data region: what SageMaker records of each region's job
    (``traingrid.runs.region_curves``); the fan-out itself has no nodes of its own."""
    step, regions = region_curves.fanout_regions(
        name, planned, reported, lambda span: bin_seconds(span, wanted), wanted.start and
        _moment(wanted.start), wanted.end and _moment(wanted.end), now, describe, list_named,
        metric_data)
    return {"step": step, "nodes": {}, "stragglers": {}, "latest": None, "regions": regions,
            "note": ("Each region's curves are its SageMaker job's metrics in CloudWatch "
                     f"({region_curves.NAMESPACE}, {region_curves.DIMENSION} <job>) in "
                     "the region where it trained; its TensorBoard files are under "
                     "'tensorboard' in that region.")}
