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
def _captured_logs() -> Iterator[io.StringIO]:
    """What a function writes (stdout, Powertools' log handler) goes to a buffer, as Lambda
    sends it to CloudWatch Logs."""
    buffer = io.StringIO()
    handlers = _shared_log_handlers()
    # Assigned, not setStream(): that flushes the old stream, which may be closed by now.
    saved = [h.stream for h in handlers]
    for handler in handlers:
        handler.stream = buffer
    try:
        with contextlib.redirect_stdout(buffer):
            yield buffer
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


def _handler(backend: LambdaSimpleBackend, fn: LambdaFunction) -> Any:
    code_dir = _extract(fn.code_bytes)
    module_name, _, attribute = fn.handler.rpartition(".")
    key = (fn.function_arn, fn.code_sha_256)
    if key not in _MODULES:
        path = code_dir.joinpath(*module_name.split(".")).with_suffix(".py")
        spec = importlib.util.spec_from_file_location(
            f"traingrid_lambda_{fn.function_name}_{module_name}".replace("-", "_"), path
        )
        if spec is None or spec.loader is None:
            raise ImportError(f"handler module {module_name} not found in the code of "
                              f"{fn.function_name}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _MODULES[key] = module
    return getattr(_MODULES[key], attribute)


def run(backend: LambdaSimpleBackend, fn: LambdaFunction, event: Any) -> tuple[bytes, bool]:
    """Invoke ``fn`` with ``event``; returns (payload, failed)."""
    layer_dirs = [str(_extract(backend.layers_versions_by_arn(layer["Arn"]).code_bytes)
                      / "python") for layer in fn.layers]
    paths = [str(_extract(fn.code_bytes)), *layer_dirs]
    with _LOCK, CLOCK.paused(), _function_environment(fn, paths):
        context = InvocationContext(fn)
        handler = _handler(backend, fn)  # the cold start creates the loggers to capture
        _INVOKING.function_name = fn.function_name
        with _captured_logs() as logs:
            try:
                result = handler(event, context)
                payload, failed = json.dumps(result).encode(), False
            except Exception as error:  # noqa: BLE001 - reported the way Lambda reports it
                payload = json.dumps({
                    "errorType": type(error).__name__,
                    "errorMessage": str(error),
                    "stackTrace": traceback.format_tb(error.__traceback__),
                }).encode()
                failed = True
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
