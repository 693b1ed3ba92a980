"""The ledger's tables (SQLAlchemy Core). The Alembic migrations in ``ledger/migrations`` build exactly
this schema (a test compares them). Times are integer milliseconds since the Unix epoch (UTC); quantities
integer milli-units; resource-seconds and money exact decimals (:class:`ledger.types.ExactDecimal`).

- ``workloads``: one row per workload life, keyed by its UID.
- ``workload_usage``: per life and flavor-resource, resource-seconds held / useful / lost and their cost.
- ``transitions``: the lifecycle transitions of each life, keyed by (uid, seq): idempotent writes.
- ``segments``: what each attempt held, per flavor-resource, over which interval (reports clip these to
  a time range), with the price in force when it opened and the reporting dimensions of that moment.
- ``quotas``: the quota in force per (team, flavor, resource) from ``since_ms`` on.
- ``audit``: the actions of the service, keyed by a hash of their content (idempotent).
- ``usage_daily``: the closed segments summed per UTC day, dimensions and outcome (``ledger.rollup``):
  what long reports read.
- ``activity``: what the GPUs did (spec.idle's telemetry, ``ledger.activity``): per life, resource and UTC
  hour, the GPU-ms measured and active, with the dimensions and price of the life's holding then.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

from .types import ExactDecimal, json_type

NAME = 253  # a Kubernetes object name or label value fits (DNS subdomain)
REASON = 316  # Kueue's condition reasons and eviction causes (MaxLength=316)
CURRENCY = 16  # an ISO 4217 code (3 letters), with room

metadata = MetaData()

workloads = Table(
    "workloads", metadata,
    Column("uid", String(128), primary_key=True),
    Column("namespace", String(NAME), nullable=False),
    Column("name", String(NAME), nullable=False),
    Column("local_queue", String(NAME), nullable=False),
    Column("team", String(NAME), nullable=True),  # ClusterQueue
    Column("owner_kind", String(NAME), nullable=True),
    Column("owner_name", String(NAME), nullable=True),
    Column("user_name", String(NAME), nullable=True),
    Column("priority_class", String(NAME), nullable=True),
    Column("priority", BigInteger, nullable=False),
    Column("project", String(NAME), nullable=True),
    Column("team_label", String(NAME), nullable=True),
    Column("cost_center", String(NAME), nullable=True),
    Column("labels", json_type(), nullable=False),  # the configured label keys present: {key: value}
    Column("pod_sets", json_type(), nullable=False),  # [{name, count, requests: {r: milli}, flavors: {r: f}}]
    Column("phase", String(16), nullable=False),
    Column("seq", Integer, nullable=False),  # transitions recorded so far
    Column("attempts", Integer, nullable=False),
    Column("submitted_ms", BigInteger, nullable=False),
    Column("first_seen_ms", BigInteger, nullable=False),
    Column("observed_ms", BigInteger, nullable=False),
    Column("first_admitted_ms", BigInteger, nullable=True),
    Column("last_admitted_ms", BigInteger, nullable=True),
    Column("attempt_start_ms", BigInteger, nullable=True),  # of the attempt holding quota now
    Column("last_evicted_ms", BigInteger, nullable=True),
    Column("eviction_reason", String(REASON), nullable=True),
    Column("evictions", Integer, nullable=False),
    Column("eviction_stats", json_type(), nullable=False),  # Kueue's schedulingStats.evictions as seen
    Column("accumulated_s", BigInteger, nullable=True),  # Kueue's accumulatedPastExecutionTimeSeconds
    Column("finished_ms", BigInteger, nullable=True),
    Column("finish_reason", String(REASON), nullable=True),
    Column("deleted_ms", BigInteger, nullable=True),
    Column("ended_ms", BigInteger, nullable=True),  # finished, else deleted: retention counts from here
    Column("recovered", Boolean, nullable=False),  # some figures inferred from Kueue's status
    Index("ix_workloads_team", "team"),
    Index("ix_workloads_namespace", "namespace"),
    Index("ix_workloads_project", "project"),
    Index("ix_workloads_cost_center", "cost_center"),
    Index("ix_workloads_ended_ms", "ended_ms"),
    Index("ix_workloads_submitted_ms", "submitted_ms"),
)

workload_usage = Table(
    "workload_usage", metadata,
    Column("uid", String(128), ForeignKey("workloads.uid"), primary_key=True),
    Column("flavor", String(NAME), primary_key=True),
    Column("resource", String(NAME), primary_key=True),
    Column("held_seconds", ExactDecimal(), nullable=False),  # resource-seconds (units x seconds)
    Column("useful_seconds", ExactDecimal(), nullable=False),
    Column("lost_seconds", ExactDecimal(), nullable=False),
    Column("cost", ExactDecimal(), nullable=False),
    Column("cost_useful", ExactDecimal(), nullable=False),
    Column("cost_lost", ExactDecimal(), nullable=False),
)

transitions = Table(
    "transitions", metadata,
    Column("uid", String(128), ForeignKey("workloads.uid"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("kind", String(16), nullable=False),
    Column("at_ms", BigInteger, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("source", String(16), nullable=False),
    Column("reason", String(REASON), nullable=False),
    Column("message", Text, nullable=False),
    Column("held", json_type(), nullable=False),  # [[flavor, resource, milli, price|null]]
    Index("ix_transitions_at_ms", "at_ms"),
)

segments = Table(
    "segments", metadata,
    Column("uid", String(128), ForeignKey("workloads.uid"), primary_key=True),
    Column("attempt", Integer, primary_key=True),
    Column("part", Integer, primary_key=True),
    Column("flavor", String(NAME), nullable=False),
    Column("resource", String(NAME), nullable=False),
    Column("quantity", BigInteger, nullable=False),  # milli-units
    # per unit-hour of the resource's unit (GPU-hour, core-hour, GiB-hour: fairshare/resource_units.py);
    # NULL = no price set
    Column("price", ExactDecimal(), nullable=True),
    Column("start_ms", BigInteger, nullable=False),
    Column("end_ms", BigInteger, nullable=True),  # NULL = still held
    Column("outcome", String(16), nullable=False),  # running | useful | lost
    Column("reason", String(REASON), nullable=False),
    Column("source", String(16), nullable=False),
    Column("team", String(NAME), nullable=False),
    Column("namespace", String(NAME), nullable=False),
    Column("local_queue", String(NAME), nullable=False),
    Column("priority_class", String(NAME), nullable=False),
    Column("project", String(NAME), nullable=False),
    Column("cost_center", String(NAME), nullable=False),
    Column("currency", String(CURRENCY), nullable=False),  # of the price ("" for the unknown flavor)
    Index("ix_segments_start_ms", "start_ms"),
    Index("ix_segments_end_ms", "end_ms"),
    Index("ix_segments_outcome", "outcome"),
)

quotas = Table(
    "quotas", metadata,
    Column("team", String(NAME), primary_key=True),
    Column("flavor", String(NAME), primary_key=True),
    Column("resource", String(NAME), primary_key=True),
    Column("since_ms", BigInteger, primary_key=True),
    Column("nominal", BigInteger, nullable=False),
    Column("borrowing_limit", BigInteger, nullable=True),
    Column("lending_limit", BigInteger, nullable=True),
    Column("policy", String(NAME), nullable=True),
    Column("generation", BigInteger, nullable=True),
)

audit = Table(
    "audit", metadata,
    Column("key", String(32), primary_key=True),
    Column("at_ms", BigInteger, nullable=False),
    Column("action", String(64), nullable=False),
    Column("target_kind", String(NAME), nullable=False),
    Column("target_namespace", String(NAME), nullable=True),
    Column("target_name", String(NAME), nullable=False),
    Column("what", Text, nullable=False),
    Column("why", Text, nullable=False),
    Column("policy", String(NAME), nullable=False),
    Column("policy_generation", BigInteger, nullable=True),
    Column("editor", String(NAME), nullable=True),
    Column("team", String(NAME), nullable=True),
    Column("local_queue", String(NAME), nullable=True),  # of a workload acted on (in target_namespace)
    Column("project", String(NAME), nullable=True),
    Column("user_name", String(NAME), nullable=True),  # who submitted the workload (stamped at admission)
    Index("ix_audit_at_ms", "at_ms"),
    Index("ix_audit_action", "action"),
    Index("ix_audit_team", "team"),
)

usage_daily = Table(
    "usage_daily", metadata,
    Column("day_ms", BigInteger, primary_key=True),  # the UTC day's start
    Column("team", String(NAME), primary_key=True),
    Column("namespace", String(NAME), primary_key=True),
    Column("local_queue", String(NAME), primary_key=True),
    Column("priority_class", String(NAME), primary_key=True),
    Column("project", String(NAME), primary_key=True),
    Column("cost_center", String(NAME), primary_key=True),
    Column("flavor", String(NAME), primary_key=True),
    Column("resource", String(NAME), primary_key=True),
    Column("currency", String(CURRENCY), primary_key=True),
    Column("outcome", String(16), primary_key=True),  # useful | lost
    Column("milli_ms", ExactDecimal(), nullable=False),  # milli-units x milliseconds in the day
    # the same, weighted by the price per unit-hour of the resource's unit (money = this / (1000 x 3,600,000
    # x the unit's base units: 2^30 for GiB))
    Column("priced_milli_ms", ExactDecimal(), nullable=False),
)

activity = Table(
    "activity", metadata,
    Column("uid", String(128), primary_key=True),
    Column("resource", String(NAME), primary_key=True),
    Column("hour_ms", BigInteger, primary_key=True),  # the UTC hour's start
    Column("measured_ms", BigInteger, nullable=False),  # GPU-ms the devices' series were present
    Column("active_ms", BigInteger, nullable=False),  # the same weighted by utilization / 100
    Column("through_ms", BigInteger, nullable=False),  # the end of the last minute added (each added once)
    # The life's dimensions, and the flavor and price of what it held when the hour's first minute came.
    Column("team", String(NAME), nullable=False),
    Column("namespace", String(NAME), nullable=False),
    Column("local_queue", String(NAME), nullable=False),
    Column("priority_class", String(NAME), nullable=False),
    Column("project", String(NAME), nullable=False),
    Column("cost_center", String(NAME), nullable=False),
    Column("flavor", String(NAME), nullable=False),
    Column("price", ExactDecimal(), nullable=True),  # per unit-hour, as segments.price
    Column("currency", String(CURRENCY), nullable=False),
    Index("ix_activity_hour_ms", "hour_ms"),
)
