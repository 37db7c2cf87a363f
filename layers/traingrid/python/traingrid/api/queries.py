"""The query parameters of ``GET /runs``, as a model.

Its own module so that pydantic is loaded by the first request that reads a query, not at the
API function's cold start (reading one run, or its logs, never needs it).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class RunsQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    limit: int = Field(default=20, ge=1, le=100)
    next_token: str | None = Field(default=None, max_length=8192)
    pipeline: Literal["training", "campaign"] | None = None
    status: Literal["RUNNING", "SUCCEEDED", "FAILED", "TIMED_OUT", "ABORTED"] | None = None
