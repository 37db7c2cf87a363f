"""Adaptation (moto 5.2.5): StopExecution stops an execution at once, and it ends ABORTED.

moto's interpreter marks a stopped execution but does not wake a Task waiting on a task token
(``.waitForTaskToken``): it waits on until the state's timeout, then records the timeout, and
the failure that surfaces replaces the stop, so the execution ends FAILED with
``States.Timeout``. On AWS the execution ends ABORTED the moment it is stopped. Here a stop
wakes every task-token wait of the execution, a failure that surfaces in a stopped execution
(the interrupted step's) is not recorded, and it cannot turn the execution FAILED.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from moto.stepfunctions.parser.asl.component.state.exec.execute_state import ExecutionState
from moto.stepfunctions.parser.asl.eval.environment import Environment
from moto.stepfunctions.parser.asl.eval.program_state import ProgramStopped

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


def apply() -> None:
    PATCHES.wrap(Environment, "set_stop", _set_stop)
    PATCHES.wrap(Environment, "set_error", _set_error)
    PATCHES.wrap(ExecutionState, "_evaluate_with_timeout", _evaluate_with_timeout)
