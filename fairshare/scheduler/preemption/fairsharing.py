"""Fair-sharing preemption (Kueue pkg/scheduler/preemption/preemption.go fairPreemptions, and
fairsharing/*.go, KEP-1714): the target ClusterQueue ordering by DRS and the strategies S2-a
(LessThanOrEqualToFinalShare) and S2-b (LessThanInitialShare)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

from fairshare.models import ClusterQueueName, PreemptionReason, ReclaimWithinCohort, WithinClusterQueue
from fairshare.quota_tree import DRS, NEGATIVE_DRS, QuotaNode, compare_drs
from fairshare.workload import WorkloadInfo

from ..types import LESS_THAN_INITIAL_SHARE, LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, SchedulerConfig, Target
from .common import PreemptionContext, candidate_order_key, fill_back, satisfies_policy


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
        tnode = self.ctx.snapshot.cluster_queues[ClusterQueueName(target)].node
        lca = next(a for a in tnode.ancestors() if id(a) in self.ancestors)
        return _almost_lca(self.ctx.cq.node, lca), _almost_lca(tnode, lca)

    def shares(self, target: str) -> tuple[DRS, DRS]:
        """ComputeShares: (preemptorNewShare, targetOldShare)."""
        p, t = self._almost_lcas(target)
        return p.dominant_resource_share(), t.dominant_resource_share()

    def target_share_after_removal(self, target: str, wl: WorkloadInfo) -> DRS:
        snap = self.ctx.snapshot
        tnode = snap.cluster_queues[ClusterQueueName(target)].node
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
            ocq = ctx.snapshot.cluster_queues[ClusterQueueName(other.name)]
            out.extend(
                w
                for w in ocq.workloads.values()
                if satisfies_policy(ctx.preemptor, w, pre.reclaim_within_cohort) and w.uses_any(ctx.frs)
            )
    return out


def fair_preemptions(ctx: PreemptionContext, config: SchedulerConfig) -> list[Target]:
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
    return fill_back(ctx, targets, True)


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
