"""Step Functions: starting named executions, idempotently."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from traingrid.aws.client_errors import NO_ANSWER, translated
from traingrid.aws.clients import client

# botocore's StartExecutionInput.input is a SensitiveData of at most 262,144: "Length
# constraints apply to the payload size, and are expressed as bytes in UTF-8 encoding". Every
# state an execution passes on is held to the same 256 KiB (States.DataLimitExceeded).
MAX_PAYLOAD_BYTES = 256 * 1024


def execution_input(payload: Any) -> str:
    """The ``input`` StartExecution is sent for ``payload``."""
    return json.dumps(payload)


def start_named_execution(state_machine_arn: str, name: str, payload: Any) -> dict[str, Any]:
    """Start ``name``; if it already exists, return it instead of starting a second run.

    Returns ``{"execution_arn", "started"}``; ``started`` is False for a duplicate.
    """
    sfn = client("stepfunctions")
    arn = execution_arn(state_machine_arn, name)
    try:
        response = sfn.start_execution(
            stateMachineArn=state_machine_arn, name=name, input=execution_input(payload)
        )
    except ClientError as error:
        if error.response["Error"]["Code"] != "ExecutionAlreadyExists":
            with translated("StepFunctions", "StartExecution"):
                raise
        return {"execution_arn": arn, "started": False}
    except NO_ANSWER:
        with translated("StepFunctions", "StartExecution"):
            raise
    return {"execution_arn": response["executionArn"], "started": True}


# A token that can no longer be completed: its wait timed out (the execution has moved on to
# check the job itself), the execution ended, or another completion came first.
STALE_TOKEN_CODES = frozenset({"TaskTimedOut", "InvalidToken", "TaskDoesNotExist"})


def complete_task(token: str, output: Any) -> bool:
    """Complete a ``.waitForTaskToken`` wait with ``output``; False if the token is stale."""
    try:
        client("stepfunctions").send_task_success(taskToken=token, output=json.dumps(output))
    except ClientError as error:
        if error.response["Error"]["Code"] in STALE_TOKEN_CODES:
            return False
        with translated("StepFunctions", "SendTaskSuccess"):
            raise
    except NO_ANSWER:
        with translated("StepFunctions", "SendTaskSuccess"):
            raise
    return True


def execution_arn(state_machine_arn: str, name: str) -> str:
    """The ARN an execution of ``name`` has (or would have) on that state machine."""
    return f"{state_machine_arn.replace(':stateMachine:', ':execution:')}:{name}"


def describe_execution(arn: str) -> dict[str, Any]:
    """DescribeExecution; ResourceNotFound when there is no such execution."""
    with translated("StepFunctions", "DescribeExecution"):
        return client("stepfunctions").describe_execution(executionArn=arn)


def execution_history(arn: str, max_events: int = 5000) -> list[dict[str, Any]]:
    """The execution's events, oldest first (at most ``max_events`` of them)."""
    sfn, token = client("stepfunctions"), None
    events: list[dict[str, Any]] = []
    with translated("StepFunctions", "GetExecutionHistory"):
        while len(events) < max_events:
            page = sfn.get_execution_history(
                executionArn=arn, maxResults=1000, **({"nextToken": token} if token else {}))
            events += page["events"]
            token = page.get("nextToken")
            if not token:
                break
    return events[:max_events]


def list_executions(state_machine_arn: str, max_results: int, token: str | None = None,
                    status: str | None = None) -> tuple[list[dict[str, Any]], str | None]:
    """One page of executions (of one status, if given), newest first, and the token of the
    next page (None at the end)."""
    optional = {"nextToken": token, "statusFilter": status}
    with translated("StepFunctions", "ListExecutions"):
        page = client("stepfunctions").list_executions(
            stateMachineArn=state_machine_arn, maxResults=max_results,
            **{k: v for k, v in optional.items() if v})
    return page["executions"], page.get("nextToken")


# botocore's StopExecutionInput: ``error`` (SensitiveError) is at most 256 characters and
# ``cause`` (SensitiveCause) at most 32,768; both are kept on the execution, as
# DescribeExecution's ``error`` and ``cause``.
MAX_STOP_ERROR, MAX_STOP_CAUSE = 256, 32768


def stop_execution(arn: str, error: str, cause: str) -> None:
    """StopExecution: the execution ends ABORTED with this ``error`` and ``cause``;
    ResourceNotFound when there is no such execution."""
    with translated("StepFunctions", "StopExecution"):
        client("stepfunctions").stop_execution(
            executionArn=arn, error=error[:MAX_STOP_ERROR], cause=cause[:MAX_STOP_CAUSE])
