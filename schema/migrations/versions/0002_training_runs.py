"""The outcome of every TrainingRun.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MONEY = sa.Numeric(12, 6)
TIMESTAMP = sa.DateTime(timezone=True)
S3_URI = sa.String(2048)


def upgrade() -> None:
    op.create_table(
        "training_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(80), nullable=False),
        sa.Column("execution_arn", sa.String(256), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("started_at", TIMESTAMP, nullable=False),
        sa.Column("ended_at", TIMESTAMP, nullable=False),
        sa.Column("dataset", sa.Text(), nullable=True),
        sa.Column("nodes", sa.Integer(), nullable=True),
        sa.Column("instance_type", sa.String(64), nullable=True),
        sa.Column("mpi_gpus", sa.Integer(), nullable=True),
        sa.Column("estimated_max_usd", MONEY, nullable=True),
        sa.Column("job_id", sa.String(64), nullable=True),
        sa.Column("job_status", sa.String(16), nullable=True),
        sa.Column("training_s", sa.Integer(), nullable=True),
        sa.Column("file_system_id", sa.String(32), nullable=True),
        sa.Column("artifacts", S3_URI, nullable=True),
        sa.Column("manifest", S3_URI, nullable=True),
        sa.Column("archived_objects", sa.Integer(), nullable=True),
        sa.Column("archived_bytes", sa.BigInteger(), nullable=True),
        sa.Column("retained_file_system", sa.String(32), nullable=True),
        sa.Column("error", sa.String(128), nullable=True),
        sa.Column("failure_cause", sa.Text(), nullable=True),
        sa.Column("recorded_by", sa.String(16), nullable=False),
        sa.Column("recorded_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_training_runs")),
        sa.UniqueConstraint("execution_arn", name=op.f("uq_training_runs_execution_arn")),
        sa.CheckConstraint("status IN ('SUCCEEDED', 'FAILED', 'ABORTED', 'TIMED_OUT')",
                           name=op.f("ck_training_runs_status")),
    )
    op.create_index(op.f("ix_training_runs_started_at"), "training_runs", ["started_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_training_runs_started_at"), table_name="training_runs")
    op.drop_table("training_runs")
