"""Adaptation (moto 5.2.5): a Catch whose ``Next`` is its own state enters that state again.

A Task may catch its own timeout and start over (``AwaitTrainingJob`` waits on a task token
again after a fallback check), which costs one state transition per cycle. moto's interpreter
decides whether a catcher chose the next state by comparing it with the current state's name
(``CommonStateField._set_next``), so a catcher that names its own state is taken for no choice
and the state's ``Next`` is followed instead. Here a catcher's choice is remembered as such.
"""

from __future__ import annotations

from typing import Any

from moto.stepfunctions.parser.asl.component.common.catch.catch_outcome import CatchOutcome
from moto.stepfunctions.parser.asl.component.state.exec.execute_state import ExecutionState
from moto.stepfunctions.parser.asl.component.state.state import CommonStateField

_CAUGHT_INTO_SELF = "traingrid_caught_into_self"
_originals: dict[str, Any] = {}


def _handle_catch(self: ExecutionState, env: Any, failure_event: Any) -> None:
    _originals["handle_catch"](self, env, failure_event)
    if env.stack and env.stack[-1] == CatchOutcome.Caught and env.next_state_name == self.name:
        env.__dict__[_CAUGHT_INTO_SELF] = True


def _set_next(self: CommonStateField, env: Any) -> None:
    if env.__dict__.pop(_CAUGHT_INTO_SELF, False):
        return  # the catcher chose this state again
    _originals["set_next"](self, env)


def apply() -> None:
    if not _originals:
        _originals.update(handle_catch=ExecutionState._handle_catch,
                          set_next=CommonStateField._set_next)
    ExecutionState._handle_catch = _handle_catch
    CommonStateField._set_next = _set_next
