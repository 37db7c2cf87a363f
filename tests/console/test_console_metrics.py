"""A run's training curves on its console page, in a real browser: drawn while the run trains,
every node a line, the straggler's red and named."""

from __future__ import annotations

import json

import pytest

from tests.console.conftest import ARTIFACTS, ROOT, WAIT_MS, playwright, submit
from tests.integration.conftest import serving
from traingrid_local.stack.environment import DEMO_BUCKET

pytestmark = pytest.mark.e2e
STRAGGLER_RED = "rgb(209, 50, 18)"


@pytest.fixture(scope="module")
def straggling(tmp_path_factory):
    with serving(tmp_path_factory, 6 * 3600, "console-metrics", frozenset({"straggler"})) as api:
        yield api


def test_a_runs_curves_are_drawn_while_it_trains_and_its_straggler_stands_out(straggling, page):
    expect = playwright.expect
    name = submit(straggling.url, "console-curves")
    page.goto(f"{straggling.url}/console#/runs/{name}")
    # While it runs: the curves appear and grow without a reload.
    expect(page.locator("#run-status")).to_have_text("RUNNING", timeout=WAIT_MS)
    loss = page.locator("#chart-loss polyline")
    expect(loss).to_have_count(1)
    first = len(loss.get_attribute("points").split())
    expect(page.locator("#run-status")).to_have_text("SUCCEEDED", timeout=WAIT_MS)
    # Set once the last refresh has drawn everything, curves included.
    expect(page.locator("body")).to_have_attribute("data-run-status", "SUCCEEDED")
    assert len(page.locator("#chart-loss polyline").get_attribute("points").split()) > first

    lines = page.locator("#chart-node-input polyline")
    expect(lines).to_have_count(4)
    slow = page.locator('#chart-node-input polyline[data-node="node-2"]')
    assert slow.evaluate("line => getComputedStyle(line).stroke") == STRAGGLER_RED
    for other in ("node-0", "node-1", "node-3"):
        line = page.locator(f'#chart-node-input polyline[data-node="{other}"]')
        assert line.evaluate("line => getComputedStyle(line).stroke") != STRAGGLER_RED
    expect(page.locator(".straggler-note")).to_contain_text("Straggler node-2: waits")
    expect(page.locator("#chart-node-images .chart-legend")).to_contain_text(
        "node-2 (straggler)")
    expect(page.locator("#metrics-latest")).to_contain_text("epoch 90.00")
    page.locator("#curves").screenshot(path=ARTIFACTS / "metrics.png")
    page.locator("#curves").screenshot(path=ROOT / "docs" / "console-metrics.png")


def test_what_was_left_out_of_a_nodes_file_is_said_on_the_page(straggling, page):
    expect = playwright.expect
    name = submit(straggling.url, "console-left-out")
    page.goto(f"{straggling.url}/console#/runs/{name}")
    expect(page.locator("body")).to_have_attribute("data-run-status", "SUCCEEDED")
    # The job's own code appends a point that is no number a node reports.
    s3 = straggling.emulator.client("s3")
    key = f"runs/{name}/outputs/metrics/node-0.jsonl"
    text = s3.get_object(Bucket=DEMO_BUCKET, Key=key)["Body"].read()
    last = json.loads(text.splitlines()[-1])
    s3.put_object(Bucket=DEMO_BUCKET, Key=key, Body=text + json.dumps(
        last | {"loss": 1e308, "images_per_s": -1.0}).encode() + b"\n")
    page.reload()
    expect(page.locator(".ignored-note")).to_have_text(
        "Left out: 2 value(s) not a finite number, over 1e+12 or negative left out: "
        "images_per_s ×1, loss ×1")
    expect(page.locator("#chart-node-input polyline")).to_have_count(4)
