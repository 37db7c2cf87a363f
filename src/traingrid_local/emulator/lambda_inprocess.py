"""Adaptation (moto 5.2.5): Lambda functions run in-process from their configured Handler.

Without Docker, moto's Lambda echoes the payload back. Here an invocation loads the deployed
code (the function's zip, its layers on ``sys.path``), imports the ``Handler`` once per code
version (a cold start, with the function's environment applied, so module-level settings are
read as on AWS) and calls it. An exception comes back the way Lambda reports it: the
``X-Amz-Function-Error: Unhandled`` header and ``{"errorType", "errorMessage"}``, so Step
Functions' Retry/Catch match our own error names. What the function logs goes to its CloudWatch
Logs group, ``/aws/lambda/<name>``.

Environment variables are process-wide, so invocations are serialised. All functions share one
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
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from moto.awslambda.models import LambdaFunction
from moto.awslambda_simple.models import LambdaSimpleBackend
from moto.logs.models import logs_backends

from traingrid_local.emulator.clock import CLOCK

_LOCK = threading.RLock()
_INVOKING = threading.local()
CALLS: dict[str, set[str]] = {}
_EXTRACTED: dict[str, Path] = {}
_MODULES: dict[tuple[str, str], ModuleType] = {}
_WORKDIR = Path(tempfile.mkdtemp(prefix="traingrid-lambda-"))


class InvocationContext:
    """The parts of Lambda's context object that Powertools and handlers read."""

    def __init__(self, fn: LambdaFunction) -> None:
        self.function_name = fn.function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = fn.function_arn
        self.memory_limit_in_mb = int(fn.memory_size)
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{fn.function_name}"
        self.log_stream_name = time.strftime("%Y/%m/%d/[$LATEST]") + uuid.uuid4().hex
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


@contextlib.contextmanager
def _function_environment(fn: LambdaFunction, paths: list[str]) -> Iterator[None]:
    saved_env, saved_path = dict(os.environ), list(sys.path)
    os.environ.update({k: str(v) for k, v in (fn.environment_vars or {}).items()})
    os.environ["AWS_LAMBDA_FUNCTION_NAME"] = fn.function_name
    sys.path[:0] = paths
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
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


@contextlib.contextmanager
def _captured_logs(buffer: io.StringIO) -> Iterator[None]:
    """What a function writes (stdout, Powertools' log handler) goes to ``buffer``, as Lambda
    sends it to CloudWatch Logs."""
    handlers = _shared_log_handlers()
    # Assigned, not setStream(): that flushes the old stream, which may be closed by now.
    saved = [h.stream for h in handlers]
    for handler in handlers:
        handler.stream = buffer
    try:
        with contextlib.redirect_stdout(buffer):
            yield
    finally:
        for handler, stream in zip(handlers, saved, strict=True):
            handler.stream = stream


def _write_logs(fn: LambdaFunction, context: InvocationContext, text: str) -> None:
    lines = [line for line in text.splitlines() if line.strip()]
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
    _MODULES.clear()
    CALLS.clear()


def record_call(model: Any, **_: Any) -> None:
    """botocore ``before-call`` hook: note ``service:Operation`` for the invoking function."""
    function_name = getattr(_INVOKING, "function_name", None)
    if function_name is not None:
        prefix = model.service_model.signing_name
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
    """Invoke ``fn`` with ``event``; returns (payload, failed)."""
    with _LOCK:  # Map branches invoke concurrently; extraction and environment are shared
        layer_dirs = [str(_extract(backend.layers_versions_by_arn(layer["Arn"]).code_bytes)
                          / "python") for layer in fn.layers]
        paths = [str(_extract(fn.code_bytes)), *layer_dirs]
        return _run_locked(fn, paths, event)


def _run_locked(fn: LambdaFunction, paths: list[str], event: Any) -> tuple[bytes, bool]:
    with CLOCK.paused(), _function_environment(fn, paths):
        context, logs = InvocationContext(fn), io.StringIO()
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
    LambdaSimpleBackend.invoke = _invoke
