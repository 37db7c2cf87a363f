"""Step Functions: starting named executions, idempotently."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from traingrid.aws.clients import client
from traingrid.aws.errors import translated


def start_named_execution(state_machine_arn: str, name: str, payload: Any) -> dict[str, Any]:
    """Start ``name``; if it already exists, return it instead of starting a second run.

    Returns ``{"execution_arn", "started"}``; ``started`` is False for a duplicate.
    """
    sfn = client("stepfunctions")
    execution_arn = f"{state_machine_arn.replace(':stateMachine:', ':execution:')}:{name}"
    try:
        response = sfn.start_execution(
            stateMachineArn=state_machine_arn, name=name, input=json.dumps(payload)
        )
    except ClientError as error:
        if error.response["Error"]["Code"] != "ExecutionAlreadyExists":
            with translated("StepFunctions", "StartExecution"):
                raise
        return {"execution_arn": execution_arn, "started": False}
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
    return True
