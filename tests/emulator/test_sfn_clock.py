"""Wait states and Retry intervals run on the simulated clock, and a Wait still ends at once
when its execution is stopped.

The durations measured here run on a slow clock (SLOW: ten simulated seconds a real second)
that the test skips ahead whenever every thread waits for it: hours pass in milliseconds, and
what a busy machine adds (a thread scheduled late, real seconds nobody holds the clock in)
costs simulated seconds, not hours. The clock stops at every deadline until its waiter has
woken, so each wait ends exactly when it should."""

from __future__ import annotations

import json

from traingrid_local.emulator.session import Emulator

from .conftest import StartEmulator
from .helpers import (
    create_role,
    create_state_machine,
    history_types,
    run_execution,
    wait_until,
    zip_files,
)

HOUR = 3600
SLOW = 10.0
# What a machine that runs the test late may add to an exact duration: a minute of this
# clock is six real seconds in which no thread holds it.
SLACK_S = 60


def _role(emulator: Emulator) -> str:
    return create_role(emulator, "waiter", "states.amazonaws.com")


def test_a_wait_state_waits_simulated_seconds(start_emulator: StartEmulator) -> None:
    emulator = start_emulator(speed=SLOW)
    machine = create_state_machine(emulator, "waits", {
        "StartAt": "Fixed",
        "States": {
            "Fixed": {"Type": "Wait", "Seconds": HOUR, "Next": "FromInput"},
            "FromInput": {"Type": "Wait", "SecondsPath": "$.wait_s", "End": True},
        },
    }, _role(emulator))

    execution = run_execution(emulator, machine, {"wait_s": 2 * HOUR}, name="waits-1",
                              skip_idle_time=True)

    assert execution["status"] == "SUCCEEDED"
    simulated = emulator.simulated_seconds(execution["startDate"], execution["stopDate"])
    assert 3 * HOUR <= simulated < 3 * HOUR + SLACK_S
    assert json.loads(execution["output"]) == {"wait_s": 2 * HOUR}


def test_retry_intervals_pass_on_the_simulated_clock(start_emulator: StartEmulator) -> None:
    emulator = start_emulator(speed=SLOW)
    machine = create_state_machine(emulator, "retries", {
        "StartAt": "Delete",
        "States": {
            "Delete": {
                "Type": "Task",
                "Resource": "arn:aws:states:::aws-sdk:fsx:deleteFileSystem",
                "Parameters": {"FileSystemId": "fs-0123456789abcdef0"},
                "Retry": [{"ErrorEquals": ["States.ALL"], "IntervalSeconds": HOUR,
                           "MaxAttempts": 2, "BackoffRate": 2.0}],
                "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Gone"}],
                "End": True,
            },
            "Gone": {"Type": "Pass", "End": True},
        },
    }, _role(emulator))

    execution = run_execution(emulator, machine, name="retries-1",
                              skip_idle_time=True)

    assert execution["status"] == "SUCCEEDED"
    # One attempt, then retries after one and two simulated hours.
    assert history_types(emulator, execution["executionArn"]).count("TaskFailed") == 3
    simulated = emulator.simulated_seconds(execution["startDate"], execution["stopDate"])
    assert 3 * HOUR <= simulated < 3 * HOUR + SLACK_S


def test_stopping_an_execution_ends_its_wait(start_emulator: StartEmulator) -> None:
    emulator = start_emulator(speed=10)  # a ten-day wait would take a real day
    machine = create_state_machine(emulator, "long-wait", {
        "StartAt": "Wait", "States": {"Wait": {"Type": "Wait", "Seconds": 864_000, "End": True}},
    }, _role(emulator))
    sfn = emulator.client("stepfunctions")
    execution = sfn.start_execution(stateMachineArn=machine, name="long-wait-1",
                                    input="{}")["executionArn"]
    wait_until(lambda: "WaitStateEntered" in history_types(emulator, execution),
               what="the wait to start")

    sfn.stop_execution(executionArn=execution, error="Operator.Cancelled", cause="test")

    stopped = wait_until(
        lambda: (d := sfn.describe_execution(executionArn=execution))["status"] != "RUNNING"
        and d,
        what="the execution to stop",
    )
    assert stopped["status"] == "ABORTED"


COUNTING_WAITER = '''
import json
import time

import boto3


def handler(event, context):
    s3 = boto3.client("s3")
    try:
        calls = int(s3.get_object(Bucket="waits", Key="calls")["Body"].read()) + 1
    except s3.exceptions.NoSuchKey:
        calls = 1
    s3.put_object(Bucket="waits", Key="calls", Body=str(calls).encode())
    # In process: the emulator's clock, read around work that costs no simulated time on AWS.
    from traingrid_local.emulator.clock import CLOCK
    started = CLOCK.timestamp()
    time.sleep(event.get("busy_s", 0))
    s3.put_object(Bucket="waits", Key="busy-simulated-s",
                  Body=str(CLOCK.timestamp() - started).encode())
    if calls >= event["complete_on_call"]:
        boto3.client("stepfunctions").send_task_success(
            taskToken=event["token"], output=json.dumps({"calls": calls}))
    return {}
'''


def _waiting_machine(emulator: Emulator, complete_on_call: int, busy_s: float = 0) -> str:
    """A task that waits on its token for an hour at a time and, timed out, waits again."""
    role = _role(emulator)
    emulator.client("s3").create_bucket(Bucket="waits")
    function = emulator.client("lambda").create_function(
        FunctionName="waiter", Runtime="python3.11", Handler="app.handler", Role=role,
        Code={"ZipFile": zip_files({"app.py": COUNTING_WAITER})},
    )["FunctionArn"]
    return create_state_machine(emulator, "await-token", {
        "StartAt": "Await",
        "States": {
            "Await": {
                "Type": "Task",
                "Resource": "arn:aws:states:::lambda:invoke.waitForTaskToken",
                "Parameters": {"FunctionName": function, "Payload": {
                    "token.$": "$$.Task.Token", "complete_on_call": complete_on_call,
                    "busy_s": busy_s}},
                "TimeoutSeconds": HOUR,
                "ResultPath": "$.result",
                "Catch": [{"ErrorEquals": ["States.Timeout"], "ResultPath": "$.timed_out",
                           "Next": "Await"}],
                "Next": "Done",
            },
            "Done": {"Type": "Pass", "End": True},
        },
    }, role)


def test_a_task_timeout_counts_simulated_seconds_and_a_catch_may_start_the_state_again(
    start_emulator: StartEmulator,
) -> None:
    emulator = start_emulator(speed=SLOW)
    machine = _waiting_machine(emulator, complete_on_call=3)

    execution = run_execution(emulator, machine, name="await-1",
                              skip_idle_time=True)

    assert execution["status"] == "SUCCEEDED"
    assert json.loads(execution["output"])["result"] == {"calls": 3}
    types = history_types(emulator, execution["executionArn"])
    assert types.count("TaskTimedOut") == 2 and types.count("TaskStateEntered") == 3
    simulated = emulator.simulated_seconds(execution["startDate"], execution["stopDate"])
    # Two timeouts of exactly an hour each (the clock stops at each until it is seen).
    assert 2 * HOUR <= simulated < 2 * HOUR + SLACK_S


def test_the_clock_stands_still_while_a_state_works(start_emulator: StartEmulator) -> None:
    emulator = start_emulator(speed=20_000)  # 0.3 s of real work would be 100 minutes
    machine = _waiting_machine(emulator, complete_on_call=1, busy_s=0.3)

    execution = run_execution(emulator, machine, name="busy-1")

    assert execution["status"] == "SUCCEEDED"
    # Not a simulated second passed while the function worked (6,000 s if the clock ran),
    # however busy the machine: the handoffs around it are the machine's, not the state's.
    busy = emulator.client("s3").get_object(Bucket="waits", Key="busy-simulated-s")
    assert float(busy["Body"].read()) == 0.0


def test_an_execution_fails_when_its_history_reaches_the_quota(emulator: Emulator,
                                                              monkeypatch) -> None:
    from traingrid_local.emulator import sfn_history

    monkeypatch.setattr(sfn_history, "HISTORY_LIMIT", 120)
    machine = create_state_machine(emulator, "forever", {
        "StartAt": "Poll",
        "States": {
            "Poll": {"Type": "Pass", "Next": "Again"},
            "Again": {"Type": "Wait", "Seconds": 30, "Next": "Poll"},
        },
    }, _role(emulator))

    execution = run_execution(emulator, machine, {}, name="forever-1")

    assert execution["status"] == "FAILED"
    assert execution["error"] == "States.Runtime"
    assert "maximum number of history events (120)" in execution["cause"]
    events = emulator.client("stepfunctions").get_execution_history(
        executionArn=execution["executionArn"], maxResults=1000)["events"]
    assert len(events) <= 120 and events[-1]["type"] == "ExecutionFailed"
