"""The query parameters of ``GET /runs`` and ``GET /costs``, as models.

Its own module so that pydantic is loaded by the first request that reads a query, not at the
API function's cold start (reading one run, or its logs, never needs it).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from traingrid import clock
from traingrid.costs.period import DEFAULT_PAGE_GROUPS, MAX_PAGE_GROUPS

RequestTime = Annotated[datetime | None, BeforeValidator(clock.request_time)]


class RunsQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    limit: int = Field(default=20, ge=1, le=100)
    next_token: str | None = Field(default=None, max_length=8192)
    pipeline: Literal["training", "campaign"] | None = None
    status: Literal["RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"] | None = None


class CostsQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    since: RequestTime = None
    until: RequestTime = None
    by: Literal["dataset", "instance_type", "status", "campaign", "pipeline"] = "dataset"
    limit: int = Field(default=DEFAULT_PAGE_GROUPS, ge=1, le=MAX_PAGE_GROUPS)
    next_token: str | None = Field(default=None, max_length=8192)
