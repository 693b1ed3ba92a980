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

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from ..models import FlavorResource, QueueingStrategy, ReclaimWithinCohort, WorkloadKey
from ..quota_tree import QuotaNode
from ..snapshot import ClusterQueueSnapshot, Snapshot
from ..workload import WorkloadInfo
from .bound import proved_no_targets
from .flavor_assigner import FlavorAssigner, Oracle, PreemptionMode, find_height_of_lowest_subtree_that_fits
from .preemption import can_have_candidates, get_targets
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

DEFAULT_CONFIG = SchedulerConfig()


# --- single-workload queries ---------------------------------------------------------------


# FastPaths.single_search: the oracle's searches of one head evaluation, by (fr, quantity), with
# the snapshot state they were made in.
_Searches = dict[tuple[FlavorResource, int], tuple[int, list[Target]]]


def _oracle(
    snapshot: Snapshot, config: SchedulerConfig, now: float, searches: _Searches | None = None
) -> Oracle:
    bounded = snapshot.paths.bound_search and not config.fair_sharing  # (the classical search only)

    def simulate(
        cq: ClusterQueueSnapshot, wl: WorkloadInfo, fr: FlavorResource, quantity: int
    ) -> tuple[PreemptionMode, int]:
        """PreemptionOracle.SimulatePreemption (preemption_oracle.go)."""
        # (get_targets is empty without building its arguments when no candidate can exist, or,
        # FastPaths.bound_search, when even every candidate's usage would not make room: bound.py)
        if not can_have_candidates(cq) or (
            bounded and proved_no_targets(snapshot, cq, wl, fr, quantity)
        ):
            targets: list[Target] = []
        else:
            targets = get_targets(snapshot, wl, frozenset((fr,)), {fr: quantity}, config, now)
        if searches is not None:
            searches[(fr, quantity)] = (snapshot.state_id, targets)
        if not targets:
            borrow, _ = find_height_of_lowest_subtree_that_fits(cq, fr, quantity)
            return PreemptionMode.NO_CANDIDATES, borrow
        # FindHeightOfLowestSubtreeThatFits with the targets' usage removed. Only victims
        # in this CQ change its own usage; when it no longer borrows the answer is 0 and
        # the simulation can be skipped.
        own = sum(t.victim.usage.get(fr, 0) for t in targets if t.victim.cluster_queue == cq.name)
        if cq.node.parent is None or not cq.node.borrowing_with(fr, quantity - own):
            borrow = 0
        else:
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


def assign_with_targets(
    snapshot: Snapshot,
    workload: WorkloadInfo,
    config: SchedulerConfig = DEFAULT_CONFIG,
    *,
    now: float = 0.0,
) -> tuple[Assignment, list[Target]]:
    """`assign`, and for mode Preempt the victims `preemption_targets` gives for it (none otherwise): what
    a caller asking both gets. FastPaths.single_search: the preemption oracle's search for the same
    flavor-resource and quantity on the same snapshot state is read again (`_final_targets`), not run
    twice."""
    assigner, searches = _searching_assigner(snapshot, workload, config, now, None, ())
    assignment = assigner.assign()
    if assignment.mode != Mode.PREEMPT:
        return assignment, []
    return assignment, _final_targets(snapshot, workload, assignment, config, now, searches)


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
    start: ScanStart = (),
) -> tuple[Assignment, list[Target]]:
    """getInitialAssignments: the assignment and, for Preempt, the targets.

    When the full counts neither fit nor find victims and a pod set has ``minCount``
    (partial admission, beta and on), the counts are binary-searched down toward the
    minimums (PodSetReducer). ``nomination`` (podSet -> resource -> flavor) pins the
    flavors of a first attempt. ``start``: where each pod set's flavor scan starts (the
    workload's recorded scan progress, see ``schedule_cycle``)."""
    assigner, searches = _searching_assigner(snapshot, workload, config, now, nomination, start)
    full = assigner.assign()
    if full.mode == Mode.FIT:
        return full, []
    if full.mode == Mode.PREEMPT and can_have_candidates(assigner.cq):
        targets = _final_targets(snapshot, workload, full, config, now, searches)
        if targets:
            return full, targets
    if config.partial_admission:
        found = _reduce_pod_sets(snapshot, workload, assigner, config, now, searches)
        if found is not None:
            return found
    return full, []


def _searching_assigner(
    snapshot: Snapshot,
    workload: WorkloadInfo,
    config: SchedulerConfig,
    now: float,
    nomination: Mapping[str, Mapping[str, str]] | None,
    start: ScanStart,
) -> tuple[FlavorAssigner, _Searches | None]:
    """The flavor assigner whose preemption oracle, FastPaths.single_search, keeps its searches for
    `_final_targets` to read again (the searches map, or None without the fast path)."""
    searches: _Searches | None = {} if snapshot.paths.single_search else None
    oracle = _oracle(snapshot, config, now, searches)
    return FlavorAssigner(snapshot, workload, config, oracle, nomination, start), searches


def _final_targets(
    snapshot: Snapshot,
    workload: WorkloadInfo,
    assignment: Assignment,
    config: SchedulerConfig,
    now: float,
    searches: _Searches | None,
) -> list[Target]:
    """preemption_targets for the nominated assignment. FastPaths.single_search: when the assignment
    needs preemption on one flavor-resource only and that is all it charges, the final search asks
    get_targets exactly what the oracle asked for that flavor-resource and quantity; on the same
    snapshot state (state_id) the deterministic search returns the same targets, so its answer is
    reused."""
    if searches:
        usage = assignment.usage
        if len(usage) == 1:
            ((fr, quantity),) = usage.items()
            hit = searches.get((fr, quantity))
            if (
                hit is not None
                and hit[0] == snapshot.state_id
                and assignment.frs_needing_preemption() == frozenset((fr,))
            ):
                return list(hit[1])
    return preemption_targets(snapshot, workload, assignment, config, now=now)


def _reduce_pod_sets(
    snapshot: Snapshot,
    workload: WorkloadInfo,
    assigner: FlavorAssigner,
    config: SchedulerConfig,
    now: float,
    searches: _Searches | None = None,
) -> tuple[Assignment, list[Target]] | None:
    """PodSetReducer.Search (flavorassigner/podset_reducer.go): the largest counts that fit."""
    pod_sets = workload.workload.pod_sets
    full = [ps.count for ps in pod_sets]  # NewPodSetReducer: spec counts
    deltas = [max(0, ps.count - (ps.min_count if ps.min_count is not None else ps.count)) for ps in pod_sets]
    total = sum(deltas)
    if total == 0:
        return None
    best: tuple[Assignment, list[Target]] | None = None

    def fits(i: int) -> bool:
        nonlocal best
        counts = [f - d * i // total for f, d in zip(full, deltas, strict=True)]
        a = assigner.assign(counts)
        if a.mode == Mode.FIT:
            best = (a, [])
            return True
        if a.mode == Mode.PREEMPT:
            targets = _final_targets(snapshot, workload, a, config, now, searches)
            if targets:
                best = (a, targets)
                return True
        return False

    # sort.Search over [0, total]: the smallest reduction index whose counts fit.
    lo, hi = 0, total + 1
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    # As in Kueue, the last successful evaluation of a binary search is at its answer.
    return best if lo <= total else None


# --- the cycle -----------------------------------------------------------------------------


@dataclass(slots=True, init=False)
class _Entry:
    info: WorkloadInfo
    cq: ClusterQueueSnapshot
    assignment: Assignment
    targets: list[Target]
    status: EntryStatus
    reason: str
    immediate: bool
    pending_preemption: bool
    requeue_reason: str
    reserved: dict[FlavorResource, int]
    scan: ScanProgress | None  # entry.LastAssignment (None: cleared)

    def __init__(
        self,
        info: WorkloadInfo,
        cq: ClusterQueueSnapshot,
        assignment: Assignment,
        targets: list[Target],
        scan: ScanProgress | None = None,
    ) -> None:
        # (written out: a dataclass-generated __init__ is interpreted even compiled; see scheduler/types.py)
        self.info = info
        self.cq = cq
        self.assignment = assignment
        self.targets = targets
        self.status = EntryStatus.WAITING
        self.reason = ""
        self.immediate = False
        self.pending_preemption = False
        self.requeue_reason = ""
        self.reserved = {}
        self.scan = scan


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
        self._drs_cache: dict[WorkloadKey, tuple[tuple[int, ...], dict[str, _FsKey]]] = {}
        self.admissions: list[AdmissionDecision] = []
        self.preemptions: list[PreemptionDecision] = []
        self.outcomes: list[EntryOutcome] = []

    def run(self, heads: Sequence[WorkloadInfo]) -> CycleResult:
        entries, inadmissible = self._nominate(heads)
        if self.config.fair_sharing:
            order: Iterable[_Entry] = self._fair_sharing_order(entries)
        else:
            order = _classical_order(entries, self.config)
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
                        requeue_reason="NamespaceMismatch" if mismatch else "",
                    )
                )
                continue
            start = self.scan.get(h.key, ())
            if snap.paths.carry_nominations and snap.transaction_depth == 1:  # only the cycle's own
                assignment, targets = self._carried(h, cq, start)
            else:
                assignment, targets = get_assignments(snap, h, self.config, self.now, start=start)
            entries.append(_Entry(h, cq, assignment, targets, scan=assignment.scan))
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

    # -- ordering ------------------------------------------------------------------------------

    def _fair_sharing_order(self, entries: list[_Entry]) -> Iterable[_Entry]:
        """fairSharingIterator: each pop runs the DRS tournament on the current snapshot.

        Entries of different root cohorts never compete, so each tree is handled apart
        (Kueue picks a tree per pop in map order; the outcome is the same)."""
        by_root: dict[str, dict[str, _Entry]] = {}
        roots: dict[str, QuotaNode] = {}
        for e in entries:
            node = e.cq.node
            if node.parent is None:
                by_root.setdefault("", {})[e.cq.name] = e
            else:
                root = node.root()
                roots[root.name] = root
                by_root.setdefault(root.name, {})[e.cq.name] = e
        order = [e.cq.name for e in entries]
        root_of = {
            e.cq.name: (e.cq.node.root().name if e.cq.node.parent is not None else "") for e in entries
        }
        for name in order:
            rname = root_of[name]
            remaining = by_root.get(rname)
            if not remaining or name not in remaining:
                continue
            if rname == "":
                yield remaining.pop(name)
                continue
            while remaining:
                winner = self._tournament(roots[rname], remaining)
                del remaining[winner.cq.name]
                yield winner

    def _tournament(self, root: QuotaNode, remaining: Mapping[str, _Entry]) -> _Entry:
        """computeDRS + runTournament for one pop."""
        keys = {name: self._entry_keys(e) for name, e in remaining.items()}
        winner = _run_tournament(root, remaining, keys)
        if winner is None:  # pragma: no cover - remaining entries are in this tree
            return next(iter(remaining.values()))
        return winner

    def _entry_keys(self, e: _Entry) -> dict[str, _FsKey]:
        """For each ancestor cohort P of the entry's CQ: the comparison key of the entry at P,
        from the DRS of P's child on the path with the entry's usage added (computeDRS,
        entryComparer.less). Computed without touching the snapshot; cached per cycle by
        the usage versions of the path's nodes."""
        path = [e.cq.node, *e.cq.node.ancestors()]
        # The DRS at each level depends on the usage of the nodes below that level's parent
        # (and on quotas, fixed during a cycle), not on the root's.
        versions = tuple(n.version for n in path[:-1])
        cached = self._drs_cache.get(e.info.key)
        if cached is not None and cached[0] == versions:
            return cached[1]
        usage = e.assignment.usage
        extra: Mapping[FlavorResource, int] = usage
        out: dict[str, _FsKey] = {}
        prio = -e.info.priority if self.config.priority_sorting_within_cohort else 0
        for node, parent in itertools.pairwise(path):
            drs = node.dominant_resource_share(extra)
            borrowing = self.config.fair_sharing_prioritize_non_borrowing and drs.is_borrowing_on(usage)
            zero_weight = drs.zero_weight_borrows
            share = drs.unweighted_ratio if zero_weight else drs.weighted_share
            out[parent.name] = (borrowing, zero_weight, share, prio, e.info.queue_order_time)
            # addUsage: what exceeds the node's local availability flows to the parent.
            nxt: dict[FlavorResource, int] = {}
            for fr, val in extra.items():
                la = node.local_available(fr)
                if val > la:
                    nxt[fr] = val - la
            extra = nxt
        self._drs_cache[e.info.key] = (versions, out)
        return out

    # -- process -------------------------------------------------------------------------------

    def _fits_and_remove_targets(self, e: _Entry, usage: Mapping[FlavorResource, int]) -> bool:
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

    def _update_assignment_if_needed(self, e: _Entry) -> Mapping[FlavorResource, int]:
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

    def _process(self, e: _Entry) -> None:
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


def _classical_order(entries: list[_Entry], config: SchedulerConfig) -> list[_Entry]:
    """makeClassicalIterator: lower borrowing level, higher priority (PrioritySortingWithinCohort),
    older queue-order time; a stable sort keeps the heads' order for ties."""
    by_priority = config.priority_sorting_within_cohort
    return sorted(
        entries,
        key=lambda e: (
            e.assignment.borrowing,
            -e.info.priority if by_priority else 0,
            e.info.queue_order_time,
        ),
    )


_FsKey = tuple[bool, bool, float, int, float]


def _run_tournament(
    cohort: QuotaNode, remaining: Mapping[str, _Entry], keys: Mapping[str, Mapping[str, _FsKey]]
) -> _Entry | None:
    """runTournament: the best candidate of every child bubbles up; compared at each cohort by
    entryComparer.less (not borrowing on its flavor-resources first, lower DRS — zero-weight
    borrowers last —, higher priority, older queue-order time). Ties keep the first."""
    candidates: list[_Entry] = []
    for child in cohort.child_cohorts:
        c = _run_tournament(child, remaining, keys)
        if c is not None:
            candidates.append(c)
    for cq in cohort.child_cqs:
        e = remaining.get(cq.name)
        if e is not None:
            candidates.append(e)
    if not candidates:
        return None
    name = cohort.name
    return min(candidates, key=lambda c: keys[c.cq.name][name])


__all__ = ["assign", "get_assignments", "preemption_targets", "schedule_cycle"]
