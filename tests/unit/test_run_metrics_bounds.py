"""A run's curves are read from files its job writes: whatever they hold, the answer stays far
inside Lambda's 6 MB response for every size a run may have, holds finite numbers only, and
reads no more than its bounds (the run's own nodes, a share of bytes each, the run's lifetime)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from moto import mock_aws

from traingrid.api.http import json_text
from traingrid.aws import clients
from traingrid.runs import metrics, node_series
from traingrid.runs.metrics import MetricsQuery, curves, run_nodes
from traingrid.runs.node_series import parse_all

T0 = 1_800_000_000
BUCKET = "curves-test-data"
PREFIX = "runs/r1/outputs/metrics/"


def point(t: float, **values: Any) -> str:
    base = {"t": t, "step": int(t - T0), "epoch": 1.0, "loss": 2.0, "lr": 0.1,
            "images_per_s": 5000.0, "step_s": 0.4, "input_s": 0.004, "gpu_util": 97.0,
            "gpu_mem_mib": 14200.0}
    return json.dumps(base | values) + "\n"


def strict(text: str) -> Any:
    """JSON as the console's parser reads it: NaN and Infinity are not JSON."""
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")
    return json.loads(text, parse_constant=refuse)


def longest(k: int, points: int) -> str:
    """A node's file whose every value is as long as a value may be."""
    near = node_series.MAGNITUDE - 0.123457
    return "".join(json.dumps({"t": T0 + 3 * i + 0.123456789, "step": near, "epoch": near,
                               **{f: -near if f == "loss" else near - i - k
                                  for f in node_series.FIELDS}}) + "\n"
                   for i in range(points))


@pytest.fixture(scope="module")
def five_hundred_nodes() -> node_series.Read:
    # A 500-node run's answer reads each node's newest 64 KiB, about 400 points: the answer's
    # size is the same for fewer, as each node's bins are widened to fit.
    return parse_all({f"node-{k}": longest(k, 250) for k in range(500)})


@pytest.mark.parametrize("step", [None, 1])
def test_five_hundred_nodes_curves_stay_far_inside_lambdas_response(five_hundred_nodes, step):
    answer = curves(five_hundred_nodes, MetricsQuery(step=step))
    body = json_text(answer)
    assert len(body) < 3_000_000, len(body)  # was 17 MB (68 MB with step=1): a 502
    assert list(answer["nodes"]) == [f"node-{k}" for k in range(500)]  # in the nodes' order
    node_points = sum(len(s) for curves_ in answer["nodes"].values() for s in curves_.values())
    assert node_points <= metrics.NODE_POINTS
    assert answer["node_step"] % answer["step"] == 0 and answer["node_step"] > answer["step"]
    assert len(answer["loss"]) <= metrics.MAX_ASKED_BINS
    strict(body)


def test_a_few_nodes_keep_the_totals_resolution():
    text = "".join(point(T0 + i) for i in range(600))
    answer = curves(parse_all({"node-0": text, "node-1": text}), MetricsQuery(step=1))
    assert answer["step"] == answer["node_step"] == 1
    assert len(answer["nodes"]["node-0"]["loss"]) == len(answer["loss"]) == 600
    assert answer["images_per_s"][0] == [T0, 10000.0]


def test_wider_node_bins_are_the_means_of_their_points():
    text = "".join(point(T0 + i, loss=float(i)) for i in range(10))
    read = parse_all({"node-0": text})
    bins = metrics._bins(*read.nodes["node-0"].series["loss"], 1)
    assert metrics._means(metrics._wider(bins, 5)) == {T0: 2.0, T0 + 5: 7.0}


def test_values_that_are_not_finite_or_beyond_a_node_are_left_out_and_counted():
    hostile = [
        point(1.7e308), point(-1.7e308), '{"t": 1' + "0" * 400 + "}\n",  # times
        '{"t": NaN}\n', '{"t": Infinity, "loss": 1}\n',
        point(T0 + 1, loss=1e308), point(T0 + 1, loss=1e308),  # twice in a bin
        point(T0 + 2, images_per_s=1.7e308), point(T0 + 2, images_per_s=1.7e308),
        point(T0 + 3, step_s=-1.0, gpu_util=True, lr="0.1"),
        '{"t": ' + str(T0 + 4) + ', "input_s": NaN, "gpu_mem_mib": -Infinity}\n',
        "[" * 1500 + "\n", "{" + '"a":' * 800 + "\n", "x" * 100_000 + "\n", "{torn\n",
        point(T0 + 5),
    ]
    read = parse_all({"node-0": "".join(hostile)})
    answer = curves(read, MetricsQuery(step=1))
    body = json_text(answer)
    found = strict(body)
    assert found["loss"] == [[T0 + 2, 2.0], [T0 + 3, 2.0], [T0 + 5, 2.0]]
    assert max(v for _, v in found["images_per_s"]) == 5000.0
    assert found["latest"]["t"] == T0 + 5
    assert read.untimely == 2  # ±1.7e308: outside any run's lifetime
    assert read.not_points == 7  # 10**400, NaN, Infinity, nested, not an object, too long, torn
    assert read.values == {"loss": 2, "images_per_s": 2, "step_s": 1, "gpu_util": 1, "lr": 1,
                           "input_s": 1, "gpu_mem_mib": 1}
    notes = read.notes(node_series.share(1), (T0 - 600, T0 + 600))
    assert notes[0].startswith("2 point(s) timed outside the run's lifetime")
    assert notes[1] == ("9 value(s) not a finite number, over 1e+12 or negative left out: "
                        "gpu_mem_mib ×1, gpu_util ×1, images_per_s ×2, input_s ×1, loss ×2, "
                        "lr ×1, step_s ×1")
    assert notes[2].startswith("7 line(s) that are not points skipped")


def test_stragglers_come_from_the_nodes_alone():
    fast = "".join(point(T0 + i) for i in range(100))
    slow = "".join(point(T0 + i, images_per_s=3000.0) for i in range(100))
    answer = curves(parse_all({"node-0": fast, "node-1": fast, "node-2": slow}), MetricsQuery())
    assert list(answer["stragglers"]) == ["node-2"]
    assert answer["stragglers"]["node-2"].startswith("3000 images/s, 60% of the nodes' median")


def test_the_answers_json_never_holds_nan_or_infinity():
    assert json_text({"a": [1.5, math.inf], "b": {"c": -math.inf, "d": math.nan}, "e": "x"}) \
        == '{"a":[1.5,null],"b":{"c":null,"d":null},"e":"x"}'
    assert json_text({"n": 1, "f": 0.25}) == '{"n":1,"f":0.25}'


@pytest.mark.parametrize(("execution_input", "nodes"), [
    ('{"request": {"nodes": 4}}', 4),
    ('{"request": {"nodes": 500}}', 500),
    ('{"request": {"nodes": 501}}', node_series.MAX_NODES),
    ('{"request": {"nodes": true}}', node_series.MAX_NODES),
    ('{"request": {"dataset": "s3://b/d/"}}', node_series.MAX_NODES),
    ('{"request": "nodes"}', node_series.MAX_NODES),
    ("[1]", node_series.MAX_NODES),
    ("not JSON", node_series.MAX_NODES),
    (None, node_series.MAX_NODES),
])
def test_the_runs_nodes_are_its_requests_or_the_most_a_request_may_ask(execution_input, nodes):
    assert run_nodes(execution_input) == nodes


@pytest.fixture
def bucket(monkeypatch: pytest.MonkeyPatch) -> Any:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        clients.reset()
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=BUCKET)

        def put(name: str, body: bytes) -> None:
            s3.put_object(Bucket=BUCKET, Key=PREFIX + name, Body=body)

        yield put
        clients.reset()


EVERYWHERE = (-math.inf, math.inf)


def test_only_the_runs_own_nodes_files_are_read(bucket):
    same = "".join(point(T0 + i) for i in range(50)).encode()
    for k in range(4):
        bucket(f"node-{k}.jsonl", same)
    # Planted: nodes the run never had, at ten times the pace, and other names.
    fast = "".join(point(T0 + i, images_per_s=50_000.0) for i in range(50)).encode()
    for name in ("node-4.jsonl", "node-499.jsonl", "node-01.jsonl", "evil.jsonl",
                 "node-0.jsonl.jsonl", "x/node-1.jsonl"):
        bucket(name, fast)
    read = node_series.read_nodes(BUCKET, PREFIX, 4, (T0 - 600, T0 + 600), EVERYWHERE)
    assert sorted(read.nodes) == ["node-0", "node-1", "node-2", "node-3"]
    answer = curves(read, MetricsQuery())
    assert answer["stragglers"] == {}
    assert answer["images_per_s"][0][1] == 4 * 5000.0


def test_each_file_is_read_to_its_share_and_the_notes_say_so(bucket, monkeypatch):
    monkeypatch.setattr(node_series, "READ_BYTES", 2 * 4096)
    lines = [point(T0 + i) for i in range(200)]
    bucket("node-0.jsonl", "".join(lines).encode())  # about 40 KB: over its 4 KiB share
    bucket("node-1.jsonl", b"")  # an empty file
    read = node_series.read_nodes(BUCKET, PREFIX, 2, (T0 - 600, T0 + 600), EVERYWHERE)
    kept = read.nodes["node-0"].series["loss"][0]
    assert 10 < len(kept) < 30 and kept[-1] == T0 + 199  # its newest points only
    assert "node-1" not in read.nodes
    assert read.cut == 1 and read.not_points == 0  # the torn first line read is dropped
    assert ("1 node file(s) larger than a node's share (4,096 bytes): only the newest part of "
            "each read") in read.notes(node_series.share(2), (T0 - 600, T0 + 600))


def test_points_outside_the_runs_lifetime_are_left_out(bucket, monkeypatch):
    bucket("node-0.jsonl", (point(T0 - 10_000) + point(T0) + point(T0 + 10_000)).encode())
    monkeypatch.setattr(metrics.clock, "now", lambda: datetime.fromtimestamp(T0 + 60, UTC))
    answer = metrics.training_run_curves(BUCKET, "r1", MetricsQuery(), 1,
                                         datetime.fromtimestamp(T0 - 60, UTC))
    assert answer["loss"] == [[T0, 2.0]]
    assert answer["ignored"] == [
        "2 point(s) timed outside the run's lifetime (2027-01-15T07:49:00+00:00 to "
        "2027-01-15T08:11:00+00:00) left out"]


def test_a_file_that_cannot_be_read_is_a_note_and_the_others_are_answered(bucket, monkeypatch):
    from traingrid.errors import AwsServiceError

    bucket("node-0.jsonl", point(T0).encode())
    read_tail = node_series.s3.read_tail

    def refusing(bucket_: str, key: str, most: int) -> Any:
        if key.endswith("node-1.jsonl"):
            raise AwsServiceError("S3", "GetObject", "AccessDenied", "Access Denied")
        return read_tail(bucket_, key, most)

    monkeypatch.setattr(node_series.s3, "read_tail", refusing)
    read = node_series.read_nodes(BUCKET, PREFIX, 3, (T0 - 600, T0 + 600), EVERYWHERE)
    assert list(read.nodes) == ["node-0"]
    assert read.notes(node_series.share(3), (T0 - 600, T0 + 600)) == [
        "1 node file(s) not read: node-1's: S3.GetObject failed: AccessDenied: Access Denied"]


def test_a_file_of_millions_of_short_lines_is_read_to_a_share_of_lines(bucket):
    # 16 MiB of "{}" lines is 5.6 million lines: parsing them all takes longer than the API
    # function may run; only the newest of them are read, and the notes say so.
    bucket("node-0.jsonl", b"{}\n" * (16 * 1024**2 // 3) + point(T0).encode())
    read = node_series.read_nodes(BUCKET, PREFIX, 1, (T0 - 600, T0 + 600), EVERYWHERE)
    assert read.not_points == node_series.READ_LINES - 1  # the newest lines, but the point
    assert read.nodes["node-0"].latest is not None and read.cut_lines == 1
    assert ("1 node file(s) with more lines than a node's share: only the newest lines read"
            in read.notes(node_series.share(1), (T0 - 600, T0 + 600)))
