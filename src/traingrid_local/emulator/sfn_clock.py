"""Adaptation (moto 5.2.5): Step Functions runs on the simulated clock.

moto's ASL interpreter waits in real seconds: ``WaitFunction._wait_interval``, a ``time.sleep``
in ``RetrierDecl._eval_body``, and ``threading.Event.wait`` for task timeouts
(``ExecutionState._evaluate_with_timeout``) and ``.waitForTaskToken`` callbacks; a six-hour
training loop would take six hours. Here every one of those waits counts simulated seconds,
and a Wait still ends at once when the execution stops.

The interpreter also holds the clock while it evaluates states (``Program._eval_body`` and the
work of each Task), letting go only while it waits: for a Wait, a Retry interval, a timeout, a
callback, or a Map's or Parallel's branches. So the milliseconds this machine spends between
states never turn into simulated minutes, however fast the clock runs. A new execution is held
for from the moment it is started until its own thread runs (``ExecutionWorker.start``): on a
busy machine that thread may wait longer than the clock's idle window, and a parent waiting on
it (``startExecution.sync``) must not see the clock skip to its own 99,999,999-second timeout.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl
from moto.stepfunctions.parser.asl.component.common.timeouts.timeout import TimeoutSeconds
from moto.stepfunctions.parser.asl.component.program.program import Program
from moto.stepfunctions.parser.asl.component.state.exec import execute_state
from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.job import JobPool
from moto.stepfunctions.parser.asl.component.state.exec.state_parallel.branches_decl import (
    BranchWorkerPool,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service import (  # noqa: E501
    StateTaskService,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task_lambda import (
    StateTaskLambda,
)
from moto.stepfunctions.parser.asl.component.state.wait.wait_function.wait_function import (
    WaitFunction,
)
from moto.stepfunctions.parser.asl.eval.callback import callback
from moto.stepfunctions.parser.backend.execution_worker import ExecutionWorker

from traingrid_local.emulator.clock import CLOCK, SimulatedEvent
from traingrid_local.emulator.patching import PATCHES


def _wait_interval(self: WaitFunction, env, wait_seconds: int) -> None:  # noqa: ANN001
    def stopped(real_timeout: float) -> bool:
        # Interruptible: StopExecution sets this event.
        return env.program_state_event.wait(real_timeout) or not env.is_running()

    if env.is_running():
        CLOCK.wait(wait_seconds, woken=stopped)


def _holding(original: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        with CLOCK.paused():
            return original(*args, **kwargs)

    return run


def _releasing(original: Callable[..., Any]) -> Callable[..., Any]:
    def wait(*args: Any, **kwargs: Any) -> Any:
        with CLOCK.released():
            return original(*args, **kwargs)

    return wait


class _StateEvent(SimulatedEvent):
    """A state's end, waited for up to its timeout: a state without TimeoutSeconds gets moto's
    default, 99,999,999 s (as on AWS: more than three years), which here is no deadline at all.
    As a deadline the clock would skip to it whenever every thread waits a moment (a parent
    whose child execution has just ended, on a busy machine) and time the state out."""

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is not None and timeout >= TimeoutSeconds.DEFAULT_TIMEOUT_SECONDS:
            timeout = None
        return super().wait(timeout)


def _start_held(previous: Callable[..., None]) -> Callable[..., None]:
    def start(self: ExecutionWorker) -> None:
        self.__dict__["_clock_handed_over"] = CLOCK.hold_for_another()
        previous(self)

    return start


def _environment_held(previous: Callable[..., Any]) -> Callable[..., Any]:
    """The starter's hold goes with the execution's environment to the program's thread."""

    def environment(self: ExecutionWorker) -> Any:
        env = previous(self)
        env.__dict__["_clock_handed_over"] = self.__dict__.pop("_clock_handed_over", None)
        return env

    return environment


def _let_go_of_handed_over(env: Any) -> None:
    handed_over = env.__dict__.pop("_clock_handed_over", None)
    if handed_over is not None:
        CLOCK.let_go_for_another(handed_over)


def _run_program_held(original: Callable[..., Any]) -> Callable[..., Any]:
    def run(self: Program, env: Any) -> Any:
        with CLOCK.paused():  # this thread's own hold, then the starter's is let go
            _let_go_of_handed_over(env)
            return original(self, env)

    return run


def _execution_logic(previous: Callable[..., None]) -> Callable[..., None]:
    def execution_logic(self: ExecutionWorker) -> None:
        try:
            previous(self)
        finally:  # the program never ran: nobody else lets go of the starter's hold
            handed_over = self.__dict__.pop("_clock_handed_over", None)
            if handed_over is not None:
                CLOCK.let_go_for_another(handed_over)
            if getattr(self, "env", None) is not None:
                _let_go_of_handed_over(self.env)

    return execution_logic


def apply() -> None:
    PATCHES.replace(WaitFunction, "_wait_interval", _wait_interval)
    # These three wait through a name their module looks up when it waits (``time.sleep`` in
    # RetrierDecl._eval_body, ``threading.Event`` in ExecutionState._evaluate_with_timeout,
    # ``Event`` in the callback endpoints), in the middle of moto's functions. Giving the
    # module another object under that name is the narrowest change that reaches them, and
    # nothing else in those modules uses the name.
    PATCHES.replace(retrier_decl, "time", types.SimpleNamespace(sleep=CLOCK.sleep))
    PATCHES.replace(execute_state, "threading", types.SimpleNamespace(Event=_StateEvent))
    PATCHES.replace(callback, "Event", SimulatedEvent)
    PATCHES.wrap(Program, "_eval_body", _run_program_held)
    PATCHES.wrap(StateTaskService, "_eval_execution", _holding)
    PATCHES.wrap(StateTaskLambda, "_eval_execution", _holding)
    PATCHES.wrap(JobPool, "await_jobs", _releasing)
    PATCHES.wrap(BranchWorkerPool, "wait", _releasing)
    PATCHES.wrap(ExecutionWorker, "start", _start_held)
    PATCHES.wrap(ExecutionWorker, "_get_evaluation_environment", _environment_held)
    PATCHES.wrap(ExecutionWorker, "_execution_logic", _execution_logic)
