"""Cost: a campaign run's cost receipt and its actual total.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("campaign_runs") as batch:
        batch.add_column(sa.Column("cost", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("cost_usd", sa.Numeric(12, 6), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("campaign_runs") as batch:
        batch.drop_column("cost_usd")
        batch.drop_column("cost")
