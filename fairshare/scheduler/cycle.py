"""One Kueue scheduling cycle (pkg/scheduler/scheduler.go ``schedule``).

1. nominate: for every head, validate (CQ exists and is active, namespace selector) and
   compute a flavor assignment; when it needs preemption, pick the targets;
2. order the entries (classical: lower borrowing level, higher priority, older
   queue-order time; fair sharing: the DRS tournament, re-run after every pop);
3. process each entry against the snapshot as earlier entries changed it: admit what
   still fits, issue preemptions, reserve capacity for CQs that cannot always reclaim,
   skip what no longer fits. Every head gets an outcome with its reason in words.

The cycle mutates the snapshot only through its undo log and restores it before
returning; commit the decisions with ``Snapshot.apply(result)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..models import FlavorResource, PreemptionReason, QueueingStrategy, ReclaimWithinCohort, WorkloadKey
from ..quota_tree import DRS, QuotaNode, compare_drs
from ..snapshot import ClusterQueueSnapshot, Snapshot, WorkloadInfo
from .flavor_assigner import FlavorAssigner, Oracle, PreemptionMode, find_height_of_lowest_subtree_that_fits
from .preemption import get_targets
from .types import (
    AdmissionDecision,
    Assignment,
    CycleResult,
    EntryOutcome,
    EntryStatus,
    Mode,
    PreemptionDecision,
    SchedulerConfig,
    Target,
)

DEFAULT_CONFIG = SchedulerConfig()


# --- single-workload queries ---------------------------------------------------------------


def _oracle(snapshot: Snapshot, config: SchedulerConfig, now: float) -> Oracle:
    def simulate(
        cq: ClusterQueueSnapshot, wl: WorkloadInfo, fr: FlavorResource, quantity: int
    ) -> tuple[PreemptionMode, int]:
        """PreemptionOracle.SimulatePreemption (preemption_oracle.go)."""
        targets = get_targets(snapshot, wl, frozenset((fr,)), {fr: quantity}, config, now)
        if not targets:
            borrow, _ = find_height_of_lowest_subtree_that_fits(cq, fr, quantity)
            return PreemptionMode.NO_CANDIDATES, borrow
        with snapshot.simulate_usage_removal(t.victim for t in targets):
            borrow, _ = find_height_of_lowest_subtree_that_fits(cq, fr, quantity)
        if any(t.victim.cluster_queue == cq.name for t in targets):
            return PreemptionMode.PREEMPT, borrow
        return PreemptionMode.RECLAIM, borrow

    return simulate


def assign(
    snapshot: Snapshot,
    workload: WorkloadInfo,
    config: SchedulerConfig = DEFAULT_CONFIG,
    *,
    now: float = 0.0,
    nomination: Mapping[str, Mapping[str, str]] | None = None,
) -> Assignment:
    """Can Kueue admit ``workload`` (pending, in ``workload.cluster_queue``) now, and how?

    Returns the flavor assignment: mode Fit / Preempt / NoFit per flavor-resource and
    overall, the borrowing level, the usage admission would charge. The snapshot is not
    changed.
    """
    # Only the preemption oracle changes the snapshot, and it undoes its own changes.
    return FlavorAssigner(snapshot, workload, config, _oracle(snapshot, config, now), nomination).assign()


def preemption_targets(
    snapshot: Snapshot,
    workload: WorkloadInfo,
    assignment: Assignment,
    config: SchedulerConfig = DEFAULT_CONFIG,
    *,
    now: float = 0.0,
) -> list[Target]:
    """The victims Kueue would preempt so that ``assignment`` fits (empty: none would do)."""
    return get_targets(snapshot, workload, assignment.frs_needing_preemption(), assignment.usage, config, now)


def get_assignments(
    snapshot: Snapshot,
    workload: WorkloadInfo,
    config: SchedulerConfig,
    now: float,
    nomination: Mapping[str, Mapping[str, str]] | None = None,
) -> tuple[Assignment, list[Target]]:
    """getInitialAssignments (no partial admission): the assignment and, for Preempt, targets.

    ``nomination`` (podSet -> resource -> flavor) pins the flavors of a first attempt."""
    a = assign(snapshot, workload, config, now=now, nomination=nomination)
    if a.mode == Mode.PREEMPT:
        targets = preemption_targets(snapshot, workload, a, config, now=now)
        if targets:
            return a, targets
    return a, []


# --- the cycle -----------------------------------------------------------------------------


@dataclass(slots=True)
class _Entry:
    info: WorkloadInfo
    cq: ClusterQueueSnapshot
    assignment: Assignment
    targets: list[Target]
    status: EntryStatus = EntryStatus.WAITING
    reason: str = ""
    immediate: bool = False
    reserved: dict[FlavorResource, int] = field(default_factory=dict)


def _requeue_immediately(
    strategy: QueueingStrategy,
    *,
    nominated: bool,
    pending_preemption: bool = False,
    namespace_mismatch: bool = False,
) -> bool:
    """ClusterQueue.RequeueIfNotPresent (pkg/cache/queue/cluster_queue.go): StrictFIFO puts
    everything but a namespace mismatch straight back; BestEffortFIFO only entries that
    failed after nomination or wait for their preemptions."""
    if strategy == QueueingStrategy.STRICT_FIFO:
        return not namespace_mismatch
    return nominated or pending_preemption


def schedule_cycle(
    snapshot: Snapshot,
    *,
    now: float,
    config: SchedulerConfig = DEFAULT_CONFIG,
    heads: Sequence[WorkloadInfo] | None = None,
) -> CycleResult:
    """Model ONE Kueue scheduling cycle over ``heads`` (one pending workload per CQ).

    ``heads=None`` takes, per active ClusterQueue, the first workload of
    ``snapshot.pending`` in Kueue's queue order. The snapshot is left unchanged.
    """
    if heads is None:
        from ..queues import heads_of  # local: queues imports the scheduler's types

        heads = heads_of(snapshot, now=now, config=config)
    mark = snapshot.checkpoint()
    try:
        return _Cycle(snapshot, config, now).run(heads)
    finally:
        snapshot.rollback(mark)


class _Cycle:
    def __init__(self, snapshot: Snapshot, config: SchedulerConfig, now: float) -> None:
        self.snapshot = snapshot
        self.config = config
        self.now = now
        # Victims chosen earlier in this cycle. Kueue re-simulates their removal for every
        # later fits check; since the accounting is order-independent we remove them from
        # the snapshot once (the cycle's undo log restores them) and put them back only
        # where Kueue reads the snapshot with them present (reservation, DRS tournament).
        self.preempted: dict[WorkloadKey, WorkloadInfo] = {}
        self._removed_usage: dict[str, dict[FlavorResource, int]] = {}
        self.admissions: list[AdmissionDecision] = []
        self.preemptions: list[PreemptionDecision] = []
        self.outcomes: list[EntryOutcome] = []

    def run(self, heads: Sequence[WorkloadInfo]) -> CycleResult:
        entries, inadmissible = self._nominate(heads)
        if self.config.fair_sharing:
            order: Iterable[_Entry] = self._fair_sharing_order(entries)
        else:
            order = _classical_order(entries)
        for e in order:
            self._process(e)
            self.outcomes.append(
                EntryOutcome(
                    key=e.info.key,
                    cluster_queue=e.cq.name,
                    status=e.status,
                    reason=e.reason,
                    assignment=e.assignment,
                    targets=tuple(e.targets),
                    requeue_immediately=e.immediate,
                    reserved=e.reserved,
                )
            )
        self.outcomes.extend(inadmissible)
        return CycleResult(tuple(self.admissions), tuple(self.preemptions), tuple(self.outcomes))

    # -- nominate ------------------------------------------------------------------------------

    def _nominate(self, heads: Sequence[WorkloadInfo]) -> tuple[list[_Entry], list[EntryOutcome]]:
        snap = self.snapshot
        entries: list[_Entry] = []
        bad: list[EntryOutcome] = []
        for h in heads:
            if h.key in snap.workloads:
                continue  # already admitted (assumed): nothing to do
            cq = snap.cluster_queues.get(h.cluster_queue)
            strict = cq is not None and cq.spec.queueing_strategy == QueueingStrategy.STRICT_FIFO
            reason = None
            mismatch = False
            if cq is None:
                reason = f"ClusterQueue {h.cluster_queue} not found"
            elif cq.inactive_reason is not None:
                reason = cq.inactive_reason
            else:
                labels = snap.namespace_labels.get(
                    h.workload.namespace, {"kubernetes.io/metadata.name": h.workload.namespace}
                )
                if not cq.namespace_matches(labels):
                    reason = "Workload namespace doesn't match ClusterQueue selector"
                    mismatch = True
            if reason is not None or cq is None:
                bad.append(
                    EntryOutcome(
                        key=h.key,
                        cluster_queue=h.cluster_queue,
                        status=EntryStatus.INADMISSIBLE,
                        reason=reason or "",
                        requeue_immediately=strict and not mismatch,
                    )
                )
                continue
            assignment, targets = get_assignments(snap, h, self.config, self.now)
            entries.append(_Entry(h, cq, assignment, targets))
        return entries, bad

    # -- ordering ------------------------------------------------------------------------------

    def _fair_sharing_order(self, entries: list[_Entry]) -> Iterable[_Entry]:
        """fairSharingIterator: each pop runs the DRS tournament on the current snapshot."""
        remaining: dict[str, _Entry] = {e.cq.name: e for e in entries}
        order = [e.cq.name for e in entries]
        while remaining:
            first = next(n for n in order if n in remaining)
            node = remaining[first].cq.node
            if node.parent is None:
                yield remaining.pop(first)
                continue
            root = node.root()
            drs = self._tournament_drs(root, remaining)
            winner = _run_tournament(root, remaining, drs, self.config)
            if winner is None:  # pragma: no cover - the CQ's own entry is in the tree
                yield remaining.pop(first)
                continue
            del remaining[winner.cq.name]
            yield winner

    def _tournament_drs(self, root: QuotaNode, remaining: Mapping[str, _Entry]) -> dict[tuple[str, str], DRS]:
        """computeDRS: each head's DRS with its usage added, for its CQ and each ancestor."""
        out: dict[tuple[str, str], DRS] = {}
        snap = self.snapshot
        victims = [
            v
            for v in self.preempted.values()
            if v.key not in snap.workloads and snap.cluster_queues[v.cluster_queue].node.root() is root
        ]
        with snap.simulate_addition(victims):  # Kueue's snapshot still holds them
            for e in remaining.values():
                self._entry_drs(e, root, out)
        return out

    def _entry_drs(self, e: _Entry, root: QuotaNode, out: dict[tuple[str, str], DRS]) -> None:
        snap = self.snapshot
        node = e.cq.node
        if node.root() is not root:
            return
        usage = e.assignment.usage
        snap.add_usage(node, usage)
        share = node.dominant_resource_share()
        for anc in node.ancestors():
            out[(anc.name, e.info.key)] = share
            share = anc.dominant_resource_share()
        snap.remove_usage(node, usage)

    # -- process -------------------------------------------------------------------------------

    def _fits(self, e: _Entry, usage: Mapping[FlavorResource, int], targets: Sequence[Target]) -> bool:
        """fits: with every victim of this cycle (and this entry's) removed, is usage available?"""
        snap = self.snapshot
        own = [t.key for t in targets if t.key in snap.workloads]
        if not own:
            return e.cq.fits(usage)
        with snap.simulate_removal(own):
            return e.cq.fits(usage)

    def _update_assignment_if_needed(self, e: _Entry) -> tuple[Mapping[FlavorResource, int], bool]:
        overlap = any(t.key in self.preempted for t in e.targets)
        if not (overlap and self.config.recompute_assignment_upon_overlap):
            return e.assignment.usage, self._fits(e, e.assignment.usage, e.targets)
        # RecomputeAssignmentUponPreemptionTargetsOverlap: recompute as if the other
        # entries' victims were gone; a plain fit then means "fits once they are gone".
        snap = self.snapshot  # the other entries' victims are already removed
        assignment, targets = get_assignments(snap, e.info, self.config, self.now, e.assignment.flavors())
        if assignment.mode == Mode.FIT:
            assignment = replace(assignment, mode_override=Mode.DEFERRED_FIT)
        e.assignment, e.targets = assignment, targets
        return assignment.usage, self._fits(e, assignment.usage, targets)

    def _process(self, e: _Entry) -> None:
        snap = self.snapshot
        strategy = e.cq.spec.queueing_strategy
        usage, fits = self._update_assignment_if_needed(e)
        mode = e.assignment.mode
        if mode == Mode.NO_FIT:
            e.status = EntryStatus.NO_FIT
            e.reason = "couldn't assign flavors: " + (e.assignment.message() or "no flavor fits")
            e.immediate = _requeue_immediately(strategy, nominated=False)
            return
        if mode == Mode.PREEMPT and not e.targets:
            e.status = EntryStatus.WAITING
            e.reason = (
                "waiting for quota: preemption is needed but found no candidates ("
                + e.assignment.message()
                + ")"
            )
            e.immediate = _requeue_immediately(strategy, nominated=False)
            # reserveCapacityForUnreclaimablePreempt: a CQ that cannot always reclaim keeps
            # the capacity it could get so that lower-priority heads elsewhere don't take it.
            if e.cq.spec.preemption.reclaim_within_cohort != ReclaimWithinCohort.ANY:
                e.reserved = self._resources_to_reserve(e)
                snap.add_usage(e.cq.node, e.reserved)
            return
        if mode == Mode.DEFERRED_FIT:
            e.status = EntryStatus.WAITING
            e.reason = (
                "has overlapping preemption targets with another workload, "
                "but will fit after these preemptions complete"
            )
            e.immediate = _requeue_immediately(strategy, nominated=True, pending_preemption=True)
            snap.add_usage(e.cq.node, usage)
            return
        if any(t.key in self.preempted for t in e.targets):
            e.status = EntryStatus.WAITING
            e.reason = "skipped: overlapping preemption targets with another workload"
            e.immediate = _requeue_immediately(strategy, nominated=True)
            return
        if not fits:
            e.status = EntryStatus.WAITING
            e.reason = "skipped: no longer fits after processing another workload"
            e.immediate = _requeue_immediately(strategy, nominated=True)
            return
        for t in e.targets:
            self.preempted[t.key] = t.victim
            if t.key in snap.workloads:
                snap.remove_workload(t.key)
                removed = self._removed_usage.setdefault(t.victim.cluster_queue, {})
                for fr, v in t.victim.usage.items():
                    removed[fr] = removed.get(fr, 0) + v
        snap.add_usage(e.cq.node, usage)
        if mode == Mode.PREEMPT:
            e.status = EntryStatus.PREEMPTING
            names = ", ".join(f"{t.key} ({t.reason.value})" for t in e.targets)
            e.reason = f"preempting {len(e.targets)} workload(s): {names}"
            e.immediate = _requeue_immediately(strategy, nominated=True, pending_preemption=True)
            for t in e.targets:
                self.preemptions.append(
                    PreemptionDecision(
                        victim=t.key,
                        victim_cluster_queue=t.victim.cluster_queue,
                        reason=t.reason,
                        preemptor=e.info.key,
                        preemptor_cluster_queue=e.cq.name,
                    )
                )
            return
        e.status = EntryStatus.ADMITTED
        flavors = "; ".join(
            f"{ps}: " + ", ".join(f"{r}={f}" for r, f in m.items())
            for ps, m in e.assignment.flavors().items()
        )
        e.reason = f"admitted ({flavors})" + (
            f", borrowing level {e.assignment.borrowing}" if e.assignment.borrowing else ""
        )
        i = e.info
        admitted = WorkloadInfo(
            i.key,
            i.workload,
            i.cluster_queue,
            i.local_queue,
            i.priority,
            i.queue_order_time,
            i.uid,
            dict(usage),
            self.now,
            False,
        )
        self.admissions.append(AdmissionDecision(e.info.key, e.cq.name, e.assignment, admitted))

    def _resources_to_reserve(self, e: _Entry) -> dict[FlavorResource, int]:
        """quotaResourcesToReserve (scheduler.go)."""
        node = e.cq.node
        removed = self._removed_usage.get(e.cq.name, {})
        out: dict[FlavorResource, int] = {}
        for fr, usage in e.assignment.usage.items():
            q = node.quota(fr)
            used = node.usage.get(fr, 0) + removed.get(fr, 0)  # as Kueue sees it: victims still there
            if e.assignment.borrowing > 0:
                limit = None if q.borrowing_limit is None else q.nominal + q.borrowing_limit - used
                out[fr] = usage if limit is None else min(usage, limit)
            else:
                out[fr] = max(0, min(usage, q.nominal - used))
        return out


def _classical_order(entries: list[_Entry]) -> list[_Entry]:
    """makeClassicalIterator: lower borrowing level, higher priority, older queue-order time."""
    return sorted(entries, key=lambda e: (e.assignment.borrowing, -e.info.priority, e.info.queue_order_time))


def _run_tournament(
    cohort: QuotaNode,
    remaining: Mapping[str, _Entry],
    drs: Mapping[tuple[str, str], DRS],
    config: SchedulerConfig,
) -> _Entry | None:
    """runTournament: the best candidate of every child bubbles up; compared at each cohort."""
    candidates: list[_Entry] = []
    for child in cohort.child_cohorts:
        c = _run_tournament(child, remaining, drs, config)
        if c is not None:
            candidates.append(c)
    for cq in cohort.child_cqs:
        e = remaining.get(cq.name)
        if e is not None:
            candidates.append(e)
    if not candidates:
        return None
    best = candidates[0]
    for cur in candidates[1:]:
        if _fs_less(cur, best, cohort.name, drs, config):
            best = cur
    return best


def _fs_less(
    a: _Entry, b: _Entry, parent: str, drs: Mapping[tuple[str, str], DRS], config: SchedulerConfig
) -> bool:
    """entryComparer.less (fair_sharing_iterator.go)."""
    a_drs = drs[(parent, a.info.key)]
    b_drs = drs[(parent, b.info.key)]
    if config.fair_sharing_prioritize_non_borrowing:
        a_b = a_drs.is_borrowing_on(a.assignment.usage)
        b_b = b_drs.is_borrowing_on(b.assignment.usage)
        if a_b != b_b:
            return not a_b
    c = compare_drs(a_drs, b_drs)
    if c != 0:
        return c < 0
    if config.priority_sorting_within_cohort and a.info.priority != b.info.priority:
        return a.info.priority > b.info.priority
    return a.info.queue_order_time < b.info.queue_order_time


__all__ = ["PreemptionReason", "assign", "get_assignments", "preemption_targets", "schedule_cycle"]
