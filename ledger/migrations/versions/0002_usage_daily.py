"""The daily rollup of closed segments (usage_daily, ledger.rollup), filled from the segments already kept.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from alembic import op

from ledger.types import ExactDecimal

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

NAME = 253
DAY_MS = 86_400_000
DIMS = ("team", "namespace", "local_queue", "priority_class", "project", "cost_center", "flavor", "resource")


def upgrade() -> None:
    table = op.create_table(
        "usage_daily",
        sa.Column("day_ms", sa.BigInteger, primary_key=True),
        *[sa.Column(d, sa.String(NAME), primary_key=True) for d in DIMS],
        sa.Column("outcome", sa.String(16), primary_key=True),
        sa.Column("milli_ms", ExactDecimal(), nullable=False),
        sa.Column("priced_milli_ms", ExactDecimal(), nullable=False),
    )
    # Backfill: every closed segment, split per UTC day (the same sums ledger.rollup keeps from now on).
    segments = sa.table("segments", *[sa.column(c) for c in (*DIMS, "quantity", "start_ms", "end_ms",
                                                             "outcome")],
                        sa.column("price", ExactDecimal()))
    conn = op.get_bind()
    sums: dict[tuple[Any, ...], list[Any]] = {}
    stmt = sa.select(segments).where(segments.c.outcome != "running", segments.c.end_ms.is_not(None))
    for r in conn.execute(stmt):
        day = r.start_ms - r.start_ms % DAY_MS
        while day < r.end_ms:
            ms = min(r.end_ms, day + DAY_MS) - max(r.start_ms, day)
            if ms > 0:
                key = (day, *(getattr(r, d) for d in DIMS), r.outcome)
                acc = sums.setdefault(key, [0, Decimal(0)])
                acc[0] += r.quantity * ms
                if r.price is not None:
                    acc[1] += Decimal(r.quantity * ms) * Decimal(r.price)
            day += DAY_MS
    rows = [{"day_ms": k[0], **dict(zip(DIMS, k[1:9], strict=True)), "outcome": k[9],
             "milli_ms": Decimal(v[0]), "priced_milli_ms": v[1]} for k, v in sorted(sums.items())]
    for i in range(0, len(rows), 1000):
        op.bulk_insert(table, rows[i:i + 1000])


def downgrade() -> None:
    op.drop_table("usage_daily")
