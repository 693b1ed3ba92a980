"""Preemption target selection (Kueue pkg/scheduler/preemption/).

Classical (preemption.go classicalPreemptions, classical/*.go) and fair sharing
(fairPreemptions, fairsharing/*.go, KEP-1714). Both work on the snapshot through its undo
log and leave it unchanged.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from ..models import (
    BorrowWithinCohortPolicy,
    FlavorResource,
    PreemptionReason,
    ReclaimWithinCohort,
    WithinClusterQueue,
)
from ..quota_tree import DRS, NEGATIVE_DRS, QuotaNode, compare_drs
from ..snapshot import ClusterQueueSnapshot, Snapshot
from ..workload import WorkloadInfo
from .types import LESS_THAN_INITIAL_SHARE, LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, SchedulerConfig, Target

FRs = frozenset[FlavorResource]


def satisfies_policy(preemptor: WorkloadInfo, candidate: WorkloadInfo, policy: str) -> bool:
    """SatisfiesPreemptionPolicy (common/preemption_policy.go)."""
    if policy == WithinClusterQueue.LOWER_PRIORITY:
        return preemptor.priority > candidate.priority
    if policy == WithinClusterQueue.LOWER_OR_NEWER_EQUAL_PRIORITY:
        return preemptor.priority > candidate.priority or (
            preemptor.priority == candidate.priority
            and preemptor.queue_order_time < candidate.queue_order_time
        )
    return policy == ReclaimWithinCohort.ANY


def candidate_order_key(w: WorkloadInfo, preemptor_cq: str, now: float) -> tuple[bool, bool, int, float, str]:
    """CandidatesOrdering (common/ordering.go): evicted first, other CQs first, lower priority,
    most recently admitted, UID. (The AFS term is not modelled.)"""
    reserved = w.quota_reserved_time if w.quota_reserved_time is not None else now
    return (not w.evicted, w.cluster_queue == preemptor_cq, w.priority, -reserved, w.uid)


@dataclass(slots=True, init=False)
class PreemptionContext:
    snapshot: Snapshot
    preemptor: WorkloadInfo
    cq: ClusterQueueSnapshot
    frs: FRs  # flavor-resources that need preemption
    usage: Mapping[FlavorResource, int]  # the preemptor's requests on the chosen flavors
    now: float

    def __init__(self, snapshot: Snapshot, preemptor: WorkloadInfo, cq: ClusterQueueSnapshot, frs: FRs,
                 usage: Mapping[FlavorResource, int], now: float) -> None:
        # written: a dataclass-generated __init__ is interpreted in the compiled core (scheduler/types.py)
        self.snapshot = snapshot
        self.preemptor = preemptor
        self.cq = cq
        self.frs = frs
        self.usage = usage
        self.now = now

    def workload_fits(self, allow_borrowing: bool) -> bool:
        """workloadFits: every request within Available and, if not allowed, without borrowing."""
        node = self.cq.node
        for fr, v in self.usage.items():
            if not allow_borrowing and node.borrowing_with(fr, v):
                return False
            if v > max(0, node.available(fr)):
                return False
        return True

    def fits_for_fair_sharing(self) -> bool:
        """workloadFitsForFairSharing: the preemptor's simulated usage is taken out first."""
        self.snapshot.remove_usage(self.cq.node, self.usage)
        ok = self.workload_fits(True)
        self.snapshot.add_usage(self.cq.node, self.usage)
        return ok


def get_targets(
    snapshot: Snapshot,
    preemptor: WorkloadInfo,
    frs: FRs,
    usage: Mapping[FlavorResource, int],
    config: SchedulerConfig,
    now: float,
) -> list[Target]:
    """GetTargets: the victims that make ``usage`` fit in the preemptor's CQ (empty: none)."""
    cq = snapshot.cluster_queues[preemptor.cluster_queue]
    if not can_have_candidates(cq):
        return []
    ctx = PreemptionContext(snapshot, preemptor, cq, frs, usage, now)
    if not config.fair_sharing:
        return _classical_preemptions(ctx)  # each attempt undoes its own changes
    mark = snapshot.checkpoint()
    try:
        return _fair_preemptions(ctx, config)
    finally:
        snapshot.rollback(mark)


def can_have_candidates(cq: ClusterQueueSnapshot) -> bool:
    """False when the CQ's policies exclude every candidate: withinClusterQueue=Never
    excludes its own workloads, and reclaimWithinCohort=Never (or no cohort) those of the
    others, in classical (candidate_generator.go) and fair-sharing (findCandidates)
    preemption alike; borrowWithinCohort only qualifies cohort candidates. Kueue's search
    then finds no candidates (preemptionMode noPreemptionCandidates)."""
    pre = cq.spec.preemption
    if pre.within_cluster_queue != WithinClusterQueue.NEVER:
        return True
    return cq.node.parent is not None and pre.reclaim_within_cohort != ReclaimWithinCohort.NEVER


def _fill_back(ctx: PreemptionContext, targets: list[Target], allow_borrowing: bool) -> list[Target]:
    """fillBackWorkloads: re-admit, newest-chosen first, any victim not needed after all."""
    snap = ctx.snapshot
    i = len(targets) - 2
    while i >= 0:
        snap.add_workload(targets[i].victim)
        if ctx.workload_fits(allow_borrowing):
            targets[i] = targets[-1]
            targets.pop()
        else:
            snap.remove_workload(targets[i].key)
        i -= 1
    return targets


# --- classical -------------------------------------------------------------------------


class Variant(IntEnum):
    """preemptionVariant (classical/hierarchical_preemption.go)."""

    NEVER = 0
    WITHIN_CQ = 1
    HIERARCHICAL_RECLAIM = 2
    RECLAIM_WITHOUT_BORROWING = 3
    RECLAIM_WHILE_BORROWING = 4

    def reason(self) -> PreemptionReason:
        if self == Variant.WITHIN_CQ:
            return PreemptionReason.IN_CLUSTER_QUEUE
        if self == Variant.RECLAIM_WHILE_BORROWING:
            return PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING
        return PreemptionReason.IN_COHORT_RECLAMATION


@dataclass(frozen=True, slots=True, init=False)
class _Candidate:
    wl: WorkloadInfo
    lca: QuotaNode | None
    variant: Variant

    def __init__(self, wl: WorkloadInfo, lca: QuotaNode | None, variant: Variant) -> None:
        object.__setattr__(self, "wl", wl)
        object.__setattr__(self, "lca", lca)
        object.__setattr__(self, "variant", variant)


_Entry = tuple[tuple[bool, int, float, str], WorkloadInfo]


@dataclass(frozen=True, slots=True, init=False)
class _Source:
    """The candidates of one ClusterQueue allowed by the preemptor's policy, as ranges of the
    CQ's sorted candidate index: evicted ones and the rest (each already in Kueue's order)."""

    cq: ClusterQueueSnapshot
    lca: QuotaNode | None
    advantage: bool
    evicted: list[_Entry]
    rest: list[_Entry]

    def __init__(self, cq: ClusterQueueSnapshot, lca: QuotaNode | None, advantage: bool,
                 evicted: list[_Entry], rest: list[_Entry]) -> None:
        object.__setattr__(self, "cq", cq)
        object.__setattr__(self, "lca", lca)
        object.__setattr__(self, "advantage", advantage)
        object.__setattr__(self, "evicted", evicted)
        object.__setattr__(self, "rest", rest)

    @property
    def empty(self) -> bool:
        return not self.evicted and not self.rest


def _policy_slice(
    seg: list[_Entry], lo: int, hi: int, flag: bool, policy: str, preemptor: WorkloadInfo
) -> list[_Entry]:
    """The part of index[lo:hi] (one evicted flag, sorted by priority) that the policy allows
    (SatisfiesPreemptionPolicy): LowerPriority keeps a priority prefix; LowerOrNewerEqualPriority
    adds the equal-priority candidates queued after the preemptor; Any keeps all."""
    if policy == ReclaimWithinCohort.ANY:
        return seg[lo:hi]
    p = preemptor.priority
    cut = bisect_left(seg, (flag, p), lo, hi, key=_flag_priority)
    out = seg[lo:cut]
    if policy == WithinClusterQueue.LOWER_OR_NEWER_EQUAL_PRIORITY:
        end = bisect_left(seg, (flag, p + 1), cut, hi, key=_flag_priority)
        out.extend(e for e in seg[cut:end] if preemptor.queue_order_time < e[1].queue_order_time)
    return out


def _flag_priority(e: _Entry) -> tuple[bool, int]:
    return e[0][0], e[0][1]


def _source(
    ctx: PreemptionContext, cq: ClusterQueueSnapshot, lca: QuotaNode | None, advantage: bool, policy: str
) -> _Source:
    index = ctx.snapshot.candidate_index(cq, ctx.frs)
    split = bisect_left(index, True, key=lambda e: e[0][0])  # evicted (False) first
    return _Source(
        cq,
        lca,
        advantage,
        _policy_slice(index, 0, split, False, policy, ctx.preemptor),
        _policy_slice(index, split, len(index), True, policy, ctx.preemptor),
    )


def _variant(ctx: PreemptionContext, src: _Source, wl: WorkloadInfo) -> Variant:
    """classifyPreemptionVariant for a candidate that passed the policy."""
    if src.cq is ctx.cq:
        return Variant.WITHIN_CQ
    if src.advantage:
        return Variant.HIERARCHICAL_RECLAIM
    pre = ctx.cq.spec.preemption
    if pre.borrow_within_cohort == BorrowWithinCohortPolicy.NEVER:
        return Variant.RECLAIM_WITHOUT_BORROWING
    # isAboveBorrowingThreshold: only strictly lower priorities (and at most the threshold)
    # may be preempted while the preemptor borrows.
    threshold = pre.max_priority_threshold
    if wl.priority >= ctx.preemptor.priority or (threshold is not None and wl.priority > threshold):
        return Variant.RECLAIM_WITHOUT_BORROWING
    return Variant.RECLAIM_WHILE_BORROWING


def _collect_in_subtree(
    ctx: PreemptionContext,
    current: QuotaNode,
    subtree_root: QuotaNode,
    skip: QuotaNode | None,
    advantage: bool,
    result: list[_Source],
) -> None:
    """collectCandidatesInSubtree: only subtrees above their quota on the contested frs."""
    over_cohorts, over_cqs = ctx.snapshot.over_nominal_children(current, ctx.frs)
    for child in over_cohorts:
        if child is not skip:
            _collect_in_subtree(ctx, child, subtree_root, skip, advantage, result)
    policy: str = ctx.cq.spec.preemption.reclaim_within_cohort
    for child in over_cqs:
        if child is not ctx.cq.node:
            src = _source(ctx, ctx.snapshot.cluster_queues[child.name], subtree_root, advantage, policy)
            if not src.empty:
                result.append(src)


def _collect_hierarchical(
    ctx: PreemptionContext, *, priority_group: bool = True
) -> tuple[list[_Source], list[_Source]]:
    """collectCandidatesForHierarchicalReclaim: (hierarchical-advantage, priority) sources.

    ``priority_group=False`` leaves the priority group empty (for a search that would skip all of
    its sources: see _classical_preemptions)."""
    hierarchy: list[_Source] = []
    priority: list[_Source] = []
    node = ctx.cq.node
    if node.parent is None or ctx.cq.spec.preemption.reclaim_within_cohort == ReclaimWithinCohort.NEVER:
        return hierarchy, priority
    advantage, remaining = node.quantities_fit_in_quota(ctx.usage)
    previous: QuotaNode | None = None
    for current in node.ancestors():
        if advantage or priority_group:
            group = hierarchy if advantage else priority
            _collect_in_subtree(ctx, current, current, previous, advantage, group)
        fits, remaining = current.quantities_fit_in_quota(remaining)
        advantage = advantage or fits
        previous = current
    return hierarchy, priority


def _tag(entries: list[_Entry], i: int) -> Iterator[tuple[tuple[bool, int, float, str], int, WorkloadInfo]]:
    for k, wl in entries:
        yield k, i, wl


class _CandidateIterator:
    """classical/candidate_generator.go candidateIterator, lazily.

    Kueue classifies every workload of the preemptor's CQ and of the over-quota CQs, sorts
    three groups (hierarchical, priority, same queue) by CandidatesOrdering and walks evicted
    ones of all groups first. Here each CQ contributes ranges of its cached, sorted candidate
    index that the policy allows, and the groups are merged on demand: the same order, but
    a search that needs few victims looks at few candidates."""

    def __init__(self, ctx: PreemptionContext, *, priority_group: bool = True) -> None:
        self.ctx = ctx
        same: list[_Source] = []
        within = ctx.cq.spec.preemption.within_cluster_queue
        if within != WithinClusterQueue.NEVER:
            src = _source(ctx, ctx.cq, None, False, within)
            if not src.empty:
                same = [src]
        hierarchy, priority = _collect_hierarchical(ctx, priority_group=priority_group)
        self.groups = (hierarchy, priority, same)
        self.no_candidate_from_other_queues = not hierarchy and not priority
        self.no_candidate_for_hierarchical_reclaim = not hierarchy
        self._skip_unborrowable = ctx.snapshot.paths.skip_unborrowable
        self._borrow_never = ctx.cq.spec.preemption.borrow_within_cohort == BorrowWithinCohortPolicy.NEVER

    def _unborrowable(self, src: _Source) -> bool:
        """FastPaths.skip_unborrowable: _variant classifies every candidate of this source
        ReclaimWithoutBorrowing (another CQ, no hierarchical advantage, borrowWithinCohort
        Never), which a borrowing attempt skips before any validity check: the source yields
        nothing and marks nothing dead, so dropping it whole yields the same candidates."""
        return self._borrow_never and src.cq is not self.ctx.cq and not src.advantage

    def iterate(self, borrow: bool) -> Iterator[_Candidate]:
        """The valid candidates in Kueue's order (Next(borrow)); validity is checked when a
        candidate is reached, after the removals of the ones before it."""
        ctx = self.ctx
        # candidateIsValid rejects a candidate whose CQ, or a cohort between it and the LCA,
        # is within nominal on the contested frs. During one search usage only goes down
        # (victims are removed), so once that holds for a source it holds for all its later
        # candidates: they are skipped without re-checking (same candidates yielded).
        dead: set[int] = set()
        skip = borrow and self._skip_unborrowable
        for evicted in (True, False):
            for group in self.groups:
                if skip:
                    group = [src for src in group if not self._unborrowable(src)]
                if not group:
                    continue
                if len(group) == 1:
                    src = group[0]
                    entries = src.evicted if evicted else src.rest
                    if src.cq is ctx.cq:  # same-queue candidates are always valid
                        for _, wl in entries:
                            yield _Candidate(wl, None, Variant.WITHIN_CQ)
                        continue
                    for _, wl in entries:
                        if id(src) in dead:
                            break
                        v = _variant(ctx, src, wl)
                        if borrow and v == Variant.RECLAIM_WITHOUT_BORROWING:
                            continue
                        if self._within_nominal_below_lca(src):
                            dead.add(id(src))
                            break
                        yield _Candidate(wl, src.lca, v)
                    continue
                tagged = [_tag(src.evicted if evicted else src.rest, i) for i, src in enumerate(group)]
                for _, i, wl in heapq.merge(*tagged, key=lambda t: t[0]):
                    src = group[i]
                    if id(src) in dead:
                        continue
                    v = _variant(ctx, src, wl)
                    if borrow and v == Variant.RECLAIM_WITHOUT_BORROWING:
                        continue
                    if self._within_nominal_below_lca(src):
                        dead.add(id(src))
                        if all(id(g) in dead for g in group):
                            break  # every remaining entry would be skipped
                        continue
                    yield _Candidate(wl, src.lca, v)

    def _within_nominal_below_lca(self, src: _Source) -> bool:
        """The invalidity test of candidateIsValid for another CQ's candidate: its CQ, or an
        ancestor below the LCA, is within nominal on the contested frs."""
        frs = self.ctx.frs
        node = src.cq.node
        if node.within_nominal_in(frs):
            return True
        lca = src.lca
        for anc in node.ancestors():
            if anc is lca:
                break
            if anc.within_nominal_in(frs):
                return True
        return False


def _classical_preemptions(ctx: PreemptionContext) -> list[Target]:
    forbidden = ctx.cq.spec.preemption.borrow_within_cohort == BorrowWithinCohortPolicy.NEVER
    node = ctx.cq.node
    # queueUnderNominalInResourcesNeedingPreemption
    under_nominal = all(node.quota(fr).nominal > node.usage.get(fr, 0) for fr in ctx.frs)
    # FastPaths.skip_unborrowable: when borrowing is forbidden and the CQ is not under nominal, the
    # only attempt is a borrowing one (below, whatever the sources), and it skips every source of
    # the priority group (other CQs without hierarchical advantage: ReclaimWithoutBorrowing), so
    # that group need not be collected at all.
    only_borrowing = forbidden and not under_nominal
    it = _CandidateIterator(
        ctx, priority_group=not (only_borrowing and ctx.snapshot.paths.skip_unborrowable)
    )
    if it.no_candidate_from_other_queues or only_borrowing:
        attempts: Sequence[bool] = (True,)
    elif forbidden and it.no_candidate_for_hierarchical_reclaim:
        attempts = (False, True)
    else:
        attempts = (True, False)
    snap = ctx.snapshot
    # Everything the search reads after its removals is per flavor-resource of ctx.usage
    # (workload_fits on ctx.usage, candidateIsValid on ctx.frs, a subset); the candidate
    # sources were taken before. Usage accounting is independent per flavor-resource, so
    # removing a victim's usage on those frs only reads the same numbers as removing the
    # whole workload (Kueue's snapshot.RemoveWorkload); the rollback undoes either.
    frs = ctx.usage.keys()
    nodes = snap.cluster_queues
    for borrowing in attempts:
        mark = snap.checkpoint()
        try:
            targets: list[Target] = []
            for c in it.iterate(borrowing):
                wl = c.wl
                snap.remove_usage(nodes[wl.cluster_queue].node, _restrict(wl.usage, frs))
                targets.append(Target(wl, c.variant.reason()))
                if ctx.workload_fits(borrowing):
                    return _classical_fill_back(ctx, targets, borrowing)
        finally:
            snap.rollback(mark)  # restoreSnapshot
    return []


def _restrict(
    usage: Mapping[FlavorResource, int], frs: Collection[FlavorResource]
) -> dict[FlavorResource, int]:
    return {fr: v for fr, v in usage.items() if fr in frs}


def _classical_fill_back(
    ctx: PreemptionContext, targets: list[Target], allow_borrowing: bool
) -> list[Target]:
    """_fill_back on the usage of ctx.usage's flavor-resources only (see _classical_preemptions)."""
    snap = ctx.snapshot
    frs = ctx.usage.keys()
    nodes = snap.cluster_queues
    i = len(targets) - 2
    while i >= 0:
        victim = targets[i].victim
        node = nodes[victim.cluster_queue].node
        usage = _restrict(victim.usage, frs)
        snap.add_usage(node, usage)
        if ctx.workload_fits(allow_borrowing):
            targets[i] = targets[-1]
            targets.pop()
        else:
            snap.remove_usage(node, usage)
        i -= 1
    return targets


# --- fair sharing ----------------------------------------------------------------------


def _strategy_passes(name: str, preemptor_new: DRS, target_old: DRS, target_new: DRS) -> bool:
    if name == LESS_THAN_OR_EQUAL_TO_FINAL_SHARE:  # S2-a
        return compare_drs(preemptor_new, target_new) <= 0
    return compare_drs(preemptor_new, target_old) < 0  # S2-b


class _TargetOrdering:
    """fairsharing/ordering.go TargetClusterQueueOrdering: descend to the highest-DRS CQ."""

    def __init__(self, ctx: PreemptionContext, candidates: Sequence[WorkloadInfo]) -> None:
        self.ctx = ctx
        self.ancestors = {id(a) for a in ctx.cq.node.ancestors()}
        self.targets: dict[str, list[WorkloadInfo]] = {}
        for c in candidates:
            self.targets.setdefault(c.cluster_queue, []).append(c)
        self.pruned_cqs: set[str] = set()
        self.pruned_cohorts: set[str] = set()

    def has_workload(self, cq: str) -> bool:
        return bool(self.targets.get(cq))

    def pop(self, cq: str) -> WorkloadInfo:
        return self.targets[cq].pop(0)

    def drop(self, cq: str) -> None:
        self.pruned_cqs.add(cq)

    def iterate(self) -> Iterator[str]:
        node = self.ctx.cq.node
        if node.parent is None:
            while node.name not in self.pruned_cqs and self.has_workload(node.name):
                yield node.name
            return
        root = node.root()
        while root.name not in self.pruned_cohorts:
            target = self._next_target(root)
            if target is not None:
                yield target

    def _next_target(self, cohort: QuotaNode) -> str | None:
        ctx = self.ctx
        best_cq: QuotaNode | None = None
        best_cq_drs = NEGATIVE_DRS
        for cq in cohort.child_cqs:
            if cq.name in self.pruned_cqs:
                continue
            drs = cq.dominant_resource_share()
            if (not drs.is_borrowing and cq is not ctx.cq.node) or not self.has_workload(cq.name):
                self.pruned_cqs.add(cq.name)
                continue
            c = compare_drs(drs, best_cq_drs)
            if c == 0 and best_cq is not None:
                new = candidate_order_key(self.targets[cq.name][0], ctx.cq.name, ctx.now)
                cur = candidate_order_key(self.targets[best_cq.name][0], ctx.cq.name, ctx.now)
                if new < cur:
                    best_cq = cq
            elif c > 0:
                best_cq, best_cq_drs = cq, drs
        best_cohort: QuotaNode | None = None
        best_cohort_drs = NEGATIVE_DRS
        for child in cohort.child_cohorts:
            if child.name in self.pruned_cohorts:
                continue
            drs = child.dominant_resource_share()
            if not drs.is_borrowing and id(child) not in self.ancestors:
                self.pruned_cohorts.add(child.name)
            elif compare_drs(drs, best_cohort_drs) >= 0:
                best_cohort, best_cohort_drs = child, drs
        if best_cohort is None and best_cq is None:
            self.pruned_cohorts.add(cohort.name)
            return None
        if best_cohort is not None and compare_drs(best_cohort_drs, best_cq_drs) >= 0:
            return self._next_target(best_cohort)
        return best_cq.name if best_cq is not None else None

    # -- shares between the preemptor's and the target's almost-LCAs (least_common_ancestor.go)

    def _almost_lcas(self, target: str) -> tuple[QuotaNode, QuotaNode]:
        tnode = self.ctx.snapshot.cluster_queues[target].node
        lca = next(a for a in tnode.ancestors() if id(a) in self.ancestors)
        return _almost_lca(self.ctx.cq.node, lca), _almost_lca(tnode, lca)

    def shares(self, target: str) -> tuple[DRS, DRS]:
        """ComputeShares: (preemptorNewShare, targetOldShare)."""
        p, t = self._almost_lcas(target)
        return p.dominant_resource_share(), t.dominant_resource_share()

    def target_share_after_removal(self, target: str, wl: WorkloadInfo) -> DRS:
        snap = self.ctx.snapshot
        tnode = snap.cluster_queues[target].node
        snap.remove_usage(tnode, wl.usage)
        try:
            return self._almost_lcas(target)[1].dominant_resource_share()
        finally:
            snap.add_usage(tnode, wl.usage)


def _almost_lca(node: QuotaNode, lca: QuotaNode) -> QuotaNode:
    current = node
    for anc in node.ancestors():
        if anc is lca:
            return current
        current = anc
    return current


def _find_fair_candidates(ctx: PreemptionContext) -> list[WorkloadInfo]:
    """findCandidates: own CQ by withinClusterQueue; borrowing CQs of the tree by reclaimWithinCohort."""
    pre = ctx.cq.spec.preemption
    out: list[WorkloadInfo] = []
    if pre.within_cluster_queue != WithinClusterQueue.NEVER:
        out.extend(
            w
            for w in ctx.cq.workloads.values()
            if satisfies_policy(ctx.preemptor, w, pre.within_cluster_queue) and w.uses_any(ctx.frs)
        )
    node = ctx.cq.node
    if node.parent is not None and pre.reclaim_within_cohort != ReclaimWithinCohort.NEVER:
        for other in ctx.snapshot.borrowing_cluster_queues(node.root(), ctx.frs):
            if other is node:
                continue
            ocq = ctx.snapshot.cluster_queues[other.name]
            out.extend(
                w
                for w in ocq.workloads.values()
                if satisfies_policy(ctx.preemptor, w, pre.reclaim_within_cohort) and w.uses_any(ctx.frs)
            )
    return out


def _fair_preemptions(ctx: PreemptionContext, config: SchedulerConfig) -> list[Target]:
    candidates = _find_fair_candidates(ctx)
    if not candidates:
        return []
    candidates.sort(key=lambda w: candidate_order_key(w, ctx.cq.name, ctx.now))
    snap = ctx.snapshot
    strategies = config.fair_sharing_strategies or (
        LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
        LESS_THAN_INITIAL_SHARE,
    )
    snap.add_usage(ctx.cq.node, ctx.usage)  # SimulateUsageAddition of the preemptor
    fits, targets, retry = _run_first_strategy(ctx, candidates, strategies[0], config)
    if not fits and len(strategies) > 1:
        fits, targets = _run_second_strategy(ctx, retry, targets)
    snap.remove_usage(ctx.cq.node, ctx.usage)
    if not fits:
        return []
    return _fill_back(ctx, targets, True)


def _run_first_strategy(
    ctx: PreemptionContext, candidates: list[WorkloadInfo], strategy: str, config: SchedulerConfig
) -> tuple[bool, list[Target], list[WorkloadInfo]]:
    ordering = _TargetOrdering(ctx, candidates)
    targets: list[Target] = []
    retry: list[WorkloadInfo] = []
    node = ctx.cq.node
    # FairSharingPreemptWithinNominal: a preemptor still within nominal (with its request
    # added) reclaims unconditionally.
    within_nominal = config.fair_sharing_preempt_within_nominal and not any(
        node.borrowing(fr) for fr in ctx.frs
    )
    snap = ctx.snapshot
    for cq_name in ordering.iterate():
        if cq_name == ctx.cq.name:
            wl = ordering.pop(cq_name)
            snap.remove_workload(wl.key)
            targets.append(Target(wl, PreemptionReason.IN_CLUSTER_QUEUE))
            if ctx.fits_for_fair_sharing():
                return True, targets, []
            continue
        if within_nominal:
            wl = ordering.pop(cq_name)
            snap.remove_workload(wl.key)
            targets.append(Target(wl, PreemptionReason.IN_COHORT_RECLAMATION))
            if ctx.fits_for_fair_sharing():
                return True, targets, []
            continue
        preemptor_new, target_old = ordering.shares(cq_name)
        if math.isinf(preemptor_new.weighted_share) and not math.isinf(target_old.weighted_share):
            while ordering.has_workload(cq_name):
                retry.append(ordering.pop(cq_name))
            continue
        while ordering.has_workload(cq_name):
            wl = ordering.pop(cq_name)
            target_new = ordering.target_share_after_removal(cq_name, wl)
            if _strategy_passes(strategy, preemptor_new, target_old, target_new):
                snap.remove_workload(wl.key)
                targets.append(Target(wl, PreemptionReason.IN_COHORT_FAIR_SHARING))
                if ctx.fits_for_fair_sharing():
                    return True, targets, []
                break
            retry.append(wl)
    return False, targets, retry


def _run_second_strategy(
    ctx: PreemptionContext, retry: list[WorkloadInfo], targets: list[Target]
) -> tuple[bool, list[Target]]:
    ordering = _TargetOrdering(ctx, retry)
    snap = ctx.snapshot
    for cq_name in ordering.iterate():
        preemptor_new, target_old = ordering.shares(cq_name)
        passed = _strategy_passes(LESS_THAN_INITIAL_SHARE, preemptor_new, target_old, target_old)
        wl = ordering.pop(cq_name)
        if passed:
            snap.remove_workload(wl.key)
            targets.append(Target(wl, PreemptionReason.IN_COHORT_FAIR_SHARING))
            if ctx.fits_for_fair_sharing():
                return True, targets
        ordering.drop(cq_name)
    return False, targets
