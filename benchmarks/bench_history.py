"""History graph benchmark (issue 4 item 5): 10,000 leaves fed 1,000,000 usage intervals.

Prints: build time, amortized cost of one incremental update, Fair Tree + history DRS over all nodes, and
the serialized size of a 1,000-node graph. Targets: build <= 5 s, update <= 50 us, all shares <= 200 ms.
Environment: QM_BENCH_HISTORY_INTERVALS overrides the interval count (default 1,000,000).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import statistics
import time

from fairshare.history import (
    FairTreeConfig,
    HalfLife,
    NodeKind,
    NodePath,
    UsageHistoryGraph,
    fair_tree,
    to_dict,
)
from fairshare.history.drs import history_drs
from fairshare.models import FlavorResource

GPU = FlavorResource("a100", "nvidia.com/gpu")
CPU = FlavorResource("default", "cpu")
DAY = 86400.0


def _tree(cohorts: int, cqs: int, lqs: int, projects: int) -> tuple[list[NodePath], list[NodePath]]:
    """(ClusterQueue paths, leaf paths) of a regular tree."""
    cq_paths: list[NodePath] = []
    leaves: list[NodePath] = []
    for c in range(cohorts):
        cohort = NodePath.root().child(NodeKind.COHORT, f"cohort-{c}")
        for q in range(cqs):
            cq = cohort.child(NodeKind.CLUSTER_QUEUE, f"cq-{c}-{q}")
            cq_paths.append(cq)
            for lq in range(lqs):
                lq_path = cq.child(NodeKind.LOCAL_QUEUE, f"ns-{c}-{q}/lq-{lq}")
                if projects:
                    leaves.extend(lq_path.child(NodeKind.PROJECT, f"p{p}") for p in range(projects))
                else:
                    leaves.append(lq_path)
    return cq_paths, leaves


Interval = tuple[NodePath, FlavorResource, int, float, float]


def _intervals(leaves: list[NodePath], n: int, seed: int) -> list[Interval]:
    rng = random.Random(seed)
    out: list[Interval] = []
    t = 0.0
    step = 30 * DAY / n  # a month of history
    for _ in range(n):
        t += step
        start = t - rng.uniform(60.0, 6 * 3600.0)
        fr = GPU if rng.random() < 0.5 else CPU
        qty = rng.choice((1000, 2000, 4000, 8000)) if fr is GPU else rng.choice((4000, 16000, 64000))
        out.append((leaves[rng.randrange(len(leaves))], fr, qty, start, t))
    return out


def _build(leaves: list[NodePath], intervals: list[Interval]) -> tuple[UsageHistoryGraph, float]:
    graph = UsageHistoryGraph(HalfLife.of_seconds(7 * DAY), created_at=-DAY)
    t0 = time.perf_counter()
    for leaf in leaves:
        graph.add_node(leaf)
    record = graph.record_interval
    for path, fr, qty, start, end in intervals:
        record(path, fr, qty, start, end)
    return graph, time.perf_counter() - t0


def main() -> None:
    n = int(os.environ.get("QM_BENCH_HISTORY_INTERVALS", "1000000"))
    cq_paths, leaves = _tree(10, 10, 10, 10)
    intervals = _intervals(leaves, n, seed=4)
    builds = []
    build_cpu = []
    graph = None
    for _ in range(3):
        c0 = time.process_time()
        graph, seconds = _build(leaves, intervals)
        build_cpu.append(time.process_time() - c0)
        builds.append(seconds)
    if graph is None:
        raise RuntimeError("no build ran")
    print(f"history graph: {len(graph):,} nodes, {len(leaves):,} leaves, {n:,} intervals; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"build: median {statistics.median(builds):.2f} s wall, {statistics.median(build_cpu):.2f} s CPU "
          f"over {len(builds)} runs (target <= 5 s)")

    # Incremental updates on the built graph: one finished interval each, and start/stop pairs.
    now = intervals[-1][4]
    extra = _intervals(leaves, 20000, seed=5)
    per_op = []
    for chunk in range(4):
        batch = extra[chunk * 5000:(chunk + 1) * 5000]
        t0 = time.perf_counter()
        for path, fr, qty, start, end in batch:
            graph.record_interval(path, fr, qty, now + start, now + end)
        per_op.append((time.perf_counter() - t0) / len(batch) * 1e6)
    now = now + extra[-1][4]
    t0 = time.perf_counter()
    for i, leaf in enumerate(leaves[:5000]):
        graph.start(f"wl-{i}", leaf, {GPU: 1000}, now)
    for i in range(5000):
        graph.stop(f"wl-{i}", now + 60.0)
    start_stop = (time.perf_counter() - t0) / 10000 * 1e6
    print(f"incremental update: record_interval median {statistics.median(per_op):.2f} us, "
          f"start/stop {start_stop:.2f} us per call (target <= 50 us)")

    at = now + 120.0
    quotas = {cq: {GPU: 8000, CPU: 64000} for cq in cq_paths}
    config = FairTreeConfig()  # the default: per-resource normalized usage
    walls: dict[str, list[float]] = {"usage": [], "fair_tree": [], "drs": []}
    cpus: dict[str, list[float]] = {"usage": [], "fair_tree": [], "drs": []}
    for _ in range(7):
        w0, c0 = time.perf_counter(), time.process_time()
        usage = graph.usage_all(at)
        w1, c1 = time.perf_counter(), time.process_time()
        fair_tree(graph, at, config, usage=usage)
        w2, c2 = time.perf_counter(), time.process_time()
        history_drs(graph, at, quotas, usage=usage)
        w3, c3 = time.perf_counter(), time.process_time()
        spans = (("usage", w1 - w0, c1 - c0), ("fair_tree", w2 - w1, c2 - c1), ("drs", w3 - w2, c3 - c2))
        for name, w, c in spans:
            walls[name].append(w * 1000)
            cpus[name].append(c * 1000)
    wu, wf, wd = (statistics.median(walls[k]) for k in ("usage", "fair_tree", "drs"))
    cu, cf, cd = (statistics.median(cpus[k]) for k in ("usage", "fair_tree", "drs"))
    print(f"all shares ({len(graph):,} nodes), median of 7: decayed usage {wu:.0f} ms + Fair Tree "
          f"{wf:.0f} ms = {wu + wf:.0f} ms wall, {cu + cf:.0f} ms CPU (target <= 200 ms); history DRS "
          f"{wd:.0f} ms wall, {cd:.0f} ms CPU")

    _, small_leaves = _tree(2, 5, 10, 8)  # 1 + 2 + 10 + 100 + 800 = 913 nodes; pad to 1,000 below
    small = UsageHistoryGraph(HalfLife.of_seconds(7 * DAY), created_at=0.0)
    for path, fr, qty, start, end in _intervals(small_leaves, 20000, seed=6):
        small.record_interval(path, fr, qty, max(0.0, start), end)
    extra_cq = NodePath.root().child(NodeKind.COHORT, "cohort-pad")
    i = 0
    while len(small) < 1000:
        small.add_node(extra_cq.child(NodeKind.CLUSTER_QUEUE, f"pad-{i}"))
        i += 1
    text = json.dumps(to_dict(small), separators=(",", ":"))
    print(f"serialized history, {len(small):,} nodes x 2 flavor-resources: {len(text):,} bytes JSON, "
          f"{len(gzip.compress(text.encode())):,} bytes gzipped")
