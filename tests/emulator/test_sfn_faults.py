"""Faults at a Task state look to the state machine as they would on AWS, and every execution
that ends is announced on the event bus ("Step Functions Execution Status Change")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from traingrid_local.emulator.fault_injection import STATE_FAULTS, FaultPlan, StateFault
from traingrid_local.emulator.session import Emulator

from .helpers import (
    client,
    create_lustre,
    create_network,
    create_role,
    create_state_machine,
    history_types,
    run_execution,
    wait_until,
    zip_files,
)

# Writes one object per call: a side effect that shows whether the step really ran.
WORKER = '''
import boto3


def handler(event, context):
    boto3.client("s3").put_object(Bucket="side-effects", Key=event["key"], Body=b"ran")
    return {"done": event["key"]}
'''

RECORDER = '''
import json

import boto3


def handler(event, context):
    key = "events/" + event["detail"]["name"] + "/" + event["detail"]["status"]
    boto3.client("s3").put_object(Bucket="side-effects", Key=key, Body=json.dumps(event))
    return {"recorded": key}
'''

WEEK = 7 * 86400
CATCH_ALL = [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": "Caught"}]


def _function(emulator: Emulator, name: str, code: str, role: str) -> str:
    return client(emulator, "lambda").create_function(
        FunctionName=name, Runtime="python3.11", Handler="app.handler", Role=role,
        Code={"ZipFile": zip_files({"app.py": code})})["FunctionArn"]


@pytest.fixture
def machine(emulator: Emulator) -> str:
    """Work (a Lambda function) → Describe (aws-sdk FSx) → Await (lambda:invoke with a task
    token that never comes); each retries throttling twice and catches everything."""
    client(emulator, "s3").create_bucket(Bucket="side-effects")
    role = create_role(emulator, "fault-tests")
    worker = _function(emulator, "worker", WORKER, role)
    retry_lambda = [{"ErrorEquals": ["Lambda.TooManyRequestsException"], "IntervalSeconds": 1,
                     "MaxAttempts": 2, "BackoffRate": 2, "JitterStrategy": "FULL"}]
    return create_state_machine(emulator, "faults", {
        "StartAt": "Work",
        "States": {
            "Work": {"Type": "Task", "Resource": worker,
                     "Parameters": {"key.$": "States.Format('{}/work', $$.Execution.Name)"},
                     "ResultPath": "$.work", "Retry": retry_lambda, "Catch": CATCH_ALL,
                     "Next": "Describe"},
            "Describe": {"Type": "Task",
                         "Resource": "arn:aws:states:::aws-sdk:fsx:describeFileSystems",
                         "Parameters": {}, "ResultPath": "$.described",
                         "Retry": [{"ErrorEquals": ["FSx.ThrottlingException"],
                                    "IntervalSeconds": 1, "MaxAttempts": 2, "BackoffRate": 2,
                                    "JitterStrategy": "FULL"}],
                         "Catch": CATCH_ALL, "Next": "Await"},
            "Await": {"Type": "Task",
                      "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
                      "Parameters": {"FunctionName": worker, "Payload": {
                          "key.$": "States.Format('{}/await', $$.Execution.Name)",
                          "token.$": "$$.Task.Token"}},
                      "TimeoutSeconds": WEEK, "ResultPath": "$.awaited",
                      "Retry": retry_lambda, "Catch": CATCH_ALL, "End": True},
            "Caught": {"Type": "Pass", "End": True},
        },
    }, role)


def _failure(execution: dict[str, Any]) -> dict[str, str]:
    return json.loads(execution["output"])["failure"]


def _ran(emulator: Emulator, key: str) -> bool:
    listing = client(emulator, "s3").list_objects_v2(Bucket="side-effects", Prefix=key)
    return listing.get("KeyCount", 0) > 0


def _task_failures(emulator: Emulator, execution_arn: str) -> int:
    events = client(emulator, "stepfunctions").get_execution_history(
        executionArn=execution_arn, maxResults=1000)["events"]
    return sum(e["type"] in ("TaskFailed", "LambdaFunctionFailed", "TaskTimedOut") for e in events)


@pytest.mark.parametrize(("state", "kind", "error"), [
    ("Work", "service-error", "AwsServiceError"),
    ("Work", "throttling-storm", "Lambda.TooManyRequestsException"),
    ("Work", "timeout", "Sandbox.Timedout"),
    ("Describe", "service-error", "FSx.BadRequestException"),
    ("Describe", "throttling-storm", "FSx.ThrottlingException"),
    ("Describe", "timeout", "States.Timeout"),
    ("Await", "service-error", "AwsServiceError"),
    ("Await", "throttling-storm", "Lambda.TooManyRequestsException"),
    ("Await", "timeout", "Sandbox.Timedout"),
])
def test_a_fault_at_a_state_fails_it_as_aws_would(emulator: Emulator, machine: str, state: str,
                                                  kind: str, error: str) -> None:
    emulator.set_faults(state_faults={state: StateFault(kind)})

    execution = run_execution(emulator, machine, name=f"{state}-{kind}")

    failure = _failure(execution)
    assert failure["Error"] == error
    if error != "States.Timeout":  # a timed-out task has no cause
        assert f"simulated fault {kind} at {state}" in failure["Cause"]
    # The states before it ran; the faulty one did not.
    assert _ran(emulator, f"{state}-{kind}/work") == (state != "Work")
    # A storm outlasts the retries: the first attempt and both retries fail.
    expected_failures = 3 if kind == "throttling-storm" else 1
    assert _task_failures(emulator, execution["executionArn"]) == expected_failures


def test_an_abort_stops_the_execution_while_its_call_goes_ahead(emulator: Emulator,
                                                                 machine: str) -> None:
    emulator.set_faults(state_faults={"Work": StateFault("abort")})

    execution = run_execution(emulator, machine, name="abort-work")

    assert execution["status"] == "ABORTED"
    assert _ran(emulator, "abort-work/work")  # what the step did stays done
    assert not _ran(emulator, "abort-work/await")


def test_an_abort_can_come_later_into_the_state(emulator: Emulator, machine: str) -> None:
    emulator.set_faults(state_faults={"Await": StateFault("abort", after_s=1800)})

    execution = run_execution(emulator, machine, name="abort-later")

    assert execution["status"] == "ABORTED"
    assert _ran(emulator, "abort-later/await")
    # Stopped half an hour in, not at the wait's own timeout; the clock runs so fast here
    # that the end is stamped a little later in simulated time.
    lasted = emulator.simulated_seconds(execution["startDate"], execution["stopDate"])
    assert 1800 <= lasted < WEEK / 10
    assert _task_failures(emulator, execution["executionArn"]) == 0


def test_no_fault_no_failure(emulator: Emulator, machine: str) -> None:
    emulator.set_faults(state_faults={"SomewhereElse": StateFault("service-error")})
    sfn = client(emulator, "stepfunctions")
    arn = sfn.start_execution(stateMachineArn=machine, name="clean")["executionArn"]

    wait_until(lambda: _ran(emulator, "clean/await"), what="the wait to be reached")

    assert sfn.describe_execution(executionArn=arn)["status"] == "RUNNING"
    assert _ran(emulator, "clean/work")


def test_a_plan_holds_state_faults_only() -> None:
    with pytest.raises(ValueError, match="must be a StateFault"):
        FaultPlan(at_states={"Work": "abort"})  # type: ignore[dict-item]


def test_unknown_state_faults_and_bad_delays_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown state fault 'meteor'") as raised:
        StateFault("meteor")
    assert all(kind in str(raised.value) for kind in STATE_FAULTS)
    with pytest.raises(ValueError, match="after_s"):
        StateFault("timeout", after_s=60)
    with pytest.raises(ValueError, match="after_s"):
        StateFault("abort", after_s=-1)


def test_every_ended_execution_is_announced_with_its_status(emulator: Emulator) -> None:
    client(emulator, "s3").create_bucket(Bucket="side-effects")
    role = create_role(emulator, "announce-tests")
    recorder = _function(emulator, "recorder", RECORDER, role)
    events = client(emulator, "events")
    events.put_rule(Name="ended", EventPattern=json.dumps({
        "source": ["aws.states"], "detail-type": ["Step Functions Execution Status Change"],
        "detail": {"status": ["FAILED", "ABORTED", "SUCCEEDED"]}}))
    events.put_targets(Rule="ended", Targets=[{"Id": "record", "Arn": recorder}])
    machine = create_state_machine(emulator, "announced", {
        "StartAt": "Choose", "States": {
            "Choose": {"Type": "Choice", "Choices": [
                {"Variable": "$.end", "StringEquals": "fail", "Next": "Fail"},
                {"Variable": "$.end", "StringEquals": "wait", "Next": "Wait"}],
                "Default": "Done"},
            "Wait": {"Type": "Wait", "Seconds": 86400, "Next": "Done"},
            "Fail": {"Type": "Fail", "Error": "Broken", "Cause": "on purpose"},
            "Done": {"Type": "Pass", "End": True}}}, role)
    sfn = client(emulator, "stepfunctions")
    run_execution(emulator, machine, {"end": "done"}, name="ok")
    run_execution(emulator, machine, {"end": "fail"}, name="broken")
    waiting = sfn.start_execution(stateMachineArn=machine, name="stopped",
                                  input=json.dumps({"end": "wait"}))["executionArn"]
    wait_until(lambda: "WaitStateEntered" in history_types(emulator, waiting),
               what="the execution to wait")
    sfn.stop_execution(executionArn=waiting)

    def recorded(name: str, status: str) -> dict[str, Any] | None:
        if not _ran(emulator, f"events/{name}/{status}"):
            return None
        body = client(emulator, "s3").get_object(Bucket="side-effects",
                                                 Key=f"events/{name}/{status}")["Body"]
        return json.loads(body.read())

    failed = wait_until(lambda: recorded("broken", "FAILED"), what="the FAILED event")
    aborted = wait_until(lambda: recorded("stopped", "ABORTED"), what="the ABORTED event")
    wait_until(lambda: recorded("ok", "SUCCEEDED"), what="the SUCCEEDED event")
    assert failed["source"] == "aws.states" and failed["resources"] == [
        failed["detail"]["executionArn"]]
    assert (failed["detail"]["error"], failed["detail"]["cause"]) == ("Broken", "on purpose")
    assert failed["detail"]["stateMachineArn"] == machine
    assert aborted["detail"]["executionArn"] == waiting
    assert aborted["detail"]["stopDate"] >= aborted["detail"]["startDate"]


def test_faults_are_injected_at_the_task_only(emulator: Emulator) -> None:
    """The aws-sdk call of a state without a fault still reaches the service."""
    network = create_network(emulator)
    fs = create_lustre(emulator, network.subnet_id)
    role = create_role(emulator, "fsx-tests")
    machine = create_state_machine(emulator, "describe", {
        "StartAt": "Describe", "States": {"Describe": {
            "Type": "Task", "Resource": "arn:aws:states:::aws-sdk:fsx:describeFileSystems",
            "Parameters": {"FileSystemIds": [fs["FileSystemId"]]},
            "ResultSelector": {"ids.$": "$.FileSystems[*].FileSystemId"}, "End": True}}}, role)
    emulator.set_faults(state_faults={"Other": StateFault("throttling-storm")})

    execution = run_execution(emulator, machine, name="described")

    assert json.loads(execution["output"]) == {"ids": [fs["FileSystemId"]]}
