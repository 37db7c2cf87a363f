"""Adaptation (moto 5.2.5): Lambda functions run in-process from their configured Handler.

Without Docker, moto's Lambda echoes the payload back. Here an invocation loads the deployed
code (the function's zip, its layers on ``sys.path``), imports the ``Handler`` once per code
version (a cold start, with the function's environment applied, so module-level settings are
read as on AWS) and calls it. An exception comes back the way Lambda reports it: the
``X-Amz-Function-Error: Unhandled`` header and ``{"errorType", "errorMessage"}``, so Step
Functions' Retry/Catch match our own error names. What the function logs goes where Lambda sends
it (:func:`log_location`): the group of its ``LoggingConfig``, or ``/aws/lambda/<name>``.

A function sees its own environment variables, and only the thread that runs it does:
``os.environ`` becomes a view (:class:`FunctionEnvironment`) that shows each invoking thread its
function's variables over the process's, so no invocation ever writes the process environment
that other threads (the test, the state machines, other functions) read at the same moment.
Invocations are still serialised: ``sys.path`` is process-wide, and all functions share one
interpreter here, and so the runtime package's Powertools Logger and Metrics: each invocation
gives them its function's ``POWERTOOLS_*`` settings, as that function's own cold start would,
even when the package was first imported outside any function. Every AWS call a
function makes is recorded (``CALLS``: function name → IAM-style actions), so tests can hold
each function's role to exactly what its code does.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import json
import logging
import os
import sys
import tempfile
import threading
import time
import traceback
import uuid
import zipfile
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from types import ModuleType
from typing import Any

from moto.awslambda.models import LambdaFunction
from moto.awslambda.utils import get_backend
from moto.awslambda_simple.models import LambdaSimpleBackend
from moto.logs.models import logs_backends

from traingrid_local.emulator import lambda_environments
from traingrid_local.emulator.clock import CLOCK
from traingrid_local.emulator.patching import PATCHES

_LOCK = threading.RLock()
_INVOKING = threading.local()
CALLS: dict[str, set[str]] = {}
# Services whose IAM actions are not named by their signing name.
IAM_PREFIXES = {"monitoring": "cloudwatch"}
_EXTRACTED: dict[str, Path] = {}
_MODULES: dict[tuple[str, str], ModuleType] = {}
_WORKDIR = Path(tempfile.mkdtemp(prefix="traingrid-lambda-"))


def log_location(fn: LambdaFunction) -> tuple[str, str]:
    """Where Lambda sends a function's logs: its ``LoggingConfig.LogGroup``, in streams named
    ``YYYY/MM/DD/<function>[$LATEST]<id>``, or ``/aws/lambda/<function>`` with streams
    ``YYYY/MM/DD/[$LATEST]<id>``. Returns the group and what follows the date in a stream's
    name, before its id."""
    custom = (getattr(fn, "logging_config", None) or {}).get("LogGroup")
    if custom:
        return custom, f"{fn.function_name}[$LATEST]"
    return f"/aws/lambda/{fn.function_name}", "[$LATEST]"


def log_location_of(account_id: str, region: str, function_name: str) -> tuple[str, str]:
    """:func:`log_location` of a deployed function, by name."""
    return log_location(get_backend(account_id, region).get_function(function_name))


class InvocationContext:
    """The parts of Lambda's context object that Powertools and handlers read."""

    def __init__(self, fn: LambdaFunction) -> None:
        self.function_name = fn.function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = fn.function_arn
        self.memory_limit_in_mb = int(fn.memory_size)
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name, stream_prefix = log_location(fn)
        self.log_stream_name = time.strftime("%Y/%m/%d/") + stream_prefix + uuid.uuid4().hex
        self._deadline = time.monotonic() + int(fn.timeout)

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _extract(code: bytes) -> Path:
    digest = hashlib.sha256(code).hexdigest()
    if digest not in _EXTRACTED:
        target = _WORKDIR / digest[:16]
        zipfile.ZipFile(io.BytesIO(code)).extractall(target)
        _EXTRACTED[digest] = target
    return _EXTRACTED[digest]


def snapshot(mapping: MutableMapping[str, str]) -> dict[str, str]:
    """A copy of an environment another thread may be writing to: a copy taken while it
    changed ("dictionary changed size during iteration", or a listed key gone) is taken
    again."""
    for _ in range(1000):
        try:
            return dict(mapping)
        except (RuntimeError, KeyError):
            continue
    return dict(mapping)


class FunctionEnvironment(MutableMapping[str, str]):
    """``os.environ`` as each thread should see it: while a thread runs a function, that
    function's variables over a snapshot of the process's (what the function sets or deletes
    stays its own); otherwise the process environment itself.

    Replacing the process environment for each call instead (update, then clear and restore)
    lets another thread read it half-restored: a key it had just listed is gone
    (``KeyError``), or the credentials it needs are missing for a moment.
    """

    def __init__(self, process: MutableMapping[str, str]) -> None:
        self.process = process
        self._local = threading.local()

    def _stack(self) -> list[dict[str, str]]:
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        return self._local.stack

    def _current(self) -> MutableMapping[str, str]:
        stack = self._stack()
        return stack[-1] if stack else self.process

    @contextlib.contextmanager
    def function(self, variables: dict[str, str]) -> Iterator[None]:
        """This thread sees ``variables`` over the environment it sees now, until the end."""
        stack = self._stack()
        stack.append(snapshot(self._current()) | variables)
        try:
            yield
        finally:
            stack.pop()

    def __getitem__(self, key: str) -> str:
        return self._current()[key]

    def __setitem__(self, key: str, value: str) -> None:
        self._current()[key] = value

    def __delitem__(self, key: str) -> None:
        del self._current()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(list(snapshot(self._current())))

    def __len__(self) -> int:
        return len(self._current())

    def copy(self) -> dict[str, str]:
        return snapshot(self._current())

    def __or__(self, other: Any) -> dict[str, str]:
        return snapshot(self._current()) | dict(other)

    def __ror__(self, other: Any) -> dict[str, str]:
        return dict(other) | snapshot(self._current())

    def __ior__(self, other: Any) -> FunctionEnvironment:
        self.update(other)
        return self

    def __repr__(self) -> str:
        return f"FunctionEnvironment({snapshot(self._current())!r})"


def environment() -> FunctionEnvironment:
    """The view installed as ``os.environ`` while an emulator is open."""
    if not isinstance(os.environ, FunctionEnvironment):
        raise RuntimeError("functions run in-process only while an emulator is open")
    return os.environ


@contextlib.contextmanager
def _function_environment(fn: LambdaFunction, paths: list[str]) -> Iterator[None]:
    variables = {k: str(v) for k, v in (fn.environment_vars or {}).items()}
    variables["AWS_LAMBDA_FUNCTION_NAME"] = fn.function_name
    saved_path = list(sys.path)
    sys.path[:0] = paths
    try:
        with environment().function(variables):
            yield
    finally:
        sys.path[:] = saved_path


def _shared_log_handlers() -> list[logging.StreamHandler]:
    """Configure the runtime package's Logger/Metrics for this function; their log handlers."""
    observability = sys.modules.get("traingrid.observability")
    if observability is None:
        return []
    service = os.environ.get("POWERTOOLS_SERVICE_NAME", "service_undefined")
    observability.metrics.namespace = os.environ.get("POWERTOOLS_METRICS_NAMESPACE")
    observability.metrics.service = service
    observability.logger.append_keys(service=service)
    observability.logger.setLevel(os.environ.get("POWERTOOLS_LOG_LEVEL", "INFO"))
    handler = observability.logger.registered_handler
    return [handler] if isinstance(handler, logging.StreamHandler) else []


_OUTPUT = threading.local()


class FunctionOutput:
    """``sys.stdout`` for every thread: what a thread running a function prints goes to that
    function's log; what other threads print goes to the stream it wraps. Swapping
    ``sys.stdout`` per call instead (``redirect_stdout``) would send other threads' output
    into the function's log, and put back, when the call ends, a stream someone else has
    replaced (and maybe closed) meanwhile."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def _target(self) -> Any:
        buffer = getattr(_OUTPUT, "buffer", None)
        return self.stream if buffer is None else buffer

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def _route_stdout() -> None:
    """``sys.stdout`` becomes a :class:`FunctionOutput` over the stream there now (again, if
    someone has replaced it since), through the patches: the session's close puts the stream
    back, unless it has been replaced again meanwhile (then that is its owner's to undo)."""
    if not isinstance(sys.stdout, FunctionOutput):
        PATCHES.swap(sys, "stdout", FunctionOutput(sys.stdout))


@contextlib.contextmanager
def _captured_logs(buffer: io.StringIO) -> Iterator[None]:
    """What a function writes (stdout, Powertools' log handler) goes to ``buffer``, as Lambda
    sends it to CloudWatch Logs."""
    handlers = _shared_log_handlers()
    # Assigned, not setStream(): that flushes the old stream, which may be closed by now.
    saved = [h.stream for h in handlers]
    for handler in handlers:
        handler.stream = buffer
    _route_stdout()
    previous, _OUTPUT.buffer = getattr(_OUTPUT, "buffer", None), buffer
    try:
        yield
    finally:
        _OUTPUT.buffer = previous
        for handler, stream in zip(handlers, saved, strict=True):
            handler.stream = stream


def _write_logs(fn: LambdaFunction, context: InvocationContext, text: str) -> None:
    # One event per line, as Lambda sends it: "\n" only (str.splitlines would also cut a
    # JSON log record at a U+2028 or U+0085 inside a string).
    lines = [line.removesuffix("\r") for line in text.split("\n") if line.strip()]
    if not lines:
        return
    logs = logs_backends[fn.account_id][fn.region]
    if context.log_group_name not in logs.groups:
        logs.create_log_group(context.log_group_name, {})
    logs.create_log_stream(context.log_group_name, context.log_stream_name)
    now_ms = int(time.time() * 1000)
    logs.put_log_events(context.log_group_name, context.log_stream_name,
                        [{"timestamp": now_ms, "message": line} for line in lines])


def reset() -> None:
    """A new emulator session: every function starts cold, no call recorded yet."""
    lambda_environments.close()
    _MODULES.clear()
    CALLS.clear()
    _LOOKUPS["function"] = None


# Whose cached lookups the shared runtime package holds now.
_LOOKUPS: dict[str, str | None] = {"function": None}
SHARED_CACHES = ("traingrid.aws.clients",)  # clients and parsed models: the process's


def _own_lookups(fn: LambdaFunction) -> None:
    """Each function's cached lookups (``functools.cache``: a secret read once) are its own,
    as in its own process: they are forgotten when another function runs, so that function
    makes (and is recorded making) the calls behind them itself."""
    if _LOOKUPS["function"] == fn.function_name:
        return
    _LOOKUPS["function"] = fn.function_name
    for name, module in list(sys.modules.items()):
        if not name.startswith("traingrid.") or name in SHARED_CACHES:
            continue
        for value in list(vars(module).values()):
            if getattr(value, "__module__", None) == name and callable(
                    getattr(value, "cache_clear", None)):
                value.cache_clear()


def record_call(model: Any, **_: Any) -> None:
    """botocore ``before-call`` hook: note ``service:Operation`` for the invoking function."""
    function_name = getattr(_INVOKING, "function_name", None)
    if function_name is not None:
        prefix = model.service_model.signing_name
        prefix = IAM_PREFIXES.get(prefix, prefix)
        CALLS.setdefault(function_name, set()).add(f"{prefix}:{model.name}")


class HandlerNotFound(Exception):
    """The configured Handler names no function of its module."""


class HandlerModuleNotFound(ImportError):
    """The configured Handler's module is not in the function's code."""


# Lambda's own names for failures of the runtime rather than of the function's code.
RUNTIME_ERRORS = {HandlerNotFound: "Runtime.HandlerNotFound",
                  HandlerModuleNotFound: "Runtime.ImportModuleError"}


def _handler(fn: LambdaFunction) -> Any:
    """The Handler's function; its module is imported once per code version (a cold start)."""
    if not fn.handler:
        raise HandlerNotFound(f"{fn.function_name} has no Handler configured")
    module_name, _, attribute = fn.handler.rpartition(".")
    key = (fn.function_arn, fn.code_sha_256)
    if key not in _MODULES:
        path = _extract(fn.code_bytes).joinpath(*module_name.split(".")).with_suffix(".py")
        if not path.is_file():
            raise HandlerModuleNotFound(f"No module named '{module_name}' in the code of "
                                        f"{fn.function_name}")
        spec = importlib.util.spec_from_file_location(
            f"traingrid_lambda_{fn.function_name}_{module_name}".replace("-", "_"), path
        )
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        _MODULES[key] = module
    handler = getattr(_MODULES[key], attribute, None)
    if not callable(handler):
        raise HandlerNotFound(f"Handler '{attribute}' missing on module '{module_name}'")
    return handler


def _error_payload(error: Exception) -> bytes:
    return json.dumps({
        "errorType": RUNTIME_ERRORS.get(type(error), type(error).__name__),
        "errorMessage": str(error),
        "stackTrace": traceback.format_tb(error.__traceback__),
    }).encode()


def run(backend: LambdaSimpleBackend, fn: LambdaFunction, event: Any) -> tuple[bytes, bool]:
    """Invoke ``fn`` with ``event`` in an execution environment of its own
    (:mod:`~traingrid_local.emulator.lambda_environments`); returns (payload, failed)."""
    environment = lambda_environments.acquire(fn.function_name)
    try:
        with _LOCK:  # Map branches invoke concurrently; extraction and environment are shared
            layer_dirs = [str(_extract(_layer_code(backend, layer["Arn"])) / "python")
                          for layer in fn.layers]
            paths = [str(_extract(fn.code_bytes)), *layer_dirs]
            with lambda_environments.running(environment):
                return _run_locked(fn, paths, event)
    finally:
        lambda_environments.release(environment)


def _layer_code(backend: LambdaSimpleBackend, arn: str) -> bytes:
    layer = backend.layers_versions_by_arn(arn)
    if layer is None:
        raise LookupError(f"the function's layer {arn} does not exist")
    return layer.code_bytes


def _run_locked(fn: LambdaFunction, paths: list[str], event: Any) -> tuple[bytes, bool]:
    with CLOCK.paused(), _function_environment(fn, paths):
        context, logs = InvocationContext(fn), io.StringIO()
        _own_lookups(fn)
        _INVOKING.function_name = fn.function_name
        try:
            # Loaded before capturing: the cold start creates the loggers to capture.
            handler = _handler(fn)
            with _captured_logs(logs):
                payload, failed = json.dumps(handler(event, context)).encode(), False
        except Exception as error:  # noqa: BLE001 - reported the way Lambda reports it
            payload, failed = _error_payload(error), True
            print(payload.decode(), file=logs)
        finally:
            _INVOKING.function_name = None
        _write_logs(fn, context, logs.getvalue())
    return payload, failed


def _invoke(self: LambdaSimpleBackend, function_name: str, qualifier: str | None, body: Any,
            headers: Any, response_headers: dict[str, str]) -> bytes:
    fn = self.get_function(function_name, qualifier)
    payload, failed = run(self, fn, json.loads(body) if body else {})
    if failed:
        response_headers["x-amz-function-error"] = "Unhandled"
    return payload


def apply() -> None:
    # A view over the same process environment: nothing is cleared or copied.
    PATCHES.replace(os, "environ", FunctionEnvironment(os.environ))
    _route_stdout()
    PATCHES.replace(LambdaSimpleBackend, "invoke", _invoke)
    lambda_environments.apply()
