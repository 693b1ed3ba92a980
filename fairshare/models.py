"""Typed, frozen models of the Kueue objects that matter for admission.

Conventions:
- Quantities are ``int`` milli-units (see :mod:`fairshare.quantity`).
- Times are ``float`` seconds since the Unix epoch (UTC).
- Names: cluster-scoped objects are keyed by name; namespaced ones by
  ``"namespace/name"`` (:data:`WorkloadKey`) or ``(namespace, name)``.
- Every model is immutable; the snapshot (``fairshare.snapshot``) holds the mutable
  accounting state.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple, NewType

FlavorName = str
ResourceName = str
ClusterQueueName = NewType("ClusterQueueName", str)
CohortName = NewType("CohortName", str)
WorkloadKey = str  # "namespace/name"
LocalQueueKey = str  # "namespace/name"
Milli = int  # an exact quantity in milli-units
Seconds = float  # seconds since the Unix epoch


class FlavorResource(NamedTuple):
    """A (ResourceFlavor, resource) pair: the unit in which Kueue accounts quota."""

    flavor: FlavorName
    resource: ResourceName

    def __str__(self) -> str:
        return f"{self.flavor}/{self.resource}"


FlavorResourceQuantities = dict[FlavorResource, Milli]


class QuotaKey(NamedTuple):
    """One quota of the cluster: a ClusterQueue's (in a QuotaPolicy: a team's) flavor-resource."""

    cluster_queue: ClusterQueueName
    flavor_resource: FlavorResource

    @classmethod
    def of(cls, cluster_queue: ClusterQueueName, flavor: FlavorName, resource: ResourceName) -> QuotaKey:
        return cls(cluster_queue, FlavorResource(flavor, resource))

    @property
    def team(self) -> ClusterQueueName:
        return self.cluster_queue

    @property
    def flavor(self) -> FlavorName:
        return self.flavor_resource.flavor

    @property
    def resource(self) -> ResourceName:
        return self.flavor_resource.resource

    def __str__(self) -> str:
        return f"{self.cluster_queue}/{self.flavor_resource}"


# --- enums (values are the exact strings of the Kueue API) -------------------------


class QueueingStrategy(StrEnum):
    STRICT_FIFO = "StrictFIFO"
    BEST_EFFORT_FIFO = "BestEffortFIFO"


class WithinClusterQueue(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"


class ReclaimWithinCohort(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    ANY = "Any"


class BorrowWithinCohortPolicy(StrEnum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


class FungibilityPolicy(StrEnum):
    MAY_STOP_SEARCH = "MayStopSearch"
    TRY_NEXT_FLAVOR = "TryNextFlavor"


class FungibilityPreference(StrEnum):
    BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"
    PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"


class StopPolicy(StrEnum):
    NONE = "None"
    HOLD = "Hold"
    HOLD_AND_DRAIN = "HoldAndDrain"


class AdmissionMode(StrEnum):
    USAGE_BASED_AFS = "UsageBasedAdmissionFairSharing"
    NO_AFS = "NoAdmissionFairSharing"


class PreemptionReason(StrEnum):
    """Reasons of the Workload ``Preempted`` condition (Kueue workload_types.go)."""

    IN_CLUSTER_QUEUE = "InClusterQueue"
    IN_COHORT_RECLAMATION = "InCohortReclamation"
    IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
    IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"


# --- quota ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    """nominalQuota / borrowingLimit / lendingLimit of one flavor-resource (None = unset)."""

    nominal: Milli = 0
    borrowing_limit: Milli | None = None
    lending_limit: Milli | None = None

    # Written (the dataclass keeps both): the generated __eq__ is interpreted, and the controller compares
    # every quota in force with the live one at each decision. The same values as the dataclass's.
    def __eq__(self, other: object) -> bool:
        if type(other) is not ResourceQuota:
            return NotImplemented
        return (self.nominal == other.nominal and self.borrowing_limit == other.borrowing_limit
                and self.lending_limit == other.lending_limit)

    def __hash__(self) -> int:
        return hash((self.nominal, self.borrowing_limit, self.lending_limit))


@dataclass(frozen=True, slots=True)
class FlavorQuotas:
    name: FlavorName
    resources: tuple[tuple[ResourceName, ResourceQuota], ...]


@dataclass(frozen=True, slots=True)
class ResourceGroup:
    covered_resources: tuple[ResourceName, ...]
    flavors: tuple[FlavorQuotas, ...]  # order = preference


def quotas_of(groups: tuple[ResourceGroup, ...]) -> dict[FlavorResource, ResourceQuota]:
    """All flavor-resource quotas of a list of resource groups."""
    out: dict[FlavorResource, ResourceQuota] = {}
    for group in groups:
        for flavor in group.flavors:
            for resource, quota in flavor.resources:
                out[FlavorResource(flavor.name, resource)] = quota
    return out


# --- selectors, taints -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LabelSelectorRequirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A Kubernetes label selector; the empty selector matches everything."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        for req in self.match_expressions:
            present = key_present = req.key in labels
            if req.operator == "In":
                ok = key_present and labels[req.key] in req.values
            elif req.operator == "NotIn":
                ok = not key_present or labels[req.key] not in req.values
            elif req.operator == "Exists":
                ok = present
            else:  # DoesNotExist
                ok = not present
            if not ok:
                return False
        return True


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"  # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""  # empty with operator Exists tolerates everything
    operator: str = "Equal"  # Equal | Exists
    value: str = ""
    effect: str = ""  # empty = all effects

    def tolerates(self, taint: Taint) -> bool:
        # k8s.io/api/core/v1 toleration.go ToleratesTaint
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


# --- cluster-scoped objects -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ResourceFlavor:
    name: FlavorName
    node_labels: tuple[tuple[str, str], ...] = ()
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True, slots=True)
class WorkloadPriorityClass:
    name: str
    value: int


@dataclass(frozen=True, slots=True)
class Cohort:
    """A Cohort object (v1beta2). Implicit cohorts (only named by CQs) have no object."""

    name: CohortName
    parent: CohortName | None = None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_sharing_weight: Milli = 1000  # fairSharing.weight, default 1


@dataclass(frozen=True, slots=True)
class ClusterQueuePreemption:
    within_cluster_queue: WithinClusterQueue = WithinClusterQueue.NEVER
    reclaim_within_cohort: ReclaimWithinCohort = ReclaimWithinCohort.NEVER
    borrow_within_cohort: BorrowWithinCohortPolicy = BorrowWithinCohortPolicy.NEVER
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True)
class FlavorFungibility:
    when_can_borrow: FungibilityPolicy = FungibilityPolicy.MAY_STOP_SEARCH
    when_can_preempt: FungibilityPolicy = FungibilityPolicy.TRY_NEXT_FLAVOR
    preference: FungibilityPreference | None = None


@dataclass(frozen=True, slots=True)
class ClusterQueue:
    name: ClusterQueueName
    resource_groups: tuple[ResourceGroup, ...] = ()
    cohort: CohortName | None = None
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    namespace_selector: LabelSelector | None = LabelSelector()  # None = matches no namespace
    flavor_fungibility: FlavorFungibility = FlavorFungibility()
    preemption: ClusterQueuePreemption = ClusterQueuePreemption()
    fair_sharing_weight: Milli = 1000
    admission_mode: AdmissionMode | None = None
    stop_policy: StopPolicy = StopPolicy.NONE
    # The spec's resourceGroups when `status.effectiveQuota` is set (Kueue v0.20 Dynamic Quota Orchestration):
    # then `resource_groups` holds the effective quota, the one Kueue's scheduler uses ("effectiveQuota, else
    # spec"), and this the spec's, for showing the difference. None: the spec is the quota in force.
    spec_resource_groups: tuple[ResourceGroup, ...] | None = None

    def quotas(self) -> dict[FlavorResource, ResourceQuota]:
        return quotas_of(self.resource_groups)

    def spec_quotas(self) -> dict[FlavorResource, ResourceQuota]:
        """The quotas the spec declares (the same as `quotas()` unless an effective quota is in force)."""
        declared = self.resource_groups if self.spec_resource_groups is None else self.spec_resource_groups
        return quotas_of(declared)


@dataclass(frozen=True, slots=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: ClusterQueueName
    stop_policy: StopPolicy = StopPolicy.NONE
    fair_sharing_weight: Milli = 1000
    # status.fairSharing.admissionFairSharingStatus (AFS), resource -> milli
    afs_consumed: tuple[tuple[ResourceName, Milli], ...] = ()
    afs_last_update: Seconds | None = None

    @property
    def key(self) -> LocalQueueKey:
        return f"{self.namespace}/{self.name}"


# --- workloads --------------------------------------------------------------------


@dataclass(frozen=True, slots=True, init=False)
class PodSet:
    """One pod set: ``count`` pods, each requesting ``requests`` (computed as Kubernetes does)."""

    name: str
    count: int
    requests: tuple[tuple[ResourceName, Milli], ...]  # per pod, sorted by resource
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    min_count: int | None = None  # partial admission: the smallest acceptable count

    def __init__(  # written: a dataclass-generated __init__ is interpreted (scheduler/types.py)
        self,
        name: str,
        count: int,
        requests: tuple[tuple[ResourceName, Milli], ...],
        node_selector: tuple[tuple[str, str], ...] = (),
        tolerations: tuple[Toleration, ...] = (),
        min_count: int | None = None,
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "count", count)
        object.__setattr__(self, "requests", requests)
        object.__setattr__(self, "node_selector", node_selector)
        object.__setattr__(self, "tolerations", tolerations)
        object.__setattr__(self, "min_count", min_count)

    def total(self, count: int | None = None) -> dict[ResourceName, Milli]:
        n = self.count if count is None else count
        return {r: q * n for r, q in self.requests}


@dataclass(frozen=True, slots=True)
class PodSetAssignment:
    name: str
    flavors: tuple[tuple[ResourceName, FlavorName], ...]
    resource_usage: tuple[tuple[ResourceName, Milli], ...]
    count: int


@dataclass(frozen=True, slots=True)
class Admission:
    cluster_queue: ClusterQueueName
    pod_set_assignments: tuple[PodSetAssignment, ...]

    def usage(self) -> FlavorResourceQuantities:
        """Flavor-resource usage this admission charges to its ClusterQueue."""
        out: FlavorResourceQuantities = {}
        for psa in self.pod_set_assignments:
            flavors = dict(psa.flavors)
            for resource, qty in psa.resource_usage:
                flavor = flavors.get(resource)
                if flavor is None:
                    continue
                fr = FlavorResource(flavor, resource)
                out[fr] = out.get(fr, 0) + qty
        return out


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: bool
    reason: str = ""
    message: str = ""
    last_transition_time: Seconds = 0.0


# Kueue's words for its preemption reasons in the Preempted condition's message (pkg/scheduler/preemption/
# preemption.go: HumanReadablePreemptionReasons, preemptionMessage).
PREEMPTION_REASONS = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortFairSharing": "Fair Sharing within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}
PREEMPTED_MESSAGE = re.compile(
    r"Preempted to accommodate a workload \(UID: (?P<uid>[^,)]+)(?:, JobUID: [^)]*)?\) due to (?P<why>[^;]+)")


@dataclass(frozen=True, slots=True)
class PreemptionNote:
    """What a Workload's `Preempted` condition says of its last preemption by Kueue."""

    preemptor_uid: str  # the preemptor Workload's UID ("" when absent or UNKNOWN)
    reason: str  # Kueue's preemption reason (InCohortFairSharing, ...), "" when its words are not known


def preemption_note(cond: Condition | None) -> PreemptionNote | None:
    """The preemptor and reason of the `Preempted` condition `cond`, whether it is True or was reset by the
    workload's next admission: Kueue then sets it False with reason QuotaReserved and the message
    "Previously: " + the old one (pkg/workload/workload.go resetActiveCondition, from SetQuotaReservation),
    so the reason is read back from the message's words. None: not a message of Kueue's preemption."""
    if cond is None:
        return None
    m = PREEMPTED_MESSAGE.search(cond.message)
    if m is None:
        return None
    uid = m.group("uid").strip()
    if cond.status and cond.reason in PREEMPTION_REASONS:
        reason = cond.reason
    else:
        words = m.group("why").strip().lower()
        reason = next((k for k, v in PREEMPTION_REASONS.items() if v.lower() == words), "")
    return PreemptionNote("" if uid == "UNKNOWN" else uid, reason)


# Evicted reasons after which Kueue orders the workload by its eviction time
# (pkg/workload/workload.go, GetQueueOrderTimestamp with requeuingStrategy.timestamp=Eviction).
EVICTION_TIME_ORDER_REASONS = frozenset({"PodsReadyTimeout", "AdmissionCheck"})


@dataclass(frozen=True, slots=True, init=False)
class Workload:
    namespace: str
    name: str
    queue_name: str
    pod_sets: tuple[PodSet, ...]
    priority: int = 0
    creation_timestamp: Seconds = 0.0
    uid: str = ""
    priority_class: str | None = None  # priorityClassRef.name
    priority_class_kind: str | None = None  # WorkloadPriorityClass | PriorityClass
    active: bool = True
    labels: tuple[tuple[str, str], ...] = ()
    admission: Admission | None = None
    conditions: tuple[Condition, ...] = ()
    requeue_at: Seconds | None = None  # status.requeueState.requeueAt (backoff): not a head before
    explicit_priority: bool = True  # False when spec.priority was absent (then the class value applies)
    priority_boost: int = 0  # annotation kueue.x-k8s.io/priority-boost (KEP-7990)
    reclaimable_pods: tuple[tuple[str, int], ...] = ()  # status.reclaimablePods: pod set -> count
    # For the ledger (accounting, not admission): who owns the workload, when it was deleted, and
    # Kueue's own record of past attempts (apis/kueue/v1beta2/workload_types.go WorkloadStatus).
    owner_kind: str | None = None  # metadata.ownerReferences: the controller (else the first) owner
    owner_name: str | None = None
    deletion_timestamp: Seconds | None = None  # metadata.deletionTimestamp
    accumulated_past_execution_seconds: int | None = None  # status.accumulatedPastExecutionTimeSeconds
    # status.schedulingStats.evictions: (reason, underlyingCause, count), sorted
    eviction_stats: tuple[tuple[str, str, int], ...] = ()

    def __init__(
        self,
        namespace: str,
        name: str,
        queue_name: str,
        pod_sets: tuple[PodSet, ...],
        priority: int = 0,
        creation_timestamp: Seconds = 0.0,
        uid: str = "",
        priority_class: str | None = None,
        priority_class_kind: str | None = None,
        active: bool = True,
        labels: tuple[tuple[str, str], ...] = (),
        admission: Admission | None = None,
        conditions: tuple[Condition, ...] = (),
        requeue_at: Seconds | None = None,
        explicit_priority: bool = True,
        priority_boost: int = 0,
        reclaimable_pods: tuple[tuple[str, int], ...] = (),
        owner_kind: str | None = None,
        owner_name: str | None = None,
        deletion_timestamp: Seconds | None = None,
        accumulated_past_execution_seconds: int | None = None,
        eviction_stats: tuple[tuple[str, str, int], ...] = (),
    ) -> None:
        # (written out: a dataclass-generated __init__ is interpreted even compiled; see scheduler/types.py)
        object.__setattr__(self, "namespace", namespace)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "queue_name", queue_name)
        object.__setattr__(self, "pod_sets", pod_sets)
        object.__setattr__(self, "priority", priority)
        object.__setattr__(self, "creation_timestamp", creation_timestamp)
        object.__setattr__(self, "uid", uid)
        object.__setattr__(self, "priority_class", priority_class)
        object.__setattr__(self, "priority_class_kind", priority_class_kind)
        object.__setattr__(self, "active", active)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "admission", admission)
        object.__setattr__(self, "conditions", conditions)
        object.__setattr__(self, "requeue_at", requeue_at)
        object.__setattr__(self, "explicit_priority", explicit_priority)
        object.__setattr__(self, "priority_boost", priority_boost)
        object.__setattr__(self, "reclaimable_pods", reclaimable_pods)
        object.__setattr__(self, "owner_kind", owner_kind)
        object.__setattr__(self, "owner_name", owner_name)
        object.__setattr__(self, "deletion_timestamp", deletion_timestamp)
        object.__setattr__(self, "accumulated_past_execution_seconds", accumulated_past_execution_seconds)
        object.__setattr__(self, "eviction_stats", eviction_stats)

    @property
    def eviction_count(self) -> int:
        """How many times Kueue has evicted this workload, for any reason (status.schedulingStats)."""
        return sum(count for _, _, count in self.eviction_stats)

    def after_eviction(self, reason: str, cause: str = "", ran: int | None = None) -> Workload:
        """The workload as Kueue leaves it after one more eviction: schedulingStats.evictions counts it
        under (reason, underlyingCause) (pkg/workload: every eviction path records one). `ran`: the whole
        seconds it was admitted in this attempt, which Kueue adds to status.accumulatedPastExecutionTime-
        Seconds when its Admitted condition turns False (pkg/workload/admissionchecks.go
        SyncAdmittedCondition: int32 of the seconds since the condition's lastTransitionTime, unconditional);
        None: not known, the field stays as it was."""
        counts = {(r, c): n for r, c, n in self.eviction_stats}
        counts[(reason, cause)] = counts.get((reason, cause), 0) + 1
        stats = tuple(sorted((r, c, n) for (r, c), n in counts.items()))
        past = self.accumulated_past_execution_seconds
        if ran is not None:
            past = ran if past is None else past + ran
        return self.without_admission(self.conditions, stats, past)

    def without_admission(self, conditions: tuple[Condition, ...],
                          eviction_stats: tuple[tuple[str, str, int], ...],
                          accumulated: int | None = None) -> Workload:
        """``dataclasses.replace(self, admission=None, conditions=..., eviction_stats=...)`` written out:
        replace() is interpreted and walks the fields (52,000 instructions a call in the compiled core).
        `accumulated`: status.accumulatedPastExecutionTimeSeconds (None: as it was)."""
        return Workload(
            namespace=self.namespace,
            name=self.name,
            queue_name=self.queue_name,
            pod_sets=self.pod_sets,
            priority=self.priority,
            creation_timestamp=self.creation_timestamp,
            uid=self.uid,
            priority_class=self.priority_class,
            priority_class_kind=self.priority_class_kind,
            active=self.active,
            labels=self.labels,
            admission=None,
            conditions=conditions,
            requeue_at=self.requeue_at,
            explicit_priority=self.explicit_priority,
            priority_boost=self.priority_boost,
            reclaimable_pods=self.reclaimable_pods,
            owner_kind=self.owner_kind,
            owner_name=self.owner_name,
            deletion_timestamp=self.deletion_timestamp,
            accumulated_past_execution_seconds=(
                self.accumulated_past_execution_seconds if accumulated is None else accumulated),
            eviction_stats=eviction_stats,
        )

    def count_after_reclaim(self, pod_set: PodSet) -> int:
        """podSetsCountsAfterReclaim: pods that finished for good no longer need quota."""
        for name, n in self.reclaimable_pods:
            if name == pod_set.name:
                return max(0, pod_set.count - n)
        return pod_set.count

    def admitted_usage(self) -> FlavorResourceQuantities:
        """totalRequestsFromAdmission: status.admission's usage, scaled down for reclaimable pods."""
        if self.admission is None:
            return {}
        if not self.reclaimable_pods:
            return self.admission.usage()
        after = {ps.name: self.count_after_reclaim(ps) for ps in self.pod_sets}
        out: FlavorResourceQuantities = {}
        for psa in self.admission.pod_set_assignments:
            flavors = dict(psa.flavors)
            keep = after.get(psa.name, psa.count)
            for resource, qty in psa.resource_usage:
                flavor = flavors.get(resource)
                if flavor is None:
                    continue
                if psa.count > 0 and keep < psa.count:
                    qty = qty // psa.count * keep
                fr = FlavorResource(flavor, resource)
                out[fr] = out.get(fr, 0) + qty
        return out

    @property
    def effective_priority(self) -> int:
        """spec.priority + the priority-boost annotation (pkg/util/priority EffectivePriority)."""
        return self.priority + self.priority_boost

    @property
    def key(self) -> WorkloadKey:
        return f"{self.namespace}/{self.name}"

    @property
    def local_queue_key(self) -> LocalQueueKey:
        return f"{self.namespace}/{self.queue_name}"

    def condition(self, type_: str) -> Condition | None:
        for cond in self.conditions:
            if cond.type == type_:
                return cond
        return None

    @property
    def has_quota_reservation(self) -> bool:
        """Admitted in the sense of the case format: status.admission set and QuotaReserved=True."""
        cond = self.condition("QuotaReserved")
        return self.admission is not None and cond is not None and cond.status

    @property
    def quota_reserved_time(self) -> Seconds:
        cond = self.condition("QuotaReserved")
        return cond.last_transition_time if cond is not None and cond.status else self.creation_timestamp

    @property
    def is_finished(self) -> bool:
        cond = self.condition("Finished")
        return cond is not None and cond.status

    @property
    def queue_order_time(self) -> Seconds:
        """Kueue's queue-order timestamp (pkg/workload/workload.go GetQueueOrderTimestamp)."""
        cond = self.condition("Evicted")
        if cond is not None and cond.status and cond.reason in EVICTION_TIME_ORDER_REASONS:
            return cond.last_transition_time
        return self.creation_timestamp

    def total_requests(self) -> dict[ResourceName, Milli]:
        out: dict[ResourceName, Milli] = {}
        for ps in self.pod_sets:
            for r, q in ps.requests:
                out[r] = out.get(r, 0) + q * ps.count
        return out


def cohort_cycle(parents: Mapping[CohortName, CohortName | None]) -> list[CohortName] | None:
    """The first loop in a Cohort parent chain, as names from its first member back to it (Kueue refuses a
    Cohort whose parents loop, pkg/cache/hierarchy); the Cohort found first in name order, so the answer
    does not depend on the order objects were read. None if there is no loop."""
    done: set[CohortName] = set()
    for start in sorted(parents):
        path: list[CohortName] = []
        name: CohortName | None = start
        while name is not None and name not in done:
            if name in path:
                return [*path[path.index(name):], name]
            path.append(name)
            name = parents.get(name)
        done.update(path)
    return None


# --- the whole state --------------------------------------------------------------


@dataclass(frozen=True)
class ClusterState:
    """Everything a scheduling cycle reads: Kueue objects keyed by name (namespaced: "ns/name")."""

    flavors: Mapping[FlavorName, ResourceFlavor] = field(default_factory=dict)
    cohorts: Mapping[CohortName, Cohort] = field(default_factory=dict)
    cluster_queues: Mapping[ClusterQueueName, ClusterQueue] = field(default_factory=dict)
    local_queues: Mapping[LocalQueueKey, LocalQueue] = field(default_factory=dict)
    priority_classes: Mapping[str, WorkloadPriorityClass] = field(default_factory=dict)
    workloads: Mapping[WorkloadKey, Workload] = field(default_factory=dict)
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def cluster_queue_of(self, wl: Workload) -> ClusterQueueName | None:
        """The ClusterQueue a workload is (or would be) charged to."""
        if wl.admission is not None:
            return wl.admission.cluster_queue
        lq = self.local_queues.get(wl.local_queue_key)
        return lq.cluster_queue if lq is not None else None
