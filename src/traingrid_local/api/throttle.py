"""API Gateway's stage throttling, as ``traingrid serve`` applies it: a token bucket.

API Gateway throttles each stage's methods with "the token bucket algorithm, where a token
counts for a request": the bucket holds ``ThrottlingBurstLimit`` tokens, refilled at
``ThrottlingRateLimit`` a second, and a request that finds it empty is answered ``429 Too Many
Requests`` without reaching the integration (API Gateway Developer Guide, "Throttle requests
to your REST APIs"). The limits are the template's own (the API's ``MethodSettings``), so a
burst of requests locally meets the answer it would meet on AWS; the client
(:class:`~traingrid_local.api.client.ApiClient`) retries it.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from traingrid_local.templates import TEMPLATE, load_template

API_RESOURCE = "Api"
TOO_MANY_REQUESTS = 429
# API Gateway's own answer to a throttled request.
THROTTLED_BODY = {"message": "Too Many Requests"}


class TokenBucket:
    """``burst`` tokens, refilled at ``rate`` a second (real time: API Gateway's clock)."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate, self.burst = rate, burst
        self._tokens = float(burst)
        self._at = time.monotonic()
        self._lock = threading.Lock()
        self.refused = 0

    def admit(self) -> bool:
        """Take a token if there is one."""
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
            self._at = now
            if self._tokens >= 1:
                self._tokens -= 1
                return True
            self.refused += 1
            return False


def stage_limits(template_path: Path = TEMPLATE) -> tuple[float, int]:
    """(rate per second, burst) of the API's methods, from the template's MethodSettings."""
    api = load_template(template_path)["Resources"][API_RESOURCE]["Properties"]
    (settings,) = [s for s in api["MethodSettings"]
                   if s.get("ResourcePath") == "/*" and s.get("HttpMethod") == "*"]
    return float(settings["ThrottlingRateLimit"]), int(settings["ThrottlingBurstLimit"])


def stage_bucket(template_path: Path = TEMPLATE) -> TokenBucket:
    rate, burst = stage_limits(template_path)
    return TokenBucket(rate, burst)
