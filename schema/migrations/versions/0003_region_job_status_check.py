"""A region job's status is one of RegionJobStatus's values.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24

The values are written out, not imported: a migration describes the schema as it was made,
whatever the code says later.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

REGION_JOB_STATUSES = ("PLANNED", "InProgress", "Stopping", "Completed", "Failed", "Stopped",
                       "CapacityUnavailable", "Moving")


def upgrade() -> None:
    # SQLite cannot add a constraint to a table: batch mode copies the table with it.
    with op.batch_alter_table("region_jobs") as batch:
        batch.create_check_constraint(
            "status", "status IN (" + ", ".join(f"'{s}'" for s in REGION_JOB_STATUSES) + ")")


def downgrade() -> None:
    with op.batch_alter_table("region_jobs") as batch:
        batch.drop_constraint("status", type_="check")
