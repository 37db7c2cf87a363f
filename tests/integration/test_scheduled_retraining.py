"""Scheduled retraining in the emulator: the deployed function fired as its EventBridge
schedule fires it; firing twice starts nothing twice."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.integration.iam import missing_permissions
from traingrid.db.engine import transaction
from traingrid.db.repositories import DatasetRepository
from traingrid_local.emulator import lambda_inprocess
from traingrid_local.stack import sample_campaign, schedules

pytestmark = pytest.mark.e2e

CAMPAIGN = sample_campaign.CAMPAIGN
NIGHT = datetime(2026, 11, 22, 2, 0, tzinfo=UTC)


def fire(served_api, at: datetime) -> dict:
    return schedules.fire(served_api.emulator, served_api.deployment.stack, "retrain", at)


def fanouts(served_api) -> list[dict]:
    sfn = served_api.emulator.client("stepfunctions")
    machine = served_api.deployment.stack.outputs["CampaignFanoutStateMachineArn"]
    return sfn.list_executions(stateMachineArn=machine)["executions"]


def wait_for_the_end(client, name: str) -> dict:
    deadline = time.monotonic() + 60
    while (run := client.get(f"/runs/{name}"))["status"] == "RUNNING":
        assert time.monotonic() < deadline, f"{name} still running"
        time.sleep(0.1)
    return run


def wait_for_every_fanout(served_api, client) -> None:
    for execution in fanouts(served_api):
        run = wait_for_the_end(client, execution["name"])
        if run["status"] == "SUCCEEDED":  # its regions priced from the receipt it recorded
            assert run["cost"]["actual"]["compute"] > 0 and not run["cost"]["in_flight"]


def register_new_data(served_api, region: str, folder: str) -> None:
    bucket = served_api.deployment.regional[region].outputs["CampaignBucketName"]
    with transaction(served_api.deployment.database_url) as session:
        DatasetRepository(session).register(
            CAMPAIGN, region, f"s3://{bucket}/campaigns/{CAMPAIGN}/{region}/{folder}/", 3,
            3 * sample_campaign.SHARD_BYTES)


def test_a_double_fire_starts_one_fanout_and_only_new_data_is_retrained(served_api, client):
    first = fire(served_api, NIGHT)
    again = fire(served_api, NIGHT + timedelta(seconds=30))  # a redelivery, or a second tick

    (started,) = first["started"]
    assert started["campaign"] == CAMPAIGN and started["new_datasets"] == 4
    assert started["name"].startswith(f"{CAMPAIGN}-20261122T0200-")
    assert first["schedule"] == "cron(0 2 * * ? *)"
    assert first["scheduled_at"] == "2026-11-22T02:00:00Z"
    assert again["started"] == [] and [e["name"] for e in again["already_started"]] == [
        started["name"]]
    assert [e["name"] for e in fanouts(served_api)] == [started["name"]]

    run = wait_for_the_end(client, started["name"])
    assert run["status"] == "SUCCEEDED", run["cause"]
    assert run["input"]["trigger"] == {"source": "schedule"}

    the_next_night = fire(served_api, NIGHT + timedelta(days=1))
    assert the_next_night["started"] == the_next_night["already_started"] == []
    assert len(fanouts(served_api)) == 1

    register_new_data(served_api, "eu-west-1", "second-drive")
    later = fire(served_api, NIGHT + timedelta(days=2))
    (retrained,) = later["started"]
    assert retrained["new_datasets"] == 1
    run = wait_for_the_end(client, retrained["name"])
    assert run["status"] == "SUCCEEDED", run["cause"]
    regions = {job["requested_region"] for job in run["output"]["jobs"]}
    assert regions == {"eu-west-1"}


def test_a_campaign_whose_fanout_is_running_is_left_alone(served_api, client):
    wait_for_every_fanout(served_api, client)
    register_new_data(served_api, "us-west-2", "third-drive")
    # A held clock holds every Wait: the requested fan-out stays RUNNING meanwhile.
    with served_api.emulator.paused():
        requested = client.call("POST", f"/campaigns/{CAMPAIGN}/runs", {"name": "by-hand"})
        assert requested.status == 202
        fired = fire(served_api, NIGHT + timedelta(days=3))
        assert client.get("/runs/by-hand")["status"] == "RUNNING"
    (skipped,) = fired["skipped"]
    assert skipped["campaign"] == CAMPAIGN
    assert "by-hand is still running" in skipped["reason"]
    assert fired["started"] == []
    assert wait_for_the_end(client, "by-hand")["status"] == "SUCCEEDED"


def test_the_retraining_function_calls_only_what_its_role_allows(served_api):
    fire(served_api, NIGHT + timedelta(days=4))
    stack = served_api.deployment.stack
    function = stack.resources["RetrainCampaignsFunction"]
    calls = {function: lambda_inprocess.CALLS[function]}
    assert "states:ListExecutions" in calls[function]
    assert missing_permissions(stack, calls) == []
