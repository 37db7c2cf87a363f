"""A ``states:startExecution.sync:2`` task starts a child execution with a history of its own
and waits for it on the simulated clock; the child's failure fails the task as on AWS
(``States.TaskFailed``, the child's DescribeExecution as the cause); a stopped parent stops its
child."""

from __future__ import annotations

import json
from typing import Any

from traingrid_local.emulator.session import Emulator

from .helpers import (
    client,
    create_role,
    create_state_machine,
    run_execution,
    wait_until,
)

CHILD = {"StartAt": "Wait", "States": {
    "Wait": {"Type": "Wait", "SecondsPath": "$.wait_s", "Next": "Fail?"},
    "Fail?": {"Type": "Choice", "Choices": [
        {"Variable": "$.fail", "BooleanEquals": True, "Next": "Broke"}], "Default": "Done"},
    "Broke": {"Type": "Fail", "Error": "RegionFailed", "Cause": "the child broke"},
    "Done": {"Type": "Pass", "Parameters": {"region.$": "$.region"}, "End": True},
}}


def _parent(child_arn: str) -> dict[str, Any]:
    return {"StartAt": "Regions", "States": {"Regions": {
        "Type": "Map", "ItemsPath": "$.regions",
        "ItemSelector": {"region.$": "$$.Map.Item.Value", "wait_s.$": "$.wait_s",
                         "fail.$": "$.fail"},
        "ItemProcessor": {"ProcessorConfig": {"Mode": "INLINE"}, "StartAt": "Child",
                          "States": {"Child": {
                              "Type": "Task",
                              "Resource": "arn:aws:states:::states:startExecution.sync:2",
                              "Parameters": {
                                  "StateMachineArn": child_arn,
                                  "Name.$": "States.Format('child-{}', $.region)",
                                  "Input": {
                                      "region.$": "$.region", "wait_s.$": "$.wait_s",
                                      "fail.$": "$.fail",
                                      "AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID.$":
                                          "$$.Execution.Id"}},
                              "OutputPath": "$.Output",
                              "Catch": [{"ErrorEquals": ["States.TaskFailed"],
                                         "ResultPath": "$.failure", "Next": "Failed"}],
                              "End": True},
                              "Failed": {"Type": "Pass", "End": True}}},
        "End": True}}}


def _machines(emulator: Emulator) -> tuple[str, str]:
    role = create_role(emulator, "nested", "states.amazonaws.com")
    child = create_state_machine(emulator, "child", CHILD, role)
    return child, create_state_machine(emulator, "parent", _parent(child), role)


def test_each_child_has_its_own_history_and_the_parent_waits_for_it(emulator: Emulator) -> None:
    child, parent = _machines(emulator)
    regions = [f"r{i}" for i in range(5)]

    execution = run_execution(emulator, parent, {"regions": regions, "wait_s": 86400,
                                                 "fail": False}, skip_idle_time=True)

    assert execution["status"] == "SUCCEEDED", execution.get("cause")
    assert json.loads(execution["output"]) == [{"region": r} for r in regions]
    sfn = client(emulator, "stepfunctions")
    children = sfn.list_executions(stateMachineArn=child)["executions"]
    assert sorted(c["name"] for c in children) == [f"child-{r}" for r in regions]
    # The day of waiting is in each child's history, not in the parent's.
    parent_events = sfn.get_execution_history(executionArn=execution["executionArn"],
                                              maxResults=1000)["events"]
    child_events = sfn.get_execution_history(executionArn=children[0]["executionArn"],
                                             maxResults=1000)["events"]
    assert "WaitStateEntered" not in {e["type"] for e in parent_events}
    assert "WaitStateEntered" in {e["type"] for e in child_events}
    described = sfn.describe_execution(executionArn=children[0]["executionArn"])
    assert json.loads(described["input"])["AWS_STEP_FUNCTIONS_STARTED_BY_EXECUTION_ID"] == (
        execution["executionArn"])


def test_a_failed_child_fails_the_task_with_its_error_and_cause(emulator: Emulator) -> None:
    _, parent = _machines(emulator)

    execution = run_execution(emulator, parent, {"regions": ["r0"], "wait_s": 60,
                                                 "fail": True}, skip_idle_time=True)

    assert execution["status"] == "SUCCEEDED"
    (failed,) = json.loads(execution["output"])
    assert failed["failure"]["Error"] == "States.TaskFailed"
    cause = json.loads(failed["failure"]["Cause"])
    assert (cause["Status"], cause["Error"], cause["Cause"]) == (
        "FAILED", "RegionFailed", "the child broke")


def test_stopping_the_parent_stops_its_children(emulator: Emulator) -> None:
    child, parent = _machines(emulator)
    sfn = client(emulator, "stepfunctions")
    arn = sfn.start_execution(stateMachineArn=parent, name="stopped", input=json.dumps(
        # Longer than the test lasts on the fast clock (99,999,999 s: about 17 real minutes).
        {"regions": ["r0", "r1"], "wait_s": 99_999_999, "fail": False}))["executionArn"]
    wait_until(lambda: len(sfn.list_executions(stateMachineArn=child)["executions"]) == 2,
               what="both children to start")

    sfn.stop_execution(executionArn=arn)

    def children_aborted() -> bool:
        return all(c["status"] == "ABORTED" for c in sfn.list_executions(
            stateMachineArn=child)["executions"])

    # In real time: stopping needs no simulated time, and skipping it could end the children's
    # waits before the stop reaches them on a busy machine.
    wait_until(children_aborted, what="the children to be stopped")
    # The emulated parent reads ABORTED once its thread has wound down (AWS at once; the
    # emulator's teardown waits on that status for the threads to end).
    wait_until(lambda: sfn.describe_execution(executionArn=arn)["status"] == "ABORTED",
               what="the parent to end ABORTED")
