"""Flavor assignment with fungibility (Kueue pkg/scheduler/flavorassigner/flavorassigner.go).

For each pod set and resource group the ClusterQueue's flavors are tried in order. A
flavor is skipped when its taints are not tolerated or the pod's nodeSelector does not
match its labels (only the flavor's own label keys count). Each resource is checked with
``fits_resource_quota`` and gets a *granular mode* (preemption mode, borrowing level);
the flavor's mode is the worst over its resources (a pod set whose chosen flavors are all
represented by a fit is Fit: see ``_find_flavor``). ``whenCanBorrow`` /
``whenCanPreempt`` decide whether to stop at this flavor or try the next, keeping the
best by ``is_preferred``. A scan starts at the flavor after the one the workload's previous
scan stopped at (``start``, from its recorded progress: NextFlavorToTryForPodSetResource) and
records where this one stops (``Assignment.scan``: the chosen flavor's index, -1 when it reached
the last flavor), as Kueue's LastAssignment does across cycles.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from ..models import (
    BorrowWithinCohortPolicy,
    FlavorFungibility,
    FlavorResource,
    FungibilityPolicy,
    FungibilityPreference,
    PodSet,
    ReclaimWithinCohort,
    ResourceFlavor,
    ResourceGroup,
    ResourceName,
)
from ..quantity import format_human
from ..snapshot import ClusterQueueSnapshot, Snapshot
from ..workload import WorkloadInfo
from .types import (
    Assignment,
    FlavorChoice,
    Mode,
    PodSetAssignmentResult,
    ScanStart,
    SchedulerConfig,
)


class PreemptionMode(IntEnum):
    """preemptionMode (flavorassigner.go): noFit < noPreemptionCandidates < preempt < reclaim < fit."""

    NO_FIT = 0
    NO_CANDIDATES = 1
    PREEMPT = 2
    RECLAIM = 3
    FIT = 4

    def assignment_mode(self) -> Mode:
        if self == PreemptionMode.NO_FIT:
            return Mode.NO_FIT
        if self == PreemptionMode.FIT:
            return Mode.FIT
        return Mode.PREEMPT


@dataclass(frozen=True, slots=True, init=False)
class GranularMode:
    mode: PreemptionMode
    borrow: int

    def __init__(self, mode: PreemptionMode, borrow: int) -> None:
        # (written out: a dataclass-generated __init__ is interpreted even compiled; see scheduler/types.py)
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "borrow", borrow)


WORST = GranularMode(PreemptionMode.NO_FIT, 2**31)
BEST = GranularMode(PreemptionMode.FIT, 0)

# (cq, workload, fr, quantity) -> (possibility, borrowing level after preemption)
Oracle = Callable[[ClusterQueueSnapshot, WorkloadInfo, FlavorResource, int], tuple[PreemptionMode, int]]


def is_preferred(a: GranularMode, b: GranularMode, ff: FlavorFungibility) -> bool:
    """isPreferred: is mode a better than b under the CQ's fungibility preference."""
    if a.mode == PreemptionMode.NO_FIT:
        return False
    if b.mode == PreemptionMode.NO_FIT:
        return True
    a_none = a.mode == PreemptionMode.NO_CANDIDATES
    b_none = b.mode == PreemptionMode.NO_CANDIDATES
    if a_none != b_none:
        return not a_none
    if ff.preference == FungibilityPreference.PREEMPTION_OVER_BORROWING:
        if a.borrow != b.borrow:
            return a.borrow < b.borrow
        return a.mode > b.mode
    if a.mode != b.mode:
        return a.mode > b.mode
    return a.borrow < b.borrow


def should_try_next_flavor(m: GranularMode, ff: FlavorFungibility) -> bool:
    if m.mode in (PreemptionMode.NO_FIT, PreemptionMode.NO_CANDIDATES):
        return True
    if (
        m.mode in (PreemptionMode.PREEMPT, PreemptionMode.RECLAIM)
        and ff.when_can_preempt == FungibilityPolicy.TRY_NEXT_FLAVOR
    ):
        return True
    return m.borrow != 0 and ff.when_can_borrow == FungibilityPolicy.TRY_NEXT_FLAVOR


def find_height_of_lowest_subtree_that_fits(
    cq: ClusterQueueSnapshot, fr: FlavorResource, val: int
) -> tuple[int, bool]:
    """FindHeightOfLowestSubtreeThatFits (classical/hierarchical_preemption.go).

    Returns the borrowing level (0 = fits in the CQ's nominal quota) and whether the
    quota could be reclaimed within the hierarchy.
    """
    node = cq.node
    has_parent = node.parent is not None
    if not has_parent or not node.borrowing_with(fr, val):
        return 0, has_parent
    remaining = val - node.local_available(fr)
    for anc in node.ancestors():
        if not anc.borrowing_with(fr, remaining):
            return anc.height(), anc.parent is not None
        remaining -= anc.local_available(fr)
    return node.root().height(), False


def flavor_matches(flavor: ResourceFlavor, pod_set: PodSet) -> str | None:
    """None when the pod set may run on the flavor, else why not (checkFlavorForPodSets)."""
    for taint in flavor.node_taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(t.tolerates(taint) for t in (*pod_set.tolerations, *flavor.tolerations)):
            return f"untolerated taint {taint.key}={taint.value}:{taint.effect} in flavor {flavor.name}"
    if pod_set.node_selector:
        labels = dict(flavor.node_labels)
        for key, value in pod_set.node_selector:
            if key in labels and labels[key] != value:
                return f"flavor {flavor.name} doesn't match node affinity"
    return None


class FlavorAssigner:
    """Assigns flavors to one workload in one ClusterQueue of a snapshot."""

    def __init__(
        self,
        snapshot: Snapshot,
        info: WorkloadInfo,
        config: SchedulerConfig,
        oracle: Oracle,
        nomination: Mapping[str, Mapping[ResourceName, str]] | None = None,
        start: ScanStart = (),
    ) -> None:
        self.snapshot = snapshot
        self.start = start
        # NominationMapping: when the cycle recomputes an assignment (preemption targets
        # overlapped), flavors other than the first attempt's are skipped (stickiness).
        self.nomination = nomination if config.recompute_assignment_upon_overlap else None
        self.info = info
        self.cq = snapshot.cluster_queues[info.cluster_queue]
        self.config = config
        self.oracle = oracle
        pre = self.cq.spec.preemption
        # canPreemptWhileBorrowing
        self.can_preempt_while_borrowing = pre.borrow_within_cohort != BorrowWithinCohortPolicy.NEVER or (
            config.fair_sharing and pre.reclaim_within_cohort != ReclaimWithinCohort.NEVER
        )

    def assign(self, counts: list[int] | None = None) -> Assignment:
        """Assign flavors for the pod sets' counts (default: their full counts after reclaim;
        partial admission passes reduced counts)."""
        cq = self.cq
        assigned: dict[FlavorResource, int] = {}
        results: list[PodSetAssignmentResult] = []
        scan: list[tuple[tuple[ResourceName, int], ...]] = []
        borrowing = 0
        for i, ps in enumerate(self.info.workload.pod_sets):
            start = self.start[i] if i < len(self.start) else {}
            tried: dict[ResourceName, int] = {}
            count = self.info.workload.count_after_reclaim(ps) if counts is None else counts[i]
            requests = ps.total(count)
            if "pods" in cq.rg_by_resource:
                requests["pods"] = count * 1000
            flavors: dict[ResourceName, FlavorChoice] = {}
            reasons: list[str] = []
            failed = False
            # Kueue's PodSetAssignment.Status: no group search returned a status (each chose a
            # flavor whose representative mode is fit). Then the pod set's RepresentativeMode is
            # Fit, whatever its resources' own modes (see _find_flavor).
            status_fit = True
            searched = False
            for res in sorted(requests):
                qty = requests[res]
                group = cq.rg_by_resource.get(res)
                if group is None:
                    if qty == 0:
                        continue
                    reasons.append(f"resource {res} unavailable in ClusterQueue")
                    failed = True
                    break
                if res in flavors:
                    continue
                group_requests = {r: q for r, q in requests.items() if r in group.covered_resources}
                group_reasons: list[str] = []
                found, stopped, group_fit = self._find_flavor(
                    ps, group, group_requests, assigned, group_reasons, res, start.get(res, 0)
                )
                searched = True
                if not found:
                    reasons.extend(group_reasons)
                    failed = True
                    break
                if not group_fit:
                    # (a nil status drops the reasons of the flavors tried: assignFlavors appends
                    # a group's reasons only when its status is not nil)
                    reasons.extend(group_reasons)
                    status_fit = False
                flavors.update(found)
                tried.update(dict.fromkeys(found, stopped))
            if failed:
                # Kueue appends the failed pod set with no flavors (and so no progress) and stops.
                scan.append(())
                results.append(PodSetAssignmentResult(ps.name, count, {}, requests, tuple(reasons)))
                return Assignment(tuple(results), borrowing, dict(assigned), scan=tuple(scan))
            scan.append(tuple(sorted(tried.items())))
            results.append(
                PodSetAssignmentResult(
                    ps.name, count, flavors, requests, tuple(reasons), status_fit=searched and status_fit
                )
            )
            for res, choice in flavors.items():
                borrowing = max(borrowing, choice.borrow)
                fr = self.snapshot.flavor_resource(choice.flavor, res)
                assigned[fr] = assigned.get(fr, 0) + requests[res]
        return Assignment(tuple(results), borrowing, assigned, scan=tuple(scan))

    def _find_flavor(
        self,
        ps: PodSet,
        group: ResourceGroup,
        requests: Mapping[ResourceName, int],
        assigned: Mapping[FlavorResource, int],
        reasons: list[str],
        trigger: ResourceName,
        start: int = 0,
    ) -> tuple[dict[ResourceName, FlavorChoice], int, bool]:
        """findFlavorForPodSets: the chosen flavor for every resource of the group (empty: none),
        where the scan stopped (TriedFlavorIdx: the last flavor index attempted, -1 when that
        was the group's last flavor), and whether the chosen flavor's representative mode is fit.
        The scan starts at ``start``.

        The representative mode of a flavor is the least preferred of its resources' modes by
        ``is_preferred``. Under ``preference: PreemptionOverBorrowing`` the borrowing level ranks
        first, so a flavor where one resource fits by borrowing and another needs preemption
        inside the CQ's share is represented by the borrowing fit. findFlavorForPodSets then
        returns a nil status (``if bestAssignmentMode.preemptionMode == fit { return
        bestAssignment, nil, ...}``), and PodSetAssignment.RepresentativeMode is Fit for a pod
        set whose Status.IsFit(), before it looks at the flavors' modes
        (pkg/scheduler/flavorassigner/flavorassigner.go, Kueue v0.19.2). The workload is then
        nominated as a fit: getInitialAssignments computes no preemption targets, and the cycle's
        fits check fails ("Workload no longer fits after processing another workload")."""
        ff = self.cq.spec.flavor_fungibility
        best: dict[ResourceName, FlavorChoice] = {}
        best_mode = WORST
        resources = sorted(requests)
        flavors = self.snapshot.flavors
        node = self.cq.node
        last = len(group.flavors) - 1
        attempted = -1
        for idx in range(start, len(group.flavors)):
            fq = group.flavors[idx]
            attempted = idx
            if self.nomination is not None and self.nomination.get(ps.name, {}).get(trigger) != fq.name:
                reasons.append(f"skipping flavor {fq.name}: not the flavor nominated for {trigger}")
                continue
            flavor = flavors.get(fq.name)
            if flavor is None:
                reasons.append(f"flavor {fq.name} not found")
                continue
            # (no taints and no nodeSelector: nothing to check)
            if flavor.node_taints or ps.node_selector:
                mismatch = flavor_matches(flavor, ps)
                if mismatch is not None:
                    reasons.append(mismatch)
                    continue
            rep = BEST
            choices: dict[ResourceName, FlavorChoice] = {}
            for res in resources:
                fr = self.snapshot.flavor_resource(fq.name, res)
                assumed = assigned.get(fr, 0)
                request = requests[res]
                val = assumed + request
                if val <= node.available(fr) and (node.parent is None or not node.borrowing_with(fr, val)):
                    # _fits_resource_quota's first case inline (Fit at borrowing level 0 =
                    # BEST): is_preferred(rep, BEST) is never true, so rep stays.
                    choices[res] = FlavorChoice(fq.name, Mode.FIT, 0)
                    continue
                pmode, borrow = self._fits_resource_quota(fr, assumed, request, reasons)
                mode = GranularMode(pmode, borrow)
                if is_preferred(rep, mode, ff):
                    rep = mode
                if rep.mode == PreemptionMode.NO_FIT:
                    break
                choices[res] = FlavorChoice(fq.name, pmode.assignment_mode(), borrow)
            if not should_try_next_flavor(rep, ff):
                return choices, (-1 if idx == last else idx), rep.mode == PreemptionMode.FIT
            if is_preferred(rep, best_mode, ff):
                best, best_mode = choices, rep
        return best, (-1 if attempted == last else attempted), best_mode.mode == PreemptionMode.FIT

    def _fits_resource_quota(
        self, fr: FlavorResource, assumed: int, request: int, reasons: list[str]
    ) -> tuple[PreemptionMode, int]:
        """fitsResourceQuota: how this flavor could be assigned for one resource."""
        cq = self.cq
        node = cq.node
        val = assumed + request
        available = node.available(fr)
        if val <= available:  # fits (hence within the maximum capacity too)
            if node.parent is None or not node.borrowing_with(fr, val):
                return PreemptionMode.FIT, 0
            return PreemptionMode.FIT, find_height_of_lowest_subtree_that_fits(cq, fr, val)[0]
        max_capacity = node.potential_available(fr)
        if val > max_capacity:
            reasons.append(
                f"insufficient quota for {fr.resource} in flavor {fr.flavor}, request "
                f"{format_human(val, fr.resource)} > maximum capacity "
                f"{format_human(max_capacity, fr.resource)}"
            )
            return PreemptionMode.NO_FIT, 0
        borrow, may_reclaim = find_height_of_lowest_subtree_that_fits(cq, fr, val)
        available = max(0, available)
        reasons.append(
            f"insufficient unused quota for {fr.resource} in flavor {fr.flavor}, "
            f"{format_human(val - available, fr.resource)} more needed"
        )
        if node.quota(fr).nominal >= val or may_reclaim or self.can_preempt_while_borrowing:
            return self.oracle(cq, self.info, fr, val)
        return PreemptionMode.NO_FIT, borrow
