"""What the GPUs did (the `activity` table): per life, resource and UTC hour, the GPU-time its devices were
measured and active (spec.idle's telemetry; ledger.activity), for active vs allocated GPU-hours in `qm usage`
and the cost of idle GPUs in `qm cost`. A new table: nothing kept before changes.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from ledger.types import ExactDecimal

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

NAME = 253
CURRENCY = 16


def upgrade() -> None:
    op.create_table(
        "activity",
        sa.Column("uid", sa.String(128), primary_key=True),
        sa.Column("resource", sa.String(NAME), primary_key=True),
        sa.Column("hour_ms", sa.BigInteger, primary_key=True),
        sa.Column("measured_ms", sa.BigInteger, nullable=False),
        sa.Column("active_ms", sa.BigInteger, nullable=False),
        sa.Column("through_ms", sa.BigInteger, nullable=False),
        *[sa.Column(d, sa.String(NAME), nullable=False) for d in (
            "team", "namespace", "local_queue", "priority_class", "project", "cost_center", "flavor")],
        sa.Column("price", ExactDecimal(), nullable=True),
        sa.Column("currency", sa.String(CURRENCY), nullable=False),
    )
    op.create_index("ix_activity_hour_ms", "activity", ["hour_ms"])


def downgrade() -> None:
    op.drop_index("ix_activity_hour_ms", table_name="activity")
    op.drop_table("activity")
