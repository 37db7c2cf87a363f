"""The console of a deployed stack (``traingrid console --stack``) in a real browser: pages
served here, API requests sent on to the stack's API, graphs from its state machines, and
links to the AWS console. The stand-in for the stack is ``traingrid serve``'s API and emulated
account (the signing itself: tests/cli/test_cli_api.py)."""

from __future__ import annotations

import pytest

from tests.console.conftest import ARTIFACTS, GREEN, WAIT_MS, playwright, stroke
from tests.integration.conftest import serving
from traingrid_local.api.client import ApiClient
from traingrid_local.console.remote import stack_console, stack_server

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with serving(tmp_path_factory, 600, "console-remote") as api:
        yield api


@pytest.fixture(scope="module")
def console_server(stack):
    outputs = {**stack.deployment.stack.outputs, "ApiUrl": stack.url}
    console = stack_console(outputs, stack.emulator.client("stepfunctions"),
                            {"api": stack.url, "stack": "traingrid", "region": "us-east-1"})
    with stack_server(ApiClient(stack.url), console, 0) as server:
        yield server


def test_runs_started_through_the_console_server_link_to_the_step_functions_console(
        stack, console_server, page):
    expect = playwright.expect
    started = ApiClient(console_server.url, token=console_server.token).call(
        "POST", "/runs", {"dataset": "s3://traingrid-demo-data/imagenet2012/resized/",
                          "nodes": 2}, headers={"Idempotency-Key": "console-remote"}).body
    # Sent on to the stack's API: the run is there, not here.
    assert ApiClient(stack.url).get(f"/runs/{started['name']}")["name"] == started["name"]

    # The URL the command prints signs the browser in; the page then reads the API with the
    # cookie it got for the token.
    page.goto(console_server.url_with_token("/console") + f"#/runs/{started['name']}")
    expect(page).to_have_url(f"{console_server.url}/console#/runs/{started['name']}")
    expect(page.locator("#where")).to_have_text(f"stack traingrid (us-east-1) · {stack.url}")
    expect(page.locator("#run-status")).to_have_text("SUCCEEDED", timeout=WAIT_MS)
    link = page.get_by_role("link", name="Open in the Step Functions console")
    expect(link).to_have_attribute("href", started["console_url"])
    expect(page.get_by_text("embedded emulator")).to_have_count(0)
    assert stroke(page, "RecordSuccess") == GREEN
    page.screenshot(path=ARTIFACTS / "remote-stack-run.png", full_page=True)


def test_the_stacks_errors_reach_the_page_as_the_api_gave_them(console_server, page):
    expect = playwright.expect
    page.goto(console_server.url_with_token("/console") + "#/runs/no-such-run")
    expect(page.get_by_role("alert")).to_have_text(
        "No run is named 'no-such-run': list recent runs with GET /runs.")
