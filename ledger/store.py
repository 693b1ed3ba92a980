"""Writing records into the database: one transaction per batch, idempotent.

A batch loads the stored lives of the workloads it names (rows, open parts, totals), advances them in
memory through the pure rules (:func:`ledger.accounting.advance`) in record order, and writes the result:
lives and usage totals as upserts, transitions and segments as inserts that ignore a row already there
(the (uid, seq) and (uid, attempt, part) keys), segment ends and attempt outcomes as guarded updates.
Replaying a batch that already committed therefore writes nothing new.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from sqlalchemy import and_, bindparam, select, update
from sqlalchemy.dialects import postgresql as pg
from sqlalchemy.dialects import sqlite as sq
from sqlalchemy.engine import Connection
from sqlalchemy.sql.dml import Insert

from fairshare.models import FlavorResource

from . import rollup
from . import schema as t
from .accounting import advance, gone
from .activity import HOUR_MS, ActivityRecord
from .codec import SpoolItem, held_json, pod_sets_from, pod_sets_json, stats_from
from .facts import Identity, WorkloadFacts
from .life import Advance, ClosedUsage, Dims, FinalPart, LifeState, Outcome, Part, Phase, Segment, Totals
from .records import AuditEntry, Millis, QuotaChange, WorkloadGone, to_millis

_MICRO = Decimal(1_000_000)  # milli-unit-milliseconds per resource-second
_CHUNK = 500  # uids per IN (...) query


def _insert(conn: Connection, table: Any) -> Insert:
    return pg.insert(table) if conn.dialect.name == "postgresql" else sq.insert(table)


def _upsert(conn: Connection, table: Any, keys: Sequence[str], rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    stmt: Any = _insert(conn, table)
    cols = [c.name for c in table.columns if c.name not in keys]
    stmt = stmt.on_conflict_do_update(index_elements=list(keys), set_={c: stmt.excluded[c] for c in cols})
    conn.execute(stmt, rows)


def _insert_new(conn: Connection, table: Any, rows: list[dict[str, Any]]) -> None:
    if rows:
        stmt: Any = _insert(conn, table)
        conn.execute(stmt.on_conflict_do_nothing(), rows)


# --- rows <-> states -------------------------------------------------------------------------------------


def _state_row(s: LifeState) -> dict[str, Any]:
    i = s.identity
    return {
        "uid": s.uid, "namespace": i.namespace, "name": i.name, "local_queue": i.local_queue, "team": i.team,
        "owner_kind": i.owner_kind, "owner_name": i.owner_name, "user_name": i.user,
        "priority_class": i.priority_class, "priority": i.priority, "project": i.project,
        "team_label": i.team_label, "cost_center": i.cost_center, "labels": dict(i.labels),
        "pod_sets": pod_sets_json(s.pod_sets), "phase": str(s.phase), "seq": s.seq, "attempts": s.attempts,
        "submitted_ms": s.submitted_ms, "first_seen_ms": s.first_seen_ms, "observed_ms": s.observed_ms,
        "first_admitted_ms": s.first_admitted_ms, "last_admitted_ms": s.last_admitted_ms,
        "attempt_start_ms": s.attempt_start_ms, "last_evicted_ms": s.last_evicted_ms,
        "eviction_reason": s.eviction_reason, "evictions": s.evictions,
        "eviction_stats": [list(e) for e in s.eviction_stats], "accumulated_s": s.accumulated_s,
        "finished_ms": s.finished_ms, "finish_reason": s.finish_reason, "deleted_ms": s.deleted_ms,
        "ended_ms": s.ended_ms, "recovered": s.recovered,
    }


def _usage_rows(s: LifeState) -> list[dict[str, Any]]:
    return [
        {"uid": s.uid, "flavor": fr.flavor, "resource": fr.resource,
         "held_seconds": Decimal(tot.held) / _MICRO, "useful_seconds": Decimal(tot.useful) / _MICRO,
         "lost_seconds": Decimal(tot.lost) / _MICRO, "cost": tot.cost_useful + tot.cost_lost,
         "cost_useful": tot.cost_useful, "cost_lost": tot.cost_lost}
        for fr, tot in s.totals
    ]


def _int(value: Decimal) -> int:
    return int(value * _MICRO)


def _state_from(row: Any, parts: tuple[Part, ...],
                totals: tuple[tuple[FlavorResource, Totals], ...]) -> LifeState:
    labels = row.labels if isinstance(row.labels, dict) else {}
    identity = Identity(
        namespace=row.namespace, name=row.name, local_queue=row.local_queue, team=row.team,
        owner_kind=row.owner_kind, owner_name=row.owner_name, user=row.user_name,
        priority_class=row.priority_class, priority=row.priority, project=row.project,
        team_label=row.team_label, cost_center=row.cost_center,
        labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
    )
    return LifeState(
        uid=row.uid, identity=identity, pod_sets=pod_sets_from(row.pod_sets), phase=Phase(row.phase),
        seq=row.seq, submitted_ms=row.submitted_ms, first_seen_ms=row.first_seen_ms,
        observed_ms=row.observed_ms, attempts=row.attempts, parts=parts,
        attempt_start_ms=row.attempt_start_ms, first_admitted_ms=row.first_admitted_ms,
        last_admitted_ms=row.last_admitted_ms, last_evicted_ms=row.last_evicted_ms,
        finished_ms=row.finished_ms, deleted_ms=row.deleted_ms, finish_reason=row.finish_reason,
        eviction_reason=row.eviction_reason, evictions=row.evictions,
        eviction_stats=stats_from(row.eviction_stats), accumulated_s=row.accumulated_s,
        recovered=bool(row.recovered), totals=totals,
    )


def load_states(conn: Connection, uids: Iterable[str]) -> dict[str, LifeState]:
    """The stored lives of ``uids`` (absent ones are simply missing)."""
    wanted = sorted(set(uids))
    rows: dict[str, Any] = {}
    parts: dict[str, list[Part]] = {}
    totals: dict[str, list[tuple[FlavorResource, Totals]]] = {}
    for i in range(0, len(wanted), _CHUNK):
        chunk = wanted[i:i + _CHUNK]
        for row in conn.execute(select(t.workloads).where(t.workloads.c.uid.in_(chunk))):
            rows[row.uid] = row
        if not rows:
            continue
        seg = t.segments.c
        running = select(t.segments).where(seg.uid.in_(chunk), seg.outcome == str(Outcome.RUNNING))
        for p in conn.execute(running.order_by(seg.uid, seg.attempt, seg.part)):
            parts.setdefault(p.uid, []).append(
                Part(p.attempt, p.part, p.flavor, p.resource, p.quantity, p.price, p.start_ms, p.end_ms,
                     Dims(p.team, p.namespace, p.local_queue, p.priority_class, p.project, p.cost_center),
                     p.currency))
        for u in conn.execute(select(t.workload_usage).where(t.workload_usage.c.uid.in_(chunk))):
            cost_useful, cost_lost = u.cost_useful, u.cost_lost
            totals.setdefault(u.uid, []).append((FlavorResource(u.flavor, u.resource), Totals(
                _int(u.held_seconds), _int(u.useful_seconds), _int(u.lost_seconds), cost_useful, cost_lost)))
    return {
        uid: _state_from(row, tuple(parts.get(uid, ())), tuple(sorted(totals.get(uid, ()))))
        for uid, row in rows.items()
    }


# --- one batch -------------------------------------------------------------------------------------------


def _segment_row(g: Segment) -> dict[str, Any]:
    d = g.dims
    return {"uid": g.uid, "attempt": g.attempt, "part": g.part, "flavor": g.flavor, "resource": g.resource,
            "quantity": g.quantity, "price": g.price, "start_ms": g.start_ms, "end_ms": g.end_ms,
            "outcome": str(g.outcome), "reason": g.reason, "source": str(g.source), "team": d.team,
            "namespace": d.namespace, "local_queue": d.local_queue, "priority_class": d.priority_class,
            "project": d.project, "cost_center": d.cost_center, "currency": g.currency}


class _Batch:
    def __init__(self, conn: Connection, states: dict[str, LifeState]) -> None:
        self.conn = conn
        self.states = states
        # the attempt whose parts are stored (so outcomes and ends of other attempts are in-memory only)
        self.stored_open = {uid: {(p.attempt, p.part) for p in s.parts} for uid, s in states.items()}
        self.lives: dict[str, LifeState] = {}
        self.usage: set[str] = set()
        self.transitions: list[dict[str, Any]] = []
        self.segments: dict[tuple[str, int, int], dict[str, Any]] = {}
        self.by_attempt: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self.ends: list[dict[str, Any]] = []
        self.outcomes: list[dict[str, Any]] = []
        self.closed: list[ClosedUsage] = []
        self.finals: list[FinalPart] = []

    def workload(self, facts: WorkloadFacts, retention_ms: Millis) -> None:
        before = self.states.get(facts.uid)
        step = advance(before, facts, cutoff_ms=facts.observed_ms - retention_ms)
        if step is not None:
            self.take(facts.uid, before, step)

    def gone(self, item: WorkloadGone) -> None:
        before = self.states.get(item.uid)
        if before is not None:  # a life the ledger never kept (or pruned) has nothing to end
            self.take(item.uid, before, gone(before, to_millis(item.at)))

    def take(self, uid: str, before: LifeState | None, step: Advance) -> None:
        """Collect the rows of one advance of a life."""
        if not step.changed:
            return
        self.states[uid] = step.state
        self.lives[uid] = step.state
        if before is None or step.state.totals != before.totals:
            self.usage.add(uid)
        for tr in step.transitions:
            self.transitions.append({
                "uid": tr.uid, "seq": tr.seq, "kind": str(tr.kind), "at_ms": tr.at_ms, "attempt": tr.attempt,
                "source": str(tr.source), "reason": tr.reason[:316], "message": tr.message,
                "held": held_json(tr.held)})
        for g in step.opened:
            row = _segment_row(g)
            self.segments[(g.uid, g.attempt, g.part)] = row
            self.by_attempt.setdefault((g.uid, g.attempt), []).append(row)
        stored = self.stored_open.get(uid, set())
        for e in step.ended:
            pending = self.segments.get((e.uid, e.attempt, e.part))
            if pending is not None:
                pending["end_ms"] = e.end_ms
            if (e.attempt, e.part) in stored:
                self.ends.append(
                    {"b_uid": e.uid, "b_attempt": e.attempt, "b_part": e.part, "b_end": e.end_ms})
        for o in step.outcomes:
            for row in self.by_attempt.get((o.uid, o.attempt), ()):
                if row["outcome"] == str(Outcome.RUNNING):
                    row["outcome"], row["reason"] = str(o.outcome), o.reason
            if any(a == o.attempt for a, _ in stored):
                self.outcomes.append({"b_uid": o.uid, "b_attempt": o.attempt, "b_outcome": str(o.outcome),
                                      "b_reason": o.reason})
        self.closed.extend(step.closed)
        self.finals.extend(step.finals)

    def write(self) -> None:
        c = self.conn
        _upsert(c, t.workloads, ["uid"], [_state_row(s) for s in self.lives.values()])
        _insert_new(c, t.segments, list(self.segments.values()))
        seg = t.segments.c
        if self.ends:
            c.execute(update(t.segments).where(and_(
                seg.uid == bindparam("b_uid"), seg.attempt == bindparam("b_attempt"),
                seg.part == bindparam("b_part"), seg.end_ms.is_(None))).values(end_ms=bindparam("b_end")),
                self.ends)
        if self.outcomes:
            c.execute(update(t.segments).where(and_(
                seg.uid == bindparam("b_uid"), seg.attempt == bindparam("b_attempt"),
                seg.outcome == str(Outcome.RUNNING))).values(
                outcome=bindparam("b_outcome"), reason=bindparam("b_reason")), self.outcomes)
        _insert_new(c, t.transitions, self.transitions)
        _upsert(c, t.workload_usage, ["uid", "flavor", "resource"],
                [r for uid in sorted(self.usage) for r in _usage_rows(self.states[uid])])
        rollup.write(c, self.finals)


def _quota(conn: Connection, q: QuotaChange) -> None:
    """Insert the quota from ``q.at`` on, unless the quota in force then is already the same."""
    c = t.quotas.c
    at = to_millis(q.at)
    key = and_(c.team == q.team, c.flavor == q.flavor, c.resource == q.resource)
    in_force = conn.execute(select(t.quotas).where(key, c.since_ms <= at).order_by(c.since_ms.desc())
                            .limit(1)).first()
    values = (q.nominal, q.borrowing_limit, q.lending_limit)
    if in_force is not None and (
            in_force.nominal, in_force.borrowing_limit, in_force.lending_limit) == values:
        return
    _upsert(conn, t.quotas, ["team", "flavor", "resource", "since_ms"], [{
        "team": q.team, "flavor": q.flavor, "resource": q.resource, "since_ms": at, "nominal": q.nominal,
        "borrowing_limit": q.borrowing_limit, "lending_limit": q.lending_limit, "policy": q.policy,
        "generation": q.generation}])


def _audit_row(a: AuditEntry) -> dict[str, Any]:
    return {"key": a.key, "at_ms": to_millis(a.at), "action": a.action, "target_kind": a.target_kind,
            "target_namespace": a.target_namespace, "target_name": a.target_name, "what": a.what,
            "why": a.why, "policy": a.policy, "policy_generation": a.policy_generation, "editor": a.editor,
            "team": a.team, "local_queue": a.local_queue, "project": a.project, "user_name": a.user}


def _activity(conn: Connection, records: Sequence[ActivityRecord]) -> None:
    """Each record's parts into their hours' rows, each once: a part that begins before the row's
    `through_ms` was covered already (a repeated or overlapping reading adds nothing). A new hour row takes
    the life's dimensions and the flavor, price and currency of the segment it held at the part's start
    (none: unknown, unpriced)."""
    a = t.activity.c
    for r in records:
        by_hour: dict[int, list[tuple[int, int, int, int]]] = {}
        for p in r.parts:
            by_hour.setdefault(p[0] - p[0] % HOUR_MS, []).append(p)
        for hour, parts in sorted(by_hour.items()):
            key = and_(a.uid == r.uid, a.resource == r.resource, a.hour_ms == hour)
            row = conn.execute(select(a.measured_ms, a.active_ms, a.through_ms).where(key)).first()
            through = -1 if row is None else int(row.through_ms)
            new: list[tuple[int, int, int, int]] = []
            for p in sorted(parts):
                if p[0] >= through:
                    new.append(p)
                    through = p[1]
            if not new:
                continue
            measured = sum(p[2] for p in new)
            active = sum(p[3] for p in new)
            end = through
            if row is not None:
                conn.execute(update(t.activity).where(key).values(
                    measured_ms=int(row.measured_ms) + measured, active_ms=int(row.active_ms) + active,
                    through_ms=end))
                continue
            _insert_new(conn, t.activity, [{
                "uid": r.uid, "resource": r.resource, "hour_ms": hour, "measured_ms": measured,
                "active_ms": active, "through_ms": end, **_holding(conn, r.uid, r.resource, new[0][0])}])


def _holding(conn: Connection, uid: str, resource: str, at_ms: Millis) -> dict[str, Any]:
    """The dimensions, flavor, price and currency of what the life held of `resource` at `at_ms` (its
    segment then; else its latest one; else the life's row, unpriced)."""
    s = t.segments.c
    seg = conn.execute(select(t.segments).where(s.uid == uid, s.resource == resource, s.start_ms <= at_ms)
                       .order_by(s.start_ms.desc()).limit(1)).first()
    if seg is not None:
        return {d: getattr(seg, d) for d in ("team", "namespace", "local_queue", "priority_class", "project",
                                              "cost_center", "flavor", "price", "currency")}
    w = conn.execute(select(t.workloads).where(t.workloads.c.uid == uid)).first()
    dims = {d: (str(getattr(w, d) or "") if w is not None else "") for d in (
        "team", "namespace", "local_queue", "priority_class", "project", "cost_center")}
    return {**dims, "flavor": "", "price": None, "currency": ""}


def apply_batch(conn: Connection, items: Sequence[SpoolItem], *, retention_ms: Millis) -> list[ClosedUsage]:
    """Write ``items`` (in order) in the caller's transaction; the usage that became final."""
    uids = [i.uid for i in items if isinstance(i, WorkloadFacts | WorkloadGone)]
    batch = _Batch(conn, load_states(conn, uids) if uids else {})
    audits: list[dict[str, Any]] = []
    activity: list[ActivityRecord] = []
    for item in items:
        if isinstance(item, WorkloadFacts):
            batch.workload(item, retention_ms)
        elif isinstance(item, WorkloadGone):
            batch.gone(item)
        elif isinstance(item, QuotaChange):
            _quota(conn, item)
        elif isinstance(item, ActivityRecord):
            activity.append(item)
        else:
            audits.append(_audit_row(item))
    batch.write()
    _insert_new(conn, t.audit, audits)
    _activity(conn, activity)  # after the lives and segments of the batch: an hour's holding is known
    return batch.closed
