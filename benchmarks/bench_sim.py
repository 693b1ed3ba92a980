"""Simulator throughput (issue 11 item 6): the scenarios of the issue, each with three cores: the pure-Python
reference (fairshare.snapshot.REFERENCE) and fast paths (FAST), both in a pure-Python process
(QM_CORE=python), and the compiled core (fairshare/compiled.py: the same source compiled with mypyc) with
the fast paths, in this process.

(a) the bundled demo (simulations/scenarios/frontier-shrink.yaml): replication 0 of every variant;
(b) 20,000 workloads on 100 ClusterQueues in 10 cohorts (8 GPUs each, ~90% offered load, 1/2/4-GPU
    jobs, exponential 1h durations, two priority classes, one-minute time quantum) with
    withinClusterQueue LowerPriority + reclaimWithinCohort Any;
(c) the same shape, preemption Never, 1,000,000 workloads;
(d) the full ITP trace (69,351 jobs; ten clusters as ten CQs in one cohort, quota = p90 of each
    cluster's concurrent demand) when ../shared/traces/itp is there.

For each run: workloads and events per wall-second, the ratio of the wall time to a bare heapq loop
pushing and popping the same number of events in the same process (median of 3 to 31), CPU seconds, the
load average; medians over QM_BENCH_SIM_REPEAT runs (default 3; 1 for runs over 200,000 workloads);
then the ratios to the compiled core and whether the cores' runs are identical (every admission, finish,
eviction, the preemption log, samples and cycle counts).

    make bench BENCH=sim                                                  # full sizes
    QM_BENCH_SIM_N=100000 QM_BENCH_SIM_CORES=compiled make bench BENCH=sim  # smaller (c), compiled only
    QM_BENCH_SIM_SCENARIOS=a,b make bench BENCH=sim                       # only (a) and (b)
"""

from __future__ import annotations

import hashlib
import heapq
import json
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairshare.compiled import state as core_state
from fairshare.snapshot import FAST, REFERENCE, FastPaths
from simulations.jobs import JobSpec
from simulations.loader import load_scenario
from simulations.runner import build_jobs
from simulations.scenario import Scenario

from .differential import in_pure_python, run_repr, simulate

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


@dataclass(frozen=True)
class Measured:
    core: str
    workloads: int
    events: int
    cycles: int
    wall: float  # median seconds
    cpu: float  # median CPU seconds
    bare: float  # bare heapq loop over the same events, seconds (median of 3)
    load: float  # 1-minute load average after the runs
    decisions: str  # SHA-256 of the run's outcome (benchmarks.differential.run_repr) as JSON


# name -> (fast paths, runs in a pure-Python process)
CORES: dict[str, tuple[FastPaths, bool]] = {
    "reference": (REFERENCE, True),
    "fast": (FAST, True),
    "compiled": (FAST, False),
}


def _cores() -> list[str]:
    wanted = os.environ.get("QM_BENCH_SIM_CORES", "reference,fast,compiled").split(",")
    return [w for w in wanted if w in CORES]


def measure(scenario: Scenario, jobs: list[JobSpec], core_name: str, base_dir: Path) -> Measured:
    core = CORES[core_name][0]
    repeat = int(os.environ.get("QM_BENCH_SIM_REPEAT", "3" if len(jobs) <= 200_000 else "1"))
    walls, cpus = [], []
    result = None
    for _ in range(max(1, repeat)):
        w, c = time.perf_counter(), time.process_time()
        result = simulate(scenario, jobs, core, base_dir=base_dir)
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    assert result is not None
    # A small run's bare loop takes milliseconds: measured more often so that its median is stable.
    bare_repeat = max(3, min(31, 1_000_000 // max(1, result.events)) | 1)
    bare = statistics.median(bare_heapq(result.events) for _ in range(bare_repeat))
    digest = hashlib.sha256(json.dumps(run_repr(result), default=repr).encode()).hexdigest()
    return Measured(core_name, len(jobs), result.events, result.cycles, statistics.median(walls),
                    statistics.median(cpus), bare, os.getloadavg()[0], digest)


def _in_pure_python(key: str, core_name: str) -> Measured:
    """The measurement of scenario ``key`` made by a pure-Python process (QM_CORE=python)."""
    return Measured(**in_pure_python("bench_sim", key, core_name))


def report(label: str, runs: list[Measured]) -> None:
    print(f"{label}")
    for m in runs:
        print(
            f"  {m.core:9} {m.workloads:>9,} workloads {m.events:>9,} events {m.cycles:>8,} cycles | "
            f"wall {m.wall:8.2f}s  CPU {m.cpu:8.2f}s | {m.workloads / m.wall:>8,.0f} workloads/s "
            f"{m.events / m.wall:>9,.0f} events/s | {m.wall / m.bare:6.1f}x bare heapq ({m.bare:.2f}s) | "
            f"load {m.load:.1f}"
        )
    last = runs[-1]
    if len(runs) > 1:
        ratios = ", ".join(f"{m.core} {m.wall / last.wall:.2f}x wall, {m.cpu / last.cpu:.2f}x CPU"
                           for m in runs[:-1])
        same = "identical" if len({m.decisions for m in runs}) == 1 else "DIFFERENT"
        print(f"  against {last.core}: {ratios}; runs {same}")


def _scenario(key: str) -> tuple[str, Scenario, Path]:
    """(label, scenario, base directory) of scenario ``key``: a0..a4 (the demo's variants), b, c, d."""
    if key.startswith("a"):
        loaded = load_scenario(ROOT / "simulations" / "scenarios" / "frontier-shrink.yaml")
        v = loaded.variants[int(key[1:])]
        return f"(a) demo frontier-shrink, variant {v.name!r}, replication 0", v.scenario, loaded.directory
    if key == "b":
        n = int(os.environ.get("QM_BENCH_SIM_PREEMPT_N", "20000"))
        return (f"(b) synthetic {n:,} workloads, 100 CQs / 10 cohorts, LowerPriority + reclaim Any",
                synthetic_scenario(n, preemption=True), ROOT)
    if key == "c":
        n = int(os.environ.get("QM_BENCH_SIM_N", "1000000"))
        return f"(c) synthetic {n:,} workloads, same shape, preemption Never", synthetic_scenario(n), ROOT
    return "(d) ITP full trace (10 clusters as 10 CQs, quota = p90 concurrent demand)", itp_scenario(), ROOT


def run_one(key: str) -> None:
    label, scenario, base_dir = _scenario(key)
    jobs = build_jobs(scenario, base_dir, 0)
    runs = []
    for name in _cores():
        # (without a compiled core this process is pure Python already)
        if CORES[name][1] and core_state().compiled:
            runs.append(_in_pure_python(key, name))
        else:
            runs.append(measure(scenario, jobs, name, base_dir))
    report(label, runs)


def main() -> None:
    n = int(os.environ.get("QM_BENCH_SIM_N", "1000000"))
    n_preempt = int(os.environ.get("QM_BENCH_SIM_PREEMPT_N", "20000"))
    wanted = set(os.environ.get("QM_BENCH_SIM_SCENARIOS", "a,b,c,d").split(","))
    print(
        "command: make bench BENCH=sim   "
        "(QM_BENCH_SIM_N / QM_BENCH_SIM_PREEMPT_N = sizes of (c) / (b), 0 skips; "
        "QM_BENCH_SIM_CORES, QM_BENCH_SIM_REPEAT, QM_BENCH_SIM_SCENARIOS)"
    )
    print(f"cores: {os.cpu_count()}, load average at start {os.getloadavg()[0]:.1f}; this process: "
          f"{core_state().why}", flush=True)
    if not core_state().compiled:
        print("  (no compiled core: its rows are the pure-Python fast paths; make core)")
    if "a" in wanted:
        variants = load_scenario(ROOT / "simulations" / "scenarios" / "frontier-shrink.yaml").variants
        for i in range(len(variants)):
            run_one(f"a{i}")
    if "b" in wanted and n_preempt:
        run_one("b")
    if "c" in wanted and n:
        run_one("c")
    if "d" in wanted and (TRACES / "itp").is_dir():
        run_one("d")


if __name__ == "__main__":
    # One measurement in this process, for a parent measuring pure Python: KEY CORE -> Measured as JSON.
    key_arg, core_arg = sys.argv[1], sys.argv[2]
    _, scenario_arg, base_arg = _scenario(key_arg)
    measured = measure(scenario_arg, build_jobs(scenario_arg, base_arg, 0), core_arg, base_arg)
    print(json.dumps(measured.__dict__))
