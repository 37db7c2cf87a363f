"""Environment configuration as typed models, read once per cold start by each handler module
and passed to the domain code that needs it."""

from __future__ import annotations

import os
from typing import Self

from pydantic import BaseModel, ConfigDict, Field


class Settings(BaseModel):
    model_config = ConfigDict(frozen=True, populate_by_name=True)

    data_bucket: str = Field(alias="DATA_BUCKET")
    retention_days: int = Field(default=7, ge=1, le=90, alias="RETENTION_DAYS")

    @classmethod
    def from_env(cls) -> Self:
        return cls.model_validate(dict(os.environ))


class TriggerSettings(Settings):
    training_run_state_machine_arn: str = Field(alias="TRAINING_RUN_STATE_MACHINE_ARN")
