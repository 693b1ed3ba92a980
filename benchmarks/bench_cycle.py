"""One scheduling cycle over 1,000 ClusterQueues in 10 cohorts, 50,000 pending and 20,000
admitted workloads (issue 2, item 8); first, "simulator-shaped cycles": 2,000 cycles of 1-5
heads on a 100-CQ / 10-cohort tree (CPU us per head) and the queue manager's per-round cost.
Prints medians; never asserts.

Run: make bench BENCH=cycle   (or: .venv/bin/python -m benchmarks cycle)
"""

from __future__ import annotations

import gc
import os
import statistics
import time

from fairshare.models import (
    Admission,
    ClusterQueue,
    ClusterQueuePreemption,
    ClusterState,
    Condition,
    FlavorQuotas,
    LocalQueue,
    PodSet,
    PodSetAssignment,
    ReclaimWithinCohort,
    ResourceFlavor,
    ResourceGroup,
    ResourceQuota,
    WithinClusterQueue,
    Workload,
)
from fairshare.queues import QueueManager
from fairshare.scheduler import SchedulerConfig, schedule_cycle
from fairshare.snapshot import FAST, REFERENCE, FastPaths, Snapshot
from fairshare.workload import WorkloadInfo

from .decisions import cycle_repr

CORES: tuple[tuple[str, FastPaths], ...] = (("reference", REFERENCE), ("fast", FAST))

COHORTS = 10
CQS_PER_COHORT = 100
PENDING_PER_CQ = 50
ADMITTED_PER_CQ = 20
REPEATS = 5
GI = 2**30 * 1000


def build_state(*, preemption: bool) -> ClusterState:
    """Each CQ: cpu/memory on one flavor, GPUs on two flavors (a100 then h100).

    Without preemption the admitted work leaves room and the heads mostly fit (some borrow).
    With preemption the admitted work (priority 0) fills the nominal GPU quota and every
    head (priority 10) must preempt in its CQ or reclaim in its cohort.
    """
    flavors = {n: ResourceFlavor(n) for n in ("default", "a100", "h100")}
    groups = (
        ResourceGroup(
            ("cpu", "memory"),
            (
                FlavorQuotas(
                    "default",
                    (("cpu", ResourceQuota(64_000, 64_000)), ("memory", ResourceQuota(256 * GI, 256 * GI))),
                ),
            ),
        ),
        ResourceGroup(
            ("nvidia.com/gpu",),
            (
                FlavorQuotas("a100", (("nvidia.com/gpu", ResourceQuota(8_000, 8_000)),)),
                FlavorQuotas("h100", (("nvidia.com/gpu", ResourceQuota(8_000, 4_000)),)),
            ),
        ),
    )
    pre = (
        ClusterQueuePreemption(WithinClusterQueue.LOWER_PRIORITY, ReclaimWithinCohort.ANY)
        if preemption
        else ClusterQueuePreemption()
    )
    cqs: dict[str, ClusterQueue] = {}
    lqs: dict[str, LocalQueue] = {}
    wls: dict[str, Workload] = {}
    for c in range(COHORTS):
        for i in range(CQS_PER_COHORT):
            name = f"team-{c}-{i}"
            cqs[name] = ClusterQueue(name=name, resource_groups=groups, cohort=f"cohort-{c}", preemption=pre)
            lqs[f"{name}/main"] = LocalQueue(name, "main", name)
            for j in range(ADMITTED_PER_CQ):
                # with preemption: 8 GPU workloads fill a100 and 8 fill h100 (all nominal)
                gpu_flavor = ("a100" if j < 8 else "h100" if j < 16 else None) if preemption else None
                gpu: tuple[tuple[str, int], ...] = (("nvidia.com/gpu", 1000),) if gpu_flavor else ()
                requests = (("cpu", 1000), ("memory", 2 * GI), *gpu)
                flv = (
                    ("cpu", "default"),
                    ("memory", "default"),
                    *((("nvidia.com/gpu", gpu_flavor),) if gpu_flavor else ()),
                )
                t = float(j)
                wls[f"{name}/run-{j}"] = Workload(
                    namespace=name,
                    name=f"run-{j}",
                    queue_name="main",
                    uid=f"{name}/run-{j}",
                    pod_sets=(PodSet("main", 1, requests),),
                    priority=0,
                    creation_timestamp=t,
                    admission=Admission(name, (PodSetAssignment("main", flv, requests, 1),)),
                    conditions=(
                        Condition("QuotaReserved", True, at_time := "QuotaReserved", "", t),
                        Condition("Admitted", True, at_time, "", t),
                    ),
                )
            for j in range(PENDING_PER_CQ):
                gpus = 1000 * (1 + (i + j) % 4)
                cpu = 2000 if preemption else 2000 + 1000 * ((i + j) % 3)
                requests = (("cpu", cpu), ("memory", 8 * GI), ("nvidia.com/gpu", gpus))
                wls[f"{name}/job-{j}"] = Workload(
                    namespace=name,
                    name=f"job-{j}",
                    queue_name="main",
                    uid=f"{name}/job-{j}",
                    pod_sets=(PodSet("main", 1 if preemption else 2, requests),),
                    priority=10 if preemption else j % 3,
                    creation_timestamp=100.0 + j,
                )
    return ClusterState(
        flavors=flavors,
        cluster_queues=cqs,
        local_queues=lqs,
        workloads=wls,
        namespace_labels={n: {"kubernetes.io/metadata.name": n} for n in cqs},
    )


def measure(preemption: bool, fair_sharing: bool = False) -> None:
    t0 = time.perf_counter()
    state = build_state(preemption=preemption)
    t1 = time.perf_counter()
    label = ("with preemption" if preemption else "without preemption") + (
        ", fair sharing" if fair_sharing else ""
    )
    medians: dict[str, float] = {}
    decisions: dict[str, object] = {}
    for core_name, core in CORES:
        t1 = time.perf_counter()
        snap = Snapshot.from_state(state, paths=core)
        config = SchedulerConfig(fair_sharing=fair_sharing)
        qm = QueueManager.from_snapshot(snap, config)
        t2 = time.perf_counter()
        heads = qm.heads(1000.0)
        t3 = time.perf_counter()
        gc.collect()
        gc.freeze()  # the long-lived state is not garbage; a simulator does the same
        times = []
        cpu = []
        result = None
        for _ in range(REPEATS):
            s, c = time.perf_counter(), time.process_time()
            result = schedule_cycle(snap, now=1000.0, config=config, heads=heads)
            times.append(time.perf_counter() - s)
            cpu.append(time.process_time() - c)
        gc.unfreeze()
        assert result is not None
        decisions[core_name] = cycle_repr(result)
        medians[core_name] = statistics.median(cpu)
        counts = (
            f"{len(snap.cluster_queues)} CQs, {len(snap.pending)} pending, {len(snap.workloads)} admitted"
        )
        decided = (
            f"{len(heads)} heads -> {len(result.admissions)} admitted, {len(result.preemptions)} preemptions"
        )
        print(f"cycle {label}, {core_name} core: {counts}, {decided}")
        wall = f"median cycle {statistics.median(times) * 1000:.1f} ms"
        spread = f"(min {min(times) * 1000:.1f}, max {max(times) * 1000:.1f}, {REPEATS} repeats)"
        print(
            f"  {wall} {spread}; CPU time median {statistics.median(cpu) * 1000:.1f} ms; "
            f"target {'(none)' if fair_sharing else '300 ms' if preemption else '100 ms'}"
        )
        print(
            f"  setup: state {t1 - t0:.2f} s, snapshot+queues {t2 - t1:.2f} s, "
            f"heads {1000 * (t3 - t2):.1f} ms"
        )
    same = "identical" if decisions["reference"] == decisions["fast"] else "DIFFERENT"
    print(
        f"  reference / fast CPU: {medians['reference'] / medians['fast']:.2f}x; decisions {same} "
        f"(load average {os.getloadavg()[0]:.1f})"
    )


# --- simulator-shaped cycles ---------------------------------------------------------------
# The simulator's hot loop: cycles with 1-5 heads on a 100-CQ / 10-cohort tree, plus the
# queue manager's heads() / notify_cohort_event. Figures are CPU microseconds per head.

SIM_COHORTS = 10
SIM_CQS_PER_COHORT = 10
SIM_ADMITTED_PER_CQ = 6
SIM_ROUNDS = 2_000


def build_sim_state(*, preemption: bool) -> ClusterState:
    """8 GPUs per CQ (a100 nominal 8, lendable), cpu/memory plenty; 6 admitted jobs per CQ
    (2 GPUs each in 3 CQs of a cohort, which borrow; 1 GPU elsewhere): 2 GPUs of the cohort
    are free. 2 pending workloads per CQ (1/2/4/8 GPUs) that fit, borrow or must wait/preempt."""
    flavors = {n: ResourceFlavor(n) for n in ("default", "a100")}
    groups = (
        ResourceGroup(
            ("cpu", "memory"),
            (
                FlavorQuotas(
                    "default",
                    (("cpu", ResourceQuota(64_000)), ("memory", ResourceQuota(256 * GI))),
                ),
            ),
        ),
        ResourceGroup(
            ("nvidia.com/gpu",), (FlavorQuotas("a100", (("nvidia.com/gpu", ResourceQuota(8_000)),)),)
        ),
    )
    pre = (
        ClusterQueuePreemption(WithinClusterQueue.LOWER_PRIORITY, ReclaimWithinCohort.ANY)
        if preemption
        else ClusterQueuePreemption()
    )
    cqs: dict[str, ClusterQueue] = {}
    lqs: dict[str, LocalQueue] = {}
    wls: dict[str, Workload] = {}
    for c in range(SIM_COHORTS):
        for i in range(SIM_CQS_PER_COHORT):
            name = f"sim-{c}-{i}"
            cqs[name] = ClusterQueue(name=name, resource_groups=groups, cohort=f"cohort-{c}", preemption=pre)
            lqs[f"{name}/main"] = LocalQueue(name, "main", name)
            for j in range(SIM_ADMITTED_PER_CQ + 2):
                pending = j >= SIM_ADMITTED_PER_CQ
                gpus = 1000 * (1, 2, 4, 8)[(i + j) % 4] if pending else 2000 if i < 3 else 1000
                requests = (("cpu", 1000), ("memory", 2 * GI), ("nvidia.com/gpu", gpus))
                flv = (("cpu", "default"), ("memory", "default"), ("nvidia.com/gpu", "a100"))
                t = float(j)
                key = f"{name}/w-{j}"
                wls[key] = Workload(
                    namespace=name,
                    name=f"w-{j}",
                    queue_name="main",
                    uid=key,
                    pod_sets=(PodSet("main", 1, requests),),
                    priority=(j % 2) if pending else 0,
                    creation_timestamp=t,
                    admission=None
                    if pending
                    else Admission(name, (PodSetAssignment("main", flv, requests, 1),)),
                    conditions=()
                    if pending
                    else (
                        Condition("QuotaReserved", True, "QuotaReserved", "", t),
                        Condition("Admitted", True, "Admitted", "", t),
                    ),
                )
    return ClusterState(
        flavors=flavors,
        cluster_queues=cqs,
        local_queues=lqs,
        workloads=wls,
        namespace_labels={n: {"kubernetes.io/metadata.name": n} for n in cqs},
    )


def measure_sim(preemption: bool, core_name: str = "reference", core: FastPaths = REFERENCE) -> None:
    snap = Snapshot.from_state(build_sim_state(preemption=preemption), paths=core)
    config = SchedulerConfig()
    pending = sorted(snap.pending.values(), key=lambda i: i.key)
    # fixed head batches of 1-5 heads from distinct CQs (deterministic)
    batches: list[list[WorkloadInfo]] = []
    for r in range(SIM_ROUNDS):
        n = 1 + r % 5
        start = (r * 7) % len(pending)
        picked: dict[str, WorkloadInfo] = {}
        for k in range(len(pending)):
            info = pending[(start + 13 * k) % len(pending)]
            picked.setdefault(info.cluster_queue, info)
            if len(picked) == n:
                break
        batches.append(list(picked.values()))
    heads_total = sum(len(b) for b in batches)
    gc.collect()
    cpu = []
    outcomes: dict[str, int] = {}
    for rep in range(REPEATS):
        c = time.process_time()
        for b in batches:
            result = schedule_cycle(snap, now=1000.0, config=config, heads=b)
            if rep == 0:
                for o in result.outcomes:
                    outcomes[o.status.value] = outcomes.get(o.status.value, 0) + 1
        cpu.append(time.process_time() - c)
    per_head = statistics.median(cpu) / heads_total * 1e6
    label = "withinCQ LowerPriority, reclaim Any" if preemption else "preemption Never"
    mix = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
    print(
        f"simulator-shaped cycles ({label}, {core_name} core): 100 CQs / 10 cohorts, "
        f"{SIM_ROUNDS} cycles of 1-5 heads ({mix})"
    )
    print(f"  CPU median {per_head:.1f} us per head ({REPEATS} repeats of {heads_total} heads)")
    # queue manager: heads() + requeue + cohort event, as the simulator's loop calls them
    qm = QueueManager.from_snapshot(snap, config)
    rounds = 20_000
    popped = 0
    c = time.process_time()
    for r in range(rounds):
        hs = qm.heads(1000.0)
        popped += len(hs)
        for h in hs:
            qm.requeue(h, immediate=False, reason="NoFit")
        qm.notify_cohort_event(f"sim-{r % SIM_COHORTS}-0")
    dt = time.process_time() - c
    print(
        f"  queue manager: heads() + requeue (NoFit, parked) + notify_cohort_event: "
        f"{dt / rounds * 1e6:.1f} us per round ({popped / rounds:.1f} heads per round, {rounds} rounds)"
    )


def main() -> None:
    print("command: make bench BENCH=cycle  (python -m benchmarks cycle)")
    for core_name, core in CORES:
        measure_sim(preemption=False, core_name=core_name, core=core)
        measure_sim(preemption=True, core_name=core_name, core=core)
    measure(preemption=False)
    measure(preemption=True)
    measure(preemption=False, fair_sharing=True)
    measure(preemption=True, fair_sharing=True)


if __name__ == "__main__":
    main()
