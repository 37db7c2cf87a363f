"""Adaptation (fault plans' ``at_states``): a failure injected at one Task state of a state
machine, whatever the state calls, so every state's failure path runs for real.

The failure looks the way AWS reports it to the state machine, so Retry and Catch see what they
would see on AWS:

- ``service-error``: an ``aws-sdk`` step gets a service error its Retry does not list
  (``FSx.BadRequestException``, ``Batch.ClientException`` …); a Lambda step's function fails with
  ``AwsServiceError``, as when an AWS call inside it fails;
- ``throttling-storm``: every attempt is throttled (``FSx.ThrottlingException``,
  ``Batch.TooManyRequestsException``, ``Lambda.TooManyRequestsException``), so the Retry runs
  out;
- ``timeout``: a Lambda step's function runs past its timeout (``Sandbox.Timedout``); an
  ``aws-sdk`` step gets no answer (``States.Timeout``). The failure is reported at once: the
  clock does not wait the time out;
- ``abort``: the execution is stopped (StopExecution) while the step's call is in flight (or
  ``after_s`` simulated seconds into the state), as when someone stops a run in the console:
  the call goes ahead, its result is lost, what it created stays.

Every failure's cause ends with ``(simulated fault <kind> at <state>)``.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from botocore.exceptions import ClientError
from moto.stepfunctions.parser.api import HistoryEventType, LambdaFunctionFailedEventDetails
from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import (
    CustomErrorName,
)
from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
    FailureEvent,
    FailureEventException,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.lambda_eval_utils import (
    LambdaFunctionErrorException,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service import (  # noqa: E501
    StateTaskService,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_lambda import (  # noqa: E501
    StateTaskServiceLambda,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task_lambda import (
    StateTaskLambda,
)
from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
from moto.stepfunctions.responses import get_backend
from moto.utilities.arns import parse_arn

from traingrid_local.emulator import fault_injection
from traingrid_local.emulator.alarms import ALARMS
from traingrid_local.emulator.clock import CLOCK
from traingrid_local.emulator.fault_injection import StateFault
from traingrid_local.emulator.patching import PATCHES

log = logging.getLogger(__name__)

# service → (error code, HTTP status) of an error the state machines' Retry does not list
# (Step Functions' own integration names its errors "StepFunctions.<code>Exception".)
SERVICE_ERRORS = {"fsx": ("BadRequest", 400), "batch": ("ClientException", 400),
                  "states": ("InvalidExecutionInput", 400),
                  "sagemaker": ("ValidationException", 400), "s3": ("AccessDenied", 403)}
THROTTLING_ERRORS = {"fsx": ("ThrottlingException", 400), "states": ("Throttling", 400),
                     "batch": ("TooManyRequestsException", 429),
                     "sagemaker": ("ThrottlingException", 400), "s3": ("SlowDown", 503)}
LAMBDA_TIMEOUT_S = 60  # the template's Globals; the reported number only



def _note(fault: StateFault, state: str) -> str:
    return f"(simulated fault {fault.kind} at {state})"


def _client_error(code: str, status: int, message: str, operation: str) -> ClientError:
    """The service's error as boto3 raises it: a ClientError subclass named after the code
    (the interpreter names aws-sdk errors after the class)."""
    modeled = type(code, (ClientError,), {})
    return modeled({"Error": {"Code": code, "Message": message},
                    "ResponseMetadata": {"HTTPStatusCode": status,
                                         "RequestId": str(uuid.uuid4())}}, operation)


def _function_error(error_type: str, message: str) -> LambdaFunctionErrorException:
    return LambdaFunctionErrorException("Unhandled", json.dumps(
        {"errorType": error_type, "errorMessage": message}, separators=(",", ":")))


def failure(task: Any, env: Any, fault: StateFault) -> Exception:
    """What the task raises under ``fault``, in the shape its own error handling expects."""
    note = _note(fault, task.name)
    if not isinstance(task, StateTaskLambda | StateTaskServiceLambda):
        service, action = task.resource.api_name, task.resource.api_action
        if fault.kind == "timeout":
            return FailureEventException(task._get_timed_out_failure_event(env))
        table = THROTTLING_ERRORS if fault.kind == "throttling-storm" else SERVICE_ERRORS
        code, status = table.get(service, ("ValidationException", 400))
        what = "Rate exceeded" if fault.kind == "throttling-storm" else f"{action} refused"
        return _client_error(code, status, f"{what} {note}", action)
    if fault.kind == "throttling-storm":
        message = f"Rate Exceeded. {note}"
        if isinstance(task, StateTaskServiceLambda):
            return _client_error("TooManyRequestsException", 429, message, "Invoke")
        error = "Lambda.TooManyRequestsException"
        return FailureEventException(FailureEvent(
            env=env, error_name=CustomErrorName(error),
            event_type=HistoryEventType.LambdaFunctionFailed,
            # moto declares EventDetails total, but each event has one kind of details.
            event_details=EventDetails(  # type: ignore[typeddict-item]
                lambdaFunctionFailedEventDetails=LambdaFunctionFailedEventDetails(
                    error=error, cause=message))))
    if fault.kind == "timeout":
        return _function_error("Sandbox.Timedout", (
            f"RequestId: {uuid.uuid4()} Error: Task timed out after {LAMBDA_TIMEOUT_S:.2f} "
            f"seconds {note}"))
    return _function_error("AwsServiceError", (
        f"An AWS call of this step failed: InternalFailure: the service could not handle the "
        f"request {note}"))


def _stop(execution_arn: str) -> None:
    arn = parse_arn(execution_arn)
    try:
        get_backend(arn.account, arn.region).stop_execution(execution_arn)
    except Exception:  # noqa: BLE001 - it ended on its own meanwhile
        log.info("execution %s had ended before its simulated abort", execution_arn)


def _aborting(original: Callable[..., Any], task: Any, env: Any, fault: StateFault) -> Any:
    """Run the step's call, and stop the execution: once the call is made (the interpreter
    skips a stopped execution's work), or ``after_s`` into the state."""
    execution_arn = env.states.context_object.context_object_data["Execution"]["Id"]
    if not fault_injection.CURRENT.first_abort(execution_arn):
        return original(task, env)
    if fault.after_s:
        ALARMS.at(CLOCK.now() + timedelta(seconds=fault.after_s), lambda: _stop(execution_arn))
        return original(task, env)
    try:
        return original(task, env)
    finally:
        _stop(execution_arn)


def _faulty(original: Callable[..., Any]) -> Callable[..., Any]:
    def run(self: Any, env: Any) -> Any:
        fault = fault_injection.CURRENT.at_state(self.name)
        if fault is None:
            return original(self, env)
        if fault.kind == "abort":
            return _aborting(original, self, env, fault)
        raise failure(self, env, fault)

    return run


def apply() -> None:
    """Wrap the tasks' evaluation as ``sfn_clock`` left it (it is applied first)."""
    for cls in (StateTaskService, StateTaskLambda):
        PATCHES.wrap(cls, "_eval_execution", _faulty)
