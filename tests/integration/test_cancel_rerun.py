"""Cancelling runs over real HTTP on loopback (`traingrid serve`) and with the CLI: a run
cancelled mid-training ends with its job stopped, its outputs archived and no file system
left; a fan-out's region jobs are stopped; the run shows who cancelled it and when."""

from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from tests.integration.conftest import serving
from tests.integration.iam import missing_permissions
from tests.integration.test_janitor import unsafe_deletions
from traingrid.training.plan import archive_prefix
from traingrid_local.api.client import ApiClient
from traingrid_local.cli.main import app
from traingrid_local.demo.runner import settle
from traingrid_local.emulator import lambda_inprocess
from traingrid_local.emulator.account import ACCOUNT
from traingrid_local.stack import report, sample_campaign
from traingrid_local.stack.environment import DEMO_BUCKET

pytestmark = pytest.mark.e2e

DATASET = f"s3://{DEMO_BUCKET}/imagenet2012/resized/"
TERMINAL = {"SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"}
# Jobs that train long enough (simulated) to be cancelled while they train.
TRAINING_SECONDS = 400_000


LIVE_JOBS = ("SUBMITTED", "PENDING", "RUNNABLE", "STARTING", "RUNNING")


def live_jobs(api) -> list[str]:
    """The Batch jobs and the campaign regions' SageMaker jobs that have not ended."""
    batch = api.emulator.client("batch")
    return [*(job["jobId"] for queue in batch.describe_job_queues()["jobQueues"]
              for status in LIVE_JOBS
              for job in batch.list_jobs(jobQueue=queue["jobQueueName"],
                                         jobStatus=status)["jobSummaryList"]),
            *(job["TrainingJobName"] for region in sample_campaign.REGION_PRICES
              for job in api.emulator.client("sagemaker", region).list_training_jobs(
                  StatusEquals="InProgress")["TrainingJobSummaries"])]


@pytest.fixture(scope="module")
def served_api(tmp_path_factory):
    with serving(tmp_path_factory, TRAINING_SECONDS, "cancel") as api:
        ACCOUNT.raise_fsx_storage(1_000_000)
        yield api
        # The cancelled runs' jobs end through the janitor, and each end is an event a
        # function handles: let them all happen in this session, not in the next module's.
        deadline = time.monotonic() + 120
        while live_jobs(api) and time.monotonic() < deadline:
            settle(api.emulator, api.deployment)
            time.sleep(0.5)
        settle(api.emulator, api.deployment)


@pytest.fixture
def client(served_api):
    return ApiClient(served_api.url, timeout=30)


def wait_for(client, name: str, ready, timeout: float = 120) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        run = client.get(f"/runs/{name}")
        if ready(run) or run["status"] in TERMINAL or time.monotonic() > deadline:
            return run
        time.sleep(0.2)


def training(run: dict) -> bool:
    return run["current_state"] == "AwaitTrainingJob"


def cli(served_api, *args: str):
    return CliRunner().invoke(app, [*args, "--endpoint", served_api.url])


def test_a_run_cancelled_mid_training_stops_its_job_archives_and_leaves_no_file_system(
        client, served_api):
    name = client.request("POST", "/runs", {"dataset": DATASET, "nodes": 2,
                                            "name": "cancel-me"}).body["name"]
    assert training(wait_for(client, name, training))
    time.sleep(1)  # the job writes its first outputs

    answer = client.request("POST", f"/runs/{name}/cancel", {})
    assert answer.status == 202, answer.body
    assert answer.headers["Location"] == f"/runs/{name}"
    assert answer.body["status"] == "ABORTED"
    who = answer.body["cancelled"]
    assert who["by"] == "an unsigned request from 127.0.0.1" and who["at"].endswith("Z")

    run = client.get(f"/runs/{name}")
    assert (run["status"], run["error"], run["cancelled"]) == (
        "ABORTED", "TrainGrid.Cancelled", who)
    assert run["cause"].startswith(f"Cancelled by {who['by']} at {who['at']}.")

    # The abort path (the janitor, set off by the execution's end) releases what it held.
    emulator, deployment = served_api.emulator, served_api.deployment
    passes = settle(emulator, deployment)
    after = report.build(emulator, deployment, [run["execution_arn"]], passes)
    assert after["leaked_resources"] == [] and after["retained_resources"] == []
    assert {("terminate", "batch:job"), ("delete", "fsx:file-system")} <= {
        (a["action"], a["type"]) for a in after["janitor"]["actions"]}
    assert not [fs for fs in emulator.client("fsx").describe_file_systems()["FileSystems"]
                if {"Key": "traingrid:run", "Value": name} in fs.get("Tags", [])]
    assert unsafe_deletions(emulator) == []
    archived = emulator.client("s3").list_objects_v2(
        Bucket=DEMO_BUCKET, Prefix=f"{archive_prefix(name)}outputs/").get("KeyCount", 0)
    assert archived > 0
    assert missing_permissions(deployment.stack, dict(lambda_inprocess.CALLS)) == []

    # Again: nothing to cancel, and the 409 says who cancelled it.
    again = client.request("POST", f"/runs/{name}/cancel", {})
    assert again.status == 409
    assert f"was cancelled by {who['by']} at {who['at']}" in again.body["message"]

    shown = cli(served_api, "status", name)
    assert shown.exit_code == 1
    assert f"{name} · TrainingRun · CANCELLED" in shown.output
    assert f"Cancelled by {who['by']} at {who['at']}" in shown.output


def test_cancel_from_the_cli_and_its_exit_codes(client, served_api):
    name = client.request("POST", "/runs", {"dataset": DATASET, "nodes": 2,
                                            "name": "cancel-cli"}).body["name"]
    assert wait_for(client, name, training)["status"] == "RUNNING"
    done = cli(served_api, "cancel", name)
    assert done.exit_code == 0, done.output
    assert f"{name} CANCELLED by an unsigned request from 127.0.0.1 at " in done.output
    again = cli(served_api, "cancel", name)
    assert again.exit_code == 1 and "was cancelled by" in again.output
    unknown = cli(served_api, "cancel", "no-such-run")
    assert unknown.exit_code == 1 and "no run is named 'no-such-run'" in unknown.output
    assert client.request("POST", "/runs/no-such-run/cancel", {}).status == 404


def test_a_cancelled_fanout_stops_every_regions_job(client, served_api):
    answer = client.request("POST", f"/campaigns/{sample_campaign.CAMPAIGN}/runs",
                            {"instance_count": 8}, headers={"Idempotency-Key": "cancel-fan"})
    assert answer.status == 202, answer.body
    name = answer.body["name"]

    def region_jobs_training(run: dict) -> bool:
        jobs = run.get("jobs") or []
        return bool(jobs) and all(j.get("job_name") and j["status"] == "InProgress"
                                  for j in jobs)

    run = wait_for(client, name, region_jobs_training)
    assert region_jobs_training(run), run.get("jobs")
    jobs = {j["region"]: j["job_name"] for j in run["jobs"]}
    assert client.request("POST", f"/runs/{name}/cancel", {}).status == 202

    # The janitor stops each region's job, from the execution's end and its scheduled passes:
    # on a busy machine, after more than one pass.
    deadline = time.monotonic() + 120
    while True:
        settle(served_api.emulator, served_api.deployment)
        statuses = {region: served_api.emulator.client("sagemaker", region).describe_training_job(
            TrainingJobName=job)["TrainingJobStatus"] for region, job in jobs.items()}
        if set(statuses.values()) <= {"Stopping", "Stopped"} or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert set(statuses.values()) <= {"Stopping", "Stopped"}, statuses
    ended = client.get(f"/runs/{name}")
    assert ended["status"] == "ABORTED" and ended["cancelled"]["by"].startswith("an unsigned")


def test_a_rerun_starts_the_same_request_under_the_next_free_name_linked_to_the_old(
        client, served_api):
    name = client.request("POST", "/runs", {"dataset": DATASET, "nodes": 2, "epochs": 3,
                                            "name": "rerun-me"}).body["name"]
    assert wait_for(client, name, training)["status"] == "RUNNING"
    running = client.request("POST", f"/runs/{name}/rerun", {})
    assert running.status == 409 and "still RUNNING" in running.body["message"]
    assert client.request("POST", f"/runs/{name}/cancel", {}).status == 202
    old = client.get(f"/runs/{name}")

    first = client.request("POST", f"/runs/{name}/rerun", {})
    assert first.status == 202, first.body
    assert first.body["name"] == f"{name}-r2" and first.headers["Location"] == f"/runs/{name}-r2"
    # Sent again while it runs: the same run, not a third.
    again = client.request("POST", f"/runs/{name}/rerun", {})
    assert (again.status, again.body["name"]) == (200, f"{name}-r2")
    new = client.get(f"/runs/{name}-r2")
    assert new["rerun_of"] == name and old["rerun_of"] is None
    assert new["input"]["request"] == {**old["input"]["request"], "name": f"{name}-r2"}

    shown = cli(served_api, "status", f"{name}-r2")
    assert f"re-run of: {name}" in shown.output
    assert wait_for(client, f"{name}-r2", training)["status"] == "RUNNING"
    assert cli(served_api, "cancel", f"{name}-r2").exit_code == 0
    # Once -r2 has ended, the next re-run (of either) is -r3.
    third = cli(served_api, "rerun", f"{name}-r2")
    assert third.exit_code == 0, third.output
    assert f"{name}-r3 started (RUNNING), a re-run of {name}-r2" in third.output
    assert wait_for(client, f"{name}-r3", training)["rerun_of"] == f"{name}-r2"
    assert client.request("POST", f"/runs/{name}-r3/cancel", {}).status == 202

    assert client.request("POST", "/runs/no-such-run/rerun", {}).status == 404
    unknown = cli(served_api, "rerun", "no-such-run")
    assert unknown.exit_code == 1 and "no run is named 'no-such-run'" in unknown.output
    fields = client.request("POST", f"/runs/{name}/rerun", {"resume": True})
    assert fields.status == 400


def test_a_rerun_name_stays_within_the_name_length_rule():
    from traingrid.runs.rerun import rerun_names

    names = rerun_names("a" * 80)
    assert next(names) == "a" * 77 + "-r2"
    assert next(rerun_names("x-r9")) == "x-r10"
    assert all(len(n) <= 80 for n, _ in zip(names, range(200), strict=False))


class _Ended:
    """A reader that knows one ended TrainingRun, whose request ran a command of its own."""

    def find(self, name: str) -> tuple[str, dict]:
        request = {"dataset": DATASET, "nodes": 2, "command": ["python", "own.py"]}
        return "TrainingRun", {"status": "FAILED", "input": json.dumps({"request": request})}


def test_a_command_run_is_not_rerun_by_the_route_every_runner_may_call():
    """A command runs only for whom the stack owner granted POST /command-runs: re-running
    one through /runs/{name}/rerun is a 400 pointing there, before anything is built."""
    from datetime import UTC, datetime

    from traingrid.errors import RequestInvalid
    from traingrid.runs.rerun import rerun_submission

    with pytest.raises(RequestInvalid) as refused:
        rerun_submission(_Ended(), None, "own-code", datetime.now(UTC))  # type: ignore[arg-type]
    (problem,) = refused.value.problems
    assert problem["pointer"] == "/command" and "POST /command-runs" in problem["message"]
