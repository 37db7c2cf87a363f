"""The campaign database: campaigns, regions and prices, datasets, runs and region jobs.

Revision ID: 0001
Revises:
Create Date: 2026-11-21
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MONEY = sa.Numeric(12, 6)
TIMESTAMP = sa.DateTime(timezone=True)
S3_URI = sa.String(2048)


def upgrade() -> None:
    op.create_table(
        "campaigns",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("hyperparameters", sa.JSON(), nullable=False),
        sa.Column("instance_type", sa.String(64), nullable=False),
        sa.Column("instance_count", sa.Integer(), nullable=False),
        sa.Column("placement", sa.String(16), nullable=False),
        sa.Column("expected_hours", sa.Float(), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_campaigns")),
        sa.CheckConstraint("placement IN ('data-local', 'cheapest')",
                           name=op.f("ck_campaigns_placement")),
    )
    op.create_table(
        "regions",
        sa.Column("code", sa.String(32), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("transfer_usd_per_gb", MONEY, nullable=False),
        sa.Column("artifact_bucket", sa.String(63), nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("code", name=op.f("pk_regions")),
    )
    op.create_table(
        "region_prices",
        sa.Column("region_code", sa.String(32), nullable=False),
        sa.Column("instance_type", sa.String(64), nullable=False),
        sa.Column("on_demand_usd_per_hour", MONEY, nullable=False),
        sa.Column("spot_usd_per_hour", MONEY, nullable=True),
        sa.Column("capacity_instances", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("region_code", "instance_type", name=op.f("pk_region_prices")),
        sa.ForeignKeyConstraint(["region_code"], ["regions.code"],
                                name=op.f("fk_region_prices_region_code_regions")),
    )
    op.create_table(
        "datasets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.String(64), nullable=False),
        sa.Column("region_code", sa.String(32), nullable=False),
        sa.Column("s3_uri", S3_URI, nullable=False),
        sa.Column("objects", sa.Integer(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("registered_at", TIMESTAMP, nullable=False),
        sa.Column("marker_etag", sa.String(128), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_datasets")),
        sa.ForeignKeyConstraint(["campaign_id"], ["campaigns.id"],
                                name=op.f("fk_datasets_campaign_id_campaigns")),
        sa.ForeignKeyConstraint(["region_code"], ["regions.code"],
                                name=op.f("fk_datasets_region_code_regions")),
        sa.UniqueConstraint("campaign_id", "region_code", "s3_uri",
                            name=op.f("uq_datasets_campaign_id_region_code_s3_uri")),
    )
    op.create_index(op.f("ix_datasets_campaign_id_registered_at"), "datasets",
                    ["campaign_id", "registered_at"])
    op.create_table(
        "campaign_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(80), nullable=False),
        sa.Column("execution_arn", sa.String(256), nullable=False),
        sa.Column("placement", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("started_at", TIMESTAMP, nullable=False),
        sa.Column("ended_at", TIMESTAMP, nullable=True),
        sa.Column("failure_cause", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_campaign_runs")),
        sa.ForeignKeyConstraint(["campaign_id"], ["campaigns.id"],
                                name=op.f("fk_campaign_runs_campaign_id_campaigns")),
        sa.UniqueConstraint("execution_arn", name=op.f("uq_campaign_runs_execution_arn")),
        sa.CheckConstraint("status IN ('RUNNING', 'SUCCEEDED', 'FAILED')",
                           name=op.f("ck_campaign_runs_status")),
        sa.CheckConstraint("placement IN ('data-local', 'cheapest')",
                           name=op.f("ck_campaign_runs_placement")),
    )
    op.create_index(op.f("ix_campaign_runs_campaign_id_started_at"), "campaign_runs",
                    ["campaign_id", "started_at"])
    op.create_table(
        "region_jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("requested_region", sa.String(32), nullable=False),
        sa.Column("region", sa.String(32), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("job_name", sa.String(63), nullable=True),
        sa.Column("job_arn", sa.String(256), nullable=True),
        sa.Column("s3_input", S3_URI, nullable=False),
        sa.Column("started_at", TIMESTAMP, nullable=True),
        sa.Column("ended_at", TIMESTAMP, nullable=True),
        sa.Column("artifacts", S3_URI, nullable=True),
        sa.Column("failure_cause", sa.Text(), nullable=True),
        sa.Column("placement_reason", sa.Text(), nullable=False),
        sa.Column("attempts", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_region_jobs")),
        sa.ForeignKeyConstraint(["run_id"], ["campaign_runs.id"], ondelete="CASCADE",
                                name=op.f("fk_region_jobs_run_id_campaign_runs")),
        sa.ForeignKeyConstraint(["requested_region"], ["regions.code"],
                                name=op.f("fk_region_jobs_requested_region_regions")),
        sa.ForeignKeyConstraint(["region"], ["regions.code"],
                                name=op.f("fk_region_jobs_region_regions")),
        sa.UniqueConstraint("run_id", "requested_region",
                            name=op.f("uq_region_jobs_run_id_requested_region")),
    )


def downgrade() -> None:
    op.drop_table("region_jobs")
    op.drop_index(op.f("ix_campaign_runs_campaign_id_started_at"), table_name="campaign_runs")
    op.drop_table("campaign_runs")
    op.drop_index(op.f("ix_datasets_campaign_id_registered_at"), table_name="datasets")
    op.drop_table("datasets")
    op.drop_table("region_prices")
    op.drop_table("regions")
    op.drop_table("campaigns")
