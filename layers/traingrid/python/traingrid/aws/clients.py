"""boto3 clients: created lazily, once per process, region-aware and replaceable in tests."""

from __future__ import annotations

from functools import cache
from typing import Any

import boto3
from botocore.config import Config

# Adaptive mode retries throttling with backoff and client-side rate limiting. A fresh Config
# per client: botocore rewrites the retries dict it is given.
RETRIES = {"mode": "adaptive", "max_attempts": 10}


@cache
def client(service: str, region: str | None = None) -> Any:
    return boto3.client(service, region_name=region, config=Config(retries=dict(RETRIES)))


def reset() -> None:
    """Forget cached clients (after the endpoint or credentials change, e.g. in tests)."""
    client.cache_clear()
