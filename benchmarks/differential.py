"""Differential check: the reference core against its fast paths (issue 11, item 1).

Every fast path of the core (``fairshare.snapshot.FastPaths``) must decide exactly what the
reference decides. This tool runs both and compares:

1. the conformance corpus (one cycle per case): every admission (flavors, usage, borrowing),
   every preemption (victim, reason, preemptor) and every head's outcome (status, reason text,
   requeue decision and reason, targets, reserved capacity), as whole structures;
2. random scenarios (raw Kueue objects + generators: hierarchical cohorts with quotas and
   lending/borrowing limits, several flavors with fungibility, classical and fair-sharing
   preemption, StrictFIFO / BestEffortFIFO), each run whole through the simulator's entry point
   with the reference and with the fast core: every workload's admission / finish time,
   evictions, lost and held seconds, the preemption log (time, victim, preemptor, reason), quota
   steps, samples, event and cycle counts;
3. the same random clusters driven in lock step at the core level (benchmarks/lockstep.py:
   arrivals with partial admission, finishes, quota changes of nominal / borrowing / lending
   limits, evictions requeued), comparing every cycle's decisions and words.

With ``--python-vs-compiled`` it compares the compiled core (fairshare/compiled.py: the same source
compiled with mypyc) with the fast paths against the pure-Python reference computed by a second process
(``QM_CORE=python``): every corpus case's cycle and every random scenario's whole run, as above.

    .venv/bin/python -m benchmarks.differential                 # corpus + 240 random scenarios
    .venv/bin/python -m benchmarks.differential --random 20 --seed 7
    .venv/bin/python -m benchmarks.differential --no-corpus --show 3   # print 3 scenarios' objects
    .venv/bin/python -m benchmarks.differential --python-vs-compiled --random 100
    .venv/bin/python -m benchmarks.differential --controller 3     # the policy controller's runs

Exit status 0 when everything is identical, 1 with one line per difference otherwise.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairshare.compiled import state as core_state
from fairshare.conformance import case_files, load_case
from fairshare.queues import schedule_pending
from fairshare.snapshot import FAST, REFERENCE, FastPaths, Snapshot
from simulations import model as sim_model
from simulations.jobs import JobSpec
from simulations.loader import LoadedScenario, load_scenario
from simulations.record import RunResult
from simulations.runner import build_jobs
from simulations.scenario import Scenario

from .decisions import cycle_repr
from .lockstep import lockstep_difference

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "conformance"
GPU = "nvidia.com/gpu"
KUEUE = "kueue.x-k8s.io/v1beta2"


# --- running one side ---------------------------------------------------------------------------


def simulate(scenario: Scenario, jobs: list[JobSpec], core: FastPaths, *, base_dir: Path = ROOT) -> RunResult:
    """One whole run through the simulator's entry point with the given core."""
    return sim_model.simulate_run(scenario, jobs, base_dir=base_dir, variant="diff", replication=0, core=core)


def run_repr(r: RunResult) -> dict[str, Any]:
    """A run's outcome as plain data; NaN ("never") compared as None."""

    def clean(xs: Sequence[float]) -> list[float | None]:
        return [None if isinstance(x, float) and math.isnan(x) else x for x in xs]

    return {
        "admitted_at": clean(r.admitted_at),
        "finished_at": clean(r.finished_at),
        "evictions": list(r.evictions),
        "lost_seconds": clean(r.lost_seconds),
        "held_seconds": clean(r.held_seconds),
        "running_at_end": list(r.running_at_end),
        "usage_seconds": dict(r.usage_seconds),
        "quota_seconds": dict(r.quota_seconds),
        "preemptions": [
            (p.time, p.victim, p.victim_cluster_queue, p.by, p.preemptor, p.reason, p.lost_seconds,
             p.gpus_milli)
            for p in r.preemptions
        ],
        "readmissions": [(x.victim, x.cluster_queue, x.evicted_at, x.time, x.usage_milli, x.nominal_milli)
                         for x in r.readmissions],
        "quota_changes": [(q.time, q.cluster_queue, q.flavor, q.resource, q.nominal_milli, q.note)
                          for q in r.quota_changes],
        "samples": [(s.time, s.cluster_queue, s.usage_milli, s.nominal_milli, s.pending, s.running)
                    for s in r.samples],
        "events": r.events,
        "cycles": r.cycles,
        "notes": list(r.notes),
    }


def first_difference(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    for k in a:
        if a[k] != b[k]:
            va, vb = a[k], b[k]
            if isinstance(va, list) and isinstance(vb, list):
                for i, (x, y) in enumerate(zip(va, vb, strict=False)):
                    if x != y:
                        return f"{k}[{i}]: reference {x!r}, fast {y!r}"
                return f"{k}: reference has {len(va)} entries, fast {len(vb)}"
            return f"{k}: reference {va!r}, fast {vb!r}"
    return None


# --- the conformance corpus ---------------------------------------------------------------------


def corpus_differences(paths: Sequence[Path], core: FastPaths = FAST) -> tuple[int, list[str]]:
    """(cases compared, differences) over the case files under ``paths``."""
    problems: list[str] = []
    files = case_files(paths)
    for f in files:
        sides = [case_repr(f, paths_) for paths_ in (REFERENCE, core)]
        if sides[0] != sides[1]:
            diff = next((f"{x!r} vs {y!r}" for x, y in zip(*sides, strict=False) if x != y), "lengths differ")
            problems.append(f"{f}: {diff}")
    return len(files), problems


def case_repr(path: Path, core: FastPaths) -> list[Any]:
    """One conformance case's next cycle, as plain data."""
    case = load_case(path)
    snap = Snapshot.from_state(case.state, paths=core)
    return cycle_repr(schedule_pending(snap, now=case.now, config=case.config))


# --- random scenarios ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """What a random scenario exercises (printed with a difference)."""

    seed: int
    fair_sharing: bool
    depth: int
    flavors: int
    cqs: int


def _quota(rng: random.Random, *, limits: bool, base: int) -> dict[str, Any]:
    q: dict[str, Any] = {"nominalQuota": rng.choice([0, base // 2, base, base, base * 2])}
    if limits and rng.random() < 0.3:
        q["borrowingLimit"] = rng.choice([0, 1, base])
    if limits and rng.random() < 0.3:
        q["lendingLimit"] = rng.choice([0, 1, base // 2])
    return q


def _groups(
    rng: random.Random, flavors: list[str], *, limits: bool, cpu: bool, base: int
) -> list[dict[str, Any]]:
    chosen = rng.sample(flavors, rng.randint(1, len(flavors)))
    groups = [
        {
            "coveredResources": [GPU],
            "flavors": [{"name": f, "resources": [{"name": GPU, **_quota(rng, limits=limits, base=base)}]}
                        for f in chosen],
        }
    ]
    if cpu:
        groups.append(
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "cpu-pool",
                             "resources": [{"name": "cpu", **_quota(rng, limits=limits, base=base * 4)}]}],
            }
        )
    return groups


def random_scenario(seed: int) -> tuple[Scenario, Shape]:
    """A small random cluster and load (about 100-250 workloads over two days)."""
    rng = random.Random(seed)
    fair = rng.random() < 0.4
    depth = rng.choice([0, 1, 1, 2, 2, 3])
    n_flavors = rng.choice([1, 1, 2, 3])
    flavors = [f"f{i}" for i in range(n_flavors)]
    cpu = rng.random() < 0.3
    objects: list[dict[str, Any]] = [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": f}} for f in flavors
    ]
    if cpu:
        objects.append({"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "cpu-pool"}})
    prios = [("p-low", 10), ("p-mid", 100), ("p-high", 1000)]
    objects += [{"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": n}, "value": v}
                for n, v in prios]
    # Cohorts: a random forest of the given depth; leaves get CQs.
    leaves: list[str] = []
    if depth:
        level = [f"root{i}" for i in range(rng.choice([1, 1, 2]))]
        for name in level:
            objects.append({"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": name}, "spec": {}})
        for d in range(1, depth):
            nxt = []
            for parent in level:
                for j in range(rng.choice([1, 2, 2, 3])):
                    child = f"{parent}-{d}{j}"
                    spec: dict[str, Any] = {"parentName": parent}
                    if rng.random() < 0.3:
                        spec["resourceGroups"] = _groups(rng, flavors, limits=True, cpu=cpu, base=2)
                    if fair and rng.random() < 0.3:
                        spec["fairSharing"] = {"weight": rng.choice(["0", "500m", "2"])}
                    objects.append({"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": child},
                                    "spec": spec})
                    nxt.append(child)
            level = nxt
        leaves = level
    n_cqs = rng.randint(2, 7)
    sources: list[dict[str, Any]] = []
    within = ["Never", "LowerPriority", "LowerPriority", "LowerOrNewerEqualPriority"]
    reclaim = ["Never", "LowerPriority", "Any", "Any"]
    for i in range(n_cqs):
        name = f"cq{i}"
        cohort = rng.choice(leaves) if leaves and rng.random() < 0.9 else None
        spec = {
            "namespaceSelector": {},
            "queueingStrategy": rng.choice(["BestEffortFIFO", "BestEffortFIFO", "StrictFIFO"]),
            "resourceGroups": _groups(rng, flavors, limits=cohort is not None, cpu=cpu, base=4),
        }
        pre: dict[str, Any] = {"withinClusterQueue": rng.choice(within),
                               "reclaimWithinCohort": rng.choice(reclaim)}
        if pre["reclaimWithinCohort"] != "Never" and rng.random() < 0.4:
            bwc: dict[str, Any] = {"policy": "LowerPriority"}
            if rng.random() < 0.5:
                bwc["maxPriorityThreshold"] = rng.choice([10, 100])
            pre["borrowWithinCohort"] = bwc
        spec["preemption"] = pre
        if rng.random() < 0.5:
            ff: dict[str, Any] = {"whenCanBorrow": rng.choice(["MayStopSearch", "TryNextFlavor"]),
                                  "whenCanPreempt": rng.choice(["MayStopSearch", "TryNextFlavor"])}
            if rng.random() < 0.3:
                ff["preference"] = rng.choice(["BorrowingOverPreemption", "PreemptionOverBorrowing"])
            spec["flavorFungibility"] = ff
        if cohort:
            spec["cohortName"] = cohort
        if fair and rng.random() < 0.4:
            spec["fairSharing"] = {"weight": rng.choice(["0", "500m", "1", "3"])}
        objects.append({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name},
                        "spec": spec})
        objects.append({"apiVersion": KUEUE, "kind": "LocalQueue",
                        "metadata": {"name": "q", "namespace": name},
                        "spec": {"clusterQueue": name}})
        requests = []
        for _ in range(rng.randint(1, 3)):
            res: dict[str, Any] = {GPU: rng.choice([1, 1, 2, 3, 4])}
            if cpu and rng.random() < 0.7:
                res["cpu"] = rng.choice(["500m", 1, 2])
            requests.append({"weight": rng.choice([1, 2, 3]), "count": rng.choice([1, 1, 1, 2]),
                             "resources": res})
        sources.append(
            {
                "name": name,
                "localQueue": f"{name}/q",
                "generator": {
                    "arrivals": {"kind": "poisson", "ratePerHour": rng.uniform(0.5, 3.0)},
                    "durations": {"kind": "exponential", "mean": rng.choice(["30m", "1h", "3h"])},
                    "requests": requests,
                    "priorityClasses": [{"priorityClass": n, "weight": rng.choice([1, 2, 4])}
                                        for n, _ in rng.sample(prios, rng.randint(1, 3))],
                },
            }
        )
    doc: dict[str, Any] = {
        "name": f"differential-{seed}",
        "seed": seed,
        "horizon": "2d",
        "timeQuantum": rng.choice([0, 0, "1m", "10m"]),
        "sampleInterval": "6h",
        "cluster": {"objects": objects},
        "workloads": sources,
        "scheduler": {"fairSharing": fair},
    }
    shape = Shape(seed, fair, depth, n_flavors, n_cqs)
    return Scenario.model_validate(doc), shape


class _Budget(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _Budget


def lockstep(seed: int, core: FastPaths = FAST) -> str | None:
    """The core-level lock-step check (benchmarks/lockstep.py) on random scenario ``seed``'s cluster."""
    scenario, shape = random_scenario(seed)
    diff = lockstep_difference(list(scenario.cluster.objects), fair_sharing=shape.fair_sharing, seed=seed,
                               core=core)
    return None if diff is None else f"lock step {shape}: {diff}"


def scenario_difference(seed: int, core: FastPaths = FAST, *, budget: float = 0.0) -> str | None:
    """None when reference and fast agree on the whole run of random scenario ``seed``.

    ``budget`` > 0: CPU seconds the reference run may take (CPU, not wall: on a loaded machine a
    wall-clock budget skips ordinary scenarios); a longer one (a scenario that livelocks, two
    workloads preempting each other until the simulator's cycle limit at every instant) raises
    :class:`OverBudget` so that the caller can take the next seed."""
    scenario, shape = random_scenario(seed)
    try:
        ref_run = _run_within(scenario, REFERENCE, budget)
    except OverBudget as err:
        raise OverBudget(f"scenario {shape}: reference {err}") from None
    ref = run_repr(ref_run)
    fast = run_repr(simulate(scenario, build_jobs(scenario, ROOT, 0), core))
    diff = first_difference(ref, fast)
    return None if diff is None else f"scenario {shape}: {diff}"


class OverBudget(Exception):
    """The reference run of a random scenario took longer than its budget."""


def _run_within(scenario: Scenario, core: FastPaths, budget: float) -> RunResult:
    """A whole run, or OverBudget after ``budget`` CPU seconds (0: no limit)."""
    jobs = build_jobs(scenario, ROOT, 0)
    if budget <= 0:
        return simulate(scenario, jobs, core)
    old = signal.signal(signal.SIGVTALRM, _alarm)
    signal.setitimer(signal.ITIMER_VIRTUAL, budget)
    try:
        return simulate(scenario, jobs, core)
    except _Budget:
        raise OverBudget(f"run over {budget:.0f} CPU s") from None
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, old)


# --- the compiled core against pure Python ------------------------------------------------------


def _plain(x: Any) -> Any:
    """As JSON has it (tuples as lists, enums as their values): what crosses the process boundary."""
    return json.loads(json.dumps(x, default=repr))


def outcomes(seeds: Sequence[int], *, corpus: bool, core: FastPaths, budget: float) -> dict[str, Any]:
    """This process's decisions on the corpus and on each random scenario, as plain data; a scenario whose
    run exceeds ``budget`` CPU seconds is None (skipped on both sides)."""
    out: dict[str, Any] = {}
    if corpus:
        for f in case_files([CORPUS]):
            out[f"case {f.relative_to(ROOT)}"] = case_repr(f, core)
    for seed in seeds:
        try:
            out[f"seed {seed}"] = run_repr(_run_within(random_scenario(seed)[0], core, budget))
        except OverBudget:
            out[f"seed {seed}"] = None
    plain: dict[str, Any] = _plain(out)
    return plain


def in_pure_python(module: str, *args: str) -> Any:
    """The JSON that ``python -m benchmarks.<module> ARGS`` prints, run by a pure-Python process
    (``QM_CORE=python``: the reference side of a comparison with the compiled core)."""
    proc = subprocess.run([sys.executable, "-m", f"benchmarks.{module}", *args], cwd=ROOT,
                          env={**os.environ, "QM_CORE": "python"}, capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmarks.{module} {' '.join(args)[:200]} in pure Python failed "
                           f"(exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return json.loads(proc.stdout)


def python_reference(seeds: Sequence[int], *, corpus: bool, budget: float) -> dict[str, Any]:
    """:func:`outcomes` of the reference (REFERENCE paths) in a pure-Python process."""
    result: dict[str, Any] = in_pure_python("differential", "--emit-reference", ",".join(map(str, seeds)),
                                            "--budget", str(budget), *([] if corpus else ["--no-corpus"]))
    return result


def compiled_differences(
    seeds: Sequence[int], *, corpus: bool = True, core: FastPaths = FAST, budget: float = 0.0
) -> tuple[int, list[str]]:
    """(cases and scenarios compared, differences): this process's core (compiled when built,
    fairshare/compiled.py) with ``core``'s paths against the pure-Python reference of another process."""
    want = python_reference(seeds, corpus=corpus, budget=budget)
    got = outcomes(seeds, corpus=corpus, core=core, budget=0.0)
    problems: list[str] = []
    compared = 0
    for name, ref in want.items():
        if ref is None:
            continue
        compared += 1
        mine = got[name]
        if isinstance(ref, dict):
            diff = first_difference(ref, mine)
        else:
            pairs = zip(ref, mine, strict=False)
            diff = next((f"reference {x!r}, compiled {y!r}" for x, y in pairs if x != y),
                        None if len(ref) == len(mine) else "lengths differ")
        if diff is not None:
            problems.append(f"{name}: {diff}")
    return compared, problems


# --- command line -------------------------------------------------------------------------------


# --- the policy controller's fast path ---------------------------------------------------------------

SCENARIOS = ROOT / "simulations" / "scenarios"


def controller_differences(
    loaded: LoadedScenario, replications: Sequence[int], label: str
) -> tuple[int, list[str]]:
    """Every variant x replication of a QuotaPolicy scenario run whole with the reference and with the fast
    paths: the operator's policy controller decides in both runs (its experiment gate re-plans only the
    quota trees whose inputs changed with FastPaths.plan_by_tree, every starved workload with the
    reference), so its evictions, holds and quota steps are in what is compared."""
    n, found = 0, []
    for v in loaded.variants:
        for rep in replications:
            jobs = build_jobs(v.scenario, loaded.directory, rep)
            runs = [
                run_repr(sim_model.simulate_run(v.scenario, jobs, base_dir=loaded.directory, variant=v.name,
                                                replication=rep, core=core))
                for core in (REFERENCE, FAST)
            ]
            n += 1
            diff = first_difference(runs[0], runs[1])
            if diff is not None:
                found.append(f"{label}, variant {v.name}, replication {rep}: {diff}")
    return n, found


def _controller(replications: int, plan_days: float) -> int:
    """--controller: the bundled scenarios, the small set's three trees and the plan benchmark's
    64-ClusterQueue cluster."""
    import tempfile

    from benchmarks.bench_plan import loaded_scenario

    started = time.perf_counter()
    problems: list[str] = []
    total = 0
    three_trees = ROOT / "tests" / "differential_fast" / "three-trees.yaml"
    for path in [*sorted(SCENARIOS.glob("*.yaml")), three_trees]:
        n, found = controller_differences(load_scenario(path), range(replications), path.name)
        total += n
        problems += found
        print(f"{path.name}: {n} runs compared, {len(found)} differences", flush=True)
    if plan_days > 0:
        with tempfile.TemporaryDirectory() as tmp:
            loaded = loaded_scenario(plan_days, replications, Path(tmp))
            n, found = controller_differences(loaded, range(replications), "bench plan")
        total += n
        problems += found
        print(f"bench plan ({plan_days:g}-day horizon): {n} runs compared, {len(found)} differences",
              flush=True)
    for p in problems:
        print("  " + p)
    print(f"policy-controller runs compared: {total}, differences: {len(problems)}; "
          f"{time.perf_counter() - started:.1f}s")
    return 1 if problems else 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.differential", description=__doc__.split("\n")[0])
    ap.add_argument("--random", type=int, default=240, help="random scenarios (default 240)")
    ap.add_argument("--seed", type=int, default=0, help="first scenario seed (default 0)")
    ap.add_argument("--no-corpus", action="store_true", help="skip the conformance corpus")
    ap.add_argument("--show", type=int, default=0, help="print the first N scenarios' shapes")
    ap.add_argument("--budget", type=float, default=10.0,
                    help="CPU seconds a reference run may take before its seed is skipped (10; 0: none)")
    ap.add_argument("--python-vs-compiled", action="store_true",
                    help="compare the compiled core (fast paths) with the pure-Python reference instead")
    ap.add_argument("--emit-reference", metavar="SEEDS", help=argparse.SUPPRESS)  # the pure-Python side
    ap.add_argument("--controller", type=int, metavar="N", default=0,
                    help="instead: the QuotaPolicy scenarios (simulations/scenarios, the plan benchmark's "
                         "cluster), N replications of every variant, reference vs fast paths")
    ap.add_argument("--plan-days", type=float, default=0.25,
                    help="with --controller: the plan benchmark's horizon in days (0.25; 0: skip it)")
    args = ap.parse_args(argv)
    if args.controller:
        return _controller(args.controller, args.plan_days)
    if args.emit_reference is not None:
        seeds = [int(x) for x in args.emit_reference.split(",") if x]
        json.dump(outcomes(seeds, corpus=not args.no_corpus, core=REFERENCE, budget=args.budget), sys.stdout)
        return 0
    if args.python_vs_compiled:
        return _python_vs_compiled(args.seed, args.random, corpus=not args.no_corpus, budget=args.budget)
    problems: list[str] = []
    skipped: list[int] = []
    started = time.perf_counter()
    if not args.no_corpus:
        n, found = corpus_differences([CORPUS])
        problems += found
        print(f"conformance corpus: {n} cases, {len(found)} differences", flush=True)
        for p in found:
            print("  " + p, flush=True)
    done = 0
    seed = args.seed
    while done < args.random:
        if done < args.show:
            print(random_scenario(seed)[1])
        try:
            diff = scenario_difference(seed, budget=args.budget)
        except OverBudget:
            skipped.append(seed)
            seed += 1
            continue
        diff = diff or lockstep(seed)
        done += 1
        seed += 1
        if diff is not None:
            problems.append(diff)
            print(diff, flush=True)
        if done % 20 == 0:
            print(f"  {done} random scenarios compared, {len(problems)} differences so far", flush=True)
    print(
        f"random scenarios compared: {done} (seeds {args.seed}..{seed - 1}; "
        f"over the {args.budget:.0f} CPU s budget "
        f"and skipped: {len(skipped)} {skipped}), differences: {len(problems)}; "
        f"{time.perf_counter() - started:.1f}s"
    )
    return 1 if problems else 0


def _python_vs_compiled(first: int, count: int, *, corpus: bool, budget: float) -> int:
    started = time.perf_counter()
    print(f"this process: {core_state().why}; the reference: pure Python (QM_CORE=python)", flush=True)
    if not core_state().compiled:
        print("the compiled core is not in use here: nothing to compare (make core)")
        return 1
    compared, problems = compiled_differences(range(first, first + count), corpus=corpus, budget=budget)
    for p in problems:
        print("  " + p)
    print(f"compiled vs pure Python: {compared} corpus cases and random scenarios (seeds {first}..."
          f"{first + count - 1}, those over the {budget:.0f} CPU s budget skipped) compared, "
          f"{len(problems)} differences; {time.perf_counter() - started:.1f}s")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
