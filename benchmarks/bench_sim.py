"""Simulator throughput (issue 5 item 8).

1. Synthetic: N workloads (default 1,000,000) on 100 ClusterQueues in 10 cohorts at
   about 90% load (8 GPUs per CQ; 1/2/4-GPU jobs; exponential 1h durations; Poisson
   arrivals; one-minute time quantum so simultaneous events share one cycle).
2. The full ITP trace (69,351 jobs, 10 clusters replayed as 10 CQs in one cohort).

For each: workloads per wall-second, events per second, cycles, and the ratio to a
bare heapq loop pushing and popping the same number of events (the practical bound
for a Python event loop).

    .venv/bin/python -m benchmarks sim                      # full sizes
    QM_BENCH_SIM_N=100000 .venv/bin/python -m benchmarks sim  # smaller synthetic run
"""

from __future__ import annotations

import heapq
import os
import random
import time
from pathlib import Path
from typing import Any

from simulations.model import simulate_run
from simulations.runner import build_jobs
from simulations.scenario import Scenario

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "traces"
GPU = "nvidia.com/gpu"


def _queue_pair(name: str, cohort: str, quota: int,
                preemption: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """A ClusterQueue with `quota` GPUs of flavor gpu in `cohort`, and LocalQueue `<name>/q` feeding it."""
    spec: dict[str, Any] = {
        "cohortName": cohort,
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": [GPU],
                "flavors": [{"name": "gpu", "resources": [{"name": GPU, "nominalQuota": quota}]}],
            }
        ],
    }
    if preemption is not None:
        spec["preemption"] = preemption
    return [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": name},
            "spec": spec,
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": name},
            "spec": {"clusterQueue": name},
        },
    ]


def synthetic_scenario(
    workloads: int, *, cqs: int = 100, cohorts: int = 10, load: float = 0.9, preemption: bool = False
) -> Scenario:
    """`preemption`: CQs preempt lower priority within the CQ and reclaim in the cohort (Kueue's classical
    preemption on every head that does not fit: several times more expensive per head); else Never/Never."""
    objects: list[dict[str, Any]] = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "gpu"}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "low"},
            "value": 10,
        },
    ]
    sources: list[dict[str, Any]] = []
    quota = 8
    policy = (
        {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
        if preemption
        else {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"}
    )
    mean_gpus = (5 * 1 + 3 * 2 + 2 * 4) / 10.0
    rate = load * quota / mean_gpus  # per hour, 1h mean duration
    per_cq = workloads / cqs
    horizon_h = per_cq / rate
    for i in range(cqs):
        name = f"team-{i:03d}"
        objects.extend(_queue_pair(name, f"cohort-{i % cohorts:02d}", quota, policy))
        sources.append(
            {
                "name": name,
                "localQueue": f"{name}/q",
                "generator": {
                    "arrivals": {"kind": "poisson", "ratePerHour": rate},
                    "durations": {"kind": "exponential", "mean": "1h"},
                    "requests": [
                        {"weight": 5, "resources": {GPU: 1}},
                        {"weight": 3, "resources": {GPU: 2}},
                        {"weight": 2, "resources": {GPU: 4}},
                    ],
                    "priorityClasses": [
                        {"priorityClass": "high", "weight": 1},
                        {"priorityClass": "low", "weight": 4},
                    ],
                },
            }
        )
    return Scenario.model_validate(
        {
            "name": "bench-synthetic",
            "seed": 1,
            "horizon": horizon_h * 3600.0,
            "timeQuantum": "1m",
            "sampleInterval": "1d",
            "cluster": {"objects": objects},
            "workloads": sources,
        }
    )


def p90_concurrent_gpus(path: Path) -> int:
    """90th percentile of concurrent GPU demand if every job started at submission (sampled at events)."""
    events: list[tuple[int, int]] = []
    with path.open() as f:
        next(f)
        for line in f:
            _, submit, duration, gpus = line.strip().split(",")
            events.append((int(submit), int(gpus)))
            events.append((int(submit) + int(duration), -int(gpus)))
    events.sort()
    level, levels = 0, []
    for _, delta in events:
        level += delta
        levels.append(level)
    levels.sort()
    return max(1, levels[int(len(levels) * 0.9)])


def itp_scenario() -> Scenario:
    """The ten ITP clusters as ten ClusterQueues in one cohort. No cluster sizes are published: each CQ's
    nominal quota is the p90 of its cluster's concurrent GPU demand (jobs started at submission)."""
    clusters = [f"cluster{i:02d}" for i in range(1, 11)]
    objects: list[dict[str, Any]] = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "gpu"}}
    ]
    sources: list[dict[str, Any]] = []
    for c in clusters:
        quota = p90_concurrent_gpus(TRACES / "itp" / f"{c}.csv")
        objects.extend(_queue_pair(c, "itp", quota))
        sources.append(
            {
                "name": c,
                "trace": {
                    "format": "itp",
                    "paths": [str(TRACES / "itp" / f"{c}.csv")],
                    "queues": {"rule": "single", "localQueue": f"{c}/q"},
                    "alignStart": False,
                },
            }
        )
    return Scenario.model_validate(
        {
            "name": "bench-itp",
            "horizon": "75d",
            "timeQuantum": "1m",
            "sampleInterval": "1d",
            "cluster": {"objects": objects},
            "workloads": sources,
        }
    )


def bare_heapq(events: int) -> float:
    """Seconds to push and pop `events` (time, kind, seq, payload) tuples with heapq."""
    rng = random.Random(0)
    times = [rng.random() * 1e6 for _ in range(events)]
    start = time.perf_counter()
    heap: list[tuple[float, int, int, int]] = []
    push, pop = heapq.heappush, heapq.heappop
    for i, t in enumerate(times):
        push(heap, (t, 2, i, i))
    while heap:
        pop(heap)
    return time.perf_counter() - start


def run_one(label: str, scenario: Scenario) -> None:
    t0 = time.perf_counter()
    jobs = build_jobs(scenario, ROOT, 0)
    t1 = time.perf_counter()
    c1 = time.process_time()
    result = simulate_run(scenario, jobs, base_dir=ROOT, variant=label, replication=0)
    wall = time.perf_counter() - t1
    cpu = time.process_time() - c1
    bare = sorted(bare_heapq(result.events) for _ in range(3))[1]  # median of 3
    admitted = sum(1 for a in result.admitted_at if a == a)
    print(
        f"{label}: {len(jobs):,} workloads ({admitted:,} admitted), {result.events:,} events, "
        f"{result.cycles:,} cycles; generate {t1 - t0:.1f}s, simulate {wall:.1f}s wall / {cpu:.1f}s CPU"
    )
    print(
        f"  per wall-second: {len(jobs) / wall:,.0f} workloads, {result.events / wall:,.0f} events, "
        f"{result.cycles / wall:,.0f} cycles; per CPU-second: {len(jobs) / cpu:,.0f} workloads"
    )
    print(
        f"  bare heapq loop over the same {result.events:,} events (median of 3): {bare:.2f}s "
        f"-> simulator / bare = {wall / bare:.1f}x"
    )


def main() -> None:
    n = int(os.environ.get("QM_BENCH_SIM_N", "1000000"))
    n_preempt = int(os.environ.get("QM_BENCH_SIM_PREEMPT_N", "20000"))
    print(
        "command: .venv/bin/python -m benchmarks sim   "
        "(QM_BENCH_SIM_N / QM_BENCH_SIM_PREEMPT_N = sizes; 0 skips)"
    )
    if n:
        run_one(
            f"synthetic {n:,} workloads, 100 CQs, 10 cohorts, ~90% load, no preemption policies",
            synthetic_scenario(n),
        )
    if n_preempt:
        run_one(
            f"synthetic {n_preempt:,} workloads, same, with LowerPriority/reclaim Any preemption",
            synthetic_scenario(n_preempt, preemption=True),
        )
    if (TRACES / "itp").is_dir():
        run_one("ITP full trace (10 clusters as 10 CQs, quota = p90 concurrent demand)", itp_scenario())
