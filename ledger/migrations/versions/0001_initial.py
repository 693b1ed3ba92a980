"""The first ledger schema: workload lives, their usage, transitions and segments, quotas and audit.

Revision ID: 0001
Revises:
Create Date: 2026-05-20
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from ledger.types import ExactDecimal, json_type

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

NAME = 253
REASON = 316


def upgrade() -> None:
    op.create_table(
        "workloads",
        sa.Column("uid", sa.String(128), primary_key=True),
        sa.Column("namespace", sa.String(NAME), nullable=False),
        sa.Column("name", sa.String(NAME), nullable=False),
        sa.Column("local_queue", sa.String(NAME), nullable=False),
        sa.Column("team", sa.String(NAME), nullable=True),
        sa.Column("owner_kind", sa.String(NAME), nullable=True),
        sa.Column("owner_name", sa.String(NAME), nullable=True),
        sa.Column("user_name", sa.String(NAME), nullable=True),
        sa.Column("priority_class", sa.String(NAME), nullable=True),
        sa.Column("priority", sa.BigInteger, nullable=False),
        sa.Column("project", sa.String(NAME), nullable=True),
        sa.Column("team_label", sa.String(NAME), nullable=True),
        sa.Column("cost_center", sa.String(NAME), nullable=True),
        sa.Column("labels", json_type(), nullable=False),
        sa.Column("pod_sets", json_type(), nullable=False),
        sa.Column("phase", sa.String(16), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("submitted_ms", sa.BigInteger, nullable=False),
        sa.Column("first_seen_ms", sa.BigInteger, nullable=False),
        sa.Column("observed_ms", sa.BigInteger, nullable=False),
        sa.Column("first_admitted_ms", sa.BigInteger, nullable=True),
        sa.Column("last_admitted_ms", sa.BigInteger, nullable=True),
        sa.Column("attempt_start_ms", sa.BigInteger, nullable=True),
        sa.Column("last_evicted_ms", sa.BigInteger, nullable=True),
        sa.Column("eviction_reason", sa.String(REASON), nullable=True),
        sa.Column("evictions", sa.Integer, nullable=False),
        sa.Column("eviction_stats", json_type(), nullable=False),
        sa.Column("accumulated_s", sa.BigInteger, nullable=True),
        sa.Column("finished_ms", sa.BigInteger, nullable=True),
        sa.Column("finish_reason", sa.String(REASON), nullable=True),
        sa.Column("deleted_ms", sa.BigInteger, nullable=True),
        sa.Column("ended_ms", sa.BigInteger, nullable=True),
        sa.Column("recovered", sa.Boolean, nullable=False),
    )
    for column in ("team", "namespace", "project", "cost_center", "ended_ms", "submitted_ms"):
        op.create_index(f"ix_workloads_{column}", "workloads", [column])

    op.create_table(
        "workload_usage",
        sa.Column("uid", sa.String(128), sa.ForeignKey("workloads.uid"), primary_key=True),
        sa.Column("flavor", sa.String(NAME), primary_key=True),
        sa.Column("resource", sa.String(NAME), primary_key=True),
        sa.Column("held_seconds", ExactDecimal(), nullable=False),
        sa.Column("useful_seconds", ExactDecimal(), nullable=False),
        sa.Column("lost_seconds", ExactDecimal(), nullable=False),
        sa.Column("cost", ExactDecimal(), nullable=False),
        sa.Column("cost_useful", ExactDecimal(), nullable=False),
        sa.Column("cost_lost", ExactDecimal(), nullable=False),
    )

    op.create_table(
        "transitions",
        sa.Column("uid", sa.String(128), sa.ForeignKey("workloads.uid"), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("at_ms", sa.BigInteger, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(REASON), nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("held", json_type(), nullable=False),
    )
    op.create_index("ix_transitions_at_ms", "transitions", ["at_ms"])

    op.create_table(
        "segments",
        sa.Column("uid", sa.String(128), sa.ForeignKey("workloads.uid"), primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True),
        sa.Column("part", sa.Integer, primary_key=True),
        sa.Column("flavor", sa.String(NAME), nullable=False),
        sa.Column("resource", sa.String(NAME), nullable=False),
        sa.Column("quantity", sa.BigInteger, nullable=False),
        sa.Column("price", ExactDecimal(), nullable=True),
        sa.Column("start_ms", sa.BigInteger, nullable=False),
        sa.Column("end_ms", sa.BigInteger, nullable=True),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(REASON), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("team", sa.String(NAME), nullable=False),
        sa.Column("namespace", sa.String(NAME), nullable=False),
        sa.Column("local_queue", sa.String(NAME), nullable=False),
        sa.Column("priority_class", sa.String(NAME), nullable=False),
        sa.Column("project", sa.String(NAME), nullable=False),
        sa.Column("cost_center", sa.String(NAME), nullable=False),
    )
    for column in ("start_ms", "end_ms", "outcome"):
        op.create_index(f"ix_segments_{column}", "segments", [column])

    op.create_table(
        "quotas",
        sa.Column("team", sa.String(NAME), primary_key=True),
        sa.Column("flavor", sa.String(NAME), primary_key=True),
        sa.Column("resource", sa.String(NAME), primary_key=True),
        sa.Column("since_ms", sa.BigInteger, primary_key=True),
        sa.Column("nominal", sa.BigInteger, nullable=False),
        sa.Column("borrowing_limit", sa.BigInteger, nullable=True),
        sa.Column("lending_limit", sa.BigInteger, nullable=True),
        sa.Column("policy", sa.String(NAME), nullable=True),
        sa.Column("generation", sa.BigInteger, nullable=True),
    )

    op.create_table(
        "audit",
        sa.Column("key", sa.String(32), primary_key=True),
        sa.Column("at_ms", sa.BigInteger, nullable=False),
        sa.Column("action", sa.String(64), nullable=False),
        sa.Column("target_kind", sa.String(NAME), nullable=False),
        sa.Column("target_namespace", sa.String(NAME), nullable=True),
        sa.Column("target_name", sa.String(NAME), nullable=False),
        sa.Column("what", sa.Text, nullable=False),
        sa.Column("why", sa.Text, nullable=False),
        sa.Column("policy", sa.String(NAME), nullable=False),
        sa.Column("policy_generation", sa.BigInteger, nullable=True),
        sa.Column("editor", sa.String(NAME), nullable=True),
        sa.Column("team", sa.String(NAME), nullable=True),
    )
    for column in ("at_ms", "action", "team"):
        op.create_index(f"ix_audit_{column}", "audit", [column])


def downgrade() -> None:
    for table in ("audit", "quotas", "segments", "transitions", "workload_usage", "workloads"):
        op.drop_table(table)
