"""The traingrid commands that use the API, through typer's runner, against a real loopback
server over the emulator; `traingrid serve` itself as a process, stopped with SIGTERM; a
deployed stack's API reached with SigV4."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from traingrid_local.api.client import ApiClient
from traingrid_local.cli.main import app
from traingrid_local.console.remote import remote
from traingrid_local.stack.environment import DEMO_BUCKET

runner = CliRunner()
DATASET = f"s3://{DEMO_BUCKET}/imagenet2012/resized/"
ROOT = Path(__file__).resolve().parents[2]


def start_serve(cwd: Path, *options: str, quiet: bool = True) -> tuple[subprocess.Popen[str], str]:
    """`traingrid serve` in its own process (the runner swaps sys.stdout, which an in-process
    server's functions would share); its URL once it answers."""
    traingrid = Path(sys.executable).with_name("traingrid")
    process = subprocess.Popen(
        [str(traingrid), "serve", "--port", "0", *(["--quiet"] if quiet else []), "--speed",
         "4000", *options],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
        env=os.environ | {"MOTO_EC2_LOAD_DEFAULT_AMIS": "false"})
    banner = process.stdout.readline()
    found = re.search(r"http://127\.0\.0\.1:\d+", banner)
    if found is None:
        process.kill()
        raise AssertionError(f"traingrid serve did not start: {process.communicate()}")
    return process, found.group(0)


def stop(process: subprocess.Popen[str]) -> tuple[int, str]:
    """SIGTERM, as a service manager stops it; (exit code, stderr)."""
    process.send_signal(signal.SIGTERM)
    try:
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    return process.returncode, err


@pytest.fixture(scope="module")
def served_url(tmp_path_factory):
    process, url = start_serve(tmp_path_factory.mktemp("serve"), "--training-hours", "1")
    yield url
    stop(process)


@pytest.fixture
def traingrid(served_url):
    """Run a traingrid command against the served API."""

    def run(*args: str):
        return runner.invoke(app, [*args, "--endpoint", served_url])

    return run


def test_submit_from_a_file_waits_with_progress_and_shows_the_timeline(traingrid, tmp_path):
    request = tmp_path / "run.json"
    request.write_text(json.dumps({"dataset": DATASET, "nodes": 2}))
    result = traingrid("submit", str(request), "--epochs", "30", "--wait", "--name",
                       "cli-run")
    assert result.exit_code == 0, result.output
    assert "cli-run: RUNNING" in result.stderr  # progress, one line per step
    assert "cli-run · TrainingRun · SUCCEEDED" in result.stdout
    assert re.search(r"TrainingJob ×\d+", result.stdout)

    status = traingrid("status", "cli-run")
    assert status.exit_code == 0, status.output
    for step in ("Plan", "CreateFileSystem", "SubmitTrainingJob", "Archive",
                 "DeleteFileSystem", "Succeeded"):
        assert step in status.stdout, status.stdout
    assert "caught" not in status.stdout  # nothing to warn of in a run that succeeded
    # What submit --wait shows of the run it followed, status shows too, and the other way.
    for shown in (result.stdout, status.stdout):
        assert f"artifacts: s3://{DEMO_BUCKET}/runs/cli-run/" in shown
        assert re.search(r"cost: \$[\d,]+\.\d\d \(compute \$[\d,]+\.\d\d, file system",
                         shown), shown
    every = traingrid("status", "cli-run", "--every-visit", "--json")
    assert json.loads(every.stdout)["input"]["request"]["epochs"] == 30

    logs = traingrid("logs", "cli-run")
    assert logs.exit_code == 0 and "mpirun -np 16" in logs.stdout

    listed = traingrid("runs", "--json")
    assert "cli-run" in [r["name"] for r in json.loads(listed.stdout)["runs"]]
    assert "cli-run" in traingrid("runs").stdout


def test_package_puts_a_project_in_the_served_data_bucket_once(traingrid, tmp_path):
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "train.py").write_text("print('mine')\n")
    # Incompressible, over one request's 6 MiB: sent in parts.
    (tmp_path / "p" / "weights.bin").write_bytes(random.Random(7).randbytes(7 * 2**20))

    first = traingrid("package", str(tmp_path / "p"))
    again = traingrid("package", str(tmp_path / "p"))

    assert first.exit_code == again.exit_code == 0, first.output + again.output
    uri = first.stdout.splitlines()[-1]
    assert re.fullmatch(rf"s3://{DEMO_BUCKET}/code/sha256/[0-9a-f]{{64}}\.tar\.gz", uri)
    assert again.stdout.splitlines()[-1] == uri
    assert (first.stderr, again.stderr) == (
        "uploaded to the data bucket\n", "already in the data bucket: not uploaded again\n")


def test_submit_with_the_same_idempotency_key_names_the_same_run(traingrid):
    args = ("submit", "--dataset", DATASET, "--nodes", "3", "--idempotency-key", "cli-key",
            "--json")
    first, again = traingrid(*args), traingrid(*args)
    assert first.exit_code == again.exit_code == 0, first.output + again.output
    assert json.loads(first.stdout)["name"] == json.loads(again.stdout)["name"]


def test_an_invalid_submission_lists_its_problems_once_and_exits_2(traingrid, tmp_path):
    result = traingrid("submit", "--nodes", "0", "--instance-type", "t2.micro")
    assert result.exit_code == 2
    assert [result.stderr.count(p) for p in ("/dataset", "/nodes", "/instance_type")] == [1, 1, 1]
    assert result.stderr.splitlines()[-1] == "traingrid submit: invalid request: 3 problems above"

    typo = tmp_path / "run.json"
    typo.write_text(json.dumps({"dataset": DATASET, "nodse": 4}))
    result = traingrid("submit", str(typo))
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "  /nodse: unknown field; did you mean 'nodes'?",
        "traingrid submit: invalid request: 1 problem above"]


def test_a_dataset_outside_the_data_bucket_is_an_invalid_request(traingrid):
    for command in ("submit", "plan"):
        result = traingrid(command, "--dataset", "s3://someone-elses-bucket/data/")
        assert result.exit_code == 2, result.output
        assert f"/dataset: TrainGrid reads datasets from s3://{DEMO_BUCKET}/ only" in result.stderr
        assert result.stderr.splitlines()[-1] == (
            f"traingrid {command}: invalid request: 1 problem above")


def test_a_failed_run_exits_non_zero_with_its_cause(traingrid):
    result = traingrid("submit", "--dataset", f"s3://{DEMO_BUCKET}/missing/", "--name",
                       "cli-missing", "--wait")
    assert result.exit_code == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("traingrid submit: cli-missing FAILED: DatasetNotFound")
    status = traingrid("status", "cli-missing")
    assert status.exit_code == 1 and "caught (DatasetNotFound)" in status.stdout
    logs = traingrid("logs", "cli-missing")
    assert logs.exit_code == 1 and "DatasetNotFound" in logs.stdout
    assert logs.stderr.strip().splitlines()[-1].startswith(
        "traingrid logs: cli-missing FAILED: DatasetNotFound")


def test_an_unknown_run_is_a_one_line_error_that_names_the_command_listing_runs(traingrid):
    for command in ("status", "logs", "watch"):
        result = traingrid(command, "no-such-run")
        assert result.exit_code == 1
        assert result.stderr == (f"traingrid {command}: no run is named 'no-such-run': "
                                 "traingrid runs lists recent runs\n")


def test_campaigns_and_tick_fire_the_schedule_once(traingrid):
    campaigns = traingrid("campaigns")
    assert campaigns.exit_code == 0 and "av-drive-2026-11" in campaigns.stdout
    at = "2026-11-23T02:00:00Z"
    first = traingrid("tick", "retrain", "--at", at)
    again = traingrid("tick", "--at", at)
    assert first.exit_code == again.exit_code == 0, first.output + again.output
    assert "started av-drive-2026-11-20261123T0200-" in first.stdout
    assert "already started av-drive-2026-11-20261123T0200-" in again.stdout
    assert "janitor: rate(5 minutes) fired for" in again.stdout  # every job, by default
    janitor = traingrid("tick", "janitor")
    assert janitor.exit_code == 0 and "started" not in janitor.stdout
    unknown = traingrid("tick", "sweeper")
    assert unknown.exit_code == 1 and "no scheduled job sweeper" in unknown.stderr


def test_without_a_server_the_commands_say_what_to_do():
    result = runner.invoke(app, ["runs", "--endpoint", "http://127.0.0.1:9"])
    assert result.exit_code == 3
    assert ("start `traingrid serve`, or give the API's URL with --endpoint (or "
            "TRAINGRID_ENDPOINT), or pass --stack NAME --region R") in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    # TRAINGRID_ENDPOINT is every API command's --endpoint when none is given.
    for command in (["runs"], ["status", "r"], ["logs", "r"], ["watch", "r"], ["costs"],
                    ["campaigns"], ["plan", "--dataset", DATASET], ["submit"]):
        result = runner.invoke(app, command, env={"TRAINGRID_ENDPOINT": "http://127.0.0.1:9"})
        assert result.exit_code == 3, (command, result.output)
        assert "nothing answers at http://127.0.0.1:9" in result.stderr, command


class RecordingApi(BaseHTTPRequestHandler):
    seen: list[dict[str, str]] = []

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        RecordingApi.seen.append(dict(self.headers) | {"path": self.path})
        body = json.dumps({"runs": [], "next_token": None}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def recording_api():
    RecordingApi.seen = []
    server = HTTPServer(("127.0.0.1", 0), RecordingApi)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_with_a_stack_the_api_url_comes_from_its_outputs_and_requests_are_signed(
        recording_api, monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
                "Outputs": {"ApiUrl": {"Value": recording_api}}}
    with mock_aws():
        boto3.client("cloudformation", region_name="eu-west-1").create_stack(
            StackName="traingrid-prod", TemplateBody=json.dumps(template))
        result = runner.invoke(app, ["runs", "--stack", "traingrid-prod", "--region",
                                     "eu-west-1", "--limit", "5"])
    assert result.exit_code == 0, result.output
    (request,) = RecordingApi.seen
    assert request["path"] == "/v1/runs?limit=5"
    assert re.fullmatch(
        r"AWS4-HMAC-SHA256 Credential=\w+/\d{8}/eu-west-1/execute-api/aws4_request, "
        r"SignedHeaders=[a-z;-]*host[a-z;-]*, Signature=[0-9a-f]{64}", request["Authorization"])
    assert request["X-Amz-Date"]


def test_the_console_of_a_deployed_stack_signs_what_it_sends_on_and_draws_its_graphs(
        recording_api, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    definitions = {name: (ROOT / "statemachines" / f"{file}.asl.json").read_text()
                   for name, file in (("TrainingRun", "training_run"),
                                      ("CampaignFanout", "campaign_fanout"))}
    with mock_aws():
        sfn = boto3.client("stepfunctions", region_name="eu-west-1")
        arns = {name: sfn.create_state_machine(
            name=f"traingrid-{name}", definition=text,
            roleArn="arn:aws:iam::123456789012:role/states")["stateMachineArn"]
            for name, text in definitions.items()}
        template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}, "Outputs": {
            "ApiUrl": {"Value": recording_api},
            "TrainingRunStateMachineArn": {"Value": arns["TrainingRun"]},
            "CampaignFanoutStateMachineArn": {"Value": arns["CampaignFanout"]}}}
        boto3.client("cloudformation", region_name="eu-west-1").create_stack(
            StackName="traingrid-prod", TemplateBody=json.dumps(template))
        with remote("traingrid-prod", "eu-west-1", port=0) as server:
            client = ApiClient(server.url, token=server.token)
            assert client.get("/runs", limit=5) == {"runs": [], "next_token": None}
            settings = client.get("/console/config.json")
            graph = client.request("GET", "/console/graphs/CampaignFanout.svg")
    assert settings == {"emulated": False, "api": recording_api, "stack": "traingrid-prod",
                        "region": "eu-west-1"}
    assert 'data-state="RunRegion"' in graph.body  # the fan-out's own: each branch in RunRegion
    (request,) = RecordingApi.seen
    assert request["path"] == "/v1/runs?limit=5"
    assert re.fullmatch(
        r"AWS4-HMAC-SHA256 Credential=\w+/\d{8}/eu-west-1/execute-api/aws4_request, "
        r"SignedHeaders=[a-z;-]*host[a-z;-]*, Signature=[0-9a-f]{64}", request["Authorization"])


def test_the_console_of_a_stack_without_its_outputs_says_which_are_missing(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
                "Outputs": {"ApiUrl": {"Value": "https://example.invalid/v1"}}}
    with mock_aws():
        boto3.client("cloudformation", region_name="eu-west-1").create_stack(
            StackName="old", TemplateBody=json.dumps(template))
        result = runner.invoke(app, ["console", "--stack", "old", "--region", "eu-west-1",
                                     "--port", "0"])
    assert result.exit_code == 3
    assert result.stderr.strip() == (
        "traingrid console: stack old in eu-west-1 has no TrainingRunStateMachineArn or "
        "CampaignFanoutStateMachineArn output")


def test_a_missing_stack_is_a_one_line_error(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        result = runner.invoke(app, ["runs", "--stack", "nope", "--region", "us-east-1"])
    assert result.exit_code == 3
    assert result.stderr.startswith("traingrid runs: cannot read stack nope in us-east-1")


def test_serve_answers_on_loopback_and_stops_cleanly_on_sigterm(tmp_path):
    """The real command, in its own process: deploy, seed, serve, SIGTERM."""
    process, url = start_serve(tmp_path)
    try:
        listed = runner.invoke(app, ["runs", "--endpoint", url, "--json"])
        assert listed.exit_code == 0, listed.output
        assert json.loads(listed.stdout) == {"runs": [], "next_token": None}
    finally:
        code, err = stop(process)
    assert code == 0, err
    assert err.strip().splitlines()[-1] == "traingrid serve: stopped"
    assert runner.invoke(app, ["runs", "--endpoint", url]).exit_code == 3


@pytest.mark.parametrize("name", ["/", "a/b", "..", "."])
def test_a_name_that_is_a_path_is_refused_not_sent(traingrid, name):
    for command in ("status", "logs"):
        result = traingrid(command, name)
        assert result.exit_code == 2, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)
        assert "is not a run name" in result.stderr.strip().splitlines()[-1]


def test_serves_request_log_shows_a_request_line_as_text(tmp_path):
    """A request line is the caller's: brackets in it are neither Rich markup (a MarkupError
    answered 500, a link hiding its address) nor is an escape sent to the terminal."""
    process, url = start_serve(tmp_path, quiet=False)
    lines = ("/runs?x=[/bold]", "/runs?x=[link=https://evil.example]docs[/link]",
             "/runs?x=%1b]0;title%07")
    try:
        for line in lines:
            try:
                with urllib.request.urlopen(url + line, timeout=30) as answer:
                    status = answer.status
            except urllib.error.HTTPError as refused:  # x is no parameter of /runs
                status = refused.code
            assert status == 400, line  # not 500: logging it did not fail
    finally:
        code, err = stop(process)
    assert code == 0, err
    assert "GET /runs?x=[/bold]" in err
    assert "GET /runs?x=[link=https://evil.example]docs[/link]" in err
    assert "\x1b" not in err
