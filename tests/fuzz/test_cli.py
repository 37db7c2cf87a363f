"""The CLI under bad arguments, against the API that `traingrid serve` runs: every command
ends with its exit code and, when it fails, a one-line reason; never a traceback."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tests.fuzz.conftest import any_body, nasty_text
from traingrid_local.cli.main import app
from traingrid_local.demo import runner as demo_runner

pytestmark = pytest.mark.e2e

FAST = settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                         HealthCheck.too_slow])
# 0: done (the run named succeeded or runs); 1: the run failed or the API refused; 2: an
# invalid request or argument (typer's own usage errors too); 3: the API cannot be reached.
EXIT_CODES = {0, 1, 2, 3}
runner = CliRunner()
# Arguments as a shell passes them: no NUL.
arguments = st.one_of(nasty_text, st.text(max_size=20)).map(lambda a: a.replace("\x00", ""))


def run_cli(*args: str) -> object:
    result = runner.invoke(app, list(args))
    # An exception typer did not turn into an exit is a crash: CliRunner keeps it here.
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        args, result.exception, result.output)
    assert result.exit_code in EXIT_CODES, (args, result.exit_code, result.output)
    assert "Traceback" not in result.output, (args, result.output)
    if result.exit_code not in (0, 2):
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert lines and lines[-1].startswith("traingrid "), (args, result.stderr)
    return result


def closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@FAST
@given(command=st.sampled_from(["status", "logs"]), name=arguments)
@example(command="status", name="[/]")
@example(command="status", name="a b")
@example(command="logs", name="a?b#c")
@example(command="status", name="\x1b[31mred")
def test_status_and_logs_of_any_name(served_api, command, name):
    result = run_cli(command, name, "--endpoint", served_api.url)
    if result.exit_code == 1:
        assert "no run is named" in result.stderr or "No route" in result.stderr


@FAST
@given(limit=st.one_of(st.integers(-5, 200).map(str), arguments), pipeline=arguments,
       status=arguments, token=arguments)
def test_runs_with_any_options(served_api, limit, pipeline, status, token):
    result = run_cli("runs", "--endpoint", served_api.url, "--limit", limit, "--pipeline",
                     pipeline, "--status", status, "--next-token", token, "--json")
    if result.exit_code == 0:
        assert isinstance(json.loads(result.stdout)["runs"], list)


@FAST
@given(body=any_body(), campaign=st.one_of(st.none(), arguments),
       key=st.one_of(st.none(), arguments, st.just("clé-ünïcode"), st.just("a\nb")),
       nodes=st.one_of(st.none(), st.integers(-3, 3).map(str), arguments))
@example(body=b"{}", campaign="a/b?c", key=None, nodes=None)
@example(body=b'{"dataset": "s3://traingrid-demo-data/fuzz/cli/"}', campaign=None,
         key="clé", nodes=None)
def test_submit_any_file_and_flags(served_api, tmp_path_factory, body, campaign, key, nodes):
    request = tmp_path_factory.mktemp("submit") / "request.json"
    request.write_bytes(body)
    args = ["submit", str(request), "--endpoint", served_api.url]
    args += ["--campaign", campaign] if campaign is not None else []
    args += ["--idempotency-key", key] if key is not None else []
    args += ["--nodes", nodes] if nodes is not None and campaign is None else []
    result = run_cli(*args)
    if key is not None and key and not (key.isascii() and key.isprintable()):
        assert result.exit_code == 2  # the key, or the file, is refused before sending


@FAST
@given(endpoint=arguments)
@example(endpoint="foo")
@example(endpoint="http://127.0.0.1:99999")
@example(endpoint="ftp://127.0.0.1/")
@example(endpoint="http://")
def test_any_endpoint_is_used_or_said_to_be_unreachable(endpoint):
    result = run_cli("runs", "--endpoint", endpoint)
    assert result.exit_code in (1, 3), result.output


def test_a_closed_port_is_unreachable():
    result = run_cli("status", "some-run", "--endpoint", closed_port())
    assert result.exit_code == 3 and "nothing answers" in result.stderr


@FAST
@given(url=arguments)
@example(url="sqlite:////nonexistent/dir/x.db")
@example(url="postgresql://")
@example(url="'; DROP TABLE campaigns; --")
def test_campaigns_from_any_database_url(url, tmp_path_factory):
    if url.startswith("sqlite:") and "nonexistent" not in url:
        return  # a SQLite URL names a file, created where it points
    result = run_cli("campaigns", "--database-url", url)
    assert result.exit_code in (0, 2, 3)


@FAST
@given(jobs=st.lists(arguments, max_size=2), at=st.one_of(st.none(), arguments))
@example(jobs=[], at="[/]")
@example(jobs=["[bold]retrain"], at=None)
def test_tick_with_any_jobs_and_time(served_api, jobs, at):
    if not jobs and at is None:
        return  # that fires the schedule for real: the scheduled-retraining tests do
    args = ["tick", *jobs, "--endpoint", served_api.url]
    result = run_cli(*args, *(["--at", at] if at is not None else []))
    assert result.exit_code in (0, 1, 2)


@FAST
@given(pipeline=arguments, scenario=arguments, uploads=st.integers(-2, 3).map(str),
       speed=st.sampled_from(["0", "-1", "nan", "inf", "1e-300", "4000", "x"]),
       hours=st.sampled_from(["0", "nan", "-3", "1"]),
       manifest=st.one_of(st.none(), arguments))
def test_demo_refuses_bad_options_before_it_starts(monkeypatch, pipeline, scenario, uploads,
                                                   speed, hours, manifest):
    started = []
    # The demo itself takes a minute; what is under test is what reaches it.
    monkeypatch.setattr(demo_runner, "run", lambda options, *_: started.append(
        options) or {"ok": True, "executions": [], "pipelines": [], "scenario": "",
                     "clock_speed": 1, "rejected_manifests": [], "artifacts": [],
                     "retained_resources": [], "leaked_resources": [], "expected": {},
                     "wall_seconds": 0})
    args = ["demo", "--json", "--pipeline", pipeline, "--scenario", scenario, "--uploads",
            uploads, "--speed", speed, "--training-hours", hours]
    result = run_cli(*args, *(["--manifest", manifest] if manifest is not None else []))
    if started:
        options = started[0]
        assert options.speed > 0 and options.training_hours > 0 and options.uploads >= 1
        assert options.manifest is None or Path(options.manifest).is_file()
    else:
        assert result.exit_code == 2


@pytest.mark.parametrize("args", [
    ["serve", "--port", "70000"], ["serve", "--port", "-1"], ["serve", "--speed", "0"],
    ["serve", "--speed", "nan"], ["serve", "--training-hours", "-1"]])
def test_serve_refuses_bad_options_with_one_line(args):
    result = run_cli(*args)
    assert result.exit_code == 2
    (line,) = [line for line in result.stderr.splitlines() if line.strip()]
    assert line.startswith("traingrid serve: ")
