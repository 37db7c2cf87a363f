"""The web console in a real browser (Debian's headless Chromium, driven by Playwright).

Runs are submitted over the API of ``traingrid serve`` and watched on ``/console`` as a user
would: the list, a run's page updating while it runs, its graph coloured by what happened (the
colours the browser computes, not class names alone), the log, the regional jobs of a fan-out.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.console.conftest import (
    ARTIFACTS,
    DATASET,
    GREEN,
    GREY,
    WAIT_MS,
    playwright,
    state,
    stroke,
    submit,
)
from tests.integration.conftest import serving
from traingrid_local.api.client import ApiClient

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    # Six simulated hours of training: long enough to watch a run while it runs.
    with serving(tmp_path_factory, 6 * 3600, "console") as api:
        yield api


def test_a_run_submitted_over_the_api_is_listed_then_seen_through_to_succeeded(healthy, page):
    expect = playwright.expect
    name = submit(healthy.url, "console-healthy")
    page.goto(f"{healthy.url}/console")
    row = page.locator(f'tr[data-run="{name}"]')
    expect(row).to_be_visible()
    page.screenshot(path=ARTIFACTS / "runs.png")
    row.get_by_role("link").click()

    # Live: the page follows the run while it runs, without a reload.
    expect(page.locator("#run-status")).to_have_text("RUNNING", timeout=WAIT_MS)
    expect(page.locator(".graph .state.current")).to_have_count(1)
    expect(page.locator("#run-status")).to_have_text("SUCCEEDED", timeout=WAIT_MS)
    expect(page.locator("body")).to_have_attribute("data-run-status", "SUCCEEDED")

    run = ApiClient(healthy.url, timeout=30).get(f"/runs/{name}")
    for visited, seen in run["by_state"].items():
        expect(state(page, visited)).to_have_attribute("data-outcome", seen["outcome"])
    for succeeded in ("Plan", "CreateFileSystem", "SubmitTrainingJob", "CheckArchive",
                      "DeleteFileSystem", "RecordSuccess", "Succeeded"):
        assert stroke(page, succeeded) == GREEN, succeeded
    for not_reached in ("NextAttempt", "StartExport", "ExplainFailure", "Failed"):
        assert stroke(page, not_reached) == GREY, not_reached
    polls = run["by_state"]["CheckFileSystem"]["visits"]
    if polls > 1:
        expect(state(page, "CheckFileSystem").locator(":scope > .visits")).to_have_text(
            f"×{polls}")
    expect(page.locator("#failure")).to_have_count(0)
    expect(page.locator("#log")).to_contain_text("exit code 0")
    expect(page.locator("#timeline tr[data-state='Plan']")).to_contain_text("succeeded")
    expect(page.get_by_text("estimate: at most (training limit)")).to_be_visible()
    # What it cost, from the API's receipt, above the estimate.
    spent = page.locator("table.facts tr", has=page.get_by_text("spent", exact=True))
    expect(spent).to_contain_text("$")
    assert run["cost"]["actual"]["total"] > 0 and not run["cost"]["in_flight"]
    good = run["cost"]["goodput"]
    goodput = page.locator("table.facts tr", has=page.get_by_text("goodput", exact=True))
    expect(goodput).to_contain_text(f"{good['goodput'] * 100:.1f}% (")
    expect(page.locator("table.facts tr", has=page.get_by_text("lost to queue", exact=True))
           ).to_contain_text("node-hours")
    page.screenshot(path=ARTIFACTS / "training-run-succeeded.png", full_page=True)


def test_a_fanout_shows_each_regions_job_and_its_map_inside_the_graph(healthy, page):
    expect = playwright.expect
    name = submit(healthy.url, "console-fanout", "/campaigns/av-drive-2026-11/runs", {})
    page.goto(f"{healthy.url}/console")
    page.select_option("#filter-pipeline", "campaign")
    expect(page.locator("#runs tbody tr")).to_have_count(1)
    page.locator(f'tr[data-run="{name}"] a').click()
    expect(page.locator("#run-status")).to_have_text("SUCCEEDED", timeout=WAIT_MS)
    run = ApiClient(healthy.url, timeout=30).get(f"/runs/{name}")
    rows = page.locator("#jobs tbody tr")
    expect(rows).to_have_count(len(run["jobs"]))
    for job in run["jobs"]:
        row = page.locator(f'#jobs tr[data-region="{job["requested_region"]}"]')
        expect(row.locator(".region-status")).to_have_text(job["status"])
        expect(row).to_contain_text(job["placement_reason"])
    # The Map's own states are drawn inside it (each region's branch, an execution of its
    # own), and coloured like the others.
    expect(state(page, "FanOut").locator('[data-state="RunRegion"]')).to_have_attribute(
        "data-outcome", "succeeded")
    assert stroke(page, "FinishFanout") == GREEN
    page.screenshot(path=ARTIFACTS / "campaign-fanout.png", full_page=True)


ATTACK_PAGE = """<!doctype html><title>elsewhere</title>
<form id="form" method="POST" action="{api}/runs" enctype="text/plain">
  <input name='{{"dataset": "{dataset}", "nodes": 2, "pad": "' value='"}}'>
</form>
<script>
const body = JSON.stringify({{dataset: "{dataset}", nodes: 2}});
const tries = [
  fetch("{api}/runs", {{method: "POST", mode: "no-cors", body,
                        headers: {{"Content-Type": "text/plain"}}}}),
  fetch("{api}/campaigns/av-drive-2026-11/runs", {{method: "POST", mode: "no-cors"}}),
  fetch("{api}/runs", {{method: "POST", body, headers: {{"Content-Type": "application/json"}}}}),
  fetch("{api}/runs"),
];
Promise.allSettled(tries).then((settled) => {{
  document.body.dataset.read = settled.filter((s) => s.status === "fulfilled" &&
                                                     s.value.type !== "opaque").length;
}});
</script>"""


def test_a_page_elsewhere_can_neither_start_a_run_nor_read_one(healthy, page):
    """A site the user visits, on another origin, calling fetch then posting a form."""
    html = ATTACK_PAGE.format(api=healthy.url, dataset=DATASET).encode()

    class Elsewhere(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(html)))
            self.end_headers()
            self.wfile.write(html)

        def log_message(self, *args: object) -> None:
            pass

    site = ThreadingHTTPServer(("127.0.0.1", 0), Elsewhere)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    client = ApiClient(healthy.url, timeout=30)
    before = {run["name"] for run in client.get("/runs", limit=100)["runs"]}
    try:
        page.goto(f"http://127.0.0.1:{site.server_port}/")
        # Every fetch settled; none could read an answer (no CORS header allows it).
        playwright.expect(page.locator("body")).to_have_attribute("data-read", "0")
        with page.expect_navigation(url=f"{healthy.url}/runs"):
            page.evaluate("document.getElementById('form').submit()")
        # The form's answer, shown as a page: the server's refusal.
        assert "not this server" in page.content()
        page.screenshot(path=ARTIFACTS / "cross-origin-form-refused.png")
    finally:
        site.shutdown()
        site.server_close()
    assert {run["name"] for run in client.get("/runs", limit=100)["runs"]} == before
