"""CloudWatch's embedded metric format, as its specification states it ("Specification:
Embedded metric format", CloudWatch User Guide), checked line by line: what CloudWatch Logs
would extract from a log event, or why it would not.

- the log event is a JSON object, with nothing before or after it;
- its root has ``_aws``, an object with ``Timestamp`` (a number: milliseconds since the epoch)
  and ``CloudWatchMetrics`` (an array of MetricDirective objects);
- a MetricDirective has ``Namespace`` (a string; CloudWatch's Namespace: 1-255 characters, not
  starting with ':'), ``Dimensions`` (an array of DimensionSets: arrays of at most 30 strings,
  each naming a member of the root whose value is a string, at most 1024 characters:
  Dimension.Value) and ``Metrics`` (an array of at most 100 MetricDefinition objects: ``Name``
  (1-255 characters) naming a member of the root holding a number or an array of at most 100
  numbers, ``Unit`` optional, one of CloudWatch's StandardUnit values, ``StorageResolution``
  optional, 1 or 60);
- the objects the specification defines hold no other members.
"""

from __future__ import annotations

import json
import math
from typing import Any

# CloudWatch's StandardUnit (botocore's cloudwatch model).
UNITS = {"Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes",
         "Gigabytes", "Terabytes", "Bits", "Kilobits", "Megabits", "Gigabits", "Terabits",
         "Percent", "Count", "Bytes/Second", "Kilobytes/Second", "Megabytes/Second",
         "Gigabytes/Second", "Terabytes/Second", "Bits/Second", "Kilobits/Second",
         "Megabits/Second", "Gigabits/Second", "Terabits/Second", "Count/Second", "None"}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(
        value)


def problems(text: str) -> list[str]:
    """Why CloudWatch would extract no metric, or not these, from the log event ``text``."""
    if text != text.strip():
        return ["data before or after the JSON object"]
    try:
        root = json.loads(text)
    except ValueError as error:
        return [f"not JSON: {error}"]
    if not isinstance(root, dict):
        return ["not a JSON object"]
    meta = root.get("_aws")
    if not isinstance(meta, dict):
        return ["no _aws object"]
    found = [f"_aws has {k}" for k in meta if k not in ("Timestamp", "CloudWatchMetrics",
                                                        "LogGroupName")]
    if not _number(meta.get("Timestamp")) or meta["Timestamp"] < 10**12:
        found.append("_aws.Timestamp is not milliseconds since the epoch")
    directives = meta.get("CloudWatchMetrics")
    if not isinstance(directives, list) or not directives:
        return [*found, "_aws.CloudWatchMetrics is not a non-empty array"]
    for directive in directives:
        found += _directive_problems(root, directive)
    return found


def _directive_problems(root: dict[str, Any], directive: Any) -> list[str]:
    if not isinstance(directive, dict):
        return ["a MetricDirective is not an object"]
    found = [f"a MetricDirective has {k}" for k in directive
             if k not in ("Namespace", "Dimensions", "Metrics")]
    namespace = directive.get("Namespace")
    if not isinstance(namespace, str) or not 1 <= len(namespace) <= 255 or \
            namespace.startswith(":"):
        found.append(f"Namespace {namespace!r}")
    for dimension_set in directive.get("Dimensions", []):
        if not isinstance(dimension_set, list) or len(dimension_set) > 30:
            found.append(f"DimensionSet {dimension_set!r}")
            continue
        for name in dimension_set:
            value = root.get(name) if isinstance(name, str) else None
            if not isinstance(value, str) or not 1 <= len(value) <= 1024:
                found.append(f"dimension {name!r} is not a string member of the root")
    metrics = directive.get("Metrics")
    if not isinstance(metrics, list) or not 1 <= len(metrics) <= 100:
        return [*found, "Metrics is not an array of 1-100 MetricDefinitions"]
    for metric in metrics:
        found += _metric_problems(root, metric)
    return found


def _metric_problems(root: dict[str, Any], metric: Any) -> list[str]:
    name = metric.get("Name") if isinstance(metric, dict) else None
    if not isinstance(name, str) or not 1 <= len(name) <= 255:
        return [f"MetricDefinition {metric!r} has no Name"]
    found = [f"{name} has {k}" for k in metric if k not in ("Name", "Unit", "StorageResolution")]
    if "Unit" in metric and metric["Unit"] not in UNITS:
        found.append(f"{name}'s Unit {metric['Unit']!r}")
    if metric.get("StorageResolution", 60) not in (1, 60):
        found.append(f"{name}'s StorageResolution")
    value = root.get(name)
    if not (_number(value) or (isinstance(value, list) and 0 < len(value) <= 100
                               and all(_number(v) for v in value))):
        found.append(f"{name} is not a number in the root")
    return found


def lines(output: str) -> list[dict[str, Any]]:
    """The EMF documents among a log's lines (those with an ``_aws`` member), each checked."""
    found = []
    for text in output.splitlines():
        if text.startswith("{") and '"_aws"' in text:
            assert problems(text) == [], (text, problems(text))
            found.append(json.loads(text))
    return found
