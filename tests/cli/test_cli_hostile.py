"""The API's commands against a hostile API on loopback: every name, cause, node and log line
it answers carries terminal control sequences (OSC 0/8/52, CSI 2J, C1 controls, bidi
overrides) and Rich markup (``[/bold]``, ``[link=…]``). The terminal gets none of them as
sequences or markup: each is shown literally, escapes spelled out, and the exit codes are
docs/cli.md's."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
from typer.testing import CliRunner

from traingrid.training.plan import DatasetSize
from traingrid_local.cli.main import app
from traingrid_local.cli.plan import local_plan
from traingrid_local.cli.terminal import plain
from traingrid_local.demo.served import TICK_PATH

runner = CliRunner()

TITLE = "\x1b]0;pwned\x07"  # OSC 0: the window's title
LINK = "\x1b]8;;https://evil/\x1b\\here\x1b]8;;\x1b\\"  # OSC 8: a hidden link
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"  # OSC 52: the clipboard
CLEAR = "\x1b[2J"  # CSI 2J: the screen cleared
C1 = "\x9b2J\x85"  # CSI and NEL as C1 controls
BIDI = "\u202eevil\u202c\u2066"  # right-to-left override, pop, left-to-right isolate
MARKUP, RICH_LINK = "[/bold]", "[link=https://evil]x[/link]"
# As the terminal must show them: escapes spelled out, brackets as they are.
SHOWN = {TITLE: r"\x1b]0;pwned\x07", LINK: r"\x1b]8;;https://evil/\x1b\here\x1b]8;;\x1b" "\\",
         CLIPBOARD: r"\x1b]52;c;cm0gLXJmIH4=\x07", CLEAR: r"\x1b[2J", C1: r"\x9b2J\x85",
         BIDI: r"\u202eevil\u202c\u2066"}

RUN = f"run{TITLE}{MARKUP}"  # the failed run's name, as the API answers it
OK_RUN = f"ok{CLEAR}[red]x{BIDI}"  # the run `submit --wait` follows (no "/": a name)
OK_SHOWN = f"ok{SHOWN[CLEAR]}[red]x{SHOWN[BIDI]}"
CURVES = {"images_per_s": [[0, 100.0], [1, 110.0]], "loss": [[0, 1.0], [1, 0.5]],
          "step_s": [[0, 0.3]], "input_s": [[0, 0.1]]}
STRAGGLER = f"n{RICH_LINK}"


def view(name: str, status: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "pipeline": "TrainingRun", "status": status, "duration_s": 120.0,
            "current_state": f"Plan{CLEAR}", "console_url": f"http://127.0.0.1/c#{LINK}",
            "states": [{"state": f"Plan{CLEAR}", "offset_s": 0, "duration_s": 10,
                        "outcome": "succeeded"}],
            "artifacts": [], "cost": None} | fields


FAILED = view(
    RUN, "FAILED", error=f"Boom{C1}{MARKUP}", cause=f"{RICH_LINK} {BIDI}",
    states=[{"state": f"Plan{CLEAR}", "offset_s": 0, "duration_s": 10, "outcome": "succeeded"},
            {"state": "TrainingJob", "offset_s": 10, "duration_s": 100,
             "outcome": f"caught{MARKUP}", "errors": [f"Err{TITLE}"]}],
    artifacts=[{"location": f"s3://b/runs/{RICH_LINK}/", "region": f"us{BIDI}"}],
    cost={"actual": {"total": 1.0, "compute": 0.5, "file_system": 0.25, "orchestration": 0.25,
                     "staging": 0.0},
          "estimate": {"max_usd": 2.0}, "prices_version": f"2026{CLIPBOARD}",
          "goodput": {"goodput": 0.5, "productive_node_hours": 1.0, "paid_node_hours": 2.0,
                      "lost_node_hours": {f"lost{MARKUP}": 1.0}}})
LOGS = {"name": RUN, "pipeline": "TrainingRun", "status": "FAILED", "error": FAILED["error"],
        "cause": FAILED["cause"], "log": {"source": f"node-0{TITLE}", "lines": [
            f"epoch 1{CLEAR}", LINK, f"{CLIPBOARD}copied", f"tab\there {RICH_LINK}", BIDI,
            "\x00nul\x7fdel\rreturn", "lone \ud800 surrogate"]}}
METRICS = {"name": RUN, "status": "SUCCEEDED", **CURVES,
           "latest": {"step": 10, "epoch": 1.0, "loss": 0.5, "lr": 0.1},
           "nodes": {f"node{CLEAR}": CURVES, STRAGGLER: CURVES},
           "stragglers": {STRAGGLER: f"waits {BIDI}{TITLE}"}}
MONEY = {"compute": 0.5, "file_system": 0.25, "orchestration": 0.25, "staging": 0.0,
         "total": 1.0, "estimated_max": 2.0}
COSTS = {"by": "dataset", "since": None, "until": None, "total": 2.0, "groups": [
    {"dataset": "s3://data/[/bold]/", "runs": 1, "pipelines": {"TrainingRun": 1},
     "unpriced_runs": 0, "goodput": 0.5, "productive_node_hours": 1.0, "paid_node_hours": 2.0,
     **MONEY},
    {"dataset": f"s3://d/{RICH_LINK}", "runs": 1, "pipelines": {"TrainingRun": 1},
     "unpriced_runs": 0, "goodput": None, **MONEY}]}
CAMPAIGNS = {"campaigns": [{
    "id": f"camp{MARKUP}", "last_run": {"name": RICH_LINK, "status": f"OK{CLEAR}"},
    "datasets": [{"region": f"us{BIDI}", "s3_uri": f"s3://c/{TITLE}", "objects": 1,
                  "bytes": 2, "registered_at": f"2026{C1}"}]}]}
RUNS = {"runs": [
    {"name": RUN, "pipeline": "TrainingRun", "status": "FAILED", "started_at": f"2026{CLEAR}",
     "duration_s": 5.0},
    {"name": RICH_LINK, "pipeline": BIDI, "status": f"OK{C1}", "started_at": "2026",
     "duration_s": None}], "next_token": f"t{CLIPBOARD}"}
TICK = {"fired": {
    "retrain": {"schedule": "cron(0 2 * * ? *)", "scheduled_at": f"2026{CLEAR}", "window": 1,
                "started": [{"name": RICH_LINK, "new_datasets": 1}],
                "skipped": [{"campaign": f"c{TITLE}", "reason": MARKUP}]},
    "janitor": {"schedule": "rate(5 minutes)", "scheduled_at": "2026",
                "released": [{"action": "deleted", "type": "fsx", "id": f"fs-{TITLE}",
                              "reason": RICH_LINK}],
                "waiting": [], "runs_recorded": [], "errors": [CLIPBOARD]}}}


def hostile_plan() -> dict[str, Any]:
    plan = local_plan({"dataset": "s3://data/imagenet/", "nodes": 2}, DatasetSize(10, 10**9))
    plan["run"] = RUN
    plan["dataset"]["uri"] = f"s3://data/{RICH_LINK}"
    plan["job"]["images_per_s_source"] = f"catalog{TITLE}"
    plan["fsx"]["deployment_type"] = f"SCRATCH{CLEAR}"
    plan["notes"], plan["warnings"] = [f"note {BIDI}"], [f"warn {MARKUP}{CLIPBOARD}"]
    return plan


ROUTES: dict[tuple[str, str], tuple[int, Any]] = {
    ("GET", "/runs"): (200, RUNS),
    ("GET", "/runs/evil"): (200, FAILED),
    ("GET", "/runs/evil/logs"): (200, LOGS),
    ("GET", "/runs/evil/metrics"): (200, METRICS),
    ("GET", f"/runs/{OK_RUN}"): (200, view(OK_RUN, "SUCCEEDED")),
    ("POST", "/runs"): (202, {"name": OK_RUN, "started": True, "status": "RUNNING",
                              "console_url": f"http://127.0.0.1/c#{LINK}"}),
    ("GET", "/costs"): (200, COSTS),
    ("GET", "/campaigns"): (200, CAMPAIGNS),
    ("POST", "/plans"): (202, {"status": "MEASURING", "next": "/plans/more",
                               "dataset": {"uri": f"s3://data/{TITLE}", "objects_so_far": 5}}),
    ("POST", TICK_PATH): (200, TICK),
}
INVALID = (400, {"message": f"Invalid request{CLEAR}{MARKUP}", "problems": [
    {"pointer": f"/nodes{BIDI}", "message": f"{RICH_LINK} too many"}]})
MISSING = (404, {"message": f"No run{CLEAR}{RICH_LINK}"})


class HostileApi(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        self._answer("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._answer("POST")

    def _answer(self, method: str) -> None:
        path = unquote(urlsplit(self.path).path)
        sent = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0))
                          or b"null")
        if method == "POST" and path == "/runs" and sent.get("name") == "bad":
            status, body = INVALID
        elif path == "/plans/more":
            status, body = 200, hostile_plan()
        else:
            status, body = ROUTES.get((method, path), MISSING)
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def hostile():
    server = HTTPServer(("127.0.0.1", 0), HostileApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}"

    def traingrid(*args: str):
        return runner.invoke(app, [*args, "--endpoint", url])

    yield traingrid
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


SGR = re.compile(r"\x1b\[[0-9;]*m")  # Rich's own colours, where it finds a terminal
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069"
                    "\ud800-\udfff]")


def inert(result, code: int) -> str:
    """The command's stdout and stderr, after checking they hold no control, bidi override or
    lone surrogate (tabs and line breaks aside) and that it exited with ``code``."""
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        repr(result.exception))
    assert result.exit_code == code, result.output
    output = result.stdout + result.stderr
    found = UNSAFE.search(SGR.sub("", output))
    assert found is None, f"{found.group()!r} reached the terminal: {output!r}"
    return output


def test_logs_show_every_line_as_text_keeping_its_tabs(hostile):
    result = hostile("logs", "evil")
    out = inert(result, 1)  # the run failed
    assert result.stderr.strip().splitlines()[-1] == (
        f"traingrid logs: run{SHOWN[TITLE]}[/bold] FAILED: Boom{SHOWN[C1]}[/bold]: "
        f"{RICH_LINK} {SHOWN[BIDI]}")
    lines = out.splitlines()
    for line in ("epoch 1" + SHOWN[CLEAR], SHOWN[LINK], SHOWN[CLIPBOARD] + "copied",
                 "tab\there " + RICH_LINK, SHOWN[BIDI], r"\x00nul\x7fdel\rreturn",
                 r"lone \ud800 surrogate"):
        assert line in lines, out
    assert f"run{SHOWN[TITLE]}[/bold] · TrainingRun · FAILED" in out
    assert f"Boom{SHOWN[C1]}[/bold]: {RICH_LINK} {SHOWN[BIDI]}" in out
    assert f"node-0{SHOWN[TITLE]}" in out  # the log's source, over its lines


def test_status_of_a_failed_run_shows_its_data_literally_and_exits_1(hostile):
    result = hostile("status", "evil")
    out = inert(result, 1)
    assert f"run{SHOWN[TITLE]}[/bold] · TrainingRun · FAILED" in out
    assert f"Plan{SHOWN[CLEAR]}" in out and f"caught[/bold] (Err{SHOWN[TITLE]})" in out
    assert f"console: http://127.0.0.1/c#{SHOWN[LINK]}" in out
    assert f"artifacts (us{SHOWN[BIDI]}): s3://b/runs/{RICH_LINK}/" in out
    assert f"prices 2026{SHOWN[CLIPBOARD]} · goodput 50.0%" in out and "lost[/bold] 1.00" in out
    assert result.stderr.strip().splitlines()[-1] == (
        f"traingrid status: run{SHOWN[TITLE]}[/bold] FAILED: Boom{SHOWN[C1]}[/bold]: "
        f"{RICH_LINK} {SHOWN[BIDI]}")
    unknown = hostile("status", f"gone{CLEAR}")  # the name as typed, as text
    inert(unknown, 1)
    assert unknown.stderr.strip() == (f"traingrid status: no run is named 'gone{SHOWN[CLEAR]}': "
                                      "traingrid runs lists recent runs")
    campaign = hostile("submit", "--campaign", "gone")  # the API's 404, one line of text
    inert(campaign, 1)
    assert campaign.stderr.strip() == f"traingrid submit: No run{SHOWN[CLEAR]}{RICH_LINK}"


def test_runs_and_campaigns_show_names_as_text(hostile):
    runs = inert(hostile("runs"), 0)
    for shown in (f"run{SHOWN[TITLE]}[/bold]", RICH_LINK, SHOWN[BIDI], f"OK{SHOWN[C1]}",
                  f"2026{SHOWN[CLEAR]}"):
        assert shown in runs, runs
    assert f"more: traingrid runs --next-token t{SHOWN[CLIPBOARD]}" in runs
    campaigns = inert(hostile("campaigns"), 0)
    assert f"camp[/bold] · last run: {RICH_LINK} OK{SHOWN[CLEAR]}" in campaigns
    for shown in (f"us{SHOWN[BIDI]}", f"s3://c/{SHOWN[TITLE]}", f"2026{SHOWN[C1]}"):
        assert shown in campaigns, campaigns


def test_watch_shows_node_names_from_s3_keys_as_text(hostile):
    out = inert(hostile("watch", "evil"), 0)
    assert f"run{SHOWN[TITLE]}[/bold] SUCCEEDED" in out
    assert f"node{SHOWN[CLEAR]}" in out and f"{STRAGGLER} (straggler)" in out
    assert f"straggler {STRAGGLER}: waits {SHOWN[BIDI]}{SHOWN[TITLE]}" in out


def test_costs_of_datasets_named_like_markup_are_shown_not_parsed(hostile):
    out = inert(hostile("costs"), 0)
    assert "s3://data/[/bold]/" in out and f"s3://d/{RICH_LINK}" in out
    assert "goodput (productive of paid node-hours): s3://data/[/bold]/ 50.0%" in out


def test_plan_shows_what_the_api_planned_as_text(hostile):
    out = inert(hostile("plan", "--dataset", "s3://data/imagenet/"), 0)
    assert f"listing s3://data/{SHOWN[TITLE]}: 5 objects so far" in out
    assert f"Plan for run{SHOWN[TITLE]}[/bold] (nothing started)" in out
    for shown in (f"s3://data/{RICH_LINK}", f"catalog{SHOWN[TITLE]}", f"SCRATCH{SHOWN[CLEAR]}",
                  f"note {SHOWN[BIDI]}", f"warn [/bold]{SHOWN[CLIPBOARD]}"):
        assert shown in out, out


def test_submit_follows_a_hostile_run_and_an_invalid_request_exits_2(hostile):
    started = inert(hostile("submit", "--dataset", "s3://data/x/"), 0)
    assert f"{OK_SHOWN} started (RUNNING)" in started
    assert f"http://127.0.0.1/c#{SHOWN[LINK]}" in started
    waited = hostile("submit", "--dataset", "s3://data/x/", "--wait", "--timeout", "5")
    out = inert(waited, 0)
    assert f"{OK_SHOWN}: SUCCEEDED · Plan{SHOWN[CLEAR]}" in waited.stderr
    assert f"{OK_SHOWN} · TrainingRun" in out  # the timeline's title
    invalid = hostile("submit", "--dataset", "s3://data/x/", "--name", "bad")
    inert(invalid, 2)
    assert invalid.stderr.splitlines() == [
        f"  /nodes{SHOWN[BIDI]}: {RICH_LINK} too many",
        "traingrid submit: invalid request: 1 problem above"]


def test_tick_shows_what_the_schedules_did_as_text(hostile):
    out = inert(hostile("tick"), 0)
    for shown in (f"fired for 2026{SHOWN[CLEAR]}", f"started {RICH_LINK} (1 new dataset(s))",
                  f"skipped c{SHOWN[TITLE]}: [/bold]",
                  f"deleted fsx fs-{SHOWN[TITLE]}: {RICH_LINK}", f"error: {SHOWN[CLIPBOARD]}"):
        assert shown in out, out


def test_plain_spells_out_what_a_terminal_would_act_on_and_keeps_the_rest():
    assert plain("ImageNet · 画像 ✓ [b]") == "ImageNet · 画像 ✓ [b]"
    assert plain(f"a{TITLE}\tb\nc\u200b") == r"a\x1b]0;pwned\x07\tb\nc\u200b"
    assert plain("a\tb\nc\rd", keep="\t\n") == "a\tb\nc\\rd"
    assert plain(None) == "None"
