"""Fluent builders of the core's models for tests.

ClusterQueueBuilder("a").cohort("all").quota("default", "cpu", "3").preemption(reclaim="Any").build()
WorkloadBuilder("team-a", "w1").queue("main").priority(0).request("cpu", "1")
    .admitted("a", "default", at=10).build()
StateBuilder().flavors("default").cq(cq).lq("team-a", "main", "a").wl(wl).build()
"""

from __future__ import annotations

import dataclasses

from fairshare.models import (
    Admission,
    AdmissionMode,
    BorrowWithinCohortPolicy,
    ClusterQueue,
    ClusterQueuePreemption,
    ClusterState,
    Cohort,
    Condition,
    FlavorFungibility,
    FlavorQuotas,
    FungibilityPolicy,
    FungibilityPreference,
    LocalQueue,
    PodSet,
    PodSetAssignment,
    QueueingStrategy,
    ReclaimWithinCohort,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    StopPolicy,
    Taint,
    Toleration,
    WithinClusterQueue,
    Workload,
)
from fairshare.quantity import parse_quantity

Q = str | int


def q(value: Q | None) -> int | None:
    return None if value is None else parse_quantity(value)


class _QuotaHolder:
    def __init__(self) -> None:
        # flavor -> resource -> quota, in insertion order; grouped by resource set at build
        self._flavors: dict[str, dict[str, ResourceQuota]] = {}
        self._groups: list[list[str]] = []  # explicit groups of flavors

    def quota(
        self,
        flavor: str,
        resource: str,
        nominal: Q,
        borrowing_limit: Q | None = None,
        lending_limit: Q | None = None,
    ) -> _QuotaHolder:
        self._flavors.setdefault(flavor, {})[resource] = ResourceQuota(
            nominal=parse_quantity(nominal),
            borrowing_limit=q(borrowing_limit),
            lending_limit=q(lending_limit),
        )
        return self

    def _resource_groups(self) -> tuple[ResourceGroup, ...]:
        # Flavors that cover the same resource set form one group (Kueue: resources of a
        # group are assigned the same flavor).
        groups: dict[tuple[str, ...], list[FlavorQuotas]] = {}
        for flavor, res in self._flavors.items():
            covered = tuple(res)
            groups.setdefault(tuple(sorted(covered)), []).append(
                FlavorQuotas(flavor, tuple((r, res[r]) for r in sorted(covered)))
            )
        return tuple(ResourceGroup(covered_resources=k, flavors=tuple(v)) for k, v in groups.items())


class ClusterQueueBuilder(_QuotaHolder):
    def __init__(self, name: str) -> None:
        super().__init__()
        self._cq = ClusterQueue(name=name)

    def cohort(self, name: str) -> ClusterQueueBuilder:
        self._cq = dataclasses.replace(self._cq, cohort=name)
        return self

    def quota(
        self,
        flavor: str,
        resource: str,
        nominal: Q,
        borrowing_limit: Q | None = None,
        lending_limit: Q | None = None,
    ) -> ClusterQueueBuilder:
        super().quota(flavor, resource, nominal, borrowing_limit, lending_limit)
        return self

    def strict_fifo(self) -> ClusterQueueBuilder:
        self._cq = dataclasses.replace(self._cq, queueing_strategy=QueueingStrategy.STRICT_FIFO)
        return self

    def preemption(
        self,
        *,
        within: str = "Never",
        reclaim: str = "Never",
        borrow: str = "Never",
        max_priority_threshold: int | None = None,
    ) -> ClusterQueueBuilder:
        self._cq = dataclasses.replace(
            self._cq,
            preemption=ClusterQueuePreemption(
                WithinClusterQueue(within),
                ReclaimWithinCohort(reclaim),
                BorrowWithinCohortPolicy(borrow),
                max_priority_threshold,
            ),
        )
        return self

    def fungibility(
        self,
        *,
        when_can_borrow: str = "MayStopSearch",
        when_can_preempt: str = "TryNextFlavor",
        preference: str | None = None,
    ) -> ClusterQueueBuilder:
        self._cq = dataclasses.replace(
            self._cq,
            flavor_fungibility=FlavorFungibility(
                FungibilityPolicy(when_can_borrow),
                FungibilityPolicy(when_can_preempt),
                None if preference is None else FungibilityPreference(preference),
            ),
        )
        return self

    def weight(self, value: Q) -> ClusterQueueBuilder:
        self._cq = dataclasses.replace(self._cq, fair_sharing_weight=parse_quantity(value))
        return self

    def afs(self) -> ClusterQueueBuilder:
        self._cq = dataclasses.replace(self._cq, admission_mode=AdmissionMode.USAGE_BASED_AFS)
        return self

    def stop(self, policy: str = "Hold") -> ClusterQueueBuilder:
        self._cq = dataclasses.replace(self._cq, stop_policy=StopPolicy(policy))
        return self

    def build(self) -> ClusterQueue:
        return dataclasses.replace(self._cq, resource_groups=self._resource_groups())


class CohortBuilder(_QuotaHolder):
    def __init__(self, name: str) -> None:
        super().__init__()
        self._c = Cohort(name=name)

    def parent(self, name: str) -> CohortBuilder:
        self._c = dataclasses.replace(self._c, parent=name)
        return self

    def quota(
        self,
        flavor: str,
        resource: str,
        nominal: Q,
        borrowing_limit: Q | None = None,
        lending_limit: Q | None = None,
    ) -> CohortBuilder:
        super().quota(flavor, resource, nominal, borrowing_limit, lending_limit)
        return self

    def weight(self, value: Q) -> CohortBuilder:
        self._c = dataclasses.replace(self._c, fair_sharing_weight=parse_quantity(value))
        return self

    def build(self) -> Cohort:
        return dataclasses.replace(self._c, resource_groups=self._resource_groups())


class WorkloadBuilder:
    def __init__(self, namespace: str, name: str) -> None:
        self._ns, self._name = namespace, name
        self._queue = "main"
        self._priority = 0
        self._created = 0.0
        self._pod_sets: list[PodSet] = []
        self._requests: dict[str, int] = {}
        self._count = 1
        self._admission: Admission | None = None
        self._conditions: list[Condition] = []
        self._node_selector: dict[str, str] = {}
        self._tolerations: list[Toleration] = []
        self._class: str | None = None
        self._owner: tuple[str, str] | None = None

    def queue(self, name: str) -> WorkloadBuilder:
        self._queue = name
        return self

    def priority(self, value: int) -> WorkloadBuilder:
        self._priority = value
        return self

    def created(self, t: float) -> WorkloadBuilder:
        self._created = t
        return self

    def priority_class(self, name: str) -> WorkloadBuilder:
        """spec.priorityClassRef.name (a WorkloadPriorityClass); the value is `priority`'s."""
        self._class = name
        return self

    def owner(self, kind: str, name: str) -> WorkloadBuilder:
        """The controller of metadata.ownerReferences (e.g. its Job)."""
        self._owner = (kind, name)
        return self

    def request(self, resource: str, value: Q) -> WorkloadBuilder:
        """Per-pod request of the default pod set."""
        self._requests[resource] = parse_quantity(value)
        return self

    def count(self, n: int) -> WorkloadBuilder:
        self._count = n
        return self

    def node_selector(self, key: str, value: str) -> WorkloadBuilder:
        self._node_selector[key] = value
        return self

    def toleration(self, key: str, value: str = "", effect: str = "") -> WorkloadBuilder:
        self._tolerations.append(Toleration(key=key, operator="Equal", value=value, effect=effect))
        return self

    def pod_set(
        self, name: str, count: int, *, min_count: int | None = None, **requests: Q
    ) -> WorkloadBuilder:
        """A pod set of ``count`` pods; requests as keywords (``nvidia_com_gpu`` -> ``nvidia.com/gpu``)."""
        reqs = tuple(sorted((r.replace("_com_", ".com/"), parse_quantity(v)) for r, v in requests.items()))
        self._pod_sets.append(PodSet(name, count, reqs, min_count=min_count))
        return self

    def _sets(self) -> tuple[PodSet, ...]:
        if self._pod_sets:
            return tuple(self._pod_sets)
        return (
            PodSet(
                "main",
                self._count,
                tuple(sorted(self._requests.items())),
                tuple(sorted(self._node_selector.items())),
                tuple(self._tolerations),
            ),
        )

    def admitted(
        self, cluster_queue: str, flavor: str | dict[str, str], *, at: float = 0.0
    ) -> WorkloadBuilder:
        """Holds quota in ``cluster_queue`` on ``flavor`` (one flavor, or resource -> flavor)."""
        psas = []
        for ps in self._sets():
            flv = {r: (flavor if isinstance(flavor, str) else flavor[r]) for r, _ in ps.requests}
            psas.append(
                PodSetAssignment(
                    ps.name, tuple(sorted(flv.items())), tuple(sorted(ps.total().items())), ps.count
                )
            )
        self._admission = Admission(cluster_queue, tuple(psas))
        self._conditions.append(Condition("QuotaReserved", True, "QuotaReserved", "", at))
        self._conditions.append(Condition("Admitted", True, "Admitted", "", at))
        return self

    def evicted(self, reason: str = "Preempted", *, at: float = 0.0) -> WorkloadBuilder:
        self._conditions.append(Condition("Evicted", True, reason, "", at))
        return self

    def condition(self, type_: str, status: bool, reason: str, message: str = "", *,
                  at: float = 0.0) -> WorkloadBuilder:
        self._conditions.append(Condition(type_, status, reason, message, at))
        return self

    def build(self) -> Workload:
        return Workload(
            namespace=self._ns,
            name=self._name,
            queue_name=self._queue,
            pod_sets=self._sets(),
            priority=self._priority,
            creation_timestamp=self._created,
            uid=f"{self._ns}/{self._name}",
            admission=self._admission,
            conditions=tuple(self._conditions),
            priority_class=self._class,
            priority_class_kind="WorkloadPriorityClass" if self._class is not None else None,
            owner_kind=self._owner[0] if self._owner else None,
            owner_name=self._owner[1] if self._owner else None,
        )


class StateBuilder:
    """Collects models into a ClusterState."""

    def __init__(self) -> None:
        self._flavors: dict[str, ResourceFlavor] = {}
        self._cohorts: dict[str, Cohort] = {}
        self._cqs: dict[str, ClusterQueue] = {}
        self._lqs: dict[str, LocalQueue] = {}
        self._wls: dict[str, Workload] = {}

    def flavors(self, *names: str) -> StateBuilder:
        for n in names:
            self._flavors[n] = ResourceFlavor(n)
        return self

    def flavor(
        self,
        name: str,
        *,
        labels: dict[str, str] | None = None,
        taints: list[tuple[str, str, str]] | None = None,
    ) -> StateBuilder:
        self._flavors[name] = ResourceFlavor(
            name, tuple(sorted((labels or {}).items())), tuple(Taint(k, v, e) for k, v, e in (taints or []))
        )
        return self

    def cohort(self, c: Cohort | CohortBuilder) -> StateBuilder:
        built = c.build() if isinstance(c, CohortBuilder) else c
        self._cohorts[built.name] = built
        return self

    def cq(self, cq: ClusterQueue | ClusterQueueBuilder, *, local_queue: str | None = None) -> StateBuilder:
        """Add a CQ; ``local_queue`` also adds LocalQueue ``<cq name>/<local_queue>`` feeding it."""
        built = cq.build() if isinstance(cq, ClusterQueueBuilder) else cq
        self._cqs[built.name] = built
        if local_queue is not None:
            self.lq(built.name, local_queue, built.name)
        return self

    def lq(self, namespace: str, name: str, cluster_queue: str) -> StateBuilder:
        self._lqs[f"{namespace}/{name}"] = LocalQueue(namespace, name, cluster_queue)
        return self

    def wl(self, *wls: Workload | WorkloadBuilder) -> StateBuilder:
        for w in wls:
            built = w.build() if isinstance(w, WorkloadBuilder) else w
            self._wls[built.key] = built
        return self

    def build(self) -> ClusterState:
        namespaces = {lq.namespace for lq in self._lqs.values()} | {w.namespace for w in self._wls.values()}
        return ClusterState(
            flavors=dict(self._flavors),
            cohorts=dict(self._cohorts),
            cluster_queues=dict(self._cqs),
            local_queues=dict(self._lqs),
            workloads=dict(self._wls),
            namespace_labels={ns: {"kubernetes.io/metadata.name": ns} for ns in namespaces},
        )


class SeedShiftBuilder:
    """The seed's shift as QuotaPolicy documents (dicts, as `kubectl apply` takes them): research and business
    lend and borrow in one cohort; `before()` gives research 4 GPUs and business 16, `after()` the edit
    research 4 -> 1 and business 16 -> 19. Neither team lets Kueue preempt (reclaimWithinCohort Never) and no
    class is protected, so the controller's transition rules are what acts, unless a test says otherwise.

    SeedShiftBuilder().transition(deadline="30s", maxVictimsPerHour=2).research_limit(0).after()
    """

    GPU = "nvidia.com/gpu"

    def __init__(self, suffix: str = "") -> None:
        self.suffix = suffix
        self._transition: dict[str, object] = {"duration": "20s", "stepInterval": "10s", "curve": "linear",
                                               "drain": True}
        self._research_limit: int | None = None
        self._reclaim = {"research": "Never", "business": "Never"}
        self._cohort = True
        self._preemption: dict[str, object] = {"victimHold": "60s", "starvationGrace": "30s"}
        self._namespaces = {"research": "research", "business": "business"}

    def name(self, what: str) -> str:
        return f"{what}-{self.suffix}" if self.suffix else what

    def transition(self, **fields: object) -> SeedShiftBuilder:
        self._transition.update(fields)
        return self

    def research_limit(self, gpus: int) -> SeedShiftBuilder:
        """research's borrowingLimit in the edit (its usage must fall to its nominal + this)."""
        self._research_limit = gpus
        return self

    def reclaim(self, team: str, policy: str) -> SeedShiftBuilder:
        self._reclaim[team] = policy
        return self

    def without_cohort(self) -> SeedShiftBuilder:
        self._cohort = False
        return self

    def preemption(self, **fields: object) -> SeedShiftBuilder:
        """spec.preemption fields (e.g. protectedClasses=["biz"] turns the experiment gate on)."""
        self._preemption.update(fields)
        return self

    def namespaces(self, research: str, business: str) -> SeedShiftBuilder:
        self._namespaces = {"research": research, "business": business}
        return self

    def before(self) -> dict[str, object]:
        return self._policy(4, 16, None)

    def after(self) -> dict[str, object]:
        return self._policy(1, 19, self._research_limit)

    def _policy(self, research: int, business: int, limit: int | None) -> dict[str, object]:
        def team(key: str, gpus: int, limit: int | None) -> dict[str, object]:
            gpu: dict[str, object] = {"name": self.GPU, "nominal": gpus}
            if limit is not None:
                gpu["borrowingLimit"] = limit
            # cpu too: Kueue admits a Job's pods (which ask for a core) only where every resource is covered.
            out: dict[str, object] = {
                "name": self.name(key), "namespaces": [self._namespaces[key]],
                "preemption": {"withinClusterQueue": "Never", "reclaimWithinCohort": self._reclaim[key]},
                "quotas": [{"flavor": self.name("gpu"), "resources": [gpu, {"name": "cpu", "nominal": 64}]}]}
            if self._cohort:
                out["cohort"] = self.name("pool")
            return out

        preemption = dict(self._preemption)
        if "protectedClasses" in preemption:
            preemption["protectedClasses"] = [self.name(str(c)) for c in preemption["protectedClasses"]]
        return {
            "apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy",
            "metadata": {"name": self.name("seed-shift")},
            "spec": {
                "flavors": [{"name": self.name("gpu")}],
                "priorityClasses": [{"name": self.name("biz"), "value": 1000000},
                                    {"name": self.name("exp"), "value": 100, "experiment": True}],
                "teams": [team("research", research, limit), team("business", business, None)],
                "preemption": preemption,
                "transitions": {"defaults": dict(self._transition)},
            },
        }
