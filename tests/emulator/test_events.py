"""EventBridge rules deliver S3 "Object Created" events to Lambda and Step Functions targets,
shaped as AWS sends them, without hiding the delivery to other targets."""

from __future__ import annotations

import json
from typing import Any

import pytest

from traingrid_local.emulator.session import Emulator

from .helpers import create_role, create_state_machine, wait_until, zip_files

RECORDER = '''
import json

import boto3


def handler(event, context):
    detail = event.get("detail", event)  # the whole event, or its detail under InputPath
    key = "events/" + detail["object"]["key"].replace("/", "_")
    boto3.client("s3").put_object(Bucket="recorded-events", Key=key, Body=json.dumps(event))
    return {"recorded": key}
'''

MANIFEST_PATTERN = {
    "source": ["aws.s3"],
    "detail-type": ["Object Created"],
    "detail": {"bucket": {"name": ["training-data"]},
               "object": {"key": [{"suffix": ".manifest.json"}]}},
}


class Wiring:
    def __init__(self, emulator: Emulator) -> None:
        self.emulator = emulator
        self.s3 = emulator.client("s3")
        self.sfn = emulator.client("stepfunctions")
        self.events = emulator.client("events")
        self.s3.create_bucket(Bucket="training-data")
        self.s3.create_bucket(Bucket="recorded-events")
        self.s3.put_bucket_notification_configuration(
            Bucket="training-data",
            NotificationConfiguration={"EventBridgeConfiguration": {}},
        )
        self.role = create_role(emulator, "events-targets", "events.amazonaws.com")
        self.function_arn = emulator.client("lambda").create_function(
            FunctionName="record-event", Runtime="python3.11", Handler="app.handler",
            Role=self.role, Code={"ZipFile": zip_files({"app.py": RECORDER})},
        )["FunctionArn"]
        self.machine_arn = create_state_machine(emulator, "start-run", {
            "StartAt": "Started", "States": {"Started": {"Type": "Pass", "End": True}},
        }, self.role)

    def rule(self, name: str, pattern: dict[str, Any], *targets: dict[str, Any]) -> None:
        self.events.put_rule(Name=name, EventPattern=json.dumps(pattern))
        self.events.put_targets(Rule=name, Targets=list(targets))

    def recorded(self) -> list[dict[str, Any]]:
        listing = self.s3.list_objects_v2(Bucket="recorded-events",
                                          Prefix="events/").get("Contents", [])
        return [json.loads(self.s3.get_object(Bucket="recorded-events",
                                              Key=o["Key"])["Body"].read())
                for o in listing]

    def executions(self) -> list[dict[str, Any]]:
        return self.sfn.list_executions(stateMachineArn=self.machine_arn)["executions"]


@pytest.fixture
def wiring(emulator: Emulator) -> Wiring:
    wiring = Wiring(emulator)
    wiring.rule("manifests", MANIFEST_PATTERN,
                {"Id": "record", "Arn": wiring.function_arn},
                {"Id": "run", "Arn": wiring.machine_arn, "RoleArn": wiring.role})
    return wiring


def test_a_matching_object_invokes_the_lambda_target(wiring: Wiring) -> None:
    put = wiring.s3.put_object(Bucket="training-data", Key="runs/r1.manifest.json", Body=b"{}")

    [event] = wait_until(wiring.recorded, what="the recorded event")

    assert event["source"] == "aws.s3"
    assert event["detail-type"] == "Object Created"
    assert event["detail"]["bucket"]["name"] == "training-data"
    assert event["detail"]["object"]["key"] == "runs/r1.manifest.json"
    assert event["detail"]["object"]["etag"] == put["ETag"].strip('"')
    assert "eTag" not in event["detail"]["object"]
    assert event["time"].endswith("Z") and "T" in event["time"]


def test_each_event_has_its_own_id(wiring: Wiring) -> None:
    for run in ("r1", "r2", "r3"):
        wiring.s3.put_object(Bucket="training-data", Key=f"runs/{run}.manifest.json",
                             Body=b"{}")

    events = wait_until(lambda: len(r := wiring.recorded()) == 3 and r,
                        what="three recorded events")

    assert len({event["id"] for event in events}) == 3


def test_a_matching_object_starts_the_state_machine(wiring: Wiring) -> None:
    wiring.s3.put_object(Bucket="training-data", Key="runs/r1.manifest.json", Body=b"{}")

    [execution] = wait_until(wiring.executions, what="an execution")
    payload = json.loads(wiring.sfn.describe_execution(
        executionArn=execution["executionArn"])["input"])

    assert payload["detail"]["object"]["key"] == "runs/r1.manifest.json"
    assert payload["detail"]["object"]["etag"]


def test_a_non_matching_object_triggers_nothing(wiring: Wiring) -> None:
    wiring.s3.create_bucket(Bucket="other-data")
    wiring.s3.put_bucket_notification_configuration(
        Bucket="other-data", NotificationConfiguration={"EventBridgeConfiguration": {}})

    wiring.s3.put_object(Bucket="training-data", Key="runs/r1.manifest.yaml", Body=b"{}")
    wiring.s3.put_object(Bucket="other-data", Key="runs/r2.manifest.json", Body=b"{}")
    # A matching upload afterwards: once it is delivered, the earlier ones had their turn.
    wiring.s3.put_object(Bucket="training-data", Key="runs/r3.manifest.json", Body=b"{}")

    [event] = wait_until(wiring.recorded, what="the recorded event")
    [execution] = wait_until(wiring.executions, what="an execution")

    assert event["detail"]["object"]["key"] == "runs/r3.manifest.json"
    payload = json.loads(wiring.sfn.describe_execution(
        executionArn=execution["executionArn"])["input"])
    assert payload["detail"]["object"]["key"] == "runs/r3.manifest.json"


def test_input_and_input_path_are_honoured(emulator: Emulator) -> None:
    wiring = Wiring(emulator)
    wiring.rule("manifests", MANIFEST_PATTERN,
                {"Id": "record", "Arn": wiring.function_arn, "InputPath": "$.detail"},
                {"Id": "run", "Arn": wiring.machine_arn, "RoleArn": wiring.role,
                 "Input": json.dumps({"detail": {"object": {"key": "fixed"}}})})

    wiring.s3.put_object(Bucket="training-data", Key="runs/r1.manifest.json", Body=b"{}")

    [execution] = wait_until(wiring.executions, what="an execution")
    payload = json.loads(wiring.sfn.describe_execution(
        executionArn=execution["executionArn"])["input"])
    assert payload == {"detail": {"object": {"key": "fixed"}}}

    [detail] = wait_until(wiring.recorded, what="the recorded event")
    assert detail["object"]["key"] == "runs/r1.manifest.json"
    assert detail["bucket"] == {"name": "training-data"}
    assert "source" not in detail


def test_a_failing_target_does_not_stop_the_others(emulator: Emulator) -> None:
    wiring = Wiring(emulator)
    missing = wiring.function_arn.replace("record-event", "no-such-function")
    wiring.rule("manifests", MANIFEST_PATTERN,
                {"Id": "missing", "Arn": missing},
                {"Id": "record", "Arn": wiring.function_arn},
                {"Id": "run", "Arn": wiring.machine_arn, "RoleArn": wiring.role})

    wiring.s3.put_object(Bucket="training-data", Key="runs/r1.manifest.json", Body=b"{}")

    assert len(wait_until(wiring.recorded, what="the recorded event")) == 1
    assert len(wait_until(wiring.executions, what="an execution")) == 1


def test_an_sqs_target_on_another_rule_still_receives_the_event(wiring: Wiring) -> None:
    sqs = wiring.emulator.client("sqs")
    queue_url = sqs.create_queue(QueueName="all-uploads")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url,
                                         AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    wiring.rule("all-uploads", {"source": ["aws.s3"], "detail-type": ["Object Created"]},
                {"Id": "queue", "Arn": queue_arn})

    wiring.s3.put_object(Bucket="training-data", Key="runs/r1.manifest.json", Body=b"{}")

    assert len(wait_until(wiring.recorded, what="the recorded event")) == 1
    messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10,
                                   WaitTimeSeconds=0).get("Messages", [])
    assert len(messages) == 1
    body = json.loads(messages[0]["Body"])
    assert body["detail"]["object"]["key"] == "runs/r1.manifest.json"


def test_a_schedule_rule_receives_no_uploads(wiring: Wiring) -> None:
    """moto matches a rule without a pattern to every event; AWS sends a schedule rule only
    its schedule's events."""
    wiring.events.put_rule(Name="nightly", ScheduleExpression="cron(0 2 * * ? *)")
    wiring.events.put_targets(Rule="nightly", Targets=[
        {"Id": "run", "Arn": wiring.machine_arn, "RoleArn": wiring.role}])

    wiring.s3.put_object(Bucket="training-data", Key="runs/r1.manifest.json", Body=b"{}")

    # The manifests rule records the event and starts one execution; nightly starts none.
    wait_until(wiring.recorded, what="the recorded event")
    [execution] = wait_until(wiring.executions, what="an execution")
    payload = json.loads(wiring.sfn.describe_execution(
        executionArn=execution["executionArn"])["input"])
    assert payload["detail"]["object"]["key"] == "runs/r1.manifest.json"
