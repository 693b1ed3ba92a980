"""One workload's nomination (Kueue pkg/scheduler/scheduler.go getAssignments, and the preemption oracle
of preemption_oracle.go): its flavor assignment and, when it needs preemption, the targets; partial
admission's search over pod-set counts (flavorassigner/podset_reducer.go). The cycle nominates each head
with it; the planners ask it about one workload ("can Kueue admit it now, and whom would it preempt?").
The snapshot is left as it was found."""

from __future__ import annotations

from collections.abc import Mapping

from fairshare.models import FlavorResource
from fairshare.snapshot import ClusterQueueSnapshot, Snapshot
from fairshare.workload import WorkloadInfo

from .bound import proved_no_targets
from .flavor_assigner import FlavorAssigner, Oracle, PreemptionMode, find_height_of_lowest_subtree_that_fits
from .preemption import can_have_candidates, get_targets
from .types import Assignment, Mode, ScanStart, SchedulerConfig, Target

DEFAULT_CONFIG = SchedulerConfig()

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
