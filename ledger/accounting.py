"""The accounting rules: one observation of a Workload advances its life (pure: no database, no clock).

``advance(state, facts, cutoff_ms)`` returns the new state and the rows to write. Every rule reads the
*times of Kueue's status conditions*, never the time of the observation, so that replaying an observation
(a restart, a replayed watch, a spool flushed twice) finds nothing new and writes nothing: an event counts
only if its condition time is later than the one already accounted.

The conditions (Kueue pkg/workload/workload.go, v1beta2):

1. An attempt starts at ``QuotaReserved=True``'s lastTransitionTime (``SetQuotaReservation``); it holds
   ``status.admission``'s resourceUsage per flavor-resource.
2. ``Evicted=True`` (``SetEvictedCondition``) marks the eviction (reason, and ``Preempted``'s reason when
   Kueue preempted it); the quota is held until ``QuotaReserved=False``
   (``UnsetQuotaReservationWithCondition``, once the pods stopped): the attempt ends there, lost.
3. ``Finished=True`` (``SetFinishedCondition``) ends the attempt, useful (succeeded or failed: it ran to
   its end).
4. Deletion before the end ends the attempt, lost (reason ``Deleted``).

What the service missed while it was down is reconstructed from Kueue's own bookkeeping and marked
``inferred``: ``status.accumulatedPastExecutionTimeSeconds`` (time spent Admitted in previous attempts,
``SyncAdmittedCondition``) and ``status.schedulingStats.evictions`` (``workloadEvictionStateInc``):

- first seen after earlier evictions: their lost time is Kueue's accumulated time (less the final
  attempt's, when Kueue already added it at finish), charged to the flavors of the current admission
  (or to an unknown flavor when the workload holds no quota now), ending when the current attempt began;
- a new admission while an attempt was open (the release was missed): the open attempt ends at its start
  plus the growth of the accumulated time, never after the new admission;
- more evictions than accounted while pending: the growth of the accumulated time, unknown flavor.
"""

from __future__ import annotations

from dataclasses import fields, replace
from decimal import Decimal
from typing import TYPE_CHECKING

from fairshare.models import FlavorResource
from fairshare.resource_units import unit_of

from .facts import Held, Identity, PodSetFacts, WorkloadFacts
from .life import (
    UNKNOWN_FLAVOR,
    Advance,
    AttemptOutcome,
    ClosedUsage,
    Dims,
    FinalPart,
    Kind,
    LifeState,
    Outcome,
    Part,
    Phase,
    Segment,
    SegmentEnd,
    Source,
    Totals,
    Transition,
    part_cost,
)
from .records import Millis

_OPEN = (Phase.RUNNING, Phase.EVICTING)


def advance(state: LifeState | None, facts: WorkloadFacts, *, cutoff_ms: Millis) -> Advance | None:
    """The life after ``facts``; None when a first-seen life ended before ``cutoff_ms`` (outside retention:
    pruned, or never kept), so that a replay of an old finished workload is not counted again."""
    if state is None:
        end = facts.end_ms
        if end is not None and end < cutoff_ms:
            return None
        run = _Run(_new_state(facts), facts)
        run.transition(Kind.SUBMITTED, facts.submitted_ms, 0, Source.OBSERVED)
        run.first_sight()
    else:
        if state.phase is Phase.DELETED:
            return Advance(state)
        run = _Run(state, facts)
        run.refresh_identity()
    # 1. a new attempt, 2. its eviction, 3. the release of its quota, 4. a resize, 5. the end.
    run.admission()
    run.eviction()
    run.release()
    run.resize()
    run.finish()
    run.deletion()
    run.missed_while_pending()
    return run.result()


def gone(state: LifeState, at_ms: Millis) -> Advance:
    """A life the service holds open whose Workload no longer exists (deleted while the service was down,
    found at a resync): an open attempt ends at ``at_ms``, lost (reason ``Deleted``), and the life ends;
    both marked inferred. A life already ended is left as it is (a replayed record writes nothing)."""
    if state.phase in (Phase.FINISHED, Phase.DELETED):
        return Advance(state)
    end = max(at_ms, state.observed_ms)
    run = _Run(state, WorkloadFacts(uid=state.uid, identity=state.identity, pod_sets=state.pod_sets,
                                    submitted_ms=state.submitted_ms, observed_ms=end))
    if run.s.phase in _OPEN:
        run._close_attempt(end, Outcome.LOST, "Deleted")
    run.transition(Kind.DELETED, end, run.s.attempts, Source.INFERRED, "Deleted",
                   "the Workload no longer exists; it was deleted while the service was not watching "
                   "(the time is when the service found it gone)")
    run._set(phase=Phase.DELETED, deleted_ms=end, observed_ms=end, recovered=True)
    return run.result()


def _new_state(f: WorkloadFacts) -> LifeState:
    return LifeState(
        uid=f.uid, identity=f.identity, pod_sets=f.pod_sets, phase=Phase.PENDING, seq=0,
        submitted_ms=f.submitted_ms, first_seen_ms=f.observed_ms, observed_ms=f.observed_ms,
        eviction_stats=f.evictions, accumulated_s=f.accumulated_s,
    )


def _reasons_added(before: tuple[tuple[str, str, int], ...], after: tuple[tuple[str, str, int], ...]) -> str:
    """The eviction reasons whose counts grew (Kueue's schedulingStats), e.g. "Preempted"."""
    old = {(r, c): n for r, c, n in before}
    grown = sorted({r for r, c, n in after if n > old.get((r, c), 0)})
    return ",".join(grown)


_FIELDS = tuple(f.name for f in fields(LifeState))


class _Working:
    """LifeState's fields, mutable, for the duration of one advance."""

    def __init__(self, state: LifeState) -> None:
        for name in _FIELDS:
            setattr(self, name, getattr(state, name))

    def freeze(self) -> LifeState:
        return LifeState(**{name: getattr(self, name) for name in _FIELDS})

    @property
    def open_parts(self) -> tuple[Part, ...]:
        parts: tuple[Part, ...] = getattr(self, "parts")  # noqa: B009 - set in __init__
        return tuple(p for p in parts if p.end_ms is None)

    if TYPE_CHECKING:  # the attributes, for the type checker (they are LifeState's)
        uid: str
        identity: Identity
        pod_sets: tuple[PodSetFacts, ...]
        phase: Phase
        seq: int
        submitted_ms: Millis
        first_seen_ms: Millis
        observed_ms: Millis
        attempts: int
        parts: tuple[Part, ...]
        attempt_start_ms: Millis | None
        first_admitted_ms: Millis | None
        last_admitted_ms: Millis | None
        last_evicted_ms: Millis | None
        finished_ms: Millis | None
        deleted_ms: Millis | None
        finish_reason: str | None
        eviction_reason: str | None
        evictions: int
        eviction_stats: tuple[tuple[str, str, int], ...]
        accumulated_s: int | None
        recovered: bool
        totals: tuple[tuple[FlavorResource, Totals], ...]


class _Run:
    """One advance: a mutable scratchpad over the frozen state (never escapes ``advance``)."""

    def __init__(self, state: LifeState, facts: WorkloadFacts) -> None:
        # A mutable working copy: dataclasses.replace on every step was the rules' main cost.
        self.s = _Working(state)
        self.f = facts
        self.original = state
        self.new = state.seq == 0
        self.transitions: list[Transition] = []
        self.opened: list[Segment] = []
        self.ended: list[SegmentEnd] = []
        self.outcomes: list[AttemptOutcome] = []
        self.closed: list[ClosedUsage] = []
        self.finals: list[FinalPart] = []
        self.totals = dict(state.totals)
        self.touched_attempt = False

    def _set(self, **changes: object) -> None:
        for name, value in changes.items():
            setattr(self.s, name, value)

    # --- helpers ----------------------------------------------------------------------------------------

    def transition(self, kind: Kind, at_ms: Millis, attempt: int, source: Source, reason: str = "",
                   message: str = "", held: tuple[Held, ...] = ()) -> None:
        seq = self.s.seq + 1
        self.transitions.append(
            Transition(self.s.uid, seq, kind, at_ms, attempt, source, reason, message, held))
        self._set(seq=seq)

    def _open_attempt(self, start_ms: Millis, held: tuple[Held, ...]) -> None:
        attempt = self.s.attempts + 1
        dims = Dims.of(self.s.identity)
        parts = tuple(
            Part(attempt, i, h.flavor, h.resource, h.quantity, h.price, start_ms, dims=dims,
                 currency=h.currency)
            for i, h in enumerate(held)
        )
        for p in parts:
            self.opened.append(Segment(self.s.uid, attempt, p.part, p.flavor, p.resource, p.quantity, p.price,
                                       start_ms, None, Outcome.RUNNING, "", Source.OBSERVED, dims,
                                       p.currency))
        first = self.s.first_admitted_ms if self.s.first_admitted_ms is not None else start_ms
        self._set(attempts=attempt, parts=parts, attempt_start_ms=start_ms,
                         phase=Phase.RUNNING, last_admitted_ms=start_ms, first_admitted_ms=first)
        self.touched_attempt = True

    def _book(self, flavor: str, resource: str, outcome: Outcome, milli_ms: int, cost: Decimal,
              currency: str) -> None:
        key = FlavorResource(flavor, resource)
        self.totals[key] = self.totals.get(key, Totals()).add(outcome, milli_ms, cost)
        ident = self.s.identity
        self.closed.append(ClosedUsage(ident.team or "", ident.project or "", flavor, resource, outcome,
                                       milli_ms, cost, currency))

    def _close_attempt(self, end_ms: Millis, outcome: Outcome, reason: str) -> None:
        """End every part of the open attempt at ``end_ms`` (never before it started) and book it."""
        attempt = self.s.attempts
        for p in self.s.parts:
            end = p.end_ms
            if end is None:
                end = max(end_ms, p.start_ms)
                self.ended.append(SegmentEnd(self.s.uid, attempt, p.part, p.flavor, p.resource, end))
            duration = end - p.start_ms
            self._book(p.flavor, p.resource, outcome, p.quantity * duration,
                       part_cost(p.quantity, duration, p.price, unit_of(p.resource).base), p.currency)
            self.finals.append(FinalPart(p.flavor, p.resource, p.quantity, p.price, p.start_ms, end, outcome,
                                         p.dims if p.dims is not None else Dims.of(self.s.identity),
                                         p.currency))
        self.outcomes.append(AttemptOutcome(self.s.uid, attempt, outcome, reason))
        self._set(parts=(), attempt_start_ms=None, phase=Phase.PENDING)
        self.touched_attempt = True

    def _inferred_lost(self, held: tuple[Held, ...], end_ms: Millis, lost_s: int, reason: str) -> None:
        """A closed, lost attempt the service did not see, of ``lost_s`` seconds ending at ``end_ms``."""
        if lost_s <= 0 or not held:
            return
        attempt = self.s.attempts + 1
        dims = Dims.of(self.s.identity)
        start = end_ms - lost_s * 1000
        for i, h in enumerate(held):
            self.opened.append(Segment(self.s.uid, attempt, i, h.flavor, h.resource, h.quantity, h.price,
                                       start, end_ms, Outcome.LOST, reason, Source.INFERRED, dims,
                                       h.currency))
            duration = end_ms - start
            self._book(h.flavor, h.resource, Outcome.LOST, h.quantity * duration,
                       part_cost(h.quantity, duration, h.price, unit_of(h.resource).base), h.currency)
            self.finals.append(FinalPart(h.flavor, h.resource, h.quantity, h.price, start, end_ms,
                                         Outcome.LOST, dims, h.currency))
        self._set(attempts=attempt)

    def _unknown_flavor_held(self) -> tuple[Held, ...]:
        """What the pod sets request, on an unknown flavor and unpriced (the admission was never seen)."""
        total: dict[str, int] = {}
        for ps in self.s.pod_sets:
            for resource, qty in ps.requests:
                total[resource] = total.get(resource, 0) + qty * ps.count
        return tuple(Held(UNKNOWN_FLAVOR, r, q, None) for r, q in sorted(total.items()) if q > 0)

    def _stats_reason(self, fallback: str) -> str:
        return _reasons_added(self.s.eviction_stats, self.f.evictions) or fallback

    def _sync_kueue_counters(self) -> None:
        self._set(eviction_stats=self.f.evictions, accumulated_s=self.f.accumulated_s,
                         evictions=max(self.s.evictions, self.f.evictions_total))

    # --- the rules ---------------------------------------------------------------------------------------

    def refresh_identity(self) -> None:
        """Labels and the team may change; the newest observation's identity is kept."""
        if self.f.observed_ms >= self.s.observed_ms:
            ident = self.f.identity
            if ident.team is None:
                ident = replace(ident, team=self.s.identity.team)
            if ident.user is None:
                ident = replace(ident, user=self.s.identity.user)
            self._set(identity=ident, pod_sets=self.f.pod_sets, observed_ms=self.f.observed_ms)

    def first_sight(self) -> None:
        """Earlier attempts of a workload first seen after evictions (the service was down or new)."""
        f = self.f
        acc = f.accumulated_s
        # Kueue also accumulates at finish (SyncAdmittedCondition), so time without evictions is no loss.
        if f.evictions_total == 0:
            return
        self._set(recovered=True)
        qr = f.quota_reserved
        holds = qr is not None and qr.status and bool(f.attempt_size)
        lost_s = acc or 0
        if holds and qr is not None and f.is_true(f.finished) and f.admitted is not None \
                and not f.admitted.status and f.admitted.reason == "Finished" and f.finished is not None:
            # SyncAdmittedCondition added the final attempt's admitted time at finish: take it out.
            lost_s = max(0, lost_s - (f.finished.at_ms - qr.at_ms) // 1000)
        reason = _reasons_added((), f.evictions) or "Evicted"
        if holds and qr is not None:
            self._inferred_lost(f.attempt_size, qr.at_ms, lost_s, reason)
        else:
            # The last attempt ended when its quota was released (QuotaReserved=False), else at eviction.
            end = f.observed_ms
            if qr is not None and not qr.status and qr.at_ms:
                end = qr.at_ms
            elif f.evicted is not None and f.evicted.status and f.evicted.at_ms:
                end = f.evicted.at_ms
            self._inferred_lost(self._unknown_flavor_held(), end, lost_s, reason)
        count = f.evictions_total
        at = qr.at_ms if holds and qr is not None else f.observed_ms
        self.transition(Kind.EVICTED, at, self.s.attempts, Source.INFERRED, reason,
                        f"{count} eviction(s) before the service saw this workload; lost time from "
                        f"status.accumulatedPastExecutionTimeSeconds={acc}")
        self._set(evictions=count, eviction_reason=reason, eviction_stats=f.evictions,
                         accumulated_s=acc)

    def admission(self) -> None:
        f, s = self.f, self.s
        qr = f.quota_reserved
        size = f.attempt_size
        if s.phase is Phase.FINISHED or qr is None or not qr.status or not size:
            return
        if s.last_admitted_ms is not None and qr.at_ms <= s.last_admitted_ms and not (
                # Kueue's condition times have one-second resolution: admitted, evicted, released and
                # admitted again within one second all read the same time. A newer observation that holds
                # quota for a life seen released is that new admission; a replayed older one is not.
                s.phase is Phase.PENDING and qr.at_ms == s.last_admitted_ms
                and f.observed_ms > self.original.observed_ms):
            return
        if s.phase in _OPEN and s.attempt_start_ms is not None:
            self._close_missed(qr.at_ms)
        self._open_attempt(qr.at_ms, size)
        self.transition(Kind.ADMITTED, qr.at_ms, self.s.attempts, Source.OBSERVED,
                        f.identity.team or "", qr.message, size)
        self._sync_kueue_counters()

    def _close_missed(self, readmitted_ms: Millis) -> None:
        """A new admission while an attempt is open: the eviction and release were missed."""
        s, f = self.s, self.f
        start = s.attempt_start_ms if s.attempt_start_ms is not None else readmitted_ms
        floor = s.last_evicted_ms if s.phase is Phase.EVICTING and s.last_evicted_ms is not None else start
        end = readmitted_ms
        # Kueue leaves the field unset until it first adds to it: unset before, set now, means from 0.
        if f.accumulated_s is not None and f.accumulated_s >= (s.accumulated_s or 0):
            end = start + (f.accumulated_s - (s.accumulated_s or 0)) * 1000
        end = min(max(end, floor), readmitted_ms)
        reason = s.eviction_reason if s.phase is Phase.EVICTING and s.eviction_reason else \
            self._stats_reason("Evicted")
        if s.phase is Phase.RUNNING:
            self.transition(Kind.EVICTED, end, s.attempts, Source.INFERRED, reason,
                            "eviction not observed; the workload was admitted again")
            self._set(evictions=self.s.evictions + 1, eviction_reason=reason,
                             last_evicted_ms=end)
        self._close_attempt(end, Outcome.LOST, reason)
        self.transition(Kind.RELEASED, end, s.attempts, Source.INFERRED, reason,
                        "release not observed; end from status.accumulatedPastExecutionTimeSeconds")

    def eviction(self) -> None:
        f, s = self.f, self.s
        ev = f.evicted
        if s.phase is not Phase.RUNNING or ev is None or not ev.status or s.attempt_start_ms is None:
            return
        if ev.at_ms < s.attempt_start_ms or (s.last_evicted_ms is not None and ev.at_ms <= s.last_evicted_ms):
            return
        detail = f.preempted.reason if f.is_true(f.preempted) and f.preempted is not None else ""
        self.transition(Kind.EVICTED, ev.at_ms, s.attempts, Source.OBSERVED, ev.reason,
                        f"{detail}: {ev.message}" if detail else ev.message)
        self._set(phase=Phase.EVICTING, last_evicted_ms=ev.at_ms, eviction_reason=ev.reason,
                         evictions=s.evictions + 1)
        self._sync_kueue_counters()

    def release(self) -> None:
        f, s = self.f, self.s
        qr = f.quota_reserved
        if s.phase not in _OPEN or qr is None or qr.status or f.is_true(f.finished):
            return
        if s.attempt_start_ms is None or qr.at_ms < s.attempt_start_ms:
            return
        if s.phase is Phase.RUNNING:
            ev = f.evicted
            reason = ev.reason if ev is not None and ev.status else (qr.reason or "Evicted")
            self.transition(Kind.EVICTED, qr.at_ms, s.attempts, Source.INFERRED, reason,
                            "eviction not observed; quota released")
            self._set(evictions=self.s.evictions + 1, eviction_reason=reason,
                             last_evicted_ms=qr.at_ms)
        reason = self.s.eviction_reason or "Evicted"
        self._close_attempt(qr.at_ms, Outcome.LOST, reason)
        self.transition(Kind.RELEASED, qr.at_ms, s.attempts, Source.OBSERVED, qr.reason, qr.message)
        self._sync_kueue_counters()

    def resize(self) -> None:
        """The held quantity changed within the attempt (Kueue scales usage for reclaimable pods)."""
        f, s = self.f, self.s
        qr = f.quota_reserved
        if s.phase not in _OPEN or qr is None or not qr.status or qr.at_ms != s.attempt_start_ms:
            return
        current = tuple((p.flavor, p.resource, p.quantity) for p in s.open_parts)
        wanted = tuple((h.flavor, h.resource, h.quantity) for h in f.held)
        # Only a newer observation may split (a replayed older one must not split again).
        if not f.held or current == wanted or f.observed_ms <= self.original.observed_ms:
            return
        at = max(f.observed_ms, s.attempt_start_ms)
        kept = []
        for p in s.parts:
            if p.end_ms is None:
                self.ended.append(SegmentEnd(s.uid, p.attempt, p.part, p.flavor, p.resource, at))
                kept.append(replace(p, end_ms=at))
            else:
                kept.append(p)
        dims = Dims.of(s.identity)
        nxt = max((p.part for p in s.parts), default=-1) + 1
        for i, h in enumerate(f.held):
            kept.append(Part(s.attempts, nxt + i, h.flavor, h.resource, h.quantity, h.price, at, dims=dims,
                             currency=h.currency))
            self.opened.append(Segment(s.uid, s.attempts, nxt + i, h.flavor, h.resource, h.quantity, h.price,
                                       at, None, Outcome.RUNNING, "", Source.OBSERVED, dims, h.currency))
        self._set(parts=tuple(kept))
        self.transition(Kind.RESIZED, at, s.attempts, Source.OBSERVED, "ReclaimablePods", "", f.held)
        self.touched_attempt = True

    def finish(self) -> None:
        f, s = self.f, self.s
        fin = f.finished
        if s.phase is Phase.FINISHED or fin is None or not fin.status:
            return
        if s.phase in _OPEN:
            self._close_attempt(fin.at_ms, Outcome.USEFUL, fin.reason)
        self.transition(Kind.FINISHED, fin.at_ms, self.s.attempts, Source.OBSERVED, fin.reason, fin.message)
        self._set(phase=Phase.FINISHED, finished_ms=fin.at_ms, finish_reason=fin.reason)
        self._sync_kueue_counters()

    def deletion(self) -> None:
        f, s = self.f, self.s
        if f.deleted_ms is None:
            return
        if s.phase in _OPEN:
            self._close_attempt(f.deleted_ms, Outcome.LOST, "Deleted")
        self.transition(Kind.DELETED, f.deleted_ms, self.s.attempts, Source.OBSERVED, "Deleted")
        self._set(phase=Phase.DELETED, deleted_ms=f.deleted_ms)

    def missed_while_pending(self) -> None:
        """Kueue counts more evictions than accounted, and no attempt is open: whole attempts were missed."""
        f, s = self.f, self.s
        if self.new or self.touched_attempt or s.phase is not Phase.PENDING:
            return
        if f.evictions_total <= s.evictions:
            return
        grown = 0
        if f.accumulated_s is not None:
            grown = max(0, f.accumulated_s - (s.accumulated_s or 0))
        reason = self._stats_reason("Evicted")
        end = f.observed_ms
        if f.quota_reserved is not None and not f.quota_reserved.status and f.quota_reserved.at_ms:
            end = f.quota_reserved.at_ms
        self._inferred_lost(self._unknown_flavor_held(), end, grown, reason)
        self.transition(Kind.EVICTED, end, self.s.attempts, Source.INFERRED, reason,
                        f"{f.evictions_total - s.evictions} eviction(s) not observed; lost time from "
                        "status.accumulatedPastExecutionTimeSeconds")
        self._set(eviction_reason=reason)
        self._sync_kueue_counters()

    def result(self) -> Advance:
        self.s.totals = tuple(sorted(self.totals.items()))
        state = self.s.freeze()
        changed = self.new or state != self.original
        return Advance(state, tuple(self.transitions), tuple(self.opened), tuple(self.ended),
                       tuple(self.outcomes), tuple(self.closed), changed, tuple(self.finals))
