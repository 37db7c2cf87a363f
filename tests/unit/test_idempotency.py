"""Idempotency-Key: a submission runs once per key, on a DynamoDB table (moto's)."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from traingrid.api.idempotency import Submissions, key_of
from traingrid.aws import clients
from traingrid.errors import IdempotencyKeyReused, RequestInProgress, RequestInvalid

# Outside a Lambda invocation there is no remaining time to register; Powertools says so.
pytestmark = pytest.mark.filterwarnings("ignore:Couldn't determine the remaining time")


@pytest.fixture
def submissions(monkeypatch):
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1",
                        "AWS_LAMBDA_FUNCTION_NAME": "traingrid-api"}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        clients.reset()
        boto3.client("dynamodb").create_table(
            TableName="idempotency", BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}])
        yield Submissions("idempotency")
    clients.reset()


def counting():
    calls = []

    def submit():
        calls.append(1)
        return {"name": f"run-{len(calls)}", "started": True}

    return submit, calls


def test_the_same_key_and_body_run_once(submissions):
    submit, calls = counting()
    first = submissions.once("POST /runs", "k", {"nodes": 2}, submit)
    again = submissions.once("POST /runs", "k", {"nodes": 2}, submit)
    assert first == again == {"name": "run-1", "started": True}
    assert len(calls) == 1
    # Another key, or the same key on another route, is another submission.
    assert submissions.once("POST /runs", "other", {"nodes": 2}, submit)["name"] == "run-2"
    assert submissions.once("POST /campaigns/c/runs", "k", {"nodes": 2}, submit)[
        "name"] == "run-3"


def test_without_a_key_every_call_runs(submissions):
    submit, calls = counting()
    submissions.once("POST /runs", None, {}, submit)
    submissions.once("POST /runs", None, {}, submit)
    assert len(calls) == 2


def test_the_same_key_with_another_body_is_refused(submissions):
    submit, _ = counting()
    submissions.once("POST /runs", "k", {"nodes": 2}, submit)
    with pytest.raises(IdempotencyKeyReused):
        submissions.once("POST /runs", "k", {"nodes": 3}, submit)


def test_a_repeat_while_the_first_is_running_is_asked_to_retry(submissions):
    def submit_and_repeat():
        return submissions.once("POST /runs", "k", {}, lambda: {"name": "inner"})

    with pytest.raises(RequestInProgress):
        submissions.once("POST /runs", "k", {}, submit_and_repeat)


def test_a_failed_submission_can_be_sent_again(submissions):
    def invalid():
        raise RequestInvalid([{"pointer": "/nodes", "message": "too few"}])

    with pytest.raises(RequestInvalid):
        submissions.once("POST /runs", "k", {"nodes": 0}, invalid)
    submit, _ = counting()
    assert submissions.once("POST /runs", "k", {"nodes": 2}, submit)["name"] == "run-1"


@pytest.mark.parametrize("key", ["", "k" * 256, "tab\there"])
def test_a_bad_key_is_a_problem(key):
    with pytest.raises(RequestInvalid, match="Idempotency-Key"):
        key_of({"Idempotency-Key": key})
