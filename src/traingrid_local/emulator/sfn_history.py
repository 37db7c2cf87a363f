"""Adaptation (moto 5.2.5): Step Functions' 25,000-event execution history quota.

A Standard workflow's execution fails once its history reaches 25,000 events; moto's
interpreter keeps appending. Here the first state entered once the history is within two events
of the quota ends the execution FAILED with ``States.Runtime``, as the service does, so a run
that polls too often fails in the emulator as it would on AWS. (The check is at state entry, so
a task's own events just before it can take a failed history a few events past 25,000.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from moto.stepfunctions.parser.api import ExecutionFailedEventDetails, HistoryEventType
from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
    FailureEvent,
    FailureEventException,
)
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import (
    StatesErrorName,
)
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import (
    StatesErrorNameType,
)
from moto.stepfunctions.parser.asl.component.state.state import CommonStateField
from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails

from traingrid_local.emulator.patching import PATCHES

HISTORY_LIMIT = 25_000


def history_length(env: Any) -> int:
    return len(env.event_manager._history_event_list)


def _eval_body(previous: Callable[..., None]) -> Callable[..., None]:
    def eval_body(self: CommonStateField, env: Any) -> None:
        # Two events short of the quota: the state's entry and the execution's failure fit.
        if history_length(env) >= HISTORY_LIMIT - 2:
            error = StatesErrorName(typ=StatesErrorNameType.StatesRuntime)
            raise FailureEventException(FailureEvent(
                env=env, error_name=error, event_type=HistoryEventType.ExecutionFailed,
                # moto declares EventDetails total, but each event has one kind of details.
                event_details=EventDetails(  # type: ignore[typeddict-item]
                    executionFailedEventDetails=ExecutionFailedEventDetails(
                        error=error.error_name,
                        cause=f"The execution reached the maximum number of history events "
                              f"({HISTORY_LIMIT}) before entering state '{self.name}'.",
                    )),
            ))
        previous(self, env)

    return eval_body


def apply() -> None:
    PATCHES.wrap(CommonStateField, "_eval_body", _eval_body)
