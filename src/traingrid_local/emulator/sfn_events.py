"""Adaptation (moto 5.2.5): Step Functions announces the end of every execution on the account's
default event bus, as a "Step Functions Execution Status Change" event, as AWS does.

moto's interpreter sends no events. Here each execution that ends (SUCCEEDED, FAILED,
TIMED_OUT, ABORTED) emits one, shortly after (an alarm at the present simulated moment, so the
rules' targets run outside the execution's own thread, as EventBridge delivers
asynchronously). ``detail`` has the fields AWS sends: ``executionArn``, ``stateMachineArn``,
``name``, ``status``, ``startDate``/``stopDate`` (epoch milliseconds), ``input``, ``output``,
``error`` and ``cause``. No event is sent while the emulator session closes (it stops what
still runs then).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from typing import Any

from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication

from traingrid_local.emulator import events
from traingrid_local.emulator.alarms import ALARMS
from traingrid_local.emulator.clock import CLOCK
from traingrid_local.emulator.patching import PATCHES

log = logging.getLogger(__name__)
DETAIL_TYPE = "Step Functions Execution Status Change"
# Whether executions' status changes are announced; off while the session closes.
ENABLED = True


def silence() -> None:
    """No more events until the emulator's patches are undone (as the session closes)."""
    PATCHES.replace(sys.modules[__name__], "ENABLED", False)


def _ms(moment: Any) -> int | None:
    return int(moment.timestamp() * 1000) if moment is not None else None


def detail(execution: Any) -> dict[str, Any]:
    output = execution.output
    return {
        "executionArn": execution.exec_arn,
        "stateMachineArn": execution.state_machine_arn,
        "name": execution.name,
        "status": execution.exec_status.value,
        "startDate": _ms(execution.start_date),
        "stopDate": _ms(execution.stop_date),
        "input": json.dumps(execution.input_data),
        "output": json.dumps(output) if output is not None else None,
        "error": execution.error,
        "cause": execution.cause,
    }


def _announce(execution: Any) -> None:
    if not ENABLED:
        return
    events.emit(execution.account_id, execution.region_name, "aws.states", DETAIL_TYPE,
                detail(execution), [execution.exec_arn])


def _terminated(previous: Callable[..., None]) -> Callable[..., None]:
    def terminated(self: BaseExecutionWorkerCommunication) -> None:
        previous(self)
        if ENABLED:
            execution = self.execution
            ALARMS.at(CLOCK.now(), lambda: _announce(execution))

    return terminated


def apply() -> None:
    PATCHES.wrap(BaseExecutionWorkerCommunication, "terminated", _terminated)
