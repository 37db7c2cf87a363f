"""The campaign database: campaigns, regions with their prices, datasets, runs and region jobs,
and the outcome of every TrainingRun.

Money is ``Numeric`` (exact list prices); times are aware and stored in UTC. Python-side defaults
only: every row is written by this package, and the migration stays the plain shape of the table.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    CheckConstraint,
    Float,
    ForeignKey,
    Index,
    Integer,
    Numeric,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from traingrid import clock
from traingrid.db.base import Base, UtcDateTime
from traingrid.vocabulary.campaign_fanout import (
    DEFAULT_CAMPAIGN_INSTANCE_COUNT,
    DEFAULT_CAMPAIGN_INSTANCE_TYPE,
    PLACEMENTS,
    RegionJobStatus,
)
from traingrid.vocabulary.statuses import ENDED_RUN_STATUSES, FANOUT_RUN_STATUSES, RunStatus

REGION_JOB_STATUSES = tuple(status.value for status in RegionJobStatus)
MONEY = Numeric(12, 6)
S3_URI = String(2048)


def _one_of(column: str, values: tuple[str, ...]) -> str:
    quoted = ", ".join(f"'{value}'" for value in values)
    return f"{column} IN ({quoted})"


class Campaign(Base):
    """A training campaign; its id is the key in S3 paths (``campaigns/<id>/<region>/``)."""

    __tablename__ = "campaigns"
    __table_args__ = (CheckConstraint(_one_of("placement", PLACEMENTS), name="placement"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    description: Mapped[str | None] = mapped_column(Text)
    # Shared by every region's job.
    hyperparameters: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    instance_type: Mapped[str] = mapped_column(String(64), default=DEFAULT_CAMPAIGN_INSTANCE_TYPE)
    instance_count: Mapped[int] = mapped_column(Integer, default=DEFAULT_CAMPAIGN_INSTANCE_COUNT)
    # Fewest instances a region's job may shrink to when SageMaker has no capacity for
    # instance_count there, before it moves region (None: instance_count, no shrinking).
    min_instance_count: Mapped[int | None] = mapped_column(Integer)
    placement: Mapped[str] = mapped_column(String(16), default="data-local")
    # For cost estimates only.
    expected_hours: Mapped[float] = mapped_column(Float, default=8.0)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=clock.now)


class Region(Base):
    """An AWS region jobs may train in."""

    __tablename__ = "regions"

    code: Mapped[str] = mapped_column(String(32), primary_key=True)
    enabled: Mapped[bool] = mapped_column(default=True)
    # What copying data OUT of this region to another one costs.
    transfer_usd_per_gb: Mapped[Decimal] = mapped_column(MONEY)
    artifact_bucket: Mapped[str] = mapped_column(String(63))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=clock.now)

    prices: Mapped[list[RegionPrice]] = relationship(
        cascade="all, delete-orphan", order_by="RegionPrice.instance_type"
    )


class RegionPrice(Base):
    """What an instance type costs in a region, and how many of it a job may get there now."""

    __tablename__ = "region_prices"

    region_code: Mapped[str] = mapped_column(ForeignKey("regions.code"), primary_key=True)
    instance_type: Mapped[str] = mapped_column(String(64), primary_key=True)
    on_demand_usd_per_hour: Mapped[Decimal] = mapped_column(MONEY)
    spot_usd_per_hour: Mapped[Decimal | None] = mapped_column(MONEY)
    # Capacity or quota headroom, in instances; 0 = none.
    capacity_instances: Mapped[int] = mapped_column(Integer)


class Dataset(Base):
    """Campaign data that landed (complete, marked) under a prefix in one region."""

    __tablename__ = "datasets"
    __table_args__ = (
        UniqueConstraint("campaign_id", "region_code", "s3_uri"),
        Index(None, "campaign_id", "registered_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    campaign_id: Mapped[str] = mapped_column(ForeignKey("campaigns.id"))
    region_code: Mapped[str] = mapped_column(ForeignKey("regions.code"))
    s3_uri: Mapped[str] = mapped_column(S3_URI)
    objects: Mapped[int] = mapped_column(Integer)
    bytes: Mapped[int] = mapped_column(BigInteger)
    registered_at: Mapped[datetime] = mapped_column(UtcDateTime, default=clock.now)
    marker_etag: Mapped[str | None] = mapped_column(String(128))


class CampaignRun(Base):
    """One fan-out of a campaign: a Step Functions execution."""

    __tablename__ = "campaign_runs"
    __table_args__ = (
        CheckConstraint(_one_of("status", FANOUT_RUN_STATUSES), name="status"),
        CheckConstraint(_one_of("placement", PLACEMENTS), name="placement"),
        Index(None, "campaign_id", "started_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    campaign_id: Mapped[str] = mapped_column(ForeignKey("campaigns.id"))
    name: Mapped[str] = mapped_column(String(80))
    execution_arn: Mapped[str] = mapped_column(String(256), unique=True)
    placement: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16), default=RunStatus.RUNNING)
    started_at: Mapped[datetime] = mapped_column(UtcDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    failure_cause: Mapped[str | None] = mapped_column(Text)
    # Its receipt (``costs.receipt``) with the regions' use behind it, and its actual total.
    cost: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    cost_usd: Mapped[Decimal | None] = mapped_column(MONEY)

    jobs: Mapped[list[RegionJob]] = relationship(
        back_populates="run",
        cascade="all, delete-orphan",
        passive_deletes=True,
        order_by="RegionJob.requested_region",
    )


class RegionJob(Base):
    """One region's job of a run: planned where its data is, possibly moved on a fallback."""

    __tablename__ = "region_jobs"
    __table_args__ = (
        UniqueConstraint("run_id", "requested_region"),
        CheckConstraint(_one_of("status", REGION_JOB_STATUSES), name="status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("campaign_runs.id", ondelete="CASCADE"))
    # Where the data is, and where the job trains now.
    requested_region: Mapped[str] = mapped_column(ForeignKey("regions.code"))
    region: Mapped[str] = mapped_column(ForeignKey("regions.code"))
    # A RegionJobStatus: PLANNED, then SageMaker's TrainingJobStatus (InProgress, Completed…).
    status: Mapped[str] = mapped_column(String(32), default=RegionJobStatus.PLANNED.value)
    job_name: Mapped[str | None] = mapped_column(String(63))
    job_arn: Mapped[str | None] = mapped_column(String(256))
    s3_input: Mapped[str] = mapped_column(S3_URI)
    started_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    artifacts: Mapped[str | None] = mapped_column(S3_URI)
    failure_cause: Mapped[str | None] = mapped_column(Text)
    placement_reason: Mapped[str] = mapped_column(Text)
    # Bytes copied into the region it trained in (0: it trained where the data is).
    staged_bytes: Mapped[int | None] = mapped_column(BigInteger)
    # Every region tried: [{"region", "status", "reason"}, ...].
    attempts: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)

    run: Mapped[CampaignRun] = relationship(back_populates="jobs")


class TrainingRunRecord(Base):
    """The outcome of one TrainingRun execution: written by its last step, or by the janitor
    when the execution ended without getting there (stopped, timed out)."""

    __tablename__ = "training_runs"
    __table_args__ = (
        CheckConstraint(_one_of("status", ENDED_RUN_STATUSES), name="status"),
        Index(None, "started_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(80))
    execution_arn: Mapped[str] = mapped_column(String(256), unique=True)
    status: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[datetime] = mapped_column(UtcDateTime)
    ended_at: Mapped[datetime] = mapped_column(UtcDateTime)
    # What was asked for and planned; None where the run ended before it was known.
    dataset: Mapped[str | None] = mapped_column(Text)
    nodes: Mapped[int | None] = mapped_column(Integer)  # requested
    instance_type: Mapped[str | None] = mapped_column(String(64))
    mpi_gpus: Mapped[int | None] = mapped_column(Integer)  # of the last attempt
    estimated_max_usd: Mapped[Decimal | None] = mapped_column(MONEY)
    # The nodes its last attempt ran on (None: no attempt got nodes), and every Batch job it
    # made: [{attempt, nodes, reason, resumed_from, job_id, outcome, ran_s}].
    nodes_used: Mapped[int | None] = mapped_column(Integer)
    attempts: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    # What it used: the Batch job and the file system, and how long the job ran.
    job_id: Mapped[str | None] = mapped_column(String(64))
    job_status: Mapped[str | None] = mapped_column(String(16))
    training_s: Mapped[int | None] = mapped_column(Integer)
    file_system_id: Mapped[str | None] = mapped_column(String(32))
    # Where its artifacts are: the verified archive in S3, else the file system kept for them.
    artifacts: Mapped[str | None] = mapped_column(S3_URI)
    manifest: Mapped[str | None] = mapped_column(S3_URI)
    archived_objects: Mapped[int | None] = mapped_column(Integer)
    archived_bytes: Mapped[int | None] = mapped_column(BigInteger)
    retained_file_system: Mapped[str | None] = mapped_column(String(32))
    error: Mapped[str | None] = mapped_column(String(128))
    failure_cause: Mapped[str | None] = mapped_column(Text)
    # What it cost (costs.receipt: estimate, actual by part, lines with their sources) and its
    # actual total, for sums over a period; None where it was recorded without one.
    cost: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    cost_usd: Mapped[Decimal | None] = mapped_column(MONEY)
    # "run" (its last step) or "janitor".
    recorded_by: Mapped[str] = mapped_column(String(16))
    recorded_at: Mapped[datetime] = mapped_column(UtcDateTime, default=clock.now)
