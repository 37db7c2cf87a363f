"""A run's training curves, as ``GET /runs/{name}/metrics`` answers: every node's points
(``runs/<run>/outputs/metrics/node-<k>.jsonl``, which the trainer's nodes write as they train)
in bins of ``step`` seconds within a time range, per node and in total, and the nodes that
stand out as stragglers.

In total a bin's ``images_per_s`` is the nodes' sum, ``step_s``, ``input_s`` and
``gpu_mem_mib`` their largest, the rest their mean. A straggler is a node whose median
``images_per_s`` is under ``SLOW_SHARE`` of the nodes' median (nodes that train apart), or
whose median wait for input is over ``INPUT_SHARE`` of a step and ``INPUT_FACTOR`` times the
nodes' median (in a synchronous job every node steps at the slowest's pace; the slow one is
the one not waiting for its peers but for its data).

A fan-out's curves are its regions' SageMaker jobs' (``traingrid.runs.region_curves``).
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from traingrid import clock
from traingrid.aws import s3
from traingrid.runs import region_curves
from traingrid.training.plan import outputs_prefix

SERIES_DIR = "metrics/"  # traingrid_node.series.SERIES_DIR
FIELDS = ("loss", "lr", "images_per_s", "step_s", "input_s", "gpu_util", "gpu_mem_mib")
SUMMED, LARGEST = {"images_per_s"}, {"step_s", "input_s", "gpu_mem_mib"}
MAX_BINS = 300  # without a step, the range is cut into at most this many bins
# With a step, at most this many: 20 nodes' 7 curves of 1,000 points are about 3.5 MB, inside
# Lambda's 6 MB response (a larger answer is API Gateway's 502); a finer step is widened.
MAX_ASKED_BINS = 1000
MAX_NODE_BYTES = 16 * 1024**2
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


def parse_points(text: str) -> list[dict[str, float]]:
    """The whole, valid lines of a node's file (a torn or foreign line is skipped)."""
    points = []
    for line in text.splitlines():
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if (isinstance(found, dict) and isinstance(found.get("t"), int | float)
                and math.isfinite(found["t"])):
            points.append({k: float(v) for k, v in found.items()
                           if k in ("t", "step", "epoch", *FIELDS) and isinstance(v, int | float)
                           and not isinstance(v, bool) and math.isfinite(v)})
    return points


def _binned(points: Iterable[Mapping[str, float]], step: int) -> dict[str, dict[float, float]]:
    """Each field's mean in each bin (keyed by the bin's start)."""
    sums: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for p in points:
        start = math.floor(p["t"] / step) * step
        for name in FIELDS:
            if name in p:
                sums[name][start].append(p[name])
    return {name: {t: statistics.fmean(values) for t, values in bins.items()}
            for name, bins in sums.items()}


def _series(bins: Mapping[float, float]) -> Series:
    return [[t, round(v, 6)] for t, v in sorted(bins.items())]


def _total(nodes: Mapping[str, Mapping[str, Mapping[float, float]]]) -> dict[str, Series]:
    out: dict[str, Series] = {}
    for name in FIELDS:
        merged: dict[float, list[float]] = defaultdict(list)
        for fields in nodes.values():
            for t, v in fields.get(name, {}).items():
                merged[t].append(v)
        if not merged:
            continue
        combine = sum if name in SUMMED else max if name in LARGEST else statistics.fmean
        out[name] = _series({t: combine(values) for t, values in merged.items()})
    return out


def stragglers(nodes: Mapping[str, Mapping[str, Series]]) -> dict[str, str]:
    """Each straggling node and why."""
    def median(node: str, name: str) -> float | None:
        values = [v for _, v in nodes[node].get(name, [])]
        return statistics.median(values) if values else None

    found: dict[str, str] = {}
    if len(nodes) < 2:
        return found
    rates = {n: r for n in nodes if (r := median(n, "images_per_s")) is not None}
    inputs = {n: w for n in nodes if (w := median(n, "input_s")) is not None}
    typical_rate = statistics.median(rates.values()) if rates else 0
    typical_input = statistics.median(inputs.values()) if inputs else 0
    for node in sorted(nodes):
        rate, waited, step_s = rates.get(node), inputs.get(node), median(node, "step_s")
        if rate is not None and typical_rate and rate < SLOW_SHARE * typical_rate:
            found[node] = (f"{rate:.0f} images/s, {rate / typical_rate:.0%} of the nodes' "
                           f"median {typical_rate:.0f}")
        elif (waited is not None and step_s and waited > INPUT_SHARE * step_s
              and waited > INPUT_FACTOR * typical_input):
            found[node] = (f"waits {waited:.3f} s a step for its input ({waited / step_s:.0%} "
                           f"of a {step_s:.3f} s step; the nodes' median {typical_input:.3f} s)")
    return found


def curves(texts: Mapping[str, str], wanted: MetricsQuery) -> dict[str, Any]:
    """The answer's curves from each node's file: in total, per node, stragglers, the step."""
    low = _seconds(wanted.start) if wanted.start else -math.inf
    high = _seconds(wanted.end) if wanted.end else math.inf
    points = {node: [p for p in parse_points(text) if low <= p["t"] <= high]
              for node, text in sorted(texts.items())}
    times = [p["t"] for found in points.values() for p in found]
    span = max(times) - min(times) if times else 0.0
    step = bin_seconds(span, wanted)
    binned = {node: _binned(found, step) for node, found in points.items() if found}
    nodes = {node: {name: _series(bins) for name, bins in fields.items()}
             for node, fields in binned.items()}
    latest = max((p for found in points.values() for p in found),
                 key=lambda p: (p["t"], p.get("step", 0)), default=None)
    return {"step": step, **_total(binned), "nodes": nodes,
            "stragglers": stragglers(nodes),
            "latest": None if latest is None else {k: round(v, 6) for k, v in latest.items()}}


def node_texts(bucket: str, prefix: str) -> dict[str, str]:
    """Each node's file under ``prefix`` (``node-<k>.jsonl``), by node."""
    texts = {}
    for item in s3.objects_under(bucket, prefix):
        name = item["key"].removeprefix(prefix)
        if "/" not in name and name.endswith(".jsonl"):
            texts[name.removesuffix(".jsonl")] = s3.read_text_tail(
                bucket, item["key"], MAX_NODE_BYTES) or ""
    return texts


def training_run_curves(bucket: str, name: str, wanted: MetricsQuery) -> dict[str, Any]:
    prefix = outputs_prefix(name) + SERIES_DIR
    return {"source": f"s3://{bucket}/{prefix}", **curves(node_texts(bucket, prefix), wanted)}


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
