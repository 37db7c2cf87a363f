"""Adaptation (moto 5.2.5): a ``states:startExecution.sync:2`` task waits for its child
execution on the simulated clock, and a stopped parent stops its child.

AWS ("Start a new AWS Step Functions state machine from a running execution", Step Functions
Developer Guide): the task starts a child execution, which has a history of its own, and
waits until it ends; ``.sync:2`` returns DescribeExecution's answer with ``Output`` as JSON;
a child that fails, times out or is aborted fails the task with ``States.TaskFailed`` and a
cause that is the child's DescribeExecution answer (its ``error`` and ``cause`` in it). The
parent's role needs ``states:StartExecution`` on the child state machine and
``states:DescribeExecution``/``states:StopExecution`` on its executions, because Step
Functions describes the child while it waits and stops it when the parent's task is stopped.

moto's interpreter does all of that, but waits by polling DescribeExecution every half a real
second while it holds the simulated clock (``StateTaskServiceCallback._eval_sync`` inside the
task's evaluation): the clock never moves, so a child that waits for anything never ends. Here
the wait lets go of the clock, looks again whenever an execution ends (else every
``_LOOK_AGAIN_S`` real seconds), and a parent stopped meanwhile stops its child. Step
Functions' managed rule (``StepFunctionsGetEventsForStepFunctionsExecutionRule``, on the default
bus) is made when the first such task runs, as on AWS.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Callable
from typing import Any

from moto.events.models import events_backends
from moto.stepfunctions.parser.api import ExecutionStatus
from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
    FailureEventException,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_sfn import (  # noqa: E501
    StateTaskServiceSfn,
)
from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication
from moto.stepfunctions.responses import get_backend
from moto.utilities.arns import parse_arn

from traingrid_local.emulator.clock import CLOCK
from traingrid_local.emulator.patching import PATCHES

_LOOK_AGAIN_S = 0.2
_MAX_UNANSWERED = 20
log = logging.getLogger(__name__)
_ENDED = threading.Condition()


# The children each execution started with a .sync task, by the parent's ARN.
_CHILDREN: dict[str, set[str]] = {}


def _terminated(previous: Callable[..., None]) -> Callable[..., None]:
    def terminated(self: BaseExecutionWorkerCommunication) -> None:
        previous(self)
        execution = self.execution
        children = _CHILDREN.pop(execution.exec_arn, set())
        if execution.exec_status == ExecutionStatus.ABORTED:
            for child in children:  # stopped: so are its children, wherever its tasks were
                _stop_child(child)
        with _ENDED:
            _ENDED.notify_all()

    return terminated


def _eval_service_task(previous: Callable[..., Any]) -> Callable[..., Any]:
    def evaluate(self: StateTaskServiceSfn, env: Any, *args: Any, **kwargs: Any) -> Any:
        result = previous(self, env, *args, **kwargs)
        child = env.stack[-1].get("ExecutionArn") if env.stack else None
        if child is not None and self.resource.condition is not None:  # .sync, .sync:2
            parent = env.states.context_object.context_object_data["Execution"]["Id"]
            _CHILDREN.setdefault(parent, set()).add(child)
            if not env.is_running():  # stopped while the child started: it ends too
                _stop_child(child)
        return result

    return evaluate


# The rule Step Functions manages on the account's default bus to learn when a child ends;
# the parent's role may put and describe it (its IAM policy names it).
MANAGED_RULE = "StepFunctionsGetEventsForStepFunctionsExecutionRule"


def _managed_rule(child: str) -> None:
    where = parse_arn(child)
    backend = events_backends[where.account][where.region]
    if MANAGED_RULE not in backend.event_buses["default"].rules:
        backend.put_rule(MANAGED_RULE, event_pattern=json.dumps({
            "source": ["aws.states"],
            "detail-type": ["Step Functions Execution Status Change"]}),
            managed_by="states.amazonaws.com", description="Managed by Step Functions")


def _build_sync_resolver(previous: Callable[..., Any]) -> Callable[..., Any]:
    """Keep the child's ARN with its resolver (moto's pops it off the stack), and make the
    managed rule the way Step Functions does, when a .sync task first runs."""

    def build(self: StateTaskServiceSfn, env: Any, *args: Any, **kwargs: Any) -> Any:
        child = env.stack[-1].get("ExecutionArn") if env.stack else None
        if child is not None:
            _managed_rule(child)
        resolver = previous(self, env, *args, **kwargs)
        return _Resolver(resolver, child)

    return build


class _Resolver:
    def __init__(self, resolve: Callable[[], Any], child: str | None) -> None:
        self.resolve, self.child = resolve, child

    def __call__(self) -> Any:
        return self.resolve()


def _stop_child(arn: str) -> None:
    where = parse_arn(arn)
    try:
        get_backend(where.account, where.region).stop_execution(arn)
    except Exception:  # noqa: BLE001 - it may have ended meanwhile
        return


def _eval_sync(self: StateTaskServiceSfn, env: Any, sync_resolver: Callable[[], Any],
               timeout_seconds: int | None, callback_endpoint: Any,
               heartbeat_endpoint: Any) -> Any:
    child = getattr(sync_resolver, "child", None)
    unanswered = 0
    with CLOCK.released():
        while env.is_running():
            try:
                with CLOCK.paused():
                    result = sync_resolver()
            except FailureEventException:
                raise  # the child failed: the task fails with it
            except Exception:  # Step Functions looks again; only the child's end decides
                unanswered += 1
                if unanswered > _MAX_UNANSWERED:
                    raise
                log.warning("DescribeExecution of %s failed; looking again", child,
                            exc_info=True)
                result = None
            if result:
                return result
            with _ENDED:
                _ENDED.wait(_LOOK_AGAIN_S)
    if child is not None:
        _stop_child(child)  # the parent was stopped: so is the child, as on AWS
    return None


def apply() -> None:
    PATCHES.replace(sys.modules[__name__], "_CHILDREN", {})
    PATCHES.wrap(BaseExecutionWorkerCommunication, "terminated", _terminated)
    PATCHES.wrap(StateTaskServiceSfn, "_eval_service_task", _eval_service_task)
    PATCHES.wrap(StateTaskServiceSfn, "_build_sync_resolver", _build_sync_resolver)
    PATCHES.wrap(StateTaskServiceSfn, "_build_sync2_resolver", _build_sync_resolver)
    PATCHES.replace(StateTaskServiceSfn, "_eval_sync", _eval_sync)
