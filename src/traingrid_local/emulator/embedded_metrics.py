"""Adaptation (moto 5.2.5): CloudWatch Logs extracts the metrics of every log event written in
CloudWatch's embedded metric format (EMF), as AWS does; moto stores the event and nothing more.

AWS extracts them from a log event of any log group: PutLogEvents' ``x-amzn-logs-format:
json/emf`` header "is not required" (CloudWatch User Guide, "Using the PutLogEvents API to send
manually-created embedded metric format logs"), and no CloudWatch permission is asked. So
whoever writes a line to a log group (a training job's own command, to its job's stream)
publishes metrics in any namespace with any dimensions: the stalled-run alarm reads such
metrics, and what it may trust of them is docs/observability.md's.

What is extracted ("Specification: Embedded metric format"): a log event that is one JSON
object, nothing before or after it, whose root holds ``_aws`` with ``Timestamp`` (milliseconds
since the epoch: the data points' time) and ``CloudWatchMetrics``, an array of directives, each
a ``Namespace``, ``Dimensions`` (an array of dimension sets, each an array of at most 30 names
of string members of the root) and ``Metrics`` (1-100 of ``{Name, Unit?, StorageResolution?}``,
each Name a member of the root holding a number or an array of 1-100 numbers). Each metric is
published once per dimension set, with that set's values from the root. The emulator is
strict: a document that breaks a rule publishes nothing (AWS counts those in ``AWS/Logs``'
EMF validation and parsing errors). Only the events moto accepted (its 14 days past, two hours
ahead) are read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from moto.cloudwatch.models import cloudwatch_backends
from moto.logs.models import LogsBackend

from traingrid_local.emulator.patching import PATCHES

MAX_DIMENSIONS = 30  # a dimension set's names
MAX_METRICS = 100  # a directive's metrics, and an array value's numbers
MAX_DIMENSION_VALUE = 1024  # CloudWatch's Dimension.Value


@dataclass(frozen=True)
class Datum:
    """One metric's data points from one log event, as PutMetricData would put them."""

    namespace: str
    name: str
    values: tuple[float, ...]
    dimensions: tuple[tuple[str, str], ...]
    timestamp: datetime
    unit: str | None


def _number(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))


def _values(value: Any) -> tuple[float, ...] | None:
    if _number(value):
        return (float(value),)
    if (isinstance(value, list) and 0 < len(value) <= MAX_METRICS
            and all(_number(v) for v in value)):
        return tuple(float(v) for v in value)
    return None


def extract(message: str) -> list[Datum]:
    """The data points CloudWatch extracts from one log event (none when it is not EMF)."""
    if not message.startswith("{") or message != message.strip():
        return []
    try:
        root = json.loads(message)
    except (ValueError, RecursionError):  # a job's line: deeply nested is no EMF either
        return []
    meta = root.get("_aws") if isinstance(root, dict) else None
    if not isinstance(meta, dict) or not _number(meta.get("Timestamp")):
        return []
    directives = meta.get("CloudWatchMetrics")
    if not isinstance(directives, list) or not directives:
        return []
    try:
        at = datetime.fromtimestamp(meta["Timestamp"] / 1000, UTC)
    except (OverflowError, ValueError, OSError):  # a time no calendar holds
        return []
    found: list[Datum] = []
    for directive in directives:
        data = _directive(root, directive, at)
        if data is None:
            return []
        found += data
    return found


def _directive(root: dict[str, Any], directive: Any, at: datetime) -> list[Datum] | None:
    if not isinstance(directive, dict):
        return None
    namespace, sets, metrics = (directive.get(k) for k in ("Namespace", "Dimensions",
                                                            "Metrics"))
    if not (isinstance(namespace, str) and 1 <= len(namespace) <= 255
            and isinstance(sets, list) and isinstance(metrics, list)
            and 1 <= len(metrics) <= MAX_METRICS):
        return None
    dimension_sets = [_dimension_set(root, names) for names in sets]
    if any(found is None for found in dimension_sets):
        return None
    data = []
    for metric in metrics:
        name = metric.get("Name") if isinstance(metric, dict) else None
        if not isinstance(name, str) or not name:
            return None
        values = _values(root.get(name))
        if values is None:
            return None
        for dimensions in dimension_sets:
            assert dimensions is not None
            data.append(Datum(namespace, name, values, dimensions, at, metric.get("Unit")))
    return data


def _dimension_set(root: dict[str, Any], names: Any) -> tuple[tuple[str, str], ...] | None:
    if not isinstance(names, list) or len(names) > MAX_DIMENSIONS:
        return None
    pairs = []
    for name in names:
        value = root.get(name) if isinstance(name, str) else None
        if not isinstance(value, str) or not 1 <= len(value) <= MAX_DIMENSION_VALUE:
            return None
        pairs.append((name, value))
    return tuple(pairs)


def publish(account_id: str, region: str, data: Sequence[Datum]) -> None:
    backend = cloudwatch_backends[account_id][region]
    for datum in data:
        backend.put_metric_data(datum.namespace, [{
            "MetricName": datum.name, "Values": list(datum.values),
            "Dimensions": [{"Name": n, "Value": v} for n, v in datum.dimensions],
            # naive UTC, as moto keeps every datum (its GetMetricData compares with them)
            "Timestamp": datum.timestamp.astimezone(UTC).replace(tzinfo=None),
            "Unit": datum.unit}])


def _accepted(events: list[dict[str, Any]], rejected: dict[str, Any]) -> list[dict[str, Any]]:
    """The events moto stored: those between its too-old and too-new indexes."""
    first = rejected.get("tooOldLogEventEndIndex", -1) + 1
    end = rejected.get("tooNewLogEventStartIndex", len(events))
    return events[first:end]


def _put_log_events(previous: Any) -> Any:
    def put_log_events(self: LogsBackend, log_group_name: str, log_stream_name: str,
                       log_events: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
        token, rejected = previous(self, log_group_name, log_stream_name, log_events)
        for event in _accepted(log_events, rejected):
            publish(self.account_id, self.region_name, extract(event["message"]))
        return token, rejected

    return put_log_events


def apply() -> None:
    PATCHES.wrap(LogsBackend, "put_log_events", _put_log_events)
