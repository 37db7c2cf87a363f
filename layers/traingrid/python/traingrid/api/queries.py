"""The query parameters of ``GET /runs`` and ``GET /costs``, as models.

Its own module so that pydantic is loaded by the first request that reads a query, not at the
API function's cold start (reading one run, or its logs, never needs it).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from traingrid import clock

# RFC 3339's date-time (OpenAPI's ``format: date-time``), as schema/openapi.yaml states it.
DATE_TIME = (r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
             r"([Zz]|[+-][0-9]{2}:[0-9]{2})$")


class RunsQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    limit: int = Field(default=20, ge=1, le=100)
    next_token: str | None = Field(default=None, max_length=8192)
    pipeline: Literal["training", "campaign"] | None = None
    status: Literal["RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"] | None = None


class CostsQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    since: datetime | None = Field(default=None)
    until: datetime | None = Field(default=None)
    by: Literal["dataset", "instance_type", "status", "campaign", "pipeline"] = "dataset"

    @field_validator("since", "until", mode="before")
    @classmethod
    def rfc3339(cls, value: object) -> object:
        """Only an RFC 3339 date-time with its offset (no bare date, no epoch seconds)."""
        import re

        if value is None or isinstance(value, datetime):
            return value
        if not isinstance(value, str) or not re.fullmatch(DATE_TIME, value):
            raise ValueError("an RFC 3339 date-time, e.g. 2026-11-01T00:00:00Z")
        try:
            return clock.parse_iso(value.upper())
        except ValueError:
            raise ValueError("an RFC 3339 date-time, e.g. 2026-11-01T00:00:00Z") from None
