"""Environment configuration as typed, frozen settings, read once per cold start by each handler
module and passed to the domain code that needs it.

Each field names its environment variable (``env("DATA_BUCKET")``) and, for numbers, its
bounds. Reading is strict and says every problem at once. These are plain dataclasses, not
pydantic models: every handler reads settings at its start, and pydantic would add ~80 ms to
the cold start of those that validate nothing else.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Mapping
from typing import Any, Self, TypeVar, dataclass_transform

TRUE, FALSE = ("true", "1", "yes"), ("false", "0", "no", "")
_T = TypeVar("_T")


class SettingsInvalid(ValueError):
    """The function's environment is not what its template sets."""


def env(name: str, default: Any = dataclasses.MISSING, ge: int | None = None,
        le: int | None = None) -> Any:
    """A field read from the environment variable ``name``."""
    return dataclasses.field(default=default, metadata={"env": name, "ge": ge, "le": le})


def _read(raw: str, kind: Any, name: str, ge: int | None, le: int | None) -> Any:
    if kind is int:
        try:
            value = int(raw)
        except ValueError:
            raise ValueError(f"{name} must be an integer, not {raw!r}") from None
        if (ge is not None and value < ge) or (le is not None and value > le):
            raise ValueError(f"{name} must be from {ge} to {le}, not {value}")
        return value
    if kind is bool:
        if raw.strip().lower() not in TRUE + FALSE:
            raise ValueError(f"{name} must be true or false, not {raw!r}")
        return raw.strip().lower() in TRUE
    return raw


class EnvSettings:
    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Self:
        """Read every field from ``environ`` (default: the process's); raise SettingsInvalid
        listing every missing or malformed variable."""
        environ = os.environ if environ is None else environ
        hints = typing.get_type_hints(cls)
        values, problems = {}, []
        for field in dataclasses.fields(cls):  # type: ignore[arg-type]
            name = field.metadata["env"]
            kind, optional = hints[field.name], False
            if isinstance(kind, types.UnionType):  # ``str | None``
                kind, optional = next(k for k in typing.get_args(kind) if k is not type(None)), True
            raw = environ.get(name)
            if raw is None or (raw == "" and optional):
                if field.default is dataclasses.MISSING:
                    problems.append(f"{name} is not set")
                continue
            try:
                values[field.name] = _read(raw, kind, name, field.metadata["ge"],
                                           field.metadata["le"])
            except ValueError as error:
                problems.append(str(error))
        if problems:
            raise SettingsInvalid(f"{cls.__name__}: " + "; ".join(problems))
        return cls(**values)


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(env,))
def _settings(cls: type[_T]) -> type[_T]:
    """A frozen, keyword-only dataclass (declared so, for type checkers, by the transform)."""
    return dataclasses.dataclass(frozen=True, kw_only=True)(cls)


@_settings
class Settings(EnvSettings):
    data_bucket: str = env("DATA_BUCKET")
    retention_days: int = env("RETENTION_DAYS", default=7, ge=1, le=90)
    # The compute environment's InstanceTypes, comma-separated; unset allows the whole catalog.
    training_instance_types: str | None = env("TRAINING_INSTANCE_TYPES", default=None)
    # The training containers' /dev/shm (NodeSharedMemoryMiB); unset: not checked.
    node_shared_memory_mib: int | None = env("NODE_SHARED_MEMORY_MIB", default=None, ge=64)

    # AllowRunCommands: whether a run may name its own command (on the API's command route).
    allow_run_commands: bool = env("ALLOW_RUN_COMMANDS", default=False)
    # The Batch backend the stack trains on: ecs (default) or eks (EksClusterName is set).
    training_backend: str = env("TRAINING_BACKEND", default="ecs")
    # FsxStorageQuotaGiB: the account's FSx for Lustre storage quota a run's file system is
    # sized within (AWS's default unless the stack names the applied value).
    fsx_storage_quota_gib: int = env("FSX_STORAGE_QUOTA_GIB", default=100_800, ge=1200)
    # Whether the ECS compute environment launches an AMI of the stack's own (ImageIdOverride)
    # instead of Batch's ECS_AL2023_NVIDIA, which does not support p3 and g3 types.
    training_image_id_overridden: bool = env("TRAINING_IMAGE_ID_OVERRIDDEN", default=False)
    # ListObjectsV2 pages one call of the Plan step (or one API request) may list while it
    # sizes a dataset; its time is bounded by the function's own (``training.plan_step``).
    plan_list_pages: int = env("PLAN_LIST_PAGES", default=20_000, ge=1)

    @property
    def allowed_instance_types(self) -> tuple[str, ...] | None:
        if self.training_instance_types is None:
            return None
        return tuple(t.strip() for t in self.training_instance_types.split(",") if t.strip())

    @property
    def launches_p3_and_g3(self) -> bool:
        """Whether the stack's nodes can be p3 or g3 types: on ECS only with an AMI of its own
        (on EKS, Batch's EKS_AL2023_NVIDIA AMI has no such limit)."""
        return self.training_image_id_overridden or self.training_backend == "eks"


@_settings
class TriggerSettings(Settings):
    training_run_state_machine_arn: str = env("TRAINING_RUN_STATE_MACHINE_ARN")


@_settings
class DatabaseSettings(EnvSettings):
    """Where the campaign database is: its secret, and what the secret may not say."""

    database_secret_arn: str = env("DATABASE_SECRET_ARN")
    database_host: str | None = env("DATABASE_HOST", default=None)
    database_name: str | None = env("DATABASE_NAME", default=None)


@_settings
class MigrationSettings(DatabaseSettings):
    """The migration signs in as the database's owner (``DATABASE_SECRET_ARN``) and keeps the
    functions' role, whose secret is ``DATABASE_APP_SECRET_ARN``, in step with the schema."""

    database_app_secret_arn: str = env("DATABASE_APP_SECRET_ARN")


@_settings
class PlanningSettings(DatabaseSettings):
    # Jobs train on managed spot: regions are ranked by their spot price.
    managed_spot: bool = env("MANAGED_SPOT", default=False)


@_settings
class RegistrationSettings(DatabaseSettings):
    campaign_fanout_state_machine_arn: str = env("CAMPAIGN_FANOUT_STATE_MACHINE_ARN")
    # Markers of one campaign within this window start one fan-out.
    settle_minutes: int = env("SETTLE_MINUTES", default=15, ge=1, le=24 * 60)


@_settings
class LaunchSettings(EnvSettings):
    sagemaker_role_arn: str = env("SAGEMAKER_ROLE_ARN")
    training_image_repository: str = env("TRAINING_IMAGE_REPOSITORY")
    managed_spot: bool = env("MANAGED_SPOT", default=False)


@_settings
class CompletionSettings(EnvSettings):
    """Where waits for training jobs park their task tokens, and how long a wait may last
    without an event before the job is checked anyway."""

    job_tokens_table: str = env("JOB_TOKENS_TABLE")
    fallback_s: int = env("JOB_EVENT_FALLBACK_SECONDS", default=24 * 3600, ge=30, le=24 * 3600)


@_settings
class RegionWaitSettings(EnvSettings):
    """Where the fan-out's waits for regions' SageMaker jobs park their task tokens."""

    region_job_tokens_table: str = env("REGION_JOB_TOKENS_TABLE")


@_settings
class ApiSettings(Settings):
    """The API function: both pipelines, the idempotency table, where training logs are and
    the campaign database (used only by the campaign routes)."""

    training_run_state_machine_arn: str = env("TRAINING_RUN_STATE_MACHINE_ARN")
    campaign_fanout_state_machine_arn: str = env("CAMPAIGN_FANOUT_STATE_MACHINE_ARN")
    idempotency_table: str = env("IDEMPOTENCY_TABLE")
    training_job_queue: str | None = env("TRAINING_JOB_QUEUE", default=None)
    training_job_log_group: str | None = env("TRAINING_JOB_LOG_GROUP", default=None)
    database_secret_arn: str = env("DATABASE_SECRET_ARN")
    database_host: str | None = env("DATABASE_HOST", default=None)
    database_name: str | None = env("DATABASE_NAME", default=None)

    @property
    def database(self) -> DatabaseSettings:
        return DatabaseSettings(database_secret_arn=self.database_secret_arn,
                                database_host=self.database_host,
                                database_name=self.database_name)


@_settings
class RetrainSettings(DatabaseSettings):
    campaign_fanout_state_machine_arn: str = env("CAMPAIGN_FANOUT_STATE_MACHINE_ARN")
    # Fires of the schedule within one window start at most one fan-out per campaign.
    retrain_window_minutes: int = env("RETRAIN_WINDOW_MINUTES", default=60, ge=1, le=24 * 60)


@_settings
class JanitorSettings(DatabaseSettings):
    """The janitor: this stack's state machines (only their executions' resources are its to
    release), where their resources are, and how long a file system it could not archive is
    kept."""

    data_bucket: str = env("DATA_BUCKET")
    retention_days: int = env("RETENTION_DAYS", default=7, ge=1, le=90)
    training_run_state_machine_arn: str = env("TRAINING_RUN_STATE_MACHINE_ARN")
    campaign_fanout_state_machine_arn: str = env("CAMPAIGN_FANOUT_STATE_MACHINE_ARN")
    training_job_queue: str = env("TRAINING_JOB_QUEUE")
    # The table of the lease that keeps passes from overlapping; unset: no lease taken.
    janitor_lease_table: str | None = env("JANITOR_LEASE_TABLE", default=None)
    # Where training waits park their tokens (each pass wakes those whose job has ended), and
    # the waits' own timeout (the state a woken wait carries on with); unset: not reconciled.
    job_tokens_table: str | None = env("JOB_TOKENS_TABLE", default=None)
    job_event_fallback_s: int = env("JOB_EVENT_FALLBACK_SECONDS", default=24 * 3600, ge=30,
                                    le=24 * 3600)

    @property
    def state_machines(self) -> tuple[str, str]:
        return self.training_run_state_machine_arn, self.campaign_fanout_state_machine_arn
