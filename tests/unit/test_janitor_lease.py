"""Janitor passes never overlap, with no reserved concurrency: a pass holds a lease in DynamoDB,
and one started while another holds it does nothing."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws

from traingrid.aws import clients, leases
from traingrid.janitor import sweep as sweep_module
from traingrid.settings import JanitorSettings
from traingrid_local.templates import load_template

TABLE = "janitor-lease"
SCHEDULE = {"detail-type": "Scheduled Event", "time": "2026-11-25T18:00:00Z"}


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch) -> Any:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        clients.reset()
        boto3.client("dynamodb").create_table(
            TableName=TABLE, BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "lease", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "lease", "KeyType": "HASH"}])
        yield TABLE
    clients.reset()


def settings(lease_table: str | None) -> JanitorSettings:
    return JanitorSettings.from_env({
        "DATABASE_SECRET_ARN": "arn:aws:secretsmanager:us-east-1:1:secret:db",
        "DATA_BUCKET": "data",
        "TRAINING_RUN_STATE_MACHINE_ARN": "arn:aws:states:us-east-1:1:stateMachine:t",
        "CAMPAIGN_FANOUT_STATE_MACHINE_ARN": "arn:aws:states:us-east-1:1:stateMachine:c",
        "TRAINING_JOB_QUEUE": "queue",
        **({"JANITOR_LEASE_TABLE": lease_table} if lease_table else {}),
    })


def test_one_holder_at_a_time_until_it_gives_the_lease_back_or_its_time_is_up(table) -> None:
    assert leases.acquire(table, "pass", "a", now_s=1000, hold_s=360)
    assert not leases.acquire(table, "pass", "b", now_s=1001, hold_s=360)
    leases.release(table, "pass", "b")  # not b's to give back
    assert not leases.acquire(table, "pass", "b", now_s=1002, hold_s=360)
    leases.release(table, "pass", "a")
    assert leases.acquire(table, "pass", "b", now_s=1003, hold_s=360)
    # b crashed: its lease frees itself when its time is up.
    assert not leases.acquire(table, "pass", "c", now_s=1003 + 359, hold_s=360)
    assert leases.acquire(table, "pass", "c", now_s=1003 + 361, hold_s=360)


def test_a_pass_started_while_another_runs_does_nothing(table, monkeypatch) -> None:
    ran: list[dict[str, Any]] = []
    monkeypatch.setattr(sweep_module, "_pass", lambda trigger, s: ran.append(trigger) or {})
    now = sweep_module.clock.now().timestamp()
    assert leases.acquire(table, sweep_module.LEASE, "another pass", now, 360)

    outcome = sweep_module.sweep(SCHEDULE, settings(table))

    assert outcome["skipped"] == "another janitor pass is running" and ran == []


def test_a_pass_gives_the_lease_back_even_when_it_fails(table, monkeypatch) -> None:
    def failing(trigger: dict[str, Any], s: JanitorSettings) -> dict[str, Any]:
        raise RuntimeError("FSx refused")

    monkeypatch.setattr(sweep_module, "_pass", failing)
    with pytest.raises(RuntimeError):
        sweep_module.sweep(SCHEDULE, settings(table))
    monkeypatch.setattr(sweep_module, "_pass", lambda trigger, s: {"trigger": trigger})

    assert sweep_module.sweep(SCHEDULE, settings(table))["trigger"]["source"] == "schedule"
    assert boto3.client("dynamodb").scan(TableName=table)["Items"] == []


def test_the_lease_outlives_the_janitors_timeout() -> None:
    function = load_template()["Resources"]["JanitorFunction"]["Properties"]
    assert function["Timeout"] < sweep_module.PASS_LEASE_S
