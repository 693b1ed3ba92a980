"""Eviction requests and their lifecycle: a pure state machine over `status.lastPreemptions` records.

How the service evicts (docs/controlplane.md, "the service preempts by deactivation"): `spec.active=false`
on the victim; Kueue evicts it through its own path (Job suspended, quota released, `Evicted` reason
Deactivated) and does not requeue it until we set `spec.active=true` again, which we do once its
beneficiary holds the freed quota, so the victim cannot take it straight back. States of a record:

  Requested --(Kueue released its quota)--> Evicted --(beneficiary holds quota, is gone, or the hold
  expired; a transition-deadline victim evicted for another team's work: the hold expired)--> Reactivated
  --(Kueue queues it again, or it holds quota)--> Requeued
  any of the first three --(the victim no longer exists: finished or deleted)--> Gone
  Reported: dry-run, never changes.
  An idle workload (kind idle-gpus, fairshare.control.idle): Requested --> Evicted --> Reclaimed, at once:
  it stays deactivated (no beneficiary waits for it, and its GPUs did nothing) until its owner acts.

A Requested victim that still holds quota and is still active was recorded but never deactivated (a crash
between the status write and the request): the request is repeated (it is idempotent). One held for
longer than `victimHold` without Kueue evicting it is reported once as overdue. Records are the budgets'
memory too (each kind has its own window), so they are trimmed only outside every window.

Held competitors (`status.heldWorkloads`, fairshare.planners.experiments rule 6) are pending experiments
deactivated with the victims; they hold no quota, and are released by the same rule as the victims.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from fairshare.durations import format_duration
from fairshare.models import QuotaKey
from fairshare.planners.deadline import Holder, borrowed_victims, deadline_victims
from fairshare.policy.status import EvictionKind, HeldWorkload, PreemptionRecord, VictimState
from fairshare.timestamps import rfc3339
from fairshare.workload import WorkloadInfo

from .actions import Action, AuditAction, HoldPending, Reactivate, RecordAudit, RequestEviction, Target
from .observed import Observed
from .transitions import ToFree

MAX_RECORDS = 50
TERMINAL = frozenset({VictimState.REQUEUED, VictimState.GONE, VictimState.REPORTED, VictimState.RECLAIMED,
                      None})
KINDS = (EvictionKind.EXPERIMENT, EvictionKind.TRANSITION, EvictionKind.IDLE)  # each with its own budget


def past_eviction_times(records: Iterable[PreemptionRecord], kind: EvictionKind) -> list[float]:
    """Times of real (not dry-run) eviction requests of one kind: each kind has its own budget."""
    return sorted(r.at for r in records if not r.dry_run and r.eviction_kind == kind and r.at is not None)


def eviction_times(records: Iterable[PreemptionRecord]) -> dict[EvictionKind, list[float]]:
    """`past_eviction_times` of every kind in one pass over the records (each kind present, maybe empty;
    no kind, as for `eviction_kind`, is an experiment's)."""
    past: dict[EvictionKind, list[float]] = {k: [] for k in KINDS}
    for r in records:
        at = r.at
        if at is not None and not r.dry_run:
            past[r.kind or EvictionKind.EXPERIMENT].append(at)
    for times in past.values():
        times.sort()
    return past


def lost_in_window(records: Iterable[PreemptionRecord], now: float, window: float) -> dict[str, float]:
    """Work lost to real experiment evictions in the window (now - window, now], resource-hours."""
    out: dict[str, float] = {}
    for r in records:
        if (
            r.dry_run
            or r.eviction_kind != EvictionKind.EXPERIMENT
            or r.at is None
            or not now - window < r.at <= now
        ):
            continue
        for resource, hours in (r.lost_hours or {}).items():
            out[resource] = out.get(resource, 0.0) + hours
    return out


def in_flight(records: Iterable[PreemptionRecord]) -> bool:
    """An eviction we asked for that Kueue has not carried out yet: plan nothing more until it has (the
    snapshot would still count the victim)."""
    return any(r.state == VictimState.REQUESTED and not r.dry_run for r in records)


def already_reported(records: Iterable[PreemptionRecord], victim: str, beneficiary: str | None) -> bool:
    return any(r.dry_run and r.victim == victim and (r.beneficiary or None) == beneficiary for r in records)


def new_record(request: RequestEviction, now: float) -> PreemptionRecord:
    return PreemptionRecord(
        time=rfc3339(now),
        at=now,
        victim=request.victim,
        beneficiary=request.beneficiary or "",
        reason=request.reason,
        dry_run=request.dry_run,
        state=VictimState.REPORTED if request.dry_run else VictimState.REQUESTED,
        kind=request.kind,
        team=request.team,
        lost_hours={r: m / 1000 for r, m in request.lost} or None,
    )


def trim(records: Sequence[PreemptionRecord], now: float, keep_for: float) -> list[PreemptionRecord]:
    """Keep every record still in its lifecycle, every one younger than `keep_for` (the longest budget
    window), and the last MAX_RECORDS others."""
    if len(records) <= MAX_RECORDS:
        return list(records)  # at most MAX_RECORDS others: every one is kept
    keep: set[int] = set()  # by position: `r in a list` compared pydantic models field by field, O(n^2)
    old: list[int] = []
    for i, r in enumerate(records):
        if r.state not in TERMINAL or (r.at is not None and now - r.at < keep_for):
            keep.add(i)
        else:
            old.append(i)
    keep.update(old[-MAX_RECORDS:])
    return [r for i, r in enumerate(records) if i in keep]


def follow_up(
    records: Sequence[PreemptionRecord],
    observed: Observed,
    now: float,
    hold_s: float,
    policy: str,
    positions: Sequence[int] | None = None,
) -> tuple[list[PreemptionRecord], list[Action], float | None]:
    """Move each record along its lifecycle from what is observed; returns the records, the actions
    (reactivations, repeated requests, audit records) and when a hold expires next. `positions`: the
    positions of every record not dry-run nor in a terminal state, in order, if the caller knows them
    (fairshare.control.record_book): the others are kept as they are either way."""
    out: list[PreemptionRecord] = list(records)
    actions: list[Action] = []
    wake: float | None = None
    for i in range(len(out)) if positions is None else positions:
        r = out[i]
        if r.dry_run or r.state in TERMINAL:
            continue
        victim = r.victim
        was = r.state
        at = r.at if r.at is not None else now
        if not observed.exists(victim):
            out[i] = r.model_copy(update={"state": VictimState.GONE})
            continue
        state = r.state
        if state == VictimState.REQUESTED:
            if not observed.holds_quota(victim):
                actions.append(
                    RecordAudit(
                        AuditAction.PREEMPT_VERIFIED,
                        Target.workload(victim),
                        f"Kueue evicted {victim}",
                        r.reason,
                    )
                )
                r = r.model_copy(update={"state": VictimState.EVICTED, "evicted_at": rfc3339(now)})
                state = VictimState.EVICTED
            elif observed.snapshot.workloads[victim].workload.active:
                actions.append(
                    RequestEviction(victim, r.beneficiary or None, r.reason, r.eviction_kind, repeat=True)
                )
            elif now - at > hold_s and not r.overdue:
                actions.append(
                    RecordAudit(
                        AuditAction.PREEMPT_OVERDUE,
                        Target.workload(victim),
                        f"Kueue has not evicted {victim} {format_duration(now - at)} after the request",
                        r.reason,
                        also_on=Target.policy(policy),
                    )
                )
                r = r.model_copy(update={"overdue": True})
            else:
                wake = _earlier(wake, at + hold_s)
        if state == VictimState.EVICTED and r.eviction_kind == EvictionKind.IDLE:
            # An idle workload reclaimed (fairshare.control.idle): it stays deactivated; its owner
            # reactivates it (spec.active=true) or deletes it.
            r = r.model_copy(update={"state": VictimState.RECLAIMED})
            state = VictimState.RECLAIMED
        if state == VictimState.EVICTED:
            beneficiary = r.beneficiary or None
            if r.eviction_kind == EvictionKind.TRANSITION and beneficiary is not None:
                why = _deadline_release(beneficiary, now - at, hold_s)
            else:
                why = _release_reason(observed, beneficiary, now - at, hold_s)
            if why is not None:
                actions.append(Reactivate(victim, why))
                r = r.model_copy(update={"state": VictimState.REACTIVATED})
                state = VictimState.REACTIVATED
            else:
                wake = _earlier(wake, at + hold_s)
        if state == VictimState.REACTIVATED:
            pending = observed.pending.get(victim)
            if observed.holds_quota(victim) or (pending is not None and pending.queued):
                r = r.model_copy(update={"state": VictimState.REQUEUED})
            elif was == VictimState.REACTIVATED and pending is not None and not pending.queued:
                # Recorded as reactivated but still deactivated (the shell stopped in between): again.
                actions.append(Reactivate(victim, "its reactivation was recorded but not carried out"))
        out[i] = r
    return out, actions, wake


def release_holds(
    held: Sequence[HeldWorkload], observed: Observed, now: float, hold_s: float
) -> tuple[list[HeldWorkload], list[Action], float | None]:
    """Held competitors (`HeldWorkload`) are released by the victims' rule (`_release_reason`): their
    beneficiary holds quota, is gone, or the hold passed victimHold. One that is gone is forgotten."""
    keep: list[HeldWorkload] = []
    actions: list[Action] = []
    wake: float | None = None
    for h in held:
        if not observed.exists(h.workload):
            continue
        at = h.at if h.at is not None else now
        why = _release_reason(observed, h.beneficiary, now - at, hold_s)
        if why is not None:
            actions.append(Reactivate(h.workload, why.replace("evicted for", "held for")))
        else:
            keep.append(h)
            wake = _earlier(wake, at + hold_s)
    return keep, actions, wake


def hold_record(action: HoldPending, now: float) -> HeldWorkload:
    return HeldWorkload(workload=action.workload, beneficiary=action.beneficiary, time=rfc3339(now), at=now)


def _deadline_release(beneficiary: str, held_for: float, hold_s: float) -> str | None:
    """A victim of a transition past its deadline, evicted for another team's pending work: its team is
    above its quota in force, so it stays deactivated the whole victimHold, whether its beneficiary got the
    quota at once or not: quota the running work frees meanwhile goes to work Kueue orders first, never
    straight back to it, and the eviction is not undone within its hold (tests/futile.py)."""
    if held_for > hold_s:
        return (f"held {format_duration(held_for)}, the policy's victimHold, after its eviction for "
                f"{beneficiary}")
    return None


def _release_reason(
    observed: Observed, beneficiary: str | None, held_for: float, hold_s: float
) -> str | None:
    if beneficiary is None:
        return "evicted for a quota transition: Kueue requeues it"
    if observed.holds_quota(beneficiary):
        return f"its beneficiary {beneficiary} holds quota"
    if not observed.exists(beneficiary):
        return f"its beneficiary {beneficiary} is gone"
    if held_for > hold_s:
        return (f"held {format_duration(held_for)}, the policy's victimHold, without {beneficiary} being "
                "admitted")
    return None


def _earlier(a: float | None, b: float) -> float:
    return b if a is None or b < a else a


def _holders(observed: Observed, key: QuotaKey, now: float, max_evictions: int | None = None) -> list[Holder]:
    """The team's workloads holding the key's flavor-resource, for the deadline's choice; with
    `max_evictions`, without those evicted that many times already (spec.preemption.maxEvictionsPerWorkload:
    status.schedulingStats.evictions)."""
    cq = observed.snapshot.cluster_queues.get(key.team)
    if cq is None:
        return []
    fr = key.flavor_resource
    return [
        Holder(w.key, w.priority, now if w.quota_reserved_time is None else w.quota_reserved_time,
               w.usage.get(fr, 0))
        for _, w in sorted(cq.workloads.items())
        if max_evictions is None or w.workload.eviction_count < max_evictions
    ]


def deadline_requests(
    to_free: Sequence[ToFree],
    observed: Observed,
    now: float,
    dry_run: bool,
) -> list[RequestEviction]:
    """Victims of transitions past their deadline holding more than their team may hold (nominal +
    borrowingLimit), among the team's workloads holding the flavor-resource: the core's rule
    (fairshare.planners.deadline.deadline_victims: lowest priority, then least work lost, filled back)."""
    out: list[RequestEviction] = []
    for item in to_free:
        key: QuotaKey = item.key
        holders = _holders(observed, key, now)
        what = f"transition of {key.team} {key.flavor}/{key.resource}"
        for v in deadline_victims(holders, excess=item.excess, allowed=item.allowed, now=now, what=what,
                                  resource=key.resource):
            out.append(RequestEviction(v.key, None, v.reason, EvictionKind.TRANSITION, dry_run=dry_run,
                                       team=key.team))
    return out


def borrowed_requests(
    borrowed: Sequence[ToFree],
    observed: Observed,
    now: float,
    dry_run: bool,
    allowed: Callable[[QuotaKey], int],
    grace: float,
    max_evictions: int,
) -> tuple[list[RequestEviction], float | None]:
    """Victims of transitions past their deadline whose team borrows above its quota in force, within what
    it may hold: only for another team's pending work that the what-if shows takes the quota they free
    (fairshare.planners.deadline.borrowed_victims), each request naming it as its beneficiary (the victim
    stays deactivated until it holds the quota: `follow_up`). Pending work counts once it has waited
    `grace` (spec.preemption.starvationGrace) since it last became pending, as for the experiment gate:
    Kueue, and the running work that finishes meanwhile, get the first chance, so that hours of a victim's
    work are not traded for seconds of someone's wait. `allowed`: the victims the key's hourly budget
    allows now. `max_evictions` (spec.preemption.maxEvictionsPerWorkload): a workload evicted that many
    times already is not a victim (anti-thrash, as for experiment preemption; what the team may not hold at
    all falls regardless, `deadline_requests`: Kueue cannot re-admit it, so it cannot thrash). Returns the
    requests and when waiting work reaches its grace."""
    teams = {item.key.team for item in borrowed}
    starved: list[WorkloadInfo] = []
    wake: float | None = None
    for _, p in sorted(observed.pending.items()):
        if not p.queued:
            continue
        if now - p.since >= grace:
            starved.append(p.info)
        elif p.info.cluster_queue not in teams:
            wake = _earlier(wake, p.since + grace)
    if not starved:
        return [], wake
    # Kueue's queues hold the starved and the waiting alike: the model's cycles see them all.
    queued = [p.info for _, p in sorted(observed.pending.items()) if p.queued]
    out: list[RequestEviction] = []
    for item in borrowed:
        key = item.key
        room = allowed(key)
        if room <= 0:
            continue
        what = f"transition of {key.team} {key.flavor}/{key.resource}"
        holders = _holders(observed, key, now, max_evictions)
        for v in borrowed_victims(observed.snapshot, key.team, key.flavor_resource, holders, starved,
                                  excess=item.excess, allowed=room, now=now, what=what,
                                  config=observed.config, queued=queued):
            out.append(RequestEviction(v.key, v.beneficiary, v.reason, EvictionKind.TRANSITION,
                                       dry_run=dry_run, team=key.team))
    return out, wake
