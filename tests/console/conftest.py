"""The browser that the console's tests drive: Debian's headless Chromium, via Playwright.

Without Chromium the tests skip, saying so, unless ``TRAINGRID_REQUIRE_BROWSER=1`` (CI), where
they fail. Each test writes a screenshot of what it saw to test-artifacts/console/.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from traingrid_local.api.client import ApiClient
from traingrid_local.stack.environment import DEMO_BUCKET

playwright = pytest.importorskip("playwright.sync_api")

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "console"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# As root in a sandbox with no route out: no setuid sandbox, no calls home at start.
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--no-first-run",
         "--disable-sync"]
GREEN, RED, GREY = "rgb(29, 129, 2)", "rgb(209, 50, 18)", "rgb(154, 164, 176)"
# However busy the machine: every wait of a page (an expect, a click, a navigation) waits on
# what it expects for up to this long, and asserts what it saw, not how soon.
WAIT_MS = 120_000
playwright.expect.set_options(timeout=WAIT_MS)
DATASET = f"s3://{DEMO_BUCKET}/imagenet2012/resized/"


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).is_file():
        reason = "no Chromium: `make chromium` installs Debian's"
        if os.environ.get("TRAINGRID_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{reason} (TRAINGRID_REQUIRE_BROWSER=1)", pytrace=False)
        pytest.skip(reason)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with playwright.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser):
    opened = browser.new_page(viewport={"width": 1400, "height": 1000})
    opened.set_default_timeout(WAIT_MS)
    opened.set_default_navigation_timeout(WAIT_MS)
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    opened.close()
    assert not errors, f"the page threw: {errors}"


def submit(url: str, name: str, path: str = "/runs", body: dict | None = None) -> str:
    answer = ApiClient(url, timeout=30).call(
        "POST", path, body if body is not None else {"dataset": DATASET, "nodes": 4},
        headers={"Idempotency-Key": name})
    return answer.body["name"]


def state(page, name: str):
    return page.locator(f'.graph [data-state="{name}"]')


def stroke(page, name: str) -> str:
    return state(page, name).locator(":scope > rect").evaluate(
        "rect => getComputedStyle(rect).stroke")
