"""Adaptation: throttling, as an account sees it.

Account rate limits, always on: an operation with a limit (Batch ``SubmitJob``: 50 calls per
second per account and region) accepts at most that many calls in any one-second window of
simulated time, and answers the rest with the service's throttling error. Every accepted call
is recorded (:data:`RATES`), so tests can measure the rate the account actually saw.

Fault ``throttling``: the first calls of every FSx and Batch operation fail with the service's
throttling error, as a busy account sees them.

Retries must absorb both: boto3's adaptive retries in the functions, Retry with backoff and
jitter in the state machines. The run still succeeds.
"""

from __future__ import annotations

import bisect
import functools
import threading
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from moto.batch.responses import BatchResponse
from moto.core.exceptions import JsonRESTError
from moto.fsx.responses import FSxResponse

from traingrid_local.emulator import fault_injection
from traingrid_local.emulator.clock import CLOCK
from traingrid_local.emulator.patching import PATCHES

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


# Calls per second, per account and region (AWS Batch's service quotas).
ACCOUNT_RATE_LIMITS = {"batch:submitjob": 50}
WINDOW_S = 1.0


class RateLimits:
    """Sliding one-second windows of simulated time: a call is accepted while fewer than the
    limit were accepted in the second before it (calls at the same instant count together)."""

    def __init__(self, limits: dict[str, int]) -> None:
        self.limits = dict(limits)
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._accepted: dict[tuple[str, str, str], list[float]] = defaultdict(list)
            self._refused: dict[tuple[str, str, str], int] = defaultdict(int)

    def admit(self, operation: str, account: str, region: str) -> bool:
        """Record the call and say whether it is within the limit."""
        limit = self.limits.get(operation)
        if limit is None:
            return True
        key = (operation, account, region)
        with self._lock:
            now = CLOCK.timestamp()
            accepted = self._accepted[key]
            # Simulated time never goes back; calls are appended in order.
            recent = len(accepted) - bisect.bisect_right(accepted, now - WINDOW_S)
            if recent >= limit:
                self._refused[key] += 1
                return False
            accepted.append(now)
            return True

    def accepted(self, operation: str, account: str, region: str) -> list[float]:
        """Simulated epoch seconds of every accepted call, in order."""
        with self._lock:
            return list(self._accepted.get((operation, account, region), []))

    def refused(self, operation: str, account: str, region: str) -> int:
        with self._lock:
            return self._refused.get((operation, account, region), 0)


def peak_per_window(moments: list[float], window_s: float = WINDOW_S) -> int:
    """The most calls in any ``window_s``-long window (open at its start) of sorted times."""
    peak, first = 0, 0
    for last, moment in enumerate(moments):
        while moments[first] <= moment - window_s:
            first += 1
        peak = max(peak, last - first + 1)
    return peak


RATES = RateLimits(ACCOUNT_RATE_LIMITS)


class Throttled(JsonRESTError):
    def __init__(self, code: str, status: int, message: str) -> None:
        super().__init__(code, message)
        self.code = status


def _throttled(method: Callable[..., Any], operation: str, code: str,
               status: int) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(self: Any) -> Any:
        if fault_injection.CURRENT.should_throttle(operation):
            raise Throttled(code, status, "Rate exceeded (simulated fault throttling)")
        if not RATES.admit(operation, self.current_account, self.region):
            raise Throttled(code, status, f"Rate exceeded: {operation} is limited to "
                            f"{RATES.limits[operation]} calls per second")
        return method(self)

    return wrapper


def apply() -> None:
    for response_class, (service, code, status, methods) in OPERATIONS.items():
        for name in methods:
            PATCHES.wrap(response_class, name, functools.partial(
                _throttled, operation=f"{service}:{name}", code=code, status=status))
