"""Planning a dataset larger than one call can list, on the emulator: the TrainingRun's Plan
step lists a bounded part per invocation and its MeasureDataset loop goes on to the end;
``POST /plans`` over real HTTP answers 202 within its budget and each ``GET /plans/{token}``
lists on, until the plan. The budget is one ListObjectsV2 page a call (``PLAN_LIST_PAGES``),
so a few dozen objects in folders stand for a dataset of millions."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from traingrid.training import plan_step
from traingrid_local.api.client import ApiClient
from traingrid_local.cli.main import app
from traingrid_local.demo.runner import (
    DATASET_PREFIX,
    DEFAULT_KEY,
    SCENARIOS,
    manifest_body,
    upload_sample_dataset,
)
from traingrid_local.stack import report
from traingrid_local.stack.environment import DEMO_BUCKET

from .conftest import finish, serving

pytestmark = pytest.mark.e2e

FOLDERS = 8
PER_FOLDER = 3


def upload_folders(s3) -> int:
    """Class folders beside the sample shards, as ImageNet's JPEGs are laid out."""
    for folder in range(FOLDERS):
        for i in range(PER_FOLDER):
            s3.put_object(Bucket=DEMO_BUCKET, Key=f"{DATASET_PREFIX}n{folder:08d}/{i}.JPEG",
                          Body=b"x" * (folder + i))
    return sum(1 for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket=DEMO_BUCKET, Prefix=DATASET_PREFIX) for _ in page.get("Contents", []))


def test_the_plan_step_lists_a_bounded_part_per_call_and_loops_to_the_end(
        emulated, monkeypatch):
    monkeypatch.setenv("PLAN_LIST_PAGES", "1")
    emulator, deployment = emulated("happy")
    upload_sample_dataset(emulator)
    s3 = emulator.client("s3")
    expected = upload_folders(s3) + 1  # and the manifest, uploaded next
    s3.put_object(Bucket=DEMO_BUCKET, Key=DEFAULT_KEY,
                  Body=manifest_body(SCENARIOS["happy"], None))
    outcome = finish(emulator, deployment, "TrainingRunStateMachineArn")
    execution = outcome.execution
    assert execution["status"] == "SUCCEEDED", execution["cause"]

    events = report.history(emulator, execution["execution_arn"])
    parts = [json.loads(e["stateExitedEventDetails"]["output"])["plan"] for e in events
             if e.get("stateExitedEventDetails", {}).get("name") in ("Plan", "MeasureDataset")]
    *measuring, planned = parts
    assert len(measuring) >= FOLDERS  # one folder a call, at one page a call
    pages = [m["measuring"]["pages"] for m in measuring]
    # Each call listed at most its page and the two that every call may take to move on.
    assert all(0 < b - a <= 3 for a, b in zip([0, *pages], pages, strict=False)), pages
    assert all(len(json.dumps(m)) < 1024 for m in measuring)  # the loop's state stays small
    assert planned["dataset"]["objects"] == expected
    assert [m["measuring"]["parts"] for m in measuring] == list(range(1, len(measuring) + 1))


def test_a_listing_that_would_outgrow_the_history_fails_explained(emulated, monkeypatch):
    monkeypatch.setenv("PLAN_LIST_PAGES", "1")
    monkeypatch.setattr(plan_step, "MAX_PARTS", 3)  # stands for the 2,500 parts of a run
    emulator, deployment = emulated("happy")
    upload_sample_dataset(emulator)
    s3 = emulator.client("s3")
    upload_folders(s3)
    s3.put_object(Bucket=DEMO_BUCKET, Key=DEFAULT_KEY,
                  Body=manifest_body(SCENARIOS["happy"], None))
    execution = finish(emulator, deployment, "TrainingRunStateMachineArn").execution
    assert execution["status"] == "FAILED"
    assert "still being listed after 3 parts" in execution["cause"], execution["cause"]
    assert "/dataset" in execution["cause"]


@pytest.fixture(scope="module")
def one_page_api(tmp_path_factory):
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PLAN_LIST_PAGES", "1")
        with serving(tmp_path_factory, 3600, "plans-one-page") as api:
            yield api


def test_post_plans_answers_202_and_each_get_lists_on_until_the_plan(one_page_api):
    client = ApiClient(one_page_api.url, timeout=30)
    expected = upload_folders(one_page_api.emulator.client("s3"))
    dataset = f"s3://{DEMO_BUCKET}/{DATASET_PREFIX}"
    answer = client.request("POST", "/plans", {"dataset": dataset, "nodes": 4})
    assert answer.status == 202, answer.body
    follows = 1
    while answer.status == 202:
        progress = answer.body
        assert progress["status"] == "MEASURING" and progress["dataset"]["uri"] == dataset
        assert progress["dataset"]["pages"] <= 3 * progress["dataset"]["parts"]
        assert answer.headers.get("Location") == progress["next"]
        answer = client.request("GET", progress["next"])
        follows += 1
        assert follows < 50
    assert answer.status == 200, answer.body
    assert answer.body["dataset"]["objects"] == expected and follows > FOLDERS // 2
    # The plan is the one POST /plans gives a dataset listed in one call.
    assert answer.body["job"]["nodes"] == 4

    forged = client.request("GET", "/plans/not-a-token")
    assert forged.status == 400, forged.body

    # `traingrid plan` follows the 202s to the same plan.
    cli = CliRunner().invoke(app, ["plan", "--endpoint", one_page_api.url, "--dataset", dataset,
                                   "--nodes", "4", "--json"])
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.stdout)["dataset"] == answer.body["dataset"]
    assert "objects so far" in cli.stderr

