"""GetTargets (Kueue pkg/scheduler/preemption/preemption.go): the victims that make a preemptor's
request fit, by the classical algorithm or by fair sharing."""

from __future__ import annotations

from collections.abc import Mapping

from fairshare.models import FlavorResource, ReclaimWithinCohort, WithinClusterQueue
from fairshare.snapshot import ClusterQueueSnapshot, Snapshot
from fairshare.workload import WorkloadInfo

from ..types import SchedulerConfig, Target
from .classical import classical_preemptions
from .common import FRs, PreemptionContext
from .fairsharing import fair_preemptions


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
        return classical_preemptions(ctx)  # each attempt undoes its own changes
    mark = snapshot.checkpoint()
    try:
        return fair_preemptions(ctx, config)
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
