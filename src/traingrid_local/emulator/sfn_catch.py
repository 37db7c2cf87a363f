"""Adaptation (moto 5.2.5): a Catch whose ``Next`` is its own state enters that state again.

A Task may catch its own timeout and start over (``AwaitTrainingJob`` waits on a task token
again after a fallback check), which costs one state transition per cycle. moto's interpreter
decides whether a catcher chose the next state by comparing it with the current state's name
(``CommonStateField._set_next``), so a catcher that names its own state is taken for no choice
and the state's ``Next`` is followed instead. Here a catcher's choice is remembered as such.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from moto.stepfunctions.parser.asl.component.common.catch.catch_outcome import CatchOutcome
from moto.stepfunctions.parser.asl.component.state.exec.execute_state import ExecutionState
from moto.stepfunctions.parser.asl.component.state.state import CommonStateField

from traingrid_local.emulator.patching import PATCHES

_CAUGHT_INTO_SELF = "traingrid_caught_into_self"


def _handle_catch(previous: Callable[..., None]) -> Callable[..., None]:
    def handle_catch(self: ExecutionState, env: Any, failure_event: Any) -> None:
        previous(self, env, failure_event)
        if (env.stack and env.stack[-1] == CatchOutcome.Caught
                and env.next_state_name == self.name):
            env.__dict__[_CAUGHT_INTO_SELF] = True

    return handle_catch


def _set_next(previous: Callable[..., None]) -> Callable[..., None]:
    def set_next(self: CommonStateField, env: Any) -> None:
        if env.__dict__.pop(_CAUGHT_INTO_SELF, False):
            return  # the catcher chose this state again
        previous(self, env)

    return set_next


def apply() -> None:
    PATCHES.wrap(ExecutionState, "_handle_catch", _handle_catch)
    PATCHES.wrap(CommonStateField, "_set_next", _set_next)
