"""``traingrid watch`` through typer's runner against a real loopback server: it follows a
run's curves until the run ends, and shows its straggler."""

from __future__ import annotations

import pytest

from tests.cli.test_cli_api import DATASET, runner, start_serve, stop
from traingrid_local.api.client import ApiClient
from traingrid_local.cli.main import app
from traingrid_local.cli.watch import sparkline

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def straggling_url(tmp_path_factory):
    process, url = start_serve(tmp_path_factory.mktemp("watch"), "--training-hours", "2",
                               "--fault", "straggler")
    yield url
    stop(process)


def test_watch_follows_a_run_to_its_end_and_shows_its_straggler(straggling_url):
    name = ApiClient(straggling_url, timeout=30).call(
        "POST", "/runs", {"dataset": DATASET, "nodes": 3},
        headers={"Idempotency-Key": "watch-straggler"}).body["name"]
    result = runner.invoke(app, ["watch", name, "--interval", "0.2", "--endpoint",
                                 straggling_url])
    assert result.exit_code == 0, result.output
    assert f"{name} SUCCEEDED" in result.output
    assert "epoch 90.00" in result.output
    for node in ("node-0", "node-2"):
        assert node in result.output
    assert "node-1 (straggler)" in result.output
    assert "straggler node-1: waits" in result.output
    assert any(bar in result.output for bar in "▁▂▃▄▅▆▇█")


def test_watching_an_unknown_run_is_a_one_line_error(straggling_url):
    result = runner.invoke(app, ["watch", "no-such-run", "--endpoint", straggling_url])
    assert result.exit_code == 1
    assert result.output == ("traingrid watch: no run is named 'no-such-run': traingrid runs "
                             "lists recent runs\n")


def test_a_sparkline_spans_its_lowest_to_its_highest_value():
    assert sparkline([[0, 1.0], [1, 2.0], [2, 3.0]]) == "▁▅█"
    assert sparkline([]) == "" and sparkline([[0, 5.0]]) == "▁"
