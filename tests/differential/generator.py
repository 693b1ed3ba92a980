"""A seeded generator of valid random Kueue states for the differential harness.

A state: 1-2 ResourceFlavors; ClusterQueues covering cpu and nvidia.com/gpu; 2-6 ClusterQueues in
1-2 cohort trees, sometimes hierarchical (a root Cohort with its own quota over child Cohorts);
nominal quotas with borrowing and lending limits; every preemption policy combination (incl.
borrowWithinCohort with maxPriorityThreshold); both queueing strategies; flavor fungibility;
fair-sharing weights (fair-sharing mode); 2-3 WorkloadPriorityClasses; 5-15 workloads with 1-2
pod sets, submitted one at a time in this order.

Valid means Kueue's webhooks and CEL rules accept it (apis/kueue/v1beta2/clusterqueue_types.go,
pkg/webhooks/clusterqueue_webhook.go, v0.19.2): borrowing and lending limits only with a cohort
(for a Cohort: only with a parent), lendingLimit <= nominalQuota, borrowWithinCohort only when
reclaimWithinCohort is not Never, fungibility ``preference`` only when both policies are
TryNextFlavor, every flavor lists every covered resource.

Pure and deterministic: the same (seed, mode) always gives the same state.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

GROUP_VERSION = "kueue.x-k8s.io/v1beta2"
RESOURCES = ("cpu", "nvidia.com/gpu")
MODES = ("classical", "fair-sharing")

Obj = dict[str, object]


@dataclass(frozen=True, slots=True)
class PodSetSpec:
    name: str
    count: int
    requests: tuple[tuple[str, str], ...]  # resource -> quantity, per pod


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """One submission: a batch/v1 Job when it has one pod set, else an owner-less Workload."""

    name: str
    local_queue: str
    priority_class: str
    priority: int
    pod_sets: tuple[PodSetSpec, ...]

    @property
    def as_job(self) -> bool:
        return len(self.pod_sets) == 1


@dataclass(frozen=True, slots=True)
class GeneratedState:
    seed: int
    mode: str
    prefix: str  # every cluster-scoped name starts with it
    namespace: str
    objects: tuple[Obj, ...]  # ResourceFlavors, Cohorts, ClusterQueues, LocalQueues, WPCs (creation order)
    workloads: tuple[WorkloadSpec, ...]

    @property
    def fair_sharing(self) -> bool:
        return self.mode == "fair-sharing"

    def kinds(self, kind: str) -> list[Obj]:
        return [o for o in self.objects if o["kind"] == kind]


def _meta(name: str, namespace: str | None = None) -> Obj:
    return {"name": name} if namespace is None else {"name": name, "namespace": namespace}


def _cpu(rng: random.Random, choices: tuple[int, ...]) -> str:
    return str(rng.choice(choices))


class _Gen:
    def __init__(self, seed: int, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        # A str seed is hashed with SHA-512 by random.seed (version 2): stable across runs and Pythons.
        self.rng = random.Random(f"{mode}:{seed}")
        self.seed = seed
        self.mode = mode
        self.prefix = f"d{'f' if mode == 'fair-sharing' else 'c'}{seed}"
        self.namespace = f"{self.prefix}-ns"

    def name(self, suffix: str) -> str:
        return f"{self.prefix}-{suffix}"

    def quota(self, resource: str, *, limits: bool) -> Obj:
        rng = self.rng
        nominal = int(_cpu(rng, (0, 1, 2, 3, 4, 6))) if resource == "cpu" else rng.choice((0, 1, 2, 3, 4))
        q: Obj = {"name": resource, "nominalQuota": str(nominal)}
        if limits and rng.random() < 0.3:
            q["borrowingLimit"] = str(rng.randint(0, 4))
        if limits and rng.random() < 0.3:
            q["lendingLimit"] = str(rng.randint(0, nominal))
        return q

    def resource_groups(self, flavors: list[str], *, limits: bool) -> list[Obj]:
        return [
            {
                "coveredResources": list(RESOURCES),
                "flavors": [
                    {"name": f, "resources": [self.quota(r, limits=limits) for r in RESOURCES]}
                    for f in flavors
                ],
            }
        ]

    def weight(self) -> str | None:
        if self.mode != "fair-sharing" or self.rng.random() >= 0.3:
            return None
        return self.rng.choice(("2", "500m", "3"))

    def preemption(self, priorities: list[int]) -> Obj:
        rng = self.rng
        # Never as often as each other policy: most states should be able to preempt somewhere.
        within = rng.choice(("Never", "LowerPriority", "LowerPriority", "LowerOrNewerEqualPriority"))
        reclaim = rng.choice(("Never", "LowerPriority", "Any", "Any"))
        out: Obj = {"withinClusterQueue": within, "reclaimWithinCohort": reclaim}
        if reclaim != "Never" and rng.random() < 0.5:
            bwc: Obj = {"policy": "LowerPriority"}
            if rng.random() < 0.6:
                bwc["maxPriorityThreshold"] = rng.choice(priorities)
            out["borrowWithinCohort"] = bwc
        return out

    def fungibility(self) -> Obj:
        rng = self.rng
        borrow = rng.choice(("MayStopSearch", "TryNextFlavor"))
        preempt = rng.choice(("TryNextFlavor", "MayStopSearch"))
        out: Obj = {"whenCanBorrow": borrow, "whenCanPreempt": preempt}
        if borrow == preempt == "TryNextFlavor" and rng.random() < 0.5:
            out["preference"] = rng.choice(("BorrowingOverPreemption", "PreemptionOverBorrowing"))
        return out

    def cohorts(self, n_cqs: int, flavors: list[str]) -> tuple[list[Obj], list[str | None]]:
        """Cohort objects and each CQ's cohortName."""
        rng = self.rng
        shape = rng.choice(("one", "two", "hierarchical", "hierarchical", "one-and-standalone"))
        objs: list[Obj] = []
        names: list[str | None] = []
        if shape == "hierarchical":
            root = self.name("root")
            spec: Obj = {"resourceGroups": self.resource_groups(flavors, limits=False)}
            if (w := self.weight()) is not None:
                spec["fairSharing"] = {"weight": w}
            objs.append(
                {"apiVersion": GROUP_VERSION, "kind": "Cohort", "metadata": _meta(root), "spec": spec}
            )
            children = [self.name(f"c{i}") for i in range(rng.choice((1, 2)))]
            for child in children:
                cspec: Obj = {"parentName": root}
                if rng.random() < 0.5:
                    cspec["resourceGroups"] = self.resource_groups(flavors, limits=True)
                if (w := self.weight()) is not None:
                    cspec["fairSharing"] = {"weight": w}
                objs.append(
                    {"apiVersion": GROUP_VERSION, "kind": "Cohort", "metadata": _meta(child), "spec": cspec}
                )
            # Most CQs in a child cohort, some straight under the root.
            pool: list[str] = [*children, *children, root]
            names = [rng.choice(pool) for _ in range(n_cqs)]
        else:
            roots = [self.name("co0")] + ([self.name("co1")] if shape == "two" else [])
            for r in roots:
                if rng.random() < 0.5:  # an explicit Cohort object; else only named by cohortName
                    objs.append(
                        {"apiVersion": GROUP_VERSION, "kind": "Cohort", "metadata": _meta(r), "spec": {}}
                    )
            names = [rng.choice(roots) for _ in range(n_cqs)]
            if shape == "one-and-standalone":
                names[-1] = None
        return objs, names

    def generate(self) -> GeneratedState:
        rng = self.rng
        flavors = [self.name(f"f{i}") for i in range(rng.choice((1, 2)))]
        objects: list[Obj] = [
            {"apiVersion": GROUP_VERSION, "kind": "ResourceFlavor", "metadata": _meta(f), "spec": {}}
            for f in flavors
        ]
        priorities = sorted(rng.sample(range(0, 1001, 100), rng.choice((2, 3))))
        pcs = [(self.name(f"p{v}"), v) for v in priorities]
        n_cqs = rng.randint(2, 6)
        cohort_objs, cohort_of = self.cohorts(n_cqs, flavors)
        objects += cohort_objs
        cqs = [self.name(f"cq{i}") for i in range(n_cqs)]
        for cq, cohort in zip(cqs, cohort_of, strict=True):
            mine = rng.sample(flavors, rng.randint(1, len(flavors)))  # a subset, in a random order
            spec: Obj = {
                "namespaceSelector": {},
                "queueingStrategy": rng.choice(("BestEffortFIFO", "StrictFIFO")),
                "resourceGroups": self.resource_groups(mine, limits=cohort is not None),
                "preemption": self.preemption(priorities),
                "flavorFungibility": self.fungibility(),
            }
            if cohort is not None:
                spec["cohortName"] = cohort
            if (w := self.weight()) is not None:
                spec["fairSharing"] = {"weight": w}
            objects.append(
                {"apiVersion": GROUP_VERSION, "kind": "ClusterQueue", "metadata": _meta(cq), "spec": spec}
            )
        for cq in cqs:
            objects.append(
                {
                    "apiVersion": GROUP_VERSION,
                    "kind": "LocalQueue",
                    "metadata": _meta(f"lq-{cq}", self.namespace),
                    "spec": {"clusterQueue": cq},
                }
            )
        for name, value in pcs:
            objects.append(
                {
                    "apiVersion": GROUP_VERSION,
                    "kind": "WorkloadPriorityClass",
                    "metadata": _meta(name),
                    "value": value,
                }
            )
        workloads = []
        for i in range(rng.randint(5, 15)):
            pc, value = rng.choice(pcs)
            sets = []
            for j in range(1 if rng.random() < 0.7 else 2):
                while True:
                    cpu = rng.choice(("0", "500m", "1", "1", "2", "3"))
                    gpu = rng.choice(("0", "1", "1", "2"))
                    if cpu != "0" or gpu != "0":
                        break
                req = tuple((r, q) for r, q in (("cpu", cpu), ("nvidia.com/gpu", gpu)) if q != "0")
                sets.append(PodSetSpec(f"ps{j}" if j else "main", rng.choice((1, 1, 1, 2)), req))
            workloads.append(WorkloadSpec(f"w{i:02d}", f"lq-{rng.choice(cqs)}", pc, value, tuple(sets)))
        return GeneratedState(
            self.seed, self.mode, self.prefix, self.namespace, tuple(objects), tuple(workloads)
        )


def generate(seed: int, mode: str) -> GeneratedState:
    """The random state for ``seed`` in ``mode`` (classical | fair-sharing)."""
    return _Gen(seed, mode).generate()
