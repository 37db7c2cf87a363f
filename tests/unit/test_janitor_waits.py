"""The janitor wakes training waits whose job ended without its event: the decision (from
DescribeJobs alone), and that a wait completed twice (event and janitor) is harmless."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from traingrid.aws import clients, stepfunctions, task_tokens
from traingrid.aws.task_tokens import ParkedWait
from traingrid.janitor import parked_waits as janitor_waits
from traingrid.training import completion

TABLE = "job-tokens"
LIMITS = {"runnable_s": 1800, "training_s": 72 * 3600}
PLAN_JOB = {"nodes": 2, "instance_type": "p3.16xlarge", "vcpus": 64}
DAY_S = 24 * 3600


def parked(job_id: str, token: str = "token") -> ParkedWait:
    return ParkedWait(job_id, token, {
        "job": {"id": job_id, "name": f"run-{job_id}", "status": "RUNNING", "wait_s": DAY_S,
                "started": True},
        "plan_job": PLAN_JOB, "limits": LIMITS})


def described(job_id: str, status: str, **more: Any) -> dict[str, Any]:
    return {"jobId": job_id, "jobName": f"run-{job_id}", "status": status,
            "createdAt": 1_000, "startedAt": 61_000, "stoppedAt": 3_661_000} | more


def test_only_waits_whose_job_batch_reports_done_are_woken() -> None:
    waits = [parked("ok"), parked("failed"), parked("running"), parked("queued"),
             parked("forgotten")]
    descriptions = [
        described("ok", "SUCCEEDED"),
        described("failed", "FAILED", statusReason="Essential container in task exited",
                  attempts=[{"container": {"exitCode": 1}}]),
        described("running", "RUNNING", stoppedAt=None),
        described("queued", "RUNNABLE", startedAt=None, stoppedAt=None),
    ]

    woken = janitor_waits.ended(waits, descriptions, DAY_S)

    assert [(w.job_id, s.status) for w, s in woken] == [("ok", "SUCCEEDED"),
                                                        ("failed", "FAILED")]
    ok, failed = (s.as_output() for _, s in woken)
    # The payload the event path sends: Batch's timestamps, the failure explained.
    assert ok["done"] and ok["error"] is None and ok["running_s"] == 3600
    assert ok["checks"] == 1 and ok["waiting_s"] == 60
    assert failed["error"] == "TrainingJobFailed" and failed["exit_code"] == 1
    assert "exited with code 1" in failed["cause"]


def test_the_janitor_builds_the_same_payload_as_the_event() -> None:
    wait, description = parked("job"), described("job", "SUCCEEDED")
    ((_, by_janitor),) = janitor_waits.ended([wait], [description], DAY_S)
    by_event, terminate = completion.assess(wait, description, DAY_S)
    assert not terminate
    assert by_janitor.as_output() == by_event.as_output()


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch) -> Any:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        clients.reset()
        boto3.client("dynamodb").create_table(
            TableName=TABLE, BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "job_id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "job_id", "KeyType": "HASH"}])
        yield TABLE
    clients.reset()


class StepFunctions:
    """SendTaskSuccess as Step Functions answers it: a token completes once; after that it is
    no longer a task's (TaskTimedOut)."""

    def __init__(self) -> None:
        self.completed: dict[str, dict[str, Any]] = {}

    def send_task_success(self, taskToken: str, output: str) -> dict[str, Any]:  # noqa: N803
        if taskToken in self.completed:
            raise ClientError({"Error": {"Code": "TaskTimedOut", "Message": "done"}},
                              "SendTaskSuccess")
        self.completed[taskToken] = json.loads(output)
        return {}


def test_a_wait_woken_by_both_the_event_and_the_janitor_is_completed_once(
        table: str, monkeypatch: pytest.MonkeyPatch) -> None:
    sfn = StepFunctions()
    real_client = clients.client
    monkeypatch.setattr(stepfunctions, "client",
                        lambda name: sfn if name == "stepfunctions" else real_client(name))
    monkeypatch.setattr(janitor_waits.batch, "describe_jobs",
                        lambda ids: [described(i, "SUCCEEDED") for i in ids])
    wait = parked("job-1", "token-1")
    task_tokens.park(table, wait.job_id, wait.token, wait.context, 0, DAY_S)
    task_tokens.park(table, "job-2", "token-2", parked("job-2").context, 0, DAY_S)
    assert {w.job_id for w in task_tokens.all_parked(table)} == {"job-1", "job-2"}

    # The janitor's pass and the late event's handler both read the wait before either
    # completes it: the second completion finds the token used and is left quietly.
    state, _ = completion.assess(wait, described("job-1", "SUCCEEDED"), DAY_S)
    woken = janitor_waits.reconcile(table, DAY_S)
    late = completion.wake(wait, state, table)

    assert sorted((w["job_id"], w["outcome"]) for w in woken) == [
        ("job-1", "completed"), ("job-2", "completed")]
    assert late["outcome"] == "stale-token"
    assert sfn.completed["token-1"]["status"] == "SUCCEEDED"
    assert task_tokens.all_parked(table) == []
    # A pass with nothing parked describes nothing.
    assert janitor_waits.reconcile(table, DAY_S) == []
