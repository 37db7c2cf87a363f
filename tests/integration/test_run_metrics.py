"""``GET /runs/{name}/metrics`` over real HTTP: the curves the emulated job's nodes write while
it trains (as the trainer does), per node and in total, a straggler named, the time range and
the step honoured; a fan-out's curves by region, what SageMaker put in CloudWatch in each
region its jobs trained in, while they train and after."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator

from tests.integration.conftest import serving
from tests.integration.iam import missing_permissions
from traingrid_local.api.client import ApiClient, ApiError
from traingrid_local.emulator import lambda_inprocess
from traingrid_local.stack import sample_campaign
from traingrid_local.stack.environment import DEMO_BUCKET

pytestmark = pytest.mark.e2e
DATASET = f"s3://{DEMO_BUCKET}/imagenet2012/resized/"
REAL_WAIT_S = 120
OPENAPI = Path(__file__).resolve().parents[2] / "schema" / "openapi.yaml"


def run_metrics_schema() -> Draft202012Validator:
    document = yaml.safe_load(OPENAPI.read_text())
    return Draft202012Validator({**document, "$ref": "#/components/schemas/RunMetrics"})


@pytest.fixture(scope="module")
def straggling(tmp_path_factory):
    with serving(tmp_path_factory, 6 * 3600, "metrics", frozenset({"straggler"})) as api:
        yield api


def test_a_runs_curves_grow_while_it_trains_and_name_its_straggler(straggling):
    client = ApiClient(straggling.url, timeout=30)
    name = client.call("POST", "/runs", {"dataset": DATASET, "nodes": 4},
                       headers={"Idempotency-Key": "metrics-straggler"}).body["name"]
    seen_running: list[int] = []
    deadline = time.monotonic() + REAL_WAIT_S
    while time.monotonic() < deadline:
        answer = client.get(f"/runs/{name}/metrics")
        if answer["status"] != "RUNNING":
            break
        if answer["nodes"]:
            seen_running.append(len(answer["nodes"]["node-0"]["loss"]))
        time.sleep(0.05)
    assert seen_running and seen_running[0] < seen_running[-1], seen_running
    answer = client.get(f"/runs/{name}/metrics")
    assert answer["status"] == "SUCCEEDED"
    assert sorted(answer["nodes"]) == ["node-0", "node-1", "node-2", "node-3"]
    assert list(answer["stragglers"]) == ["node-2"]
    assert "waits" in answer["stragglers"]["node-2"]
    loss = [v for _, v in answer["loss"]]
    assert loss[0] > 5 and loss[-1] < 2
    assert answer["source"] == f"s3://{DEMO_BUCKET}/runs/{name}/outputs/metrics/"
    total = dict(map(tuple, answer["images_per_s"]))
    bin_start, rate = next(iter(total.items()))
    assert rate == pytest.approx(sum(
        dict(map(tuple, answer["nodes"][n]["images_per_s"]))[bin_start]
        for n in answer["nodes"]), rel=1e-4)
    assert len(answer["loss"]) <= 300 and answer["latest"]["epoch"] == pytest.approx(90)

    # A range and a step: the first hour, in 10-minute bins.
    first = answer["loss"][0][0]
    start = datetime.fromtimestamp(first, UTC).isoformat()
    end = datetime.fromtimestamp(first + 3599, UTC).isoformat()
    hour = client.get(f"/runs/{name}/metrics", start=start, end=end, step=600)
    assert hour["step"] == 600
    assert [t for t, _ in hour["loss"]] == sorted({t // 600 * 600 for t, _ in hour["loss"]})
    assert all(first - 600 < t <= first + 3599 for t, _ in hour["loss"])
    assert len(hour["loss"]) in (6, 7)

    with pytest.raises(ApiError) as refused:
        client.get(f"/runs/{name}/metrics", start=end, end=start)
    assert refused.value.status == 400
    with pytest.raises(ApiError) as missing:
        client.get("/runs/no-such-run/metrics")
    assert missing.value.status == 404


def test_a_fanouts_curves_by_region_are_its_sagemaker_jobs_metrics(straggling):
    # The straggler fault slows a Batch node only: the fan-out's SageMaker jobs train as usual.
    client = ApiClient(straggling.url, timeout=30)
    name = client.call("POST", f"/campaigns/{sample_campaign.CAMPAIGN}/runs",
                       {}, headers={"Idempotency-Key": "metrics-fanout"}
                       ).body["name"]
    seen_running: list[int] = []
    deadline = time.monotonic() + REAL_WAIT_S
    while time.monotonic() < deadline:
        answer = client.get(f"/runs/{name}/metrics")
        if answer["status"] != "RUNNING":
            break
        seen_running += [len(r.get("loss", [])) for r in answer["regions"].values()
                         if r["status"] == "InProgress"]
        time.sleep(0.05)
    assert any(0 < a < b for a, b in zip(seen_running, seen_running[1:], strict=False)), (
        seen_running)  # a region's curve grew while its job trained
    answer = client.get(f"/runs/{name}/metrics")
    assert answer["status"] == "SUCCEEDED"
    assert answer["nodes"] == {} and answer["step"] % 60 == 0
    run_metrics_schema().validate(answer)
    regions = answer["regions"]
    assert sorted(regions) == sorted(sample_campaign.REGION_PRICES)
    for data_region, found in regions.items():
        job = found["job_name"]
        assert found["status"] == "Completed", (data_region, found)
        assert found["source"] == (f"cloudwatch:{found['region']}:/aws/sagemaker/TrainingJobs:"
                                   f"TrainingJobName={job}")
        loss = [v for _, v in found["loss"]]
        assert loss[0] > 5 and loss[-1] < 2, (data_region, loss)
        assert [t for t, _ in found["loss"]] == sorted(t for t, _ in found["loss"])
        assert all(v > 0 for _, v in found["images_per_s"])
        assert found["final"]["loss"] < 2 and found["final"]["images_per_s"] > 0
        assert found["tensorboard"].startswith("s3://") and found["tensorboard"].endswith(
            f"/campaigns/{sample_campaign.CAMPAIGN}/runs/{name}/tensorboard/{job}/")

    # The first half hour of the jobs' training, in 10-minute bins.
    first = min(r["loss"][0][0] for r in regions.values())
    half = client.get(f"/runs/{name}/metrics", step=600,
                      start=datetime.fromtimestamp(first, UTC).isoformat(),
                      end=datetime.fromtimestamp(first + 1799, UTC).isoformat())
    assert half["step"] == 600
    run_metrics_schema().validate(half)
    for found in half["regions"].values():
        assert 1 <= len(found["loss"]) <= 4 and all(t % 600 == 0 for t, _ in found["loss"])

    function = straggling.deployment.stack.resources["ApiFunction"]
    calls = {function: lambda_inprocess.CALLS[function]}
    assert {"sagemaker:ListTrainingJobs", "sagemaker:DescribeTrainingJob",
            "cloudwatch:GetMetricData"} <= calls[function]
    assert missing_permissions(straggling.deployment.stack, calls) == []
