"""The console of a deployed stack (``traingrid console --stack``) in a real browser: pages
served here, API requests sent on to the stack's API, graphs from its state machines, and
links to the AWS console. The stand-in for the stack is ``traingrid serve``'s API and emulated
account (the signing itself: tests/cli/test_cli_api.py)."""

from __future__ import annotations

import pytest

from tests.console.conftest import ARTIFACTS, GREEN, WAIT_MS, playwright, stroke
from tests.integration.conftest import serving
from traingrid_local.client import ApiClient
from traingrid_local.console.remote import forwarding, stack_console
from traingrid_local.server import ApiServer

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with serving(tmp_path_factory, 600, "console-remote") as api:
        yield api


@pytest.fixture(scope="module")
def console_url(stack):
    outputs = {**stack.deployment.stack.outputs, "ApiUrl": stack.url}
    console = stack_console(outputs, stack.emulator.client("stepfunctions"),
                            {"api": stack.url, "stack": "traingrid", "region": "us-east-1"})
    with ApiServer(forwarding(ApiClient(stack.url)), 0, pages=console.answer) as server:
        yield server.url


def test_runs_started_through_the_console_server_link_to_the_step_functions_console(
        stack, console_url, page):
    expect = playwright.expect
    started = ApiClient(console_url).call(
        "POST", "/runs", {"dataset": "s3://traingrid-demo-data/imagenet2012/resized/",
                          "nodes": 2}, headers={"Idempotency-Key": "console-remote"}).body
    # Sent on to the stack's API: the run is there, not here.
    assert ApiClient(stack.url).get(f"/runs/{started['name']}")["name"] == started["name"]

    page.goto(f"{console_url}/console#/runs/{started['name']}")
    expect(page.locator("#where")).to_have_text(f"stack traingrid (us-east-1) · {stack.url}")
    expect(page.locator("#run-status")).to_have_text("SUCCEEDED", timeout=WAIT_MS)
    link = page.get_by_role("link", name="Open in the Step Functions console")
    expect(link).to_have_attribute("href", started["console_url"])
    expect(page.get_by_text("embedded emulator")).to_have_count(0)
    assert stroke(page, "RecordSuccess") == GREEN
    page.screenshot(path=ARTIFACTS / "remote-stack-run.png", full_page=True)


def test_the_stacks_errors_reach_the_page_as_the_api_gave_them(console_url, page):
    expect = playwright.expect
    page.goto(f"{console_url}/console#/runs/no-such-run")
    expect(page.get_by_role("alert")).to_have_text(
        "No run is named 'no-such-run': list recent runs with GET /runs.")
