"""POST /plans over real HTTP (`traingrid serve`): the plan a request would get, on the
dataset as it is in the emulator's S3, starting nothing; and `traingrid plan` asking it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from traingrid_local.cli.main import app
from traingrid_local.stack.environment import DEMO_BUCKET

pytestmark = pytest.mark.e2e

DATASET = f"s3://{DEMO_BUCKET}/imagenet2012/resized/"


def test_a_plan_sizes_the_listed_dataset_and_starts_nothing(client, served_api):
    before = client.get("/runs?limit=100")["runs"]
    answer = client.request("POST", "/plans", {"dataset": DATASET, "nodes": 4,
                                               "expected_images_per_s_per_gpu": 625})
    assert answer.status == 200, answer.body
    plan = answer.body
    assert plan["dataset"]["objects"] > 0 and plan["dataset"]["bytes"] > 0
    assert plan["job"]["images_per_s"] == 4 * 8 * 625
    assert plan["fsx"]["throughput_mb_s"] >= plan["input"]["required_mb_s"]
    assert client.get("/runs?limit=100")["runs"] == before

    cli = CliRunner().invoke(app, ["plan", "--endpoint", served_api.url, "--dataset", DATASET,
                                   "--nodes", "4", "--images-per-s-per-gpu", "625", "--json"])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.stdout) == plan


def test_an_empty_prefix_or_another_bucket_is_refused(client):
    empty = client.request("POST", "/plans", {"dataset": f"s3://{DEMO_BUCKET}/nothing-here/"})
    assert empty.status == 404 and "No objects under" in empty.body["message"]
    elsewhere = client.request("POST", "/plans", {"dataset": "s3://another-bucket/imagenet/"})
    assert elsewhere.status == 403
    assert [p["pointer"] for p in elsewhere.body["problems"]] == ["/dataset"]
