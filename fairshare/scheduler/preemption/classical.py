"""Classical preemption (Kueue pkg/scheduler/preemption/preemption.go classicalPreemptions, and
classical/candidate_generator.go, classical/hierarchical_preemption.go): candidates in Kueue's order,
removed until the preemptor fits, with and without borrowing, then filled back."""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from fairshare.models import (
    BorrowWithinCohortPolicy,
    ClusterQueueName,
    FlavorResource,
    PreemptionReason,
    ReclaimWithinCohort,
    WithinClusterQueue,
)
from fairshare.quota_tree import QuotaNode
from fairshare.snapshot import ClusterQueueSnapshot
from fairshare.workload import WorkloadInfo

from ..types import Target
from .common import PreemptionContext


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
            cq = ctx.snapshot.cluster_queues[ClusterQueueName(child.name)]
            src = _source(ctx, cq, subtree_root, advantage, policy)
            if not src.empty:
                result.append(src)


def _collect_hierarchical(
    ctx: PreemptionContext, *, priority_group: bool = True
) -> tuple[list[_Source], list[_Source]]:
    """collectCandidatesForHierarchicalReclaim: (hierarchical-advantage, priority) sources.

    ``priority_group=False`` leaves the priority group empty (for a search that would skip all of
    its sources: see classical_preemptions)."""
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


def classical_preemptions(ctx: PreemptionContext) -> list[Target]:
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
    """fill_back on the usage of ctx.usage's flavor-resources only (see classical_preemptions)."""
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
