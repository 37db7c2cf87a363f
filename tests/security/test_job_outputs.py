"""What a training job writes is its own: its code (or any job, whose role writes under
``runs/``) can put anything in the run's outputs. Read back, a forged ``metrics.json`` neither
fails the run nor its goodput (the values it could not have had are left out and named in the
receipt), and forged curve files neither break ``GET /runs/{name}/metrics`` nor swell it past
Lambda's 6 MB response, nor make the run's own nodes read as stragglers. Crafted outputs go
through the emulator: a job that writes them, and objects planted under the run's prefix;
the API is asked over real HTTP."""

from __future__ import annotations

import http.client
import json
from datetime import datetime
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest

from tests.integration.conftest import emulated, run_scenario, serving  # noqa: F401
from traingrid_local.api.client import ApiClient
from traingrid_local.emulator import workload
from traingrid_local.stack.environment import DEMO_BUCKET

pytestmark = pytest.mark.e2e

DATASET = f"s3://{DEMO_BUCKET}/imagenet2012/resized/"
HONEST = {"nodes_before": 20, "nodes_after": 19, "world_size_before": 160,
          "world_size_after": 152, "recovery_s": 60.0, "lost_work_s": 300.0, "steps_lost": 732}
FORGED = [HONEST | {"lost_work_s": 1e308}, HONEST | {"nodes_before": 10**400}]


def test_a_forged_metrics_json_neither_fails_the_run_nor_zeroes_its_goodput(
        run_scenario, monkeypatch):  # noqa: F811
    written = workload.outputs

    def forging(*args: Any, **kwargs: Any) -> dict[str, bytes]:
        files = written(*args, **kwargs)
        if workload.METRICS_FILE in files:  # the job's own code rewrites it before it ends
            document = json.loads(files[workload.METRICS_FILE])
            files[workload.METRICS_FILE] = json.dumps(
                document | {"recoveries": [*FORGED, HONEST]}).encode()
        return files

    monkeypatch.setattr(workload, "outputs", forging)
    outcome = run_scenario("happy")
    execution = outcome.execution
    # It was FAILED, with no manifest, its file system kept: an OverflowError in WriteManifest.
    assert execution["status"] == "SUCCEEDED", execution["cause"]
    assert execution["output"]["manifest"].endswith("/manifest.json")
    assert outcome.emulator.client("fsx").describe_file_systems()["FileSystems"] == []
    assert outcome.report["leaked_resources"] == []
    good = execution["cost"]["goodput"]
    assert good["ignored"] == [
        "/recoveries/0/lost_work_s: 1e+308 is longer than the attempt ran (3600 s); the "
        "recovery is left out",
        "/recoveries/1/nodes_before: an integer too large is not from 1 to the attempt's nodes "
        "(20); the recovery is left out"]
    # The honest recovery counts; nothing forged is clamped into a 0 % goodput.
    assert good["lost_node_hours"]["recovery"] == round(19 * 60 / 3600, 6)
    assert good["lost_node_hours"]["lost_work"] == round(20 * 300 / 3600, 6)
    assert good["goodput"] > 0.8
    assert outcome.record["cost"]["goodput"] == good


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    # Runs that never train: the only curve files are the ones planted.
    with serving(tmp_path_factory, 600, "job-outputs", frozenset({"fsx-create-failed"}),
                 throttled=False) as api:
        yield api


def get(url: str, target: str) -> tuple[int, bytes]:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=300)
    try:
        connection.request("GET", target)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def strict(data: bytes) -> Any:
    """JSON as the console's parser reads it: NaN and Infinity are not JSON."""
    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} in the answer")
    return json.loads(data, parse_constant=refuse)


def start(served, nodes: int, key: str) -> tuple[str, float]:
    """A run of ``nodes`` nodes: its name and when it started (its points' earliest time)."""
    answer = ApiClient(served.url, timeout=60).call(
        "POST", "/runs", {"dataset": DATASET, "nodes": nodes}, headers={"Idempotency-Key": key})
    described = served.emulator.client("stepfunctions").describe_execution(
        executionArn=answer.body["execution_arn"])
    started: datetime = described["startDate"]
    return answer.body["name"], started.timestamp()


def plant(served, name: str, files: dict[str, str]) -> None:
    s3 = served.emulator.client("s3")
    for file, text in files.items():
        s3.put_object(Bucket=DEMO_BUCKET, Key=f"runs/{name}/outputs/metrics/{file}",
                      Body=text.encode())


def line(t: float, **values: Any) -> str:
    return json.dumps({"t": t, "step": 50, "epoch": 0.5, "loss": 3.1, "lr": 0.1,
                       "images_per_s": 5000.0, "step_s": 0.41, "input_s": 0.004,
                       "gpu_util": 97.0, "gpu_mem_mib": 14200.0} | values) + "\n"


def test_a_500_node_runs_curves_fit_lambdas_response(served):
    name, started = start(served, 500, "curves-500")
    plant(served, name, {f"node-{k}.jsonl": "".join(
        line(started + i, loss=3.1 - i / 1000 - k / 1e5) for i in range(400))
        for k in range(500)})
    for query in ("", "?" + urlencode({"step": 1})):
        status, data = get(served.url, f"/runs/{name}/metrics{query}")
        assert status == 200, data[:300]
        # It was 13.5 MB (with step=1, 27 MB): a 502 from API Gateway on AWS.
        assert len(data) < 3_000_000, len(data)
        answer = strict(data)
        assert list(answer["nodes"]) == [f"node-{k}" for k in range(500)]
        assert answer["node_step"] > answer["step"] and answer["stragglers"] == {}


def test_forged_curve_files_neither_break_the_answer_nor_make_stragglers(served):
    name, started = start(served, 4, "curves-forged")
    same = "".join(line(started + i) for i in range(120))
    hostile = "".join([
        line(1.7e308), line(-1.7e308), line(started + 5, loss=1e308),
        line(started + 5, loss=1e308), line(started + 6, images_per_s=1.7e308),
        line(started + 6, images_per_s=1.7e308), "[" * 1500 + "\n", "x" * 100_000 + "\n"])
    fast = "".join(line(started + i, images_per_s=50_000.0) for i in range(120))
    plant(served, name, {"node-0.jsonl": same + hostile, "node-1.jsonl": same,
                         "node-2.jsonl": same, "node-3.jsonl": same,
                         # Nodes the run never had, ten times as fast as its own.
                         **{f"node-{k}.jsonl": fast for k in range(4, 12)},
                         "node-01.jsonl": fast, "evil.jsonl": fast})
    status, data = get(served.url, f"/runs/{name}/metrics?step=1")
    assert status == 200, data[:300]  # was a 500: math.ceil(inf), an fmean overflow
    answer = strict(data)
    assert sorted(answer["nodes"]) == ["node-0", "node-1", "node-2", "node-3"]
    assert answer["stragglers"] == {}  # the planted nodes made all four read as stragglers
    assert max(v for _, v in answer["images_per_s"]) == 4 * 5000.0
    assert max(v for _, v in answer["loss"]) == 3.1
    assert any(n.startswith("2 point(s) timed outside the run's lifetime")
               for n in answer["ignored"]), answer["ignored"]
    assert any(n.startswith("4 value(s) not a finite number") for n in answer["ignored"])
