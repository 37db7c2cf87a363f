"""Adaptation (moto 5.2.5): StopExecution stops an execution at once, and it ends ABORTED.

moto's interpreter marks a stopped execution but does not wake a Task waiting on a task token
(``.waitForTaskToken``): it waits on until the state's timeout, then records the timeout, and
the failure that surfaces replaces the stop, so the execution ends FAILED with
``States.Timeout``. On AWS the execution ends ABORTED the moment it is stopped. Here a stop
wakes every task-token wait of the execution, a failure that surfaces in a stopped execution
(the interrupted step's) is not recorded, and it cannot turn the execution FAILED. moto also
drops StopExecution's ``error`` and ``cause``; AWS keeps them as the execution's (its
DescribeExecution's), and here they are kept too.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from moto.stepfunctions.parser.asl.component.state.exec.execute_state import ExecutionState
from moto.stepfunctions.parser.asl.eval.environment import Environment
from moto.stepfunctions.parser.asl.eval.program_state import ProgramStopped
from moto.stepfunctions.parser.backend.execution import Execution
from moto.stepfunctions.responses import StepFunctionResponse

from traingrid_local.emulator.patching import PATCHES


def _set_stop(previous: Callable[..., None]) -> Callable[..., None]:
    def set_stop(self: Environment, *args: Any, **kwargs: Any) -> None:
        previous(self, *args, **kwargs)
        for endpoint in list(self.callback_pool_manager._pool.values()):
            endpoint.interrupt_all()

    return set_stop


def _set_error(previous: Callable[..., None]) -> Callable[..., None]:
    def set_error(self: Environment, *args: Any, **kwargs: Any) -> None:
        if isinstance(self._program_state, ProgramStopped):
            return  # stopped first: it stays ABORTED
        previous(self, *args, **kwargs)

    return set_error


def _evaluate_with_timeout(previous: Callable[..., None]) -> Callable[..., None]:
    def evaluate_with_timeout(self: ExecutionState, env: Environment) -> None:
        try:
            previous(self, env)
        except Exception:
            if isinstance(env.program_state(), ProgramStopped):
                return  # the step was interrupted by the stop: nothing to retry or catch
            raise

    return evaluate_with_timeout


# StopExecution's error and cause, while its request is handled.
_STOPPED_WITH: ContextVar[tuple[str | None, str | None] | None] = ContextVar(
    "stopped_with", default=None)


def _stop_execution(previous: Callable[..., Any]) -> Callable[..., Any]:
    def stop_execution(self: StepFunctionResponse) -> Any:
        given = _STOPPED_WITH.set((self._get_param("error"), self._get_param("cause")))
        try:
            return previous(self)
        finally:
            _STOPPED_WITH.reset(given)

    return stop_execution


def _stop(previous: Callable[..., None]) -> Callable[..., None]:
    def stop(self: Execution, stop_date: Any, error: str | None, cause: str | None) -> None:
        given = _STOPPED_WITH.get()
        if given is not None:
            error, cause = given
            self.error, self.cause = error, cause
        previous(self, stop_date, error, cause)

    return stop


def apply() -> None:
    PATCHES.wrap(StepFunctionResponse, "stop_execution", _stop_execution)
    PATCHES.wrap(Execution, "stop", _stop)
    PATCHES.wrap(Environment, "set_stop", _set_stop)
    PATCHES.wrap(Environment, "set_error", _set_error)
    PATCHES.wrap(ExecutionState, "_evaluate_with_timeout", _evaluate_with_timeout)
