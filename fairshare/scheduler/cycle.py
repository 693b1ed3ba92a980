"""One Kueue scheduling cycle (pkg/scheduler/scheduler.go ``schedule``).

1. nominate: for every head, validate (CQ exists and is active, namespace selector) and
   compute a flavor assignment; when it needs preemption, pick the targets;
2. order the entries (classical: lower borrowing level, higher priority, older
   queue-order time; fair sharing: the DRS tournament, re-run after every pop);
3. process each entry against the snapshot as earlier entries changed it: admit what
   still fits, issue preemptions, reserve capacity for CQs that cannot always reclaim,
   skip what no longer fits. Every head gets an outcome with its reason in words.

The cycle mutates the snapshot only through its undo log and restores it before
returning; commit the decisions with ``fairshare.scheduler.apply_cycle(snapshot, result)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from ..models import FlavorResource, QueueingStrategy, ReclaimWithinCohort, WorkloadKey
from ..snapshot import ClusterQueueSnapshot, Snapshot
from ..workload import WorkloadInfo
from .assignments import DEFAULT_CONFIG, get_assignments
from .entry import Entry
from .ordering import FairSharingOrder, classical_order
from .types import (
    AdmissionDecision,
    Assignment,
    CycleResult,
    EntryOutcome,
    EntryStatus,
    Mode,
    PreemptionDecision,
    ScanProgress,
    ScanStart,
    SchedulerConfig,
    Target,
    pending_flavors,
)


def _requeue_immediately(
    strategy: QueueingStrategy,
    *,
    nominated: bool,
    pending_preemption: bool = False,
    namespace_mismatch: bool = False,
    scan: ScanProgress | None = None,
) -> bool:
    """ClusterQueue.RequeueIfNotPresent (pkg/cache/queue/cluster_queue.go): StrictFIFO puts
    everything but a namespace mismatch straight back; BestEffortFIFO only entries that
    failed after nomination or wait for their preemptions, and (requeueIfNotPresent) a
    workload whose flavor scan stopped before the last flavor (LastAssignment.PendingFlavors):
    it goes back to the heap to try the remaining flavors."""
    if strategy == QueueingStrategy.STRICT_FIFO:
        return not namespace_mismatch
    return nominated or pending_preemption or pending_flavors(scan)


def schedule_cycle(
    snapshot: Snapshot,
    *,
    now: float,
    config: SchedulerConfig = DEFAULT_CONFIG,
    heads: Sequence[WorkloadInfo],
    scan: Mapping[WorkloadKey, ScanStart] | None = None,
) -> CycleResult:
    """Model ONE Kueue scheduling cycle over ``heads`` (one pending workload per CQ, as
    ``fairshare.queues.QueueManager.heads`` or ``heads_of`` pops them). The snapshot is left unchanged.

    ``scan``: where a head's flavor scan starts, from the progress Kueue kept with it
    (``EntryOutcome.scan`` of its last evaluation, ``next_scan``; pkg/scheduler/scheduler.go
    getAssignments drops it when outdated, which the caller decides: ``fairshare.settle``).
    Without it every scan starts at the first flavor.
    """
    mark = snapshot.checkpoint()
    try:
        return _Cycle(snapshot, config, now, scan or {}).run(heads)
    finally:
        snapshot.rollback(mark)


class _Cycle:
    def __init__(
        self, snapshot: Snapshot, config: SchedulerConfig, now: float, scan: Mapping[WorkloadKey, ScanStart]
    ) -> None:
        self.snapshot = snapshot
        self.config = config
        self.now = now
        self.scan = scan
        # Victims chosen earlier in this cycle. Kueue keeps them in the snapshot and
        # re-simulates their removal for every later fits check. Classical mode: since the
        # accounting is order-independent we remove them once (the cycle's undo log restores
        # them) and add their usage back where Kueue reads it (capacity reservation).
        # Fair-sharing mode keeps them, as Kueue (the DRS tournament reads them), and
        # simulates the removal of the same tree's victims for each fits check.
        self.preempted: dict[WorkloadKey, WorkloadInfo] = {}
        self._persist_removals = not config.fair_sharing
        self._victims_by_root: dict[int, list[WorkloadInfo]] = {}
        self._removed_usage: dict[str, dict[FlavorResource, int]] = {}
        self.admissions: list[AdmissionDecision] = []
        self.preemptions: list[PreemptionDecision] = []
        self.outcomes: list[EntryOutcome] = []

    def run(self, heads: Sequence[WorkloadInfo]) -> CycleResult:
        entries, inadmissible = self._nominate(heads)
        if self.config.fair_sharing:
            order: Iterable[Entry] = FairSharingOrder(self.config).iterate(entries)
        else:
            order = classical_order(entries, self.config)
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
                    pending_preemption=e.pending_preemption,
                    requeue_reason=e.requeue_reason,
                    reserved=e.reserved,
                    scan=e.scan,
                )
            )
        self.outcomes.extend(inadmissible)
        return CycleResult(tuple(self.admissions), tuple(self.preemptions), tuple(self.outcomes))

    # -- nominate ------------------------------------------------------------------------------

    def _nominate(self, heads: Sequence[WorkloadInfo]) -> tuple[list[Entry], list[EntryOutcome]]:
        snap = self.snapshot
        entries: list[Entry] = []
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
                        requeue_reason="NamespaceMismatch" if mismatch else "",
                    )
                )
                continue
            start = self.scan.get(h.key, ())
            if snap.paths.carry_nominations and snap.transaction_depth == 1:  # only the cycle's own
                assignment, targets = self._carried(h, cq, start)
            else:
                assignment, targets = get_assignments(snap, h, self.config, self.now, start=start)
            entries.append(Entry(h, cq, assignment, targets, scan=assignment.scan))
        return entries, bad

    def _carried(
        self, h: WorkloadInfo, cq: ClusterQueueSnapshot, start: ScanStart
    ) -> tuple[Assignment, list[Target]]:
        """FastPaths.carry_nominations: get_assignments, or its answer at this head's previous
        evaluation when every input is the same (the WorkloadInfo, scan start, config, `now` if
        the candidate order reads it, and the content of the CQ's root tree). get_assignments is
        a deterministic function of those and leaves the snapshot as it found it."""
        snap = self.snapshot
        token = snap.tree_token(cq.node)
        now = self.now if snap.now_sensitive else None
        hit = snap.nominations.get(h.key)
        if (
            hit is not None
            and hit[0] is h
            and hit[1] == token
            and hit[2] == start
            and hit[3] is self.config
            and hit[4] == now
        ):
            return hit[5], list(hit[6])
        assignment, targets = get_assignments(snap, h, self.config, self.now, start=start)
        # (the search left the tree's content as it found it: the token still names it)
        snap.nominations[h.key] = (h, token, start, self.config, now, assignment, tuple(targets))
        return assignment, targets


    def _fits_and_remove_targets(self, e: Entry, usage: Mapping[FlavorResource, int]) -> bool:
        """fits: with every victim of this cycle and this entry's own removed, is usage available?

        On success this entry's victims stay removed (they are preempted); otherwise the
        snapshot is restored. (The other entries' victims are already removed.)"""
        snap = self.snapshot
        if not self._persist_removals:
            victims = [
                *self._victims_by_root.get(id(e.cq.node.root()), ()),
                *(t.victim for t in e.targets if t.key not in self.preempted),
            ]
            if not victims:
                return e.cq.fits(usage)
            with snap.simulate_usage_removal(victims):
                return e.cq.fits(usage)
        own = [t.key for t in e.targets if t.key in snap.workloads]
        if not own:
            return e.cq.fits(usage)
        mark = snap.checkpoint()
        for key in own:
            snap.remove_workload(key)
        if e.cq.fits(usage):
            snap.release(mark)
            return True
        snap.rollback(mark)
        return False

    def _update_assignment_if_needed(self, e: Entry) -> Mapping[FlavorResource, int]:
        overlap = any(t.key in self.preempted for t in e.targets)
        if not (overlap and self.config.recompute_assignment_upon_overlap):
            return e.assignment.usage
        # RecomputeAssignmentUponPreemptionTargetsOverlap: recompute as if the other
        # entries' victims were gone; a plain fit then means "fits once they are gone".
        snap = self.snapshot
        nomination = e.assignment.flavors()
        if self._persist_removals:  # the other entries' victims are already removed
            assignment, targets = get_assignments(snap, e.info, self.config, self.now, nomination)
        else:
            with snap.simulate_removal([k for k in self.preempted if k in snap.workloads]):
                assignment, targets = get_assignments(snap, e.info, self.config, self.now, nomination)
        if assignment.mode == Mode.FIT:
            assignment = replace(assignment, mode_override=Mode.DEFERRED_FIT)
        # updateAssignmentIfNeeded clears LastAssignment before recomputing; recordAssignment keeps
        # the new one's progress.
        e.assignment, e.targets, e.scan = assignment, targets, assignment.scan
        return assignment.usage

    def _process(self, e: Entry) -> None:
        snap = self.snapshot
        strategy = e.cq.spec.queueing_strategy
        usage = self._update_assignment_if_needed(e)
        mode = e.assignment.mode
        if mode == Mode.NO_FIT:
            e.status = EntryStatus.NO_FIT
            e.reason = "couldn't assign flavors: " + (e.assignment.message() or "no flavor fits")
            e.immediate = _requeue_immediately(strategy, nominated=False, scan=e.scan)
            e.requeue_reason = "NoFit"
            return
        if mode == Mode.PREEMPT and not e.targets:
            e.status = EntryStatus.WAITING
            e.reason = (
                "waiting for quota: preemption is needed but found no candidates ("
                + e.assignment.message()
                + ")"
            )
            e.immediate = _requeue_immediately(strategy, nominated=False, scan=e.scan)
            e.requeue_reason = "PreemptionNoCandidates"
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
            e.requeue_reason = "PendingPreemption"
            e.pending_preemption = True
            e.scan = None  # DeferredFit clears LastAssignment: a full re-evaluation next cycle
            snap.add_usage(e.cq.node, usage)
            return
        if any(t.key in self.preempted for t in e.targets):
            e.status = EntryStatus.WAITING
            e.reason = "skipped: overlapping preemption targets with another workload"
            e.immediate = _requeue_immediately(strategy, nominated=True)
            e.requeue_reason = "FailedAfterNomination"
            return
        # Kueue computes "fits" before the checks above; it has no side effect there, so
        # evaluating it here decides the same.
        if not self._fits_and_remove_targets(e, usage):
            e.status = EntryStatus.WAITING
            e.reason = "skipped: no longer fits after processing another workload"
            e.immediate = _requeue_immediately(strategy, nominated=True)
            e.requeue_reason = "FailedAfterNomination"
            return
        for t in e.targets:
            self.preempted[t.key] = t.victim
            root = snap.cluster_queues[t.victim.cluster_queue].node.root()
            self._victims_by_root.setdefault(id(root), []).append(t.victim)
            if self._persist_removals:
                removed = self._removed_usage.setdefault(t.victim.cluster_queue, {})
                for fr, v in t.victim.usage.items():
                    removed[fr] = removed.get(fr, 0) + v
        snap.add_usage(e.cq.node, usage)
        if mode == Mode.PREEMPT:
            e.status = EntryStatus.PREEMPTING
            names = ", ".join(f"{t.key} ({t.reason.value})" for t in e.targets)
            e.reason = f"preempting {len(e.targets)} workload(s): {names}"
            e.immediate = _requeue_immediately(strategy, nominated=True, pending_preemption=True)
            e.requeue_reason = "PendingPreemption"
            e.pending_preemption = True
            e.scan = None  # markPreemptionOutcome clears LastAssignment
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

    def _resources_to_reserve(self, e: Entry) -> dict[FlavorResource, int]:
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


__all__ = ["schedule_cycle"]
