"""The node's CloudWatch metrics (traingrid_node.emf): every line it writes is an embedded
metric format document CloudWatch extracts, namespace TrainGrid, dimensions run and node."""

from __future__ import annotations

import io
import json

import pytest

from tests.node.emf_spec import lines, problems
from traingrid_node import emf


class Clock:
    def __init__(self) -> None:
        self.now = 1_795_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_document_follows_the_specification() -> None:
    text = emf.line({"ImagesPerSecond": 812.5, "Loss": 6.9}, "imagenet-20261128", "ip-10-0-1-7",
                    1_795_000_000_123)
    assert problems(text) == []
    document = json.loads(text)
    (directive,) = document["_aws"]["CloudWatchMetrics"]
    assert document["_aws"]["Timestamp"] == 1_795_000_000_123
    assert directive["Namespace"] == "TrainGrid"
    assert directive["Dimensions"] == [["run", "node"], ["run"]]
    assert {m["Name"]: m["Unit"] for m in directive["Metrics"]} == {
        "ImagesPerSecond": "Count/Second", "Loss": "None"}
    assert (document["run"], document["node"]) == ("imagenet-20261128", "ip-10-0-1-7")


def test_the_checker_refuses_what_cloudwatch_would_not_extract() -> None:
    good = json.loads(emf.line({"Loss": 1.0}, "r", "n", 1_795_000_000_000))
    assert problems("[trainer] " + json.dumps(good))
    assert problems(json.dumps({**good, "_aws": {**good["_aws"], "Timestamp": 1_795_000_000}}))
    assert problems(json.dumps({**good, "run": 7}))
    assert problems(json.dumps({**good, "Loss": "1.0"}))
    with pytest.raises(ValueError, match="no unit for Accuracy"):
        emf.document({"Accuracy": 0.5}, "r", "n", 0)


def test_windows_and_heartbeats_are_the_nodes_metrics() -> None:
    out, clock = io.StringIO(), Clock()
    reporter = emf.Reporter("run-1", "algo-2", out, heartbeat_s=3600, ranks=8, clock=clock)
    clock.now += 10
    reporter.window(steps=5, seconds=2.0, batch=256, loss=6.5, lr=0.1)
    clock.now += 90
    reporter.heartbeat()  # no step for 90 s
    reporter.heartbeat()  # nothing since the last one
    written = lines(out.getvalue())
    assert len(written) == 3 and all(d["run"] == "run-1" and d["node"] == "algo-2"
                                     for d in written)
    window, first, second = written
    assert window["ImagesPerSecond"] == 5 * 256 * 8 / 2.0 and window["StepTime"] == 0.4
    assert (window["Loss"], window["LearningRate"]) == (6.5, 0.1)
    assert (first["StepsCompleted"], first["StalledSeconds"]) == (5, 90)
    assert second["StepsCompleted"] == 0


def test_the_heartbeat_goes_on_from_its_thread_and_ends_with_a_last_one() -> None:
    out = io.StringIO()
    reporter = emf.Reporter("run-2", "n", out, heartbeat_s=0.01).start()
    reporter.window(steps=1, seconds=0.1, batch=2, loss=1.0, lr=0.01)
    while len(lines(out.getvalue())) < 3:
        pass
    reporter.stop()
    beats = [d for d in lines(out.getvalue()) if "StepsCompleted" in d]
    assert sum(d["StepsCompleted"] for d in beats) == 1
    count = len(lines(out.getvalue()))
    assert len(lines(out.getvalue())) == count  # stopped: no more lines


def test_only_a_nodes_first_rank_writes_and_the_run_names_it() -> None:
    env = {"TRAINGRID_RUN": "imagenet-1", "SM_CURRENT_HOST": "algo-3",
           "OMPI_COMM_WORLD_LOCAL_SIZE": "8"}
    reporter = emf.reporter(env, local_rank=0)
    assert reporter is not None
    assert (reporter.run, reporter.node, reporter.ranks) == ("imagenet-1", "algo-3", 8)
    assert emf.reporter(env, local_rank=1) is None
    assert emf.reporter(env | {"TRAINGRID_EMF": "0"}, local_rank=0) is None
