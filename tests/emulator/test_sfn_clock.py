"""Wait states and Retry intervals run on the simulated clock, and a Wait still ends at once
when its execution is stopped."""

from __future__ import annotations

import json
import time

from traingrid_local.emulator.session import Emulator

from .conftest import StartEmulator
from .helpers import create_role, create_state_machine, history_types, run_execution, wait_until

HOUR = 3600


def _role(emulator: Emulator) -> str:
    return create_role(emulator, "waiter", "states.amazonaws.com")


def test_a_wait_state_waits_simulated_seconds(emulator: Emulator) -> None:
    machine = create_state_machine(emulator, "waits", {
        "StartAt": "Fixed",
        "States": {
            "Fixed": {"Type": "Wait", "Seconds": HOUR, "Next": "FromInput"},
            "FromInput": {"Type": "Wait", "SecondsPath": "$.wait_s", "End": True},
        },
    }, _role(emulator))
    started = time.monotonic()

    execution = run_execution(emulator, machine, {"wait_s": 2 * HOUR}, name="waits-1")

    assert execution["status"] == "SUCCEEDED"
    assert time.monotonic() - started < 3  # three simulated hours
    simulated = emulator.simulated_seconds(execution["startDate"], execution["stopDate"])
    assert simulated >= 3 * HOUR
    assert json.loads(execution["output"]) == {"wait_s": 2 * HOUR}


def test_retry_intervals_pass_on_the_simulated_clock(emulator: Emulator) -> None:
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

    execution = run_execution(emulator, machine, name="retries-1")

    assert execution["status"] == "SUCCEEDED"
    # One attempt, then retries after one and two simulated hours.
    assert history_types(emulator, execution["executionArn"]).count("TaskFailed") == 3
    simulated = emulator.simulated_seconds(execution["startDate"], execution["stopDate"])
    assert simulated >= 3 * HOUR


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
        timeout=3, what="the execution to stop",
    )
    assert stopped["status"] == "ABORTED"
