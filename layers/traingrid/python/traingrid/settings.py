"""Environment configuration as typed models, read once per cold start by each handler module
and passed to the domain code that needs it."""

from __future__ import annotations

import os
from typing import Self

from pydantic import BaseModel, ConfigDict, Field

# Each handler reads one of these models: the others are not built (defer_build) at its start.
CONFIG = ConfigDict(frozen=True, populate_by_name=True, defer_build=True)


class Settings(BaseModel):
    model_config = CONFIG

    data_bucket: str = Field(alias="DATA_BUCKET")
    retention_days: int = Field(default=7, ge=1, le=90, alias="RETENTION_DAYS")

    @classmethod
    def from_env(cls) -> Self:
        return cls.model_validate(dict(os.environ))


class TriggerSettings(Settings):
    training_run_state_machine_arn: str = Field(alias="TRAINING_RUN_STATE_MACHINE_ARN")


class DatabaseSettings(BaseModel):
    """Where the campaign database is: its secret, and what the secret may not say."""

    model_config = CONFIG

    database_secret_arn: str = Field(alias="DATABASE_SECRET_ARN")
    database_host: str | None = Field(default=None, alias="DATABASE_HOST")
    database_name: str | None = Field(default=None, alias="DATABASE_NAME")

    @classmethod
    def from_env(cls) -> Self:
        return cls.model_validate(dict(os.environ))


class RegistrationSettings(DatabaseSettings):
    campaign_fanout_state_machine_arn: str = Field(alias="CAMPAIGN_FANOUT_STATE_MACHINE_ARN")
    # Markers of one campaign within this window start one fan-out.
    settle_minutes: int = Field(default=15, ge=1, le=24 * 60, alias="SETTLE_MINUTES")


class LaunchSettings(BaseModel):
    model_config = CONFIG

    sagemaker_role_arn: str = Field(alias="SAGEMAKER_ROLE_ARN")
    training_image_repository: str = Field(alias="TRAINING_IMAGE_REPOSITORY")
    managed_spot: bool = Field(default=False, alias="MANAGED_SPOT")

    @classmethod
    def from_env(cls) -> Self:
        return cls.model_validate(dict(os.environ))


class CompletionSettings(BaseModel):
    """Where waits for training jobs park their task tokens, and how long a wait may last
    without an event before the job is checked anyway."""

    model_config = CONFIG

    job_tokens_table: str = Field(alias="JOB_TOKENS_TABLE")
    fallback_s: int = Field(default=2700, ge=30, le=24 * 3600,
                            alias="JOB_EVENT_FALLBACK_SECONDS")

    @classmethod
    def from_env(cls) -> Self:
        return cls.model_validate(dict(os.environ))


class ApiSettings(Settings):
    """The API function: both pipelines, the idempotency table, where training logs are and
    the campaign database (used only by the campaign routes)."""

    training_run_state_machine_arn: str = Field(alias="TRAINING_RUN_STATE_MACHINE_ARN")
    campaign_fanout_state_machine_arn: str = Field(alias="CAMPAIGN_FANOUT_STATE_MACHINE_ARN")
    idempotency_table: str = Field(alias="IDEMPOTENCY_TABLE")
    training_job_queue: str | None = Field(default=None, alias="TRAINING_JOB_QUEUE")
    training_job_log_group: str | None = Field(default=None, alias="TRAINING_JOB_LOG_GROUP")
    database_secret_arn: str = Field(alias="DATABASE_SECRET_ARN")
    database_host: str | None = Field(default=None, alias="DATABASE_HOST")
    database_name: str | None = Field(default=None, alias="DATABASE_NAME")

    @property
    def database(self) -> DatabaseSettings:
        return DatabaseSettings(database_secret_arn=self.database_secret_arn,
                                database_host=self.database_host,
                                database_name=self.database_name)


class RetrainSettings(DatabaseSettings):
    campaign_fanout_state_machine_arn: str = Field(alias="CAMPAIGN_FANOUT_STATE_MACHINE_ARN")
    # Fires of the schedule within one window start at most one fan-out per campaign.
    retrain_window_minutes: int = Field(default=60, ge=1, le=24 * 60,
                                        alias="RETRAIN_WINDOW_MINUTES")


class JanitorSettings(DatabaseSettings):
    """The janitor: this stack's state machines (only their executions' resources are its to
    release), where their resources are, and how long a file system it could not archive is
    kept."""

    data_bucket: str = Field(alias="DATA_BUCKET")
    retention_days: int = Field(default=7, ge=1, le=90, alias="RETENTION_DAYS")
    training_run_state_machine_arn: str = Field(alias="TRAINING_RUN_STATE_MACHINE_ARN")
    campaign_fanout_state_machine_arn: str = Field(alias="CAMPAIGN_FANOUT_STATE_MACHINE_ARN")
    training_job_queue: str = Field(alias="TRAINING_JOB_QUEUE")

    @property
    def state_machines(self) -> tuple[str, str]:
        return self.training_run_state_machine_arn, self.campaign_fanout_state_machine_arn
