"""Attempts: a TrainingRun's nodes used and Batch jobs, a campaign's fewest instances, the
bytes a region's job had copied to where it trained.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("training_runs") as batch:
        batch.add_column(sa.Column("nodes_used", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("attempts", sa.JSON(), nullable=True))
    with op.batch_alter_table("campaigns") as batch:
        batch.add_column(sa.Column("min_instance_count", sa.Integer(), nullable=True))
    with op.batch_alter_table("region_jobs") as batch:
        batch.add_column(sa.Column("staged_bytes", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("region_jobs") as batch:
        batch.drop_column("staged_bytes")
    with op.batch_alter_table("campaigns") as batch:
        batch.drop_column("min_instance_count")
    with op.batch_alter_table("training_runs") as batch:
        batch.drop_column("attempts")
        batch.drop_column("nodes_used")
