"""FastPaths.bound_search: a proof, without searching, that the classical preemption search of the
flavor assigner's oracle (preemption_oracle.go SimulatePreemption -> GetTargets) finds no targets.

The search (preemption.py _classical_preemptions) removes candidates' usage on the contested
flavor-resource one at a time and stops at the first prefix after which the request fits
(workloadFits: request <= Available, and not borrowing when the attempt forbids it). Available is
1-Lipschitz in removals: taking ``u`` off any ClusterQueue of the tree raises the preemptor CQ's
Available by at most ``u`` (quota_tree.available: along the path from the root each level is
``min(parent's, borrowing cap) + local availability``; a removal lowers usage by ``d_0 <= d_1 <=
... <= u`` from the root down to the lowest common ancestor, the cap of a level rises by what its
child stored in it, the local availability by the rest, so by induction a level's Available rises
by at most its own usage decrease). So when

    request > max(0, Available) + (usage of every workload the search could remove)

no prefix of any attempt fits, and GetTargets returns no targets. The candidates counted are a
superset of those candidate_generator.go can yield: the CQ's own workloads the withinClusterQueue
policy allows; the workloads of every other CQ of the tree above its quota on the flavor-resource
(collectCandidatesInSubtree only reaches those) that reclaimWithinCohort allows, of which a search
takes at most the CQ's excess over its quota plus one workload (candidateIsValid drops a CQ's
candidates once it is within its quota). With borrowWithinCohort Never those other CQs' candidates
are left out when neither attempt can take them: the attempt that allows borrowing skips them
(classifyPreemptionVariant: ReclaimWithoutBorrowing, unless a level gives a hierarchical
advantage), and the attempt that does not runs only for a CQ under its nominal quota and cannot
succeed when the request does not fit that quota even after every own candidate is gone.
"""

from __future__ import annotations

from fairshare.models import ClusterQueueName

from ..models import (
    BorrowWithinCohortPolicy,
    FlavorResource,
    ReclaimWithinCohort,
    WithinClusterQueue,
)
from ..snapshot import ClusterQueueSnapshot, Snapshot
from ..workload import WorkloadInfo


def proved_no_targets(
    snapshot: Snapshot, cq: ClusterQueueSnapshot, wl: WorkloadInfo, fr: FlavorResource, quantity: int
) -> bool:
    """True only if the classical GetTargets(wl, {fr}, {fr: quantity}) is empty (see the module)."""
    node = cq.node
    reach = max(0, node.available(fr))
    if quantity <= reach:
        return False
    pre = cq.spec.preemption
    p = wl.priority
    own = 0
    within = pre.within_cluster_queue
    if within != WithinClusterQueue.NEVER:
        equal_too = within == WithinClusterQueue.LOWER_OR_NEWER_EQUAL_PRIORITY
        for w in cq.workloads.values():
            if w.priority < p or (equal_too and w.priority == p):
                own += w.usage.get(fr, 0)
        reach += own
        if quantity <= reach:
            return False
    if node.parent is None or pre.reclaim_within_cohort == ReclaimWithinCohort.NEVER:
        return True
    if pre.borrow_within_cohort == BorrowWithinCohortPolicy.NEVER:
        # Other CQs' candidates without a hierarchical advantage are ReclaimWithoutBorrowing
        # (classifyPreemptionVariant): skipped by the attempt that allows borrowing, so they count
        # only in the attempt that does not, which runs only when the CQ is under nominal
        # (queueUnderNominalInResourcesNeedingPreemption) and succeeds only if the request fits
        # without borrowing; own removals are all that lower the CQ's own usage.
        usage = node.usage.get(fr, 0)
        nominal = node.quota(fr).nominal
        without_borrowing = nominal > usage and usage - own + quantity <= nominal
        if not without_borrowing:
            # collectCandidatesForHierarchicalReclaim: is there any level with an advantage?
            advantage, remaining = node.quantities_fit_in_quota({fr: quantity})
            for current in node.ancestors():
                if advantage:
                    break
                fits, remaining = current.quantities_fit_in_quota(remaining)
                advantage = fits
            if not advantage:
                return True
    lower_only = pre.reclaim_within_cohort == ReclaimWithinCohort.LOWER_PRIORITY
    frs = (fr,)
    for other in node.root().subtree_cluster_queues():
        if other is node or other.within_nominal_in(frs):
            continue
        total = largest = 0
        for w in snapshot.cluster_queues[ClusterQueueName(other.name)].workloads.values():
            if not lower_only or w.priority < p:
                u = w.usage.get(fr, 0)
                total += u
                largest = max(largest, u)
        # candidateIsValid: another CQ's candidate is taken only while its CQ is above its quota
        # (usage > subtreeQuota), so the search removes at most its excess plus one workload.
        excess = other.usage.get(fr, 0) - other.subtree_quota.get(fr, 0)
        reach += min(total, excess + largest)
        if quantity <= reach:
            return False
    return True
