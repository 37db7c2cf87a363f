"""CloudWatch Logs extracts the metrics of a log event written in the embedded metric format,
in any log group, as AWS does: the node's own lines become its metrics, and so does any other
line that follows the specification, whoever wrote it."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

from traingrid_local.emulator.embedded_metrics import extract
from traingrid_local.emulator.session import Emulator
from traingrid_node import emf

AT_MS = 1_795_000_000_000


def test_the_nodes_heartbeat_is_a_metric_per_dimension_set() -> None:
    line = emf.line({"StepsCompleted": 12, "StalledSeconds": 30.5}, "imagenet-1", "ip-10-0-1-7",
                    AT_MS)
    data = extract(line)
    assert {(d.name, d.dimensions) for d in data} == {
        (name, dims) for name in ("StepsCompleted", "StalledSeconds")
        for dims in ((("run", "imagenet-1"), ("node", "ip-10-0-1-7")), (("run", "imagenet-1"),))}
    stalled = next(d for d in data if d.name == "StalledSeconds")
    assert (stalled.namespace, stalled.values, stalled.unit) == ("TrainGrid", (30.5,), "Seconds")
    assert stalled.timestamp == datetime.fromtimestamp(AT_MS / 1000, UTC)


def test_a_line_anyone_prints_is_extracted_as_well() -> None:
    """No permission, no header: a job's command printing this publishes it."""
    forged = json.dumps({"_aws": {"Timestamp": AT_MS, "CloudWatchMetrics": [{
        "Namespace": "TrainGrid", "Dimensions": [["run", "node"]],
        "Metrics": [{"Name": "StalledSeconds"}]}]},
        "run": "someone-elses-run", "node": "n", "StalledSeconds": [0, 1, 2]})
    (datum,) = extract(forged)
    assert datum.dimensions == (("run", "someone-elses-run"), ("node", "n"))
    assert datum.values == (0.0, 1.0, 2.0) and datum.unit is None


def test_a_document_that_breaks_the_specification_publishes_nothing() -> None:
    good = json.loads(emf.line({"StalledSeconds": 1.0}, "r", "n", AT_MS))
    broken = [
        " " + json.dumps(good),  # something before the object
        json.dumps({k: v for k, v in good.items() if k != "_aws"}),
        json.dumps({**good, "_aws": {**good["_aws"], "Timestamp": "now"}}),
        json.dumps({**good, "run": 7}),  # a dimension that is no string
        json.dumps({**good, "node": "x" * 1025}),
        json.dumps({**good, "StalledSeconds": "90"}),  # a metric that is no number
        json.dumps({**good, "StalledSeconds": float("inf")}),  # JSON's Infinity
        json.dumps({**good, "StalledSeconds": []}),
        "not json at all",
        # a job's lines that would break the reader: a time past any calendar, deep nesting
        json.dumps({**good, "_aws": {**good["_aws"], "Timestamp": 1e300}}),
        "{" + '"a":' + "[" * 100_000 + "]" * 100_000 + "}",
    ]
    assert [extract(text) for text in broken] == [[]] * len(broken)


def test_put_log_events_publishes_what_it_stores(emulator: Emulator) -> None:
    logs, cloudwatch = emulator.client("logs"), emulator.client("cloudwatch")
    logs.create_log_group(logGroupName="/traingrid/t/training-jobs")
    logs.create_log_stream(logGroupName="/traingrid/t/training-jobs", logStreamName="s")
    now_ms = int(time.time() * 1000)
    answer = logs.put_log_events(
        logGroupName="/traingrid/t/training-jobs", logStreamName="s", logEvents=[
            {"timestamp": now_ms, "message": emf.line({"StalledSeconds": 5}, "kept", "n",
                                                      AT_MS)},
            {"timestamp": now_ms, "message": "epoch 1: loss 2.0"},
            # More than two hours ahead: CloudWatch Logs refuses the event, nothing is read.
            {"timestamp": now_ms + 3 * 3600 * 1000,
             "message": emf.line({"StalledSeconds": 5}, "refused", "n", AT_MS)}])
    assert answer["rejectedLogEventsInfo"] == {"tooNewLogEventStartIndex": 2}
    metrics = cloudwatch.list_metrics(Namespace="TrainGrid", MetricName="StalledSeconds")
    runs = {d["Value"] for m in metrics["Metrics"] for d in m["Dimensions"] if d["Name"] == "run"}
    assert runs == {"kept"}
