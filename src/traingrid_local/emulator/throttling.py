"""Adaptation (fault ``throttling``): the first calls of every FSx and Batch operation fail
with the service's throttling error, as a busy account sees them.

Retries must absorb them: boto3's adaptive retries in the functions, Retry with backoff and
jitter in the state machines. The run still succeeds.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from moto.batch.responses import BatchResponse
from moto.core.exceptions import JsonRESTError
from moto.fsx.responses import FSxResponse

from traingrid_local.emulator import faults

OPERATIONS: dict[type, tuple[str, str, int, tuple[str, ...]]] = {
    # response class: (service, error code, HTTP status, methods)
    FSxResponse: ("fsx", "ThrottlingException", 400, (
        "create_file_system", "describe_file_systems", "delete_file_system",
        "create_data_repository_task", "describe_data_repository_tasks", "tag_resource",
    )),
    BatchResponse: ("batch", "TooManyRequestsException", 429, (
        "submitjob", "describejobs", "terminatejob",
    )),
}


class Throttled(JsonRESTError):
    def __init__(self, code: str, status: int) -> None:
        super().__init__(code, "Rate exceeded (simulated fault throttling)")
        self.code = status


def _throttled(method: Callable[..., Any], operation: str, code: str,
               status: int) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(self: Any) -> Any:
        if faults.CURRENT.should_throttle(operation):
            raise Throttled(code, status)
        return method(self)

    wrapper.__traingrid_throttled__ = True  # type: ignore[attr-defined]
    return wrapper


def apply() -> None:
    for response_class, (service, code, status, methods) in OPERATIONS.items():
        for name in methods:
            method = getattr(response_class, name)
            if not getattr(method, "__traingrid_throttled__", False):
                setattr(response_class, name,
                        _throttled(method, f"{service}:{name}", code, status))
