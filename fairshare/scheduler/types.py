"""Inputs and outputs of the scheduling cycle (plain frozen data)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum

from ..models import ClusterQueueName, FlavorName, FlavorResource, PreemptionReason, ResourceName, WorkloadKey
from ..workload import WorkloadInfo

LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"  # KEP-1714 rule S2-a
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"  # KEP-1714 rule S2-b


@dataclass(frozen=True, slots=True)
class AdmissionFairSharingConfig:
    """Configuration.admissionFairSharing (KEP-4136)."""

    usage_half_life_seconds: float = 0.0
    usage_sampling_interval_seconds: float = 300.0
    resource_weights: Mapping[ResourceName, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """The subset of Kueue's Configuration (and feature gates) that the cycle depends on.

    ``fair_sharing`` mirrors the presence of ``Configuration.fairSharing`` (v1beta2:
    presence = enabled); the strategies default to Kueue's ``[S2-a, S2-b]``.
    """

    fair_sharing: bool = False
    fair_sharing_strategies: tuple[str, ...] = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)
    admission_fair_sharing: AdmissionFairSharingConfig | None = None
    # Feature gates, at their Kueue defaults (beta, on).
    fair_sharing_prioritize_non_borrowing: bool = True
    fair_sharing_preempt_within_nominal: bool = True
    priority_sorting_within_cohort: bool = True
    recompute_assignment_upon_overlap: bool = True
    partial_admission: bool = True


# Flavor scan progress (workload.AssignmentClusterQueueState.LastTriedFlavorIdx): per pod set,
# resource -> index of the flavor its scan stopped at (-1: it reached the last flavor, so the
# next scan starts over). A scan resumes at the index after it (NextFlavorToTryForPodSetResource).
ScanProgress = tuple[tuple[tuple[ResourceName, int], ...], ...]
# Where each pod set's scan starts: per pod set, resource -> first flavor index to try.
ScanStart = Sequence[Mapping[ResourceName, int]]


def next_scan(progress: ScanProgress) -> tuple[dict[ResourceName, int], ...]:
    """The scan start a recorded progress gives (each index + 1; -1 starts over at 0)."""
    return tuple({r: i + 1 for r, i in ps} for ps in progress)


def pending_flavors(progress: ScanProgress | None) -> bool:
    """AssignmentClusterQueueState.PendingFlavors: some scan stopped before the last flavor."""
    return progress is not None and any(i != -1 for ps in progress for _, i in ps)


class Mode(IntEnum):
    """FlavorAssignmentMode (flavorassigner.go): worse modes compare lower."""

    NO_FIT = 0
    PREEMPT = 1
    DEFERRED_FIT = 2
    FIT = 3


class EntryStatus(StrEnum):
    """What the cycle did with a head."""

    ADMITTED = "Admitted"
    PREEMPTING = "Preempting"  # victims chosen; admitted in a later cycle
    WAITING = "Waiting"  # needs quota / no candidates / skipped this cycle
    NO_FIT = "NoFit"  # cannot fit even with every possible preemption
    INADMISSIBLE = "Inadmissible"  # CQ inactive, namespace mismatch, ...


# The hot classes below write their own __init__ (init=False): a dataclass-generated __init__ is interpreted
# Python even in the compiled core (fairshare/compiled.py), and building these per head evaluation was a
# quarter of the simulator's time; eq, hash, repr, replace() and frozenness stay the dataclass's.


@dataclass(frozen=True, slots=True, init=False)
class FlavorChoice:
    flavor: FlavorName
    mode: Mode
    borrow: int  # borrowing level (0 = inside the CQ)

    def __init__(self, flavor: FlavorName, mode: Mode, borrow: int) -> None:
        object.__setattr__(self, "flavor", flavor)
        object.__setattr__(self, "mode", mode)
        object.__setattr__(self, "borrow", borrow)


@dataclass(frozen=True, slots=True, init=False)
class PodSetAssignmentResult:
    name: str
    count: int
    flavors: Mapping[ResourceName, FlavorChoice]
    requests: Mapping[ResourceName, int]  # total for the pod set
    reasons: tuple[str, ...] = ()
    # Kueue's PodSetAssignment.Status.IsFit(): every resource group chose a flavor whose
    # representative mode is fit; the pod set is then Fit even when one of its resources' own
    # modes is Preempt (PreemptionOverBorrowing: see FlavorAssigner._find_flavor).
    status_fit: bool = False

    def __init__(
        self,
        name: str,
        count: int,
        flavors: Mapping[ResourceName, FlavorChoice],
        requests: Mapping[ResourceName, int],
        reasons: tuple[str, ...] = (),
        status_fit: bool = False,
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "count", count)
        object.__setattr__(self, "flavors", flavors)
        object.__setattr__(self, "requests", requests)
        object.__setattr__(self, "reasons", reasons)
        object.__setattr__(self, "status_fit", status_fit)

    @property
    def mode(self) -> Mode:
        """PodSetAssignment.RepresentativeMode (flavorassigner.go)."""
        if self.status_fit:
            return Mode.FIT
        if not self.flavors and self.requests:
            return Mode.NO_FIT
        worst = Mode.FIT  # min() over a generator: a Python-level call and a generator object per pod set
        for c in self.flavors.values():
            if c.mode < worst:
                worst = c.mode
        return worst


@dataclass(frozen=True, slots=True, init=False)
class Assignment:
    """The flavor assignment of one workload (flavorassigner.Assignment)."""

    pod_sets: tuple[PodSetAssignmentResult, ...]
    borrowing: int  # the highest borrowing level over the chosen flavors
    usage: Mapping[FlavorResource, int]  # what admission would charge
    mode_override: Mode | None = None
    scan: ScanProgress = ()  # LastState.LastTriedFlavorIdx of this assignment
    # RepresentativeMode, computed once: the cycle reads it several times per head.
    _mode: Mode = field(init=False, repr=False, compare=False, default=Mode.NO_FIT)

    def __init__(
        self,
        pod_sets: tuple[PodSetAssignmentResult, ...],
        borrowing: int,
        usage: Mapping[FlavorResource, int],
        mode_override: Mode | None = None,
        scan: ScanProgress = (),
    ) -> None:
        object.__setattr__(self, "pod_sets", pod_sets)
        object.__setattr__(self, "borrowing", borrowing)
        object.__setattr__(self, "usage", usage)
        object.__setattr__(self, "mode_override", mode_override)
        object.__setattr__(self, "scan", scan)
        if mode_override is not None:
            mode = mode_override
        elif not pod_sets:
            mode = Mode.NO_FIT
        else:
            mode = pod_sets[0].mode
            for ps in pod_sets:
                if ps.mode < mode:
                    mode = ps.mode
        object.__setattr__(self, "_mode", mode)

    @property
    def mode(self) -> Mode:
        """RepresentativeMode: the worst over the pod sets."""
        return self._mode

    def frs_needing_preemption(self) -> frozenset[FlavorResource]:
        return frozenset(
            FlavorResource(c.flavor, r)
            for ps in self.pod_sets
            for r, c in ps.flavors.items()
            if c.mode == Mode.PREEMPT
        )

    def flavors(self) -> dict[str, dict[ResourceName, FlavorName]]:
        """podSet -> resource -> flavor (the case format's ``expect.admitted`` shape)."""
        return {ps.name: {r: c.flavor for r, c in sorted(ps.flavors.items())} for ps in self.pod_sets}

    def message(self) -> str:
        reasons = [r for ps in self.pod_sets for r in ps.reasons]
        return "; ".join(dict.fromkeys(reasons))


@dataclass(frozen=True, slots=True, init=False)
class Target:
    """A preemption victim (preemption.Target)."""

    victim: WorkloadInfo
    reason: PreemptionReason

    def __init__(self, victim: WorkloadInfo, reason: PreemptionReason) -> None:
        object.__setattr__(self, "victim", victim)
        object.__setattr__(self, "reason", reason)

    @property
    def key(self) -> WorkloadKey:
        return self.victim.key


@dataclass(frozen=True, slots=True, init=False)
class AdmissionDecision:
    key: WorkloadKey
    cluster_queue: ClusterQueueName
    assignment: Assignment
    info: WorkloadInfo  # the admitted form (usage set), ready for Snapshot.add_workload

    def __init__(self, key: WorkloadKey, cluster_queue: ClusterQueueName, assignment: Assignment,
                 info: WorkloadInfo) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "cluster_queue", cluster_queue)
        object.__setattr__(self, "assignment", assignment)
        object.__setattr__(self, "info", info)

    @property
    def flavors(self) -> dict[str, dict[ResourceName, FlavorName]]:
        return self.assignment.flavors()

    @property
    def usage(self) -> Mapping[FlavorResource, int]:
        return self.assignment.usage


@dataclass(frozen=True, slots=True, init=False)
class PreemptionDecision:
    victim: WorkloadKey
    victim_cluster_queue: ClusterQueueName
    reason: PreemptionReason
    preemptor: WorkloadKey
    preemptor_cluster_queue: ClusterQueueName

    def __init__(self, victim: WorkloadKey, victim_cluster_queue: ClusterQueueName, reason: PreemptionReason,
                 preemptor: WorkloadKey, preemptor_cluster_queue: ClusterQueueName) -> None:
        object.__setattr__(self, "victim", victim)
        object.__setattr__(self, "victim_cluster_queue", victim_cluster_queue)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "preemptor", preemptor)
        object.__setattr__(self, "preemptor_cluster_queue", preemptor_cluster_queue)


@dataclass(frozen=True, slots=True, init=False)
class EntryOutcome:
    """What happened to one head, in processing order, with the reason in words."""

    key: WorkloadKey
    cluster_queue: ClusterQueueName
    status: EntryStatus
    reason: str
    assignment: Assignment | None = None
    targets: tuple[Target, ...] = ()
    requeue_immediately: bool = False  # BestEffortFIFO: back to the heap (else parked inadmissible)
    pending_preemption: bool = False  # waits for victims: becomes its CQ's (sticky) preemptor head
    requeue_reason: str = ""  # Kueue's RequeueReason: NoFit, PreemptionNoCandidates, PendingPreemption, ...
    reserved: Mapping[FlavorResource, int] = field(default_factory=dict)
    # The flavor scan progress Kueue keeps with the requeued workload (entry.LastAssignment);
    # None: cleared (preemptions issued, deferred fit), the next scan starts at the first flavor.
    scan: ScanProgress | None = None

    def __init__(
        self,
        key: WorkloadKey,
        cluster_queue: ClusterQueueName,
        status: EntryStatus,
        reason: str,
        assignment: Assignment | None = None,
        targets: tuple[Target, ...] = (),
        requeue_immediately: bool = False,
        pending_preemption: bool = False,
        requeue_reason: str = "",
        reserved: Mapping[FlavorResource, int] | None = None,
        scan: ScanProgress | None = None,
    ) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "cluster_queue", cluster_queue)
        object.__setattr__(self, "status", status)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "assignment", assignment)
        object.__setattr__(self, "targets", targets)
        object.__setattr__(self, "requeue_immediately", requeue_immediately)
        object.__setattr__(self, "pending_preemption", pending_preemption)
        object.__setattr__(self, "requeue_reason", requeue_reason)
        object.__setattr__(self, "reserved", {} if reserved is None else reserved)
        object.__setattr__(self, "scan", scan)


@dataclass(frozen=True, init=False)
class CycleResult:
    """What one scheduling cycle decided. The snapshot is left unchanged by the cycle."""

    admissions: tuple[AdmissionDecision, ...]
    preemptions: tuple[PreemptionDecision, ...]
    outcomes: tuple[EntryOutcome, ...]  # every head, in the order processed (inadmissible last)

    def __init__(self, admissions: tuple[AdmissionDecision, ...], preemptions: tuple[PreemptionDecision, ...],
                 outcomes: tuple[EntryOutcome, ...]) -> None:
        object.__setattr__(self, "admissions", admissions)
        object.__setattr__(self, "preemptions", preemptions)
        object.__setattr__(self, "outcomes", outcomes)

    def admitted_infos(self) -> Iterator[WorkloadInfo]:
        for a in self.admissions:
            yield a.info

    def preempted_keys(self) -> Iterator[WorkloadKey]:
        for p in self.preemptions:
            yield p.victim

    @property
    def pending(self) -> tuple[EntryOutcome, ...]:
        return tuple(o for o in self.outcomes if o.status != EntryStatus.ADMITTED)

    def outcome(self, key: WorkloadKey) -> EntryOutcome | None:
        return next((o for o in self.outcomes if o.key == key), None)
