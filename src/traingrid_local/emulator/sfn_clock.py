"""Adaptation (moto 5.2.5): Step Functions Wait states and Retry intervals run on the simulated
clock.

moto's ASL interpreter waits in real seconds (``WaitFunction._wait_interval`` and a
``time.sleep`` in ``RetrierDecl._eval_body``); a six-hour training loop would take six hours.
Here both divide by the clock's speed, and a Wait still ends at once when the execution stops.
"""

from __future__ import annotations

import types

from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import (
    WaitFunction,
)

from traingrid_local.emulator.clock import CLOCK


def _wait_interval(self: WaitFunction, env, wait_seconds: int) -> None:  # noqa: ANN001
    deadline = CLOCK.timestamp() + wait_seconds
    while env.is_running():
        remaining = deadline - CLOCK.timestamp()
        if remaining <= 0:
            return
        # Interruptible: StopExecution sets this event.
        env.program_state_event.wait(CLOCK.real_seconds(remaining))


def apply() -> None:
    WaitFunction._wait_interval = _wait_interval
    retrier_decl.time = types.SimpleNamespace(sleep=CLOCK.sleep)
