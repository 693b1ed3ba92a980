"""Reading the ledger: usage and cost by any dimensions over a time range, the audit trail, quotas, one
life, and pruning.

Usage over ``[since, until)`` is the sum, over every segment, of its quantity times the part of its
interval inside the range (a segment still held counts up to ``now``). The database sums durations per
(dimensions, outcome, quantity, price); the products are made here, in exact integers and Decimals, so no
column can overflow and no float is involved.
"""

from __future__ import annotations

import decimal
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from enum import StrEnum
from typing import Any

from sqlalchemy import and_, case, delete, exists, func, or_, select
from sqlalchemy.engine import Connection
from sqlalchemy.orm import aliased

from fairshare.resource_units import unit_of

from . import rollup
from . import schema as t
from .life import MILLI_MS_PER_UNIT_HOUR, Outcome
from .records import AuditEntry, Millis

_MICRO = Decimal(1_000_000)
_CHUNK = 500
# Digits that keep every sum exact: a product of milli-unit-ms (up to ~1e25 over a long window), a price
# (NUMERIC(38, 9)) and 2^-30 (30 more decimals) fits with room.
_PREC = 120


class Dim(StrEnum):
    """What usage and cost can be grouped and filtered by (CLI names)."""

    TEAM = "team"  # the ClusterQueue
    PROJECT = "project"
    COST_CENTER = "cost-center"
    NAMESPACE = "namespace"
    LOCAL_QUEUE = "local-queue"
    PRIORITY_CLASS = "priority-class"
    FLAVOR = "flavor"
    RESOURCE = "resource"
    # Who submitted the workload (its workloads.user_name: the queuemanager.dev/user label stamped at
    # admission, docs/tenancy.md). Not in the daily rollup: a report by user reads the segments.
    USER = "user"
    CURRENCY = "currency"  # of the price (a cost report is always split by it: USD and EUR never add up)


_COLUMN = {
    Dim.TEAM: t.segments.c.team, Dim.PROJECT: t.segments.c.project, Dim.COST_CENTER: t.segments.c.cost_center,
    Dim.NAMESPACE: t.segments.c.namespace, Dim.LOCAL_QUEUE: t.segments.c.local_queue,
    Dim.PRIORITY_CLASS: t.segments.c.priority_class, Dim.FLAVOR: t.segments.c.flavor,
    Dim.RESOURCE: t.segments.c.resource, Dim.USER: func.coalesce(t.workloads.c.user_name, ""),
    Dim.CURRENCY: t.segments.c.currency,
}
_BY_WORKLOAD = frozenset({Dim.USER})  # dimensions read from the workload's row, not the segment's


@dataclass(frozen=True, slots=True)
class UsageQuery:
    since_ms: Millis
    until_ms: Millis
    now_ms: Millis  # a segment still held counts up to here
    by: tuple[Dim, ...] = (Dim.TEAM,)
    filters: tuple[tuple[Dim, str], ...] = ()


@dataclass(frozen=True, slots=True)
class UsageRow:
    """Resource-seconds and money of one group. held = useful + lost + running. With the GPUs' telemetry
    (the `activity` table, ledger.activity; None without any in the window): measured = the resource-seconds
    held while its devices reported, active = what they did, idle = measured - active, and its cost."""

    key: tuple[str, ...]
    useful_seconds: Decimal = Decimal(0)
    lost_seconds: Decimal = Decimal(0)
    running_seconds: Decimal = Decimal(0)
    cost_useful: Decimal = Decimal(0)
    cost_lost: Decimal = Decimal(0)
    cost_running: Decimal = Decimal(0)
    measured_seconds: Decimal | None = None
    active_seconds: Decimal | None = None
    cost_idle: Decimal | None = None

    @property
    def held_seconds(self) -> Decimal:
        return self.useful_seconds + self.lost_seconds + self.running_seconds

    @property
    def idle_seconds(self) -> Decimal | None:
        if self.measured_seconds is None or self.active_seconds is None:
            return None
        return self.measured_seconds - self.active_seconds

    @property
    def cost(self) -> Decimal:
        return self.cost_useful + self.cost_lost + self.cost_running


def usage(conn: Connection, q: UsageQuery) -> list[UsageRow]:
    """Usage and cost over [since, until): the daily rollup for the whole UTC days inside the window, the
    closed segments of the partial days at its edges, and the segments still running (ledger.rollup)."""
    sums: dict[tuple[str, ...], dict[str, Decimal]] = {}
    with decimal.localcontext() as ctx:
        ctx.prec = _PREC  # exact for every product made here; the one rounding is at the end
        by_workload = any(d in _BY_WORKLOAD for d in (*q.by, *(d for d, _ in q.filters)))
        days = None if by_workload else rollup.full_days(q.since_ms, q.until_ms)
        if days is None:
            _raw(conn, q, q.since_ms, q.until_ms, None, sums)
        else:
            first, end = days
            by = [_ROLLUP[d] for d in q.by]
            filters = [(_ROLLUP[d], v) for d, v in q.filters]
            for key, resource, outcome, milli_ms, priced in rollup.read(conn, first, end, by, filters):
                _add(sums, key, resource, outcome, milli_ms, priced)
            if q.since_ms < first:
                _raw(conn, q, q.since_ms, first, "closed", sums, index="ix_segments_start_ms")
            if end < q.until_ms:
                _raw(conn, q, end, q.until_ms, "closed", sums, index="ix_segments_end_ms")
            _raw(conn, q, q.since_ms, q.until_ms, "running", sums, index="ix_segments_outcome")
        _activity(conn, q, sums)
        return _rows_of(sums)


def _rows_of(sums: dict[tuple[str, ...], dict[str, Decimal]]) -> list[UsageRow]:
    out = []
    for key in sorted(sums):
        acc = sums[key]
        out.append(UsageRow(
            key=key,
            useful_seconds=acc.get(Outcome.USEFUL, Decimal(0)) / _MICRO,
            lost_seconds=acc.get(Outcome.LOST, Decimal(0)) / _MICRO,
            running_seconds=acc.get(Outcome.RUNNING, Decimal(0)) / _MICRO,
            cost_useful=_money(acc.get("$" + Outcome.USEFUL)),
            cost_lost=_money(acc.get("$" + Outcome.LOST)),
            cost_running=_money(acc.get("$" + Outcome.RUNNING)),
            measured_seconds=None if "measured" not in acc else acc["measured"] / 1000,
            active_seconds=None if "active" not in acc else acc["active"] / 1000,
            cost_idle=None if "measured" not in acc else _money(acc.get("$idle", Decimal(0))),
        ))
    return out


def usage_scanned(conn: Connection, q: UsageQuery) -> list[UsageRow]:
    """The same figures as `usage`, from a scan of every segment (no rollup): the reference the rollup is
    tested against."""
    sums: dict[tuple[str, ...], dict[str, Decimal]] = {}
    with decimal.localcontext() as ctx:
        ctx.prec = _PREC
        _raw(conn, q, q.since_ms, q.until_ms, None, sums)
        _activity(conn, q, sums)
        return _rows_of(sums)


_ROLLUP = {Dim.TEAM: "team", Dim.PROJECT: "project", Dim.COST_CENTER: "cost_center",
           Dim.NAMESPACE: "namespace", Dim.LOCAL_QUEUE: "local_queue", Dim.PRIORITY_CLASS: "priority_class",
           Dim.FLAVOR: "flavor", Dim.RESOURCE: "resource", Dim.CURRENCY: "currency"}


def _add(sums: dict[tuple[str, ...], dict[str, Decimal]], key: tuple[str, ...], resource: str, outcome: str,
         milli_ms: Decimal, priced: Decimal | None) -> None:
    """Milli-unit-ms and price-weighted milli-unit-ms of one group and outcome. The price is per unit-hour
    of the resource's unit (a GiB of memory is 2^30 of the bytes the quantity counts): the weighted sum is
    brought to base units here, exactly, and money is made once, at the end (/ MILLI_MS_PER_UNIT_HOUR)."""
    acc = sums.setdefault(key, {})
    acc[outcome] = acc.get(outcome, Decimal(0)) + milli_ms
    if priced is not None:
        base = unit_of(resource).base
        acc["$" + outcome] = acc.get("$" + outcome, Decimal(0)) + (priced / base if base != 1 else priced)


def _raw(conn: Connection, q: UsageQuery, since_ms: Millis, until_ms: Millis, state: str | None,
         sums: dict[tuple[str, ...], dict[str, Decimal]], *, index: str | None = None) -> None:
    """Segments clipped to [since, until) (a running one counts up to now); `state`: only closed ones
    ("closed": their outcome is final) or only running ones. The database sums durations per group,
    quantity and price; the products are made here, exactly."""
    s = t.segments.c
    eff_end = case((s.end_ms.is_(None), q.now_ms), else_=s.end_ms)
    clip_end = case((eff_end > until_ms, until_ms), else_=eff_end)
    clip_start = case((s.start_ms < since_ms, since_ms), else_=s.start_ms)
    dims = [_COLUMN[d].label(f"d{i}") for i, d in enumerate(q.by)]
    stmt = (
        select(*dims, s.resource.label("res"), s.outcome, s.quantity, s.price,
               func.sum(clip_end - clip_start).label("ms"))
        .where(s.start_ms < until_ms, or_(s.end_ms.is_(None), s.end_ms > since_ms), clip_end > clip_start)
        .group_by(*[_COLUMN[d] for d in q.by], s.resource, s.outcome, s.quantity, s.price)
    )
    if any(d in _BY_WORKLOAD for d in (*q.by, *(d for d, _ in q.filters))):
        stmt = stmt.select_from(t.segments.join(t.workloads, t.workloads.c.uid == s.uid))
    if state == "closed":
        stmt = stmt.where(s.outcome != str(Outcome.RUNNING))
    elif state == "running":
        stmt = stmt.where(s.outcome == str(Outcome.RUNNING))
    if index is not None:
        # SQLite would pick an index by its own estimate; the edges are narrow in time, so the index on
        # the bound that is narrow (or on the outcome, for what still runs) is the one to read.
        stmt = stmt.with_hint(t.segments, f"INDEXED BY {index}", "sqlite")
    for dim, value in q.filters:
        stmt = stmt.where(_COLUMN[dim] == value)
    for row in conn.execute(stmt):
        key = tuple(str(row[i]) for i in range(len(dims)))
        milli_ms = Decimal(int(row.quantity) * int(row.ms))
        priced = None if row.price is None else milli_ms * Decimal(row.price)
        _add(sums, key, str(row.res), str(row.outcome), milli_ms, priced)


def _activity(conn: Connection, q: UsageQuery, sums: dict[tuple[str, ...], dict[str, Decimal]]) -> None:
    """The GPUs' measured and active time (the `activity` table) of the hours that begin in the window, the
    window's edges rounded out to whole UTC hours (an hour is kept whole), and the cost of the idle part
    (measured - active) at the price of the holding (per unit-hour; money made once, in `_rows_of`)."""
    a = t.activity.c
    columns = {Dim.TEAM: a.team, Dim.PROJECT: a.project, Dim.COST_CENTER: a.cost_center,
               Dim.NAMESPACE: a.namespace, Dim.LOCAL_QUEUE: a.local_queue,
               Dim.PRIORITY_CLASS: a.priority_class, Dim.FLAVOR: a.flavor, Dim.RESOURCE: a.resource,
               Dim.USER: func.coalesce(t.workloads.c.user_name, ""), Dim.CURRENCY: a.currency}
    dims = [columns[d].label(f"d{i}") for i, d in enumerate(q.by)]
    first = q.since_ms - q.since_ms % 3_600_000
    stmt = (select(*dims, a.resource.label("res"), a.price, func.sum(a.measured_ms).label("measured"),
                   func.sum(a.active_ms).label("active"))
            .where(a.hour_ms >= first, a.hour_ms < q.until_ms)
            .group_by(*[columns[d] for d in q.by], a.resource, a.price))
    if any(d in _BY_WORKLOAD for d in (*q.by, *(d for d, _ in q.filters))):
        stmt = stmt.select_from(t.activity.join(t.workloads, t.workloads.c.uid == a.uid))
    for dim, value in q.filters:
        stmt = stmt.where(columns[dim] == value)
    for row in conn.execute(stmt):
        key = tuple(str(row[i]) for i in range(len(dims)))
        acc = sums.setdefault(key, {})
        measured, active = Decimal(int(row.measured)), Decimal(int(row.active))
        acc["measured"] = acc.get("measured", Decimal(0)) + measured
        acc["active"] = acc.get("active", Decimal(0)) + active
        if row.price is not None:
            # (measured - active) unit-ms x price per unit-hour: x1000 to the milli-unit-ms `_money` divides.
            base = unit_of(str(row.res)).base
            idle = (measured - active) * 1000 * Decimal(row.price)
            acc["$idle"] = acc.get("$idle", Decimal(0)) + (idle / base if base != 1 else idle)


def _money(priced: Decimal | None) -> Decimal:
    if priced is None:
        return Decimal("0E-9")
    return (priced / MILLI_MS_PER_UNIT_HOUR).quantize(Decimal("1e-9"), rounding=ROUND_HALF_EVEN)


# --- audit ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AuditQuery:
    since_ms: Millis
    until_ms: Millis
    team: str | None = None
    actions: tuple[str, ...] = ()  # exact names, or a prefix ending in "*"
    limit: int | None = None


def audit(conn: Connection, q: AuditQuery) -> list[AuditEntry]:
    a = t.audit.c
    stmt = select(t.audit).where(a.at_ms >= q.since_ms, a.at_ms < q.until_ms)
    if q.team is not None:
        on_queue = and_(a.target_kind == "ClusterQueue", a.target_name == q.team)
        stmt = stmt.where(or_(a.team == q.team, on_queue))
    if q.actions:
        conds = [a.action.startswith(x[:-1], autoescape=True) if x.endswith("*") else a.action == x
                 for x in q.actions]
        stmt = stmt.where(or_(*conds))
    stmt = stmt.order_by(a.at_ms, a.key)
    if q.limit is not None:
        stmt = stmt.limit(q.limit)
    return [
        AuditEntry(at=r.at_ms / 1000, action=r.action, target_kind=r.target_kind, target_name=r.target_name,
                   what=r.what, why=r.why, policy=r.policy, target_namespace=r.target_namespace,
                   policy_generation=r.policy_generation, editor=r.editor, team=r.team,
                   local_queue=r.local_queue, project=r.project, user=r.user_name)
        for r in conn.execute(stmt)
    ]


# --- quotas, lives ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QuotaRow:
    team: str
    flavor: str
    resource: str
    since_ms: Millis
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None
    policy: str | None
    generation: int | None


def quotas(conn: Connection, *, since_ms: Millis, until_ms: Millis,
           team: str | None = None) -> list[QuotaRow]:
    """The quotas in force over ``[since, until)``: the one in force at ``since`` and every later change."""
    c = t.quotas.c
    later = aliased(t.quotas)
    superseded = exists().where(later.c.team == c.team, later.c.flavor == c.flavor,
                                later.c.resource == c.resource, later.c.since_ms > c.since_ms,
                                later.c.since_ms <= since_ms)
    stmt = select(t.quotas).where(c.since_ms < until_ms, ~superseded)
    if team is not None:
        stmt = stmt.where(c.team == team)
    stmt = stmt.order_by(c.team, c.flavor, c.resource, c.since_ms)
    return [QuotaRow(r.team, r.flavor, r.resource, r.since_ms, r.nominal, r.borrowing_limit, r.lending_limit,
                     r.policy, r.generation) for r in conn.execute(stmt)]


@dataclass(frozen=True, slots=True)
class LifeRecord:
    """One workload life as stored: its row, its usage per flavor-resource and its transitions."""

    row: dict[str, Any]
    usage: tuple[dict[str, Any], ...] = ()
    transitions: tuple[dict[str, Any], ...] = ()
    segments: tuple[dict[str, Any], ...] = field(default=())


def life(conn: Connection, uid: str) -> LifeRecord | None:
    row = conn.execute(select(t.workloads).where(t.workloads.c.uid == uid)).mappings().first()
    if row is None:
        return None
    use = conn.execute(select(t.workload_usage).where(t.workload_usage.c.uid == uid)
                       .order_by(t.workload_usage.c.flavor, t.workload_usage.c.resource)).mappings()
    trs = conn.execute(select(t.transitions).where(t.transitions.c.uid == uid)
                       .order_by(t.transitions.c.seq)).mappings()
    segs = conn.execute(select(t.segments).where(t.segments.c.uid == uid)
                        .order_by(t.segments.c.attempt, t.segments.c.part)).mappings()
    return LifeRecord(dict(row), tuple(dict(u) for u in use), tuple(dict(x) for x in trs),
                      tuple(dict(s) for s in segs))


@dataclass(frozen=True, slots=True)
class LifeSummary:
    """One workload life in brief: who, where, when it was submitted, first admitted and ended (what a
    forecast is scored with, docs/operator.md "Forecasts", and what arrivals are fitted from)."""

    uid: str
    namespace: str
    name: str
    local_queue: str
    team: str | None  # the ClusterQueue
    priority_class: str | None
    priority: int
    submitted_ms: Millis
    first_admitted_ms: Millis | None
    last_admitted_ms: Millis | None
    finished_ms: Millis | None
    finish_reason: str | None
    deleted_ms: Millis | None
    evictions: int
    attempts: int
    pod_sets: tuple[dict[str, Any], ...]  # [{name, count, requests: {resource: milli}, flavors: {r: f}}]
    phase: str = ""
    attempt_start_ms: Millis | None = None  # of the attempt holding quota now (None: holds none)


_SUMMARY_COLUMNS = ("uid", "namespace", "name", "local_queue", "team", "priority_class", "priority",
                    "submitted_ms", "first_admitted_ms", "last_admitted_ms", "finished_ms", "finish_reason",
                    "deleted_ms", "evictions", "attempts", "pod_sets", "phase", "attempt_start_ms")


def _summaries(conn: Connection, where: Any) -> list[LifeSummary]:
    """The lives `where` selects, in submission order (ties: uid). Only LifeSummary's columns are read: the
    other JSON columns (labels, eviction_stats) cost as much to decode as the rest of the row."""
    w = t.workloads.c
    stmt = select(*(w[c] for c in _SUMMARY_COLUMNS)).where(where).order_by(w.submitted_ms, w.uid)
    out = []
    for (uid, namespace, name, local_queue, team, priority_class, priority, submitted_ms, first_admitted_ms,
         last_admitted_ms, finished_ms, finish_reason, deleted_ms, evictions, attempts, pod_sets, phase,
         attempt_start_ms) in conn.execute(stmt):
        sets = pod_sets if isinstance(pod_sets, list) else []
        out.append(LifeSummary(
            uid=uid, namespace=namespace, name=name, local_queue=local_queue, team=team,
            priority_class=priority_class, priority=int(priority), submitted_ms=submitted_ms,
            first_admitted_ms=first_admitted_ms, last_admitted_ms=last_admitted_ms, finished_ms=finished_ms,
            finish_reason=finish_reason, deleted_ms=deleted_ms, evictions=int(evictions),
            attempts=int(attempts),
            pod_sets=tuple(dict(p) for p in sets if isinstance(p, dict)), phase=str(phase),
            attempt_start_ms=attempt_start_ms))
    return out


def lives(conn: Connection, *, submitted_since_ms: Millis, submitted_until_ms: Millis) -> list[LifeSummary]:
    """The lives submitted in ``[since, until)``, in submission order (ties: uid)."""
    w = t.workloads.c
    return _summaries(conn, and_(w.submitted_ms >= submitted_since_ms, w.submitted_ms < submitted_until_ms))


def lives_of(conn: Connection, uids: Sequence[str]) -> list[LifeSummary]:
    """The lives of these uids that exist, in submission order (ties: uid); chunked below every database's
    bound on bound parameters."""
    w = t.workloads.c
    out: list[LifeSummary] = []
    for k in range(0, len(uids), 500):
        out += _summaries(conn, w.uid.in_(list(uids[k:k + 500])))
    out.sort(key=lambda life: (life.submitted_ms, life.uid))
    return out


def lives_digest(conn: Connection, *, submitted_since_ms: Millis, submitted_until_ms: Millis
                 ) -> tuple[int, int, int]:
    """Of the lives submitted in ``[since, until)``: how many, the sum of their submission times and the sum
    of their end times (finished, else deleted; 0 while open), both in ms after ``since`` (a cache of them
    compares these: qm/planning/lives_cache.py)."""
    w = t.workloads.c
    ended = func.coalesce(w.finished_ms, w.deleted_ms, submitted_since_ms) - submitted_since_ms
    stmt = select(func.count(), func.coalesce(func.sum(w.submitted_ms - submitted_since_ms), 0),
                  func.coalesce(func.sum(ended), 0)).select_from(t.workloads).where(
        w.submitted_ms >= submitted_since_ms, w.submitted_ms < submitted_until_ms)
    count, submitted, ended_sum = conn.execute(stmt).one()
    return int(count), int(submitted), int(ended_sum)


def open_lives(conn: Connection, observed_before_ms: Millis) -> list[tuple[str, str, str]]:
    """(uid, namespace, name) of the lives not ended (pending, running or evicting), last observed before
    ``observed_before_ms``: what a resync compares with the Workloads that exist."""
    w = t.workloads.c
    stmt = (select(w.uid, w.namespace, w.name)
            .where(w.ended_ms.is_(None), w.observed_ms < observed_before_ms).order_by(w.uid))
    return [(r.uid, r.namespace, r.name) for r in conn.execute(stmt)]


# --- retention --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PruneCounts:
    workloads: int = 0
    audit: int = 0
    quotas: int = 0


def prune(conn: Connection, *, cutoff_ms: Millis) -> PruneCounts:
    """Delete lives that ended before ``cutoff_ms`` (with their rows), older audit rows, and quotas
    superseded before it (the quota in force at the cutoff is kept)."""
    w = t.workloads.c
    uids = [r.uid for r in conn.execute(select(w.uid).where(w.ended_ms < cutoff_ms))]
    for i in range(0, len(uids), _CHUNK):
        chunk: Sequence[str] = uids[i:i + _CHUNK]
        for table in (t.segments, t.transitions, t.workload_usage, t.activity):
            conn.execute(delete(table).where(table.c.uid.in_(chunk)))
        conn.execute(delete(t.workloads).where(w.uid.in_(chunk)))
    audit_deleted = conn.execute(delete(t.audit).where(t.audit.c.at_ms < cutoff_ms)).rowcount
    # The rollup's days before the first whole day after the cutoff: a report within the retention never
    # reads them (its whole days start at or after its `since`), and they may hold usage of lives pruned.
    kept_from = -(-cutoff_ms // rollup.DAY_MS) * rollup.DAY_MS
    conn.execute(delete(t.usage_daily).where(t.usage_daily.c.day_ms < kept_from))
    # What the GPUs did in hours that ended before the cutoff (of lives still running too): never reported.
    conn.execute(delete(t.activity).where(t.activity.c.hour_ms < cutoff_ms - 3_600_000))
    c = t.quotas.c
    later = aliased(t.quotas)
    superseded = exists().where(later.c.team == c.team, later.c.flavor == c.flavor,
                                later.c.resource == c.resource, later.c.since_ms > c.since_ms,
                                later.c.since_ms <= cutoff_ms)
    quota_deleted = conn.execute(delete(t.quotas).where(c.since_ms < cutoff_ms, superseded)).rowcount
    return PruneCounts(len(uids), int(audit_deleted or 0), int(quota_deleted or 0))
