"""Why one workload is where it is, and what the next scheduling cycle does with it (`qm explain
--kubeconfig K NAMESPACE/WORKLOAD`); the same for one ClusterQueue (`--cluster-queue CQ`).

Input is a `ClusterState` as the live cluster holds it (qm/live.py reads it) or as a file gives it: the
Kueue objects and every Workload with its conditions. Nothing else is read, so the verdict is the core's
model of Kueue's next cycle (fairshare.scheduler, the same code `qm explain FILE` and the controller use)
beside Kueue's own words (the Workload's conditions):

- pending: the model's verdict for it (its outcome as its ClusterQueue's head, or, when entries are ahead,
  the outcome it would have as the head: Kueue evaluates every entry in turn), the quota that blocks it
  (each flavor-resource it cannot get: the ClusterQueue's nominal quota, usage and what it can borrow, and
  each cohort node up to the root with its subtree quota and usage: Kueue's `available`,
  pkg/cache/scheduler/resource_node.go), the entries ahead of it in its queue (Kueue's ordering:
  priority, then queue-order time, pkg/cache/queue/cluster_queue.go `queueOrderingFunc`) and Kueue's own
  message (`QuotaReserved=False`, pkg/scheduler/scheduler.go). The model agrees when each reason it gives
  is in Kueue's message: the flavor assigner words them as Kueue does (pkg/scheduler/flavorassigner).
- preempted or evicted: from the conditions. Kueue's preemptor writes `Evicted` (reason `Preempted`) and
  `Preempted` (reason InClusterQueue, InCohortReclamation, InCohortFairSharing, InCohortReclaimWhileBorrowing)
  with "Preempted to accommodate a workload (UID: U, JobUID: J) due to REASON; preemptor path: P; preemptee
  path: Q" (pkg/scheduler/preemption/preemption.go `preemptionMessage`); the preemptor is named by finding
  the Workload of UID U. The operator's own evictions deactivate (`Evicted` reason `Deactivated`) and carry
  its reason in the `QueueManagerPreempted` condition (queue_manager/eviction.py).
- admitted: where, and whether the model's next cycle preempts it (and for whom).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from fairshare.errors import InputError, Location
from fairshare.models import (
    PREEMPTION_REASONS,
    ClusterQueueName,
    ClusterState,
    FlavorResource,
    Workload,
    preemption_note,
)
from fairshare.quantity import format_human
from fairshare.queues import QueueManager
from fairshare.scheduler import EntryOutcome, EntryStatus, PreemptionDecision, SchedulerConfig, schedule_cycle
from fairshare.snapshot import Snapshot
from fairshare.workload import WorkloadInfo

from .cycle import Explanation, explain_state

OUR_CONDITION = "QueueManagerPreempted"  # queue_manager/eviction.py OUR_CONDITION (the core cannot import it)
AHEAD_SHOWN = 10  # entries ahead listed (the count is always given)


class WorkloadState(StrEnum):
    PENDING = "pending"  # queued, no quota reserved
    ADMITTED = "admitted"  # holds quota (QuotaReserved=True)
    FINISHED = "finished"
    DEACTIVATED = "deactivated"  # spec.active=false: Kueue does not queue it
    NO_QUEUE = "no queue"  # its LocalQueue (or that queue's ClusterQueue) does not exist


@dataclass(frozen=True, slots=True)
class CohortLevel:
    """One cohort on the path from the ClusterQueue to the root, for one flavor-resource."""

    name: str
    quota: int  # subtree quota (milli-units)
    usage: int


@dataclass(frozen=True, slots=True)
class QuotaShortfall:
    """A flavor-resource the workload requests more of than its ClusterQueue can get now."""

    flavor_resource: FlavorResource
    request: int
    nominal: int
    borrowing_limit: int | None
    usage: int  # the ClusterQueue's
    available: int  # what the ClusterQueue can take now, borrowing included (never negative)
    potential: int  # the most it could ever get (nominal + what its cohorts can lend)
    cohorts: tuple[CohortLevel, ...]

    @property
    def never_fits(self) -> bool:
        return self.request > self.potential


@dataclass(frozen=True, slots=True)
class QueueEntry:
    key: str
    priority: int
    priority_class: str | None
    since: float  # queue-order time (creation, or the last eviction)


@dataclass(frozen=True, slots=True)
class Eviction:
    """The workload's last eviction or preemption, from its conditions."""

    at: float
    current: bool  # Evicted=True now (False: a past one Kueue reports as "Previously: ...")
    reason: str  # the Evicted reason (Preempted, Deactivated, ...) or the Preempted reason
    message: str
    preemption_reason: str | None = None  # InClusterQueue, InCohortReclamation, ...
    preemptor_uid: str | None = None
    preemptor: str | None = None  # namespace/name, when that Workload still exists
    ours: str | None = None  # the operator's QueueManagerPreempted message


@dataclass(frozen=True)
class WorkloadExplanation:
    key: str
    workload: Workload
    cluster_queue: str | None
    state: WorkloadState
    cycle: Explanation  # the whole next cycle
    outcome: EntryOutcome | None = None  # the model's verdict (as the head, or as if it were)
    is_head: bool = False
    ahead: tuple[QueueEntry, ...] = ()
    shortfalls: tuple[QuotaShortfall, ...] = ()
    kueue_message: str | None = None  # QuotaReserved's message: Kueue's own verdict
    eviction: Eviction | None = None
    preempted_next: PreemptionDecision | None = None  # the next cycle preempts this admitted workload

    @property
    def agrees(self) -> bool | None:
        """The model's reasons are all in Kueue's message (None: nothing to compare)."""
        if self.outcome is None or self.kueue_message is None or self.outcome.assignment is None:
            return None
        reasons = [r for ps in self.outcome.assignment.pod_sets for r in ps.reasons]
        if not reasons:
            return None
        said = _norm(self.kueue_message)
        return all(_norm(r) in said for r in reasons)


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def explain_workload(state: ClusterState, key: str, *, now: float, config: SchedulerConfig | None = None,
                     cycle: Explanation | None = None) -> WorkloadExplanation:
    """`key` ("namespace/name") in the next cycle from `state` (`cycle`: that cycle, when already made)."""
    config = config or SchedulerConfig()
    wl = state.workloads.get(key)
    if wl is None:
        raise InputError("no such Workload", location=Location(field="workload"), value=key)
    if cycle is None:
        cycle = explain_state(state, now=now, config=config)
    snap = cycle.snapshot
    lq = state.local_queues.get(wl.local_queue_key)
    cq_name = wl.admission.cluster_queue if wl.admission is not None else (lq.cluster_queue if lq else None)
    eviction = last_eviction(wl, state)
    kueue = _kueue_message(wl)
    base = WorkloadExplanation(key, wl, cq_name, WorkloadState.PENDING, cycle, kueue_message=kueue,
                               eviction=eviction)
    if wl.is_finished:
        return replace(base, state=WorkloadState.FINISHED)
    if wl.has_quota_reservation:
        nxt = next((p for p in cycle.result.preemptions if p.victim == key), None)
        return replace(base, state=WorkloadState.ADMITTED, preempted_next=nxt)
    if cq_name is None or cq_name not in snap.cluster_queues:
        return replace(base, state=WorkloadState.NO_QUEUE)
    if not wl.active:
        return replace(base, state=WorkloadState.DEACTIVATED)
    info = snap.pending.get(key) or WorkloadInfo.pending(wl, cq_name)
    ordered = QueueManager.from_snapshot(snap, config).ordered(cq_name)
    position = next((i for i, e in enumerate(ordered) if e.key == key), None)
    ahead = tuple(QueueEntry(e.key, e.priority, e.workload.priority_class, e.queue_order_time)
                  for e in ordered[: position if position is not None else 0])
    outcome = cycle.result.outcome(key)
    is_head = outcome is not None
    if outcome is None:
        # Not this cycle's head: the verdict it gets when Kueue evaluates it (Kueue pops every entry in
        # turn; a head that does not fit is set aside in BestEffortFIFO). A what-if cycle with it as the
        # only head; the snapshot is left unchanged (CycleResult).
        outcome = schedule_cycle(snap, now=now, config=config, heads=[info]).outcome(key)
    return replace(base, outcome=outcome, is_head=is_head, ahead=ahead,
                 shortfalls=tuple(shortfalls(snap, wl, cq_name)))


def shortfalls(snap: Snapshot, wl: Workload, cluster_queue: ClusterQueueName) -> list[QuotaShortfall]:
    """Each flavor-resource of the ClusterQueue's resource groups the workload requests more of than the
    ClusterQueue can get now (a flavor that fits on every resource blocks nothing: none listed then)."""
    cq = snap.cluster_queue(cluster_queue)
    requests = wl.total_requests()
    out: list[QuotaShortfall] = []
    fitting_flavor = False
    for group in cq.spec.resource_groups:
        wanted = [r for r in group.covered_resources if requests.get(r, 0) > 0]
        if not wanted:
            continue
        for fq in group.flavors:
            short = []
            for r in wanted:
                fr = FlavorResource(fq.name, r)
                available = cq.available(fr)
                if requests[r] <= available:
                    continue
                q = cq.quota(fr)
                levels = tuple(CohortLevel(n.name, n.subtree_quota.get(fr, 0), n.usage.get(fr, 0))
                               for n in cq.node.ancestors())
                short.append(QuotaShortfall(fr, requests[r], q.nominal, q.borrowing_limit, cq.usage(fr),
                                            available, cq.potential_available(fr), levels))
            if not short:
                fitting_flavor = True
            out += short
    return [] if fitting_flavor else out


def _kueue_message(wl: Workload) -> str | None:
    cond = wl.condition("QuotaReserved")
    if cond is not None and cond.message:
        return cond.message
    pending = wl.condition("Pending")  # older Kueue versions word the wait here
    return pending.message if pending is not None and pending.message else None


def last_eviction(wl: Workload, state: ClusterState) -> Eviction | None:
    """The workload's last eviction, from `Evicted`, `Preempted` and our own condition."""
    evicted = wl.condition("Evicted")
    preempted = wl.condition("Preempted")
    ours = wl.condition(OUR_CONDITION)
    if evicted is None and preempted is None:
        return None
    if preempted is not None and ("Preempted to accommodate" in preempted.message or evicted is None):
        source = preempted
    elif evicted is not None:
        source = evicted
    else:
        return None
    message = source.message
    note = preemption_note(source)
    uid = (note.preemptor_uid or None) if note is not None else None
    preemptor = None
    if uid:
        preemptor = next((k for k, w in sorted(state.workloads.items()) if w.uid == uid), None)
    current = bool(evicted is not None and evicted.status) or bool(preempted is not None and preempted.status)
    reason = evicted.reason if evicted is not None and evicted.status else source.reason
    return Eviction(
        at=max(c.last_transition_time for c in (evicted, preempted) if c is not None),
        current=current,
        reason=reason,
        message=message,
        preemption_reason=preempted.reason if preempted is not None and preempted.reason in PREEMPTION_REASONS
        else (note.reason or None) if note is not None else None,
        preemptor_uid=uid,
        preemptor=preemptor,
        ours=ours.message if ours is not None and ours.status and ours.message else None,
    )


# ----------------------------------------------------------------------------------------- rendering


def _q(milli: int, resource: str) -> str:
    return format_human(milli, resource)


def _ago(now: float, t: float) -> str:
    from fairshare.durations import format_duration

    seconds = max(0.0, now - t)
    return f"{format_duration(round(seconds))} ago" if seconds >= 1 else "just now"


def render_workload(ex: WorkloadExplanation) -> list[str]:
    wl, now = ex.workload, ex.cycle.now
    klass = f" ({wl.priority_class})" if wl.priority_class else ""
    lines = [f"Workload {ex.key}: {ex.state.value}",
             f"  LocalQueue {wl.local_queue_key} -> ClusterQueue {ex.cluster_queue or '(none)'}; priority "
             f"{wl.effective_priority}{klass}; created {_ago(now, wl.creation_timestamp)}"]
    requests = ", ".join(f"{r} {_q(v, r)}" for r, v in sorted(wl.total_requests().items()))
    lines.append(f"  requests {requests or 'nothing'}")
    if ex.state == WorkloadState.ADMITTED and wl.admission is not None:
        flavors = sorted({f for ps in wl.admission.pod_set_assignments for _, f in ps.flavors})
        lines.append(f"  holds quota in ClusterQueue {wl.admission.cluster_queue} on {', '.join(flavors)} "
                     f"(since {_ago(now, wl.quota_reserved_time or now)})")
        if ex.preempted_next is not None:
            p = ex.preempted_next
            lines.append(f"  next cycle: preempted by {p.preemptor} ({p.reason.value}: "
                         f"{PREEMPTION_REASONS.get(p.reason.value, p.reason.value)})")
        else:
            lines.append("  next cycle: keeps its quota")
    elif ex.state == WorkloadState.FINISHED:
        cond = wl.condition("Finished")
        lines.append(f"  finished {_ago(now, cond.last_transition_time if cond else now)}"
                     + (f": {cond.reason}" if cond is not None and cond.reason else ""))
    elif ex.state == WorkloadState.NO_QUEUE:
        lines.append(f"  Kueue does not queue it: LocalQueue {wl.local_queue_key} or its ClusterQueue does "
                     "not exist")
    elif ex.state == WorkloadState.DEACTIVATED:
        lines.append("  spec.active=false: Kueue does not queue it until it is reactivated")
    else:
        lines += _pending_lines(ex)
    if ex.eviction is not None:
        lines += _eviction_lines(ex.eviction, now)
    return lines


def _pending_lines(ex: WorkloadExplanation) -> list[str]:
    lines: list[str] = []
    o = ex.outcome
    if o is not None:
        decision = o.status.value if o.status != EntryStatus.ADMITTED else "admitted"
        if o.status == EntryStatus.PREEMPTING:
            decision = "preempting " + ", ".join(t.key for t in o.targets)
        when = "next cycle" if ex.is_head else "when it is evaluated (not this cycle's head)"
        lines.append(f"  {when}: {decision}: {o.reason}")
    if ex.kueue_message is not None:
        lines.append(f"  Kueue says: {ex.kueue_message}")
        if ex.agrees is not None:
            lines.append("  the model " + ("agrees with Kueue" if ex.agrees else "differs from Kueue"))
    for s in ex.shortfalls:
        r = s.flavor_resource.resource
        limit = "" if s.borrowing_limit is None else f", borrowingLimit {_q(s.borrowing_limit, r)}"
        lines.append(
            f"  blocked by quota {s.flavor_resource.flavor}/{r}: requests {_q(s.request, r)}; ClusterQueue "
            f"{ex.cluster_queue} nominal {_q(s.nominal, r)}{limit}, used {_q(s.usage, r)}, can take "
            f"{_q(s.available, r)} now" + (f", at most {_q(s.potential, r)} ever" if s.never_fits else ""))
        for c in s.cohorts:
            lines.append(f"    cohort {c.name}: quota {_q(c.quota, r)}, used {_q(c.usage, r)}, "
                         f"free {_q(max(0, c.quota - c.usage), r)}")
    if ex.ahead:
        higher = sum(1 for e in ex.ahead if e.priority > ex.workload.effective_priority)
        lines.append(f"  {len(ex.ahead)} entr{'y' if len(ex.ahead) == 1 else 'ies'} ahead in ClusterQueue "
                     f"{ex.cluster_queue}'s queue ({higher} of higher priority):")
        now = ex.cycle.now
        for e in ex.ahead[:AHEAD_SHOWN]:
            klass = f" ({e.priority_class})" if e.priority_class else ""
            lines.append(f"    {e.key}  priority {e.priority}{klass}  queued {_ago(now, e.since)}")
        if len(ex.ahead) > AHEAD_SHOWN:
            lines.append(f"    ... and {len(ex.ahead) - AHEAD_SHOWN} more")
    elif o is not None and ex.is_head:
        lines.append(f"  first in ClusterQueue {ex.cluster_queue}'s queue")
    return lines


def _eviction_lines(e: Eviction, now: float) -> list[str]:
    when = _ago(now, e.at)
    head = "evicted" if e.current else "previously evicted"
    if e.preemption_reason is not None or e.preemptor_uid is not None:
        who = e.preemptor or (f"the workload of UID {e.preemptor_uid} (gone)" if e.preemptor_uid else "?")
        why = e.preemption_reason or "?"
        words = PREEMPTION_REASONS.get(why, "")
        lines = [f"  {head} {when}: preempted by {who} ({why}{': ' + words if words else ''})"]
    else:
        lines = [f"  {head} {when}: {e.reason}" + (f": {e.message}" if e.message else "")]
    if e.ours is not None:
        lines.append(f"  queue-manager's reason: {e.ours}")
    return lines


# ----------------------------------------------------------------------------------------- a ClusterQueue


@dataclass(frozen=True)
class QueueExplanation:
    name: ClusterQueueName
    cycle: Explanation
    ordered: tuple[QueueEntry, ...]  # pending entries in queue order
    admitted: tuple[str, ...]
    verdicts: tuple[WorkloadExplanation, ...]  # the first entries, each explained


def explain_cluster_queue(state: ClusterState, name: ClusterQueueName, *, now: float,
                          config: SchedulerConfig | None = None, explain_first: int = 3) -> QueueExplanation:
    config = config or SchedulerConfig()
    if name not in state.cluster_queues:
        known = ", ".join(sorted(state.cluster_queues)) or "none"
        raise InputError(f"no such ClusterQueue (known: {known})", location=Location(field="--cluster-queue"),
                         value=name)
    cycle = explain_state(state, now=now, config=config)
    snap = cycle.snapshot
    ordered = QueueManager.from_snapshot(snap, config).ordered(name)
    entries = tuple(QueueEntry(e.key, e.priority, e.workload.priority_class, e.queue_order_time)
                    for e in ordered)
    admitted = tuple(sorted(snap.cluster_queue(name).workloads))
    verdicts = tuple(explain_workload(state, e.key, now=now, config=config, cycle=cycle)
                     for e in entries[:explain_first])
    return QueueExplanation(name, cycle, entries, admitted, verdicts)


def render_cluster_queue(ex: QueueExplanation) -> list[str]:
    snap = ex.cycle.snapshot
    cq = snap.cluster_queue(ex.name)
    cohort = cq.node.parent.name if cq.node.parent is not None else "-"
    lines = [f"ClusterQueue {ex.name}: cohort {cohort}; {len(ex.admitted)} admitted, "
             f"{len(ex.ordered)} pending" + ("" if cq.active else f"; inactive: {cq.inactive_reason}")]
    rows = [["FLAVOR/RESOURCE", "NOMINAL", "BORROWING LIMIT", "USED", "CAN TAKE NOW", "COHORT PATH"]]
    for fr in sorted(cq.node.quotas):
        q = cq.quota(fr)
        r = fr.resource
        path = "; ".join(f"{n.name} {_q(n.usage.get(fr, 0), r)}/{_q(n.subtree_quota.get(fr, 0), r)}"
                         for n in cq.node.ancestors()) or "-"
        rows.append([f"{fr.flavor}/{fr.resource}", _q(q.nominal, fr.resource),
                     "-" if q.borrowing_limit is None else _q(q.borrowing_limit, fr.resource),
                     _q(cq.usage(fr), fr.resource), _q(cq.available(fr), fr.resource), path])
    lines += ["", "Quota (cohort path: used/quota of each cohort up to the root):", *_table(rows)]
    outcomes = [o for o in ex.cycle.result.outcomes if o.cluster_queue == ex.name]
    lines += ["", "Next cycle:"]
    if not outcomes:
        lines.append("  no head (nothing pending, or the queue is inactive)")
    for o in outcomes:
        lines.append(f"  head {o.key}: {o.status.value}: {o.reason}")
    victims = [p for p in ex.cycle.result.preemptions if p.victim_cluster_queue == ex.name]
    for p in victims:
        lines.append(f"  preempts {p.victim} for {p.preemptor} ({p.reason.value})")
    if ex.ordered:
        lines += ["", f"Queue ({len(ex.ordered)} pending, in Kueue's order):"]
        qrows = [["#", "WORKLOAD", "PRIORITY", "CLASS", "QUEUED"]]
        for i, e in enumerate(ex.ordered[: AHEAD_SHOWN * 2]):
            qrows.append([str(i + 1), e.key, str(e.priority), e.priority_class or "-",
                          _ago(ex.cycle.now, e.since)])
        lines += _table(qrows)
        if len(ex.ordered) > AHEAD_SHOWN * 2:
            lines.append(f"... and {len(ex.ordered) - AHEAD_SHOWN * 2} more")
    for v in ex.verdicts:
        lines += ["", *render_workload(v)]
    return lines


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
