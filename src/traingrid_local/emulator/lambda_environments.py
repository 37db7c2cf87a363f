"""Adaptation: Lambda's execution environments, one per concurrent invocation of a function.

Lambda runs each invocation in an execution environment of its function: an idle one if the
function has one, a new one (a cold start) otherwise, so a function called N times at once has
N environments, and each keeps what its process holds between invocations. The in-process
functions (:mod:`traingrid_local.emulator.lambda_inprocess`) take turns in one interpreter; here
each call still gets an environment of its own, busy from the call until the answer, its wait
for a turn included (Lambda would have run those calls at once).

What an environment keeps that a server counts, the campaign database's pooled connections
(``traingrid.db.engine``'s engines), is its own: the database sees one pool per environment
that used it, as it would from Lambda. ``peak_concurrency`` is the most environments each
function had busy at once; :func:`close` (the session's end) closes their connections.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, MutableMapping
from typing import Any

from traingrid.db import engine
from traingrid_local.emulator.patching import PATCHES

_CURRENT = threading.local()
_LOCK = threading.Lock()


class ExecutionEnvironment:
    """One of a function's execution environments: busy while it handles an invocation; the
    database engines (and their pooled connections) it keeps between invocations."""

    def __init__(self) -> None:
        self.busy = False
        self.engines: dict[str, Any] = {}

    def close(self) -> None:
        for found in self.engines.values():
            found.dispose()
        self.engines.clear()


_ENVIRONMENTS: dict[str, list[ExecutionEnvironment]] = {}
_PEAKS: dict[str, int] = {}


def acquire(function_name: str) -> ExecutionEnvironment:
    """An idle execution environment of the function, or a new one, now busy."""
    with _LOCK:
        environments = _ENVIRONMENTS.setdefault(function_name, [])
        found = next((e for e in environments if not e.busy), None)
        if found is None:
            found = ExecutionEnvironment()
            environments.append(found)
        found.busy = True
        busy = sum(e.busy for e in environments)
        _PEAKS[function_name] = max(_PEAKS.get(function_name, 0), busy)
        return found


def release(environment: ExecutionEnvironment) -> None:
    with _LOCK:
        environment.busy = False


class running:  # noqa: N801 - a context manager, used as a statement
    """``with running(environment):`` this thread's database engines are the environment's."""

    def __init__(self, environment: ExecutionEnvironment) -> None:
        self.environment = environment

    def __enter__(self) -> ExecutionEnvironment:
        self.previous = getattr(_CURRENT, "environment", None)
        _CURRENT.environment = self.environment
        return self.environment

    def __exit__(self, *_: Any) -> None:
        _CURRENT.environment = self.previous


def peak_concurrency() -> dict[str, int]:
    """Function name → the most execution environments it had busy at once this session."""
    with _LOCK:
        return dict(_PEAKS)


def counts() -> dict[str, int]:
    """Function name → how many execution environments it has, busy or idle."""
    with _LOCK:
        return {name: len(found) for name, found in _ENVIRONMENTS.items()}


def with_database() -> int:
    """How many execution environments have connected to a database (hold an engine)."""
    with _LOCK:
        return sum(bool(e.engines) for found in _ENVIRONMENTS.values() for e in found)


def close() -> None:
    """Every execution environment goes, its database connections closed."""
    with _LOCK:
        gone = [e for found in _ENVIRONMENTS.values() for e in found]
        _ENVIRONMENTS.clear()
        _PEAKS.clear()
    for environment in gone:
        environment.close()


class EnvironmentEngines(MutableMapping[str, Any]):
    """``traingrid.db.engine``'s engines as each thread should see them: while a thread runs a
    function, those of its execution environment; otherwise the process's."""

    def __init__(self, process: MutableMapping[str, Any]) -> None:
        self.process = process

    def _current(self) -> MutableMapping[str, Any]:
        environment = getattr(_CURRENT, "environment", None)
        return self.process if environment is None else environment.engines

    def __getitem__(self, key: str) -> Any:
        return self._current()[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._current()[key] = value

    def __delitem__(self, key: str) -> None:
        del self._current()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._current()))

    def __len__(self) -> int:
        return len(self._current())


def apply() -> None:
    # ``engine_for`` reads the mapping at every call, so each environment keeps its own.
    PATCHES.replace(engine, "_engines", EnvironmentEngines(engine._engines))
