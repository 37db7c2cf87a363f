"""The web console on a failed run: the failed state red, the error and the cause as the API
gives them (headless Chromium, as in test_console_browser)."""

from __future__ import annotations

import pytest

from tests.console.conftest import (
    ARTIFACTS,
    GREEN,
    GREY,
    RED,
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
def failing(tmp_path_factory):
    with serving(tmp_path_factory, 600, "console-failing",
                 faults=frozenset({"batch-job-failed"})) as api:
        yield api


def test_a_failed_run_shows_the_failed_state_red_and_the_cause(failing, page):
    expect = playwright.expect
    name = submit(failing.url, "console-failing")
    page.goto(f"{failing.url}/console#/runs/{name}")
    expect(page.locator("#run-status")).to_have_text("FAILED", timeout=WAIT_MS)
    run = ApiClient(failing.url, timeout=30).get(f"/runs/{name}")
    expect(page.locator("#failure strong")).to_have_text(run["error"])
    expect(page.locator("#failure pre")).to_have_text(run["cause"])
    assert stroke(page, "Failed") == RED
    assert stroke(page, "RecordSuccess") == GREY
    assert stroke(page, "Plan") == GREEN
    expect(state(page, "NextAttempt")).to_have_attribute("data-outcome", "succeeded")
    page.screenshot(path=ARTIFACTS / "training-run-failed.png", full_page=True)
