"""What classical and fair-sharing preemption share: the candidates' order and the preemption policy
(Kueue pkg/scheduler/preemption/common/), the preemption context, workloadFits and fillBack
(preemption.go)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fairshare.models import FlavorResource, ReclaimWithinCohort, WithinClusterQueue
from fairshare.snapshot import ClusterQueueSnapshot, Snapshot
from fairshare.workload import WorkloadInfo

from ..types import Target

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



def fill_back(ctx: PreemptionContext, targets: list[Target], allow_borrowing: bool) -> list[Target]:
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
