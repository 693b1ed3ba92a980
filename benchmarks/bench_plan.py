"""Where `qm plan`'s time goes on a large cluster, without an API server: the live state is built in memory
(the documents qm/live.py would list, made the way tests/unit/plan/world.py makes them) and the ledger's
lives are generated as the calibration reads them (simulations.calibrate.RecordedLife); everything from
there on is qm/commands/plan.py's own path: the controller's decision and the diff, the transition plan,
the calibration and the scenario, the runs, the forecast and the gate.

    .venv/bin/python -m benchmarks plan      # make bench BENCH=plan
    QM_BENCH_PLAN_HORIZON_DAYS=0.25 QM_BENCH_PLAN_REPLICATIONS=1 QM_BENCH_PLAN_JOBS=1 make bench BENCH=plan
                                             # the same path, shorter
    QM_BENCH_PLAN_SCALE=10 make bench BENCH=plan   # ten times the size (target: 5 minutes)

The cluster: 1,000 GPUs in 64 ClusterQueues of 15-16 GPUs (8 cohorts of 4 business and 4 research teams),
about 80% busy (issue 38's asked run; QM_BENCH_PLAN_SCALE=10 is its ten-times run, in one policy); 30 days
of ledger history (Poisson arrivals per queue, 1/2/4-GPU shapes, log-normal run times of median 2 h); at t=0
the work that history leaves running and pending. The change: every research team 3 GPUs less and every
business team 3 more, paired within each cohort, over 7 days in daily steps with drain; forecast 14 days
ahead, current vs new (2 variants) x up to 5 replications, on all cores (QM_BENCH_PLAN_JOBS to change),
with the gate `--fail-if 'wait_p95[business] > +10%'`: the replications stop once it is decided
(simulations/gate.py: Sequential), and the output says after how many and why.
Not in the total: listing the objects from an API server, and reading the lives from the ledger (printed
after it: the same lives in SQLite, read whole and then through qm plan's lives cache).
"""

from __future__ import annotations

import datetime as dt
import math
import os
import random
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
GPU = "nvidia.com/gpu"
HOUR, DAY = 3600.0, 86400.0
NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z: t=0 of the forecast
# QM_BENCH_PLAN_SCALE=10: the issue's ten-times run (10,000 GPUs, 640 ClusterQueues in one policy).
SCALE = int(os.environ.get("QM_BENCH_PLAN_SCALE", "1") or "1")
COHORTS, TEAMS_PER_COHORT, GPUS = 8 * SCALE, 8, 1000 * SCALE
CUT = 3
HISTORY_DAYS, HORIZON_DAYS, REPLICATIONS = 30, 14, 5
SHAPES = ((1, 0.7), (2, 0.2), (4, 0.1))  # GPUs per workload, share
MEDIAN_RUN, SIGMA = 2 * HOUR, 1.0  # log-normal run times
LOAD = 0.8
SEED = 11
GATE = "wait_p95[business] > +10%"


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


PHASES: list[tuple[str, float, float]] = []


def _timed(label: str, fn: Callable[[], T]) -> T:
    wall, cpu = time.perf_counter(), _cpu()
    out = fn()
    w, c = time.perf_counter() - wall, _cpu() - cpu
    PHASES.append((label, w, c))
    print(f"  {label:<44} {w:7.2f} s wall {c:7.2f} s CPU", flush=True)
    return out


def _rfc3339(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def teams() -> list[tuple[str, str, str, int]]:
    """(team, cohort, priority class of its work, GPUs): GPUS split as evenly as whole GPUs allow."""
    n = COHORTS * TEAMS_PER_COHORT
    out = []
    for c in range(COHORTS):
        for k in range(TEAMS_PER_COHORT):
            i = c * TEAMS_PER_COHORT + k
            kind = "biz" if k < TEAMS_PER_COHORT // 2 else "res"
            out.append((f"{kind}-{c}-{k}", f"org-{c}", "business" if kind == "biz" else "experiment",
                        GPUS // n + (i < GPUS % n)))
    return out


def policy(change: int) -> dict[str, Any]:
    """Every business team `change` GPUs more, every research team `change` less."""
    def team(name: str, cohort: str, gpus: int) -> dict[str, Any]:
        gpus += change if name.startswith("biz") else -change
        return {"name": name, "namespaces": [name], "cohort": cohort,
                "quotas": [{"flavor": "gpu", "resources": [{"name": GPU, "nominal": gpus}]}],
                "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"}}

    return {
        "apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy", "metadata": {"name": "bench-plan"},
        "spec": {
            "flavors": [{"name": "gpu", "pricePerUnitHour": {GPU: "2.5"}}],
            "priorityClasses": [{"name": "business", "value": 1000},
                                {"name": "experiment", "value": 10, "experiment": True}],
            "teams": [team(name, cohort, gpus) for name, cohort, _, gpus in teams()],
            "preemption": {"protectedClasses": ["business"], "experimentPriorityThreshold": 100},
            "transitions": {"defaults": {"duration": "7d", "stepInterval": "24h", "curve": "linear",
                                         "drain": True, "floor": {GPU: 1}}},
        },
    }


def _shape(rng: random.Random) -> int:
    x = rng.random()
    for gpus, share in SHAPES:
        if x < share:
            return gpus
        x -= share
    return SHAPES[-1][0]


def history(rng: random.Random) -> tuple[list[Any], list[dict[str, Any]]]:
    """30 days of lives per queue (each starts when its queue has room, first come first served within
    the team's own 10 GPUs: a coarse stand-in for Kueue, enough to give the calibration realistic waits and
    a backlog) and the Workload documents of what runs and waits at NOW."""
    from simulations.calibrate import RecordedLife

    mean_gpus = sum(g * s for g, s in SHAPES)
    mean_run = MEDIAN_RUN * math.exp(SIGMA**2 / 2)
    since = NOW - HISTORY_DAYS * DAY
    lives: list[RecordedLife] = []
    docs: list[dict[str, Any]] = []
    for team, _, klass, quota in teams():
        rate = LOAD * quota / (mean_gpus * mean_run)  # arrivals per second
        t, busy, n = since, [], 0  # busy: (end, gpus) of the running ones
        free_at = since
        while True:
            t += rng.expovariate(rate)
            if t >= NOW:
                break
            gpus, run = _shape(rng), rng.lognormvariate(math.log(MEDIAN_RUN), SIGMA)
            start = max(t, free_at)
            busy = [(e, g) for e, g in busy if e > start]
            while sum(g for _, g in busy) + gpus > quota:
                start = min(e for e, _ in busy)
                busy = [(e, g) for e, g in busy if e > start]
            free_at = start
            end = start + run
            busy.append((end, gpus))
            n += 1
            name = f"{team}-{n}"
            if start >= NOW:
                lives.append(RecordedLife(f"{team}/{team}", klass, t, 1, ((GPU, gpus * 1000),)))
                docs.append(_workload(team, name, gpus, t, None, klass))
            elif end > NOW:
                lives.append(RecordedLife(f"{team}/{team}", klass, t, 1, ((GPU, gpus * 1000),), started=start,
                                          running=True))
                docs.append(_workload(team, name, gpus, t, start, klass))
            else:
                lives.append(RecordedLife(f"{team}/{team}", klass, t, 1, ((GPU, gpus * 1000),), started=start,
                                          ended=end))
    return lives, docs


def _workload(ns: str, name: str, gpus: int, created: float, admitted: float | None,
              klass: str) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"namespace": ns, "name": name, "uid": f"uid-{name}",
                     "creationTimestamp": _rfc3339(created)},
        "spec": {"queueName": ns, "active": True, "priority": 1000 if klass == "business" else 10,
                 "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                      "name": klass},
                 "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                     {"name": "c", "resources": {"requests": {GPU: str(gpus)}}}]}}}]},
    }
    if admitted is not None:
        doc["status"] = {
            "admission": {"clusterQueue": ns, "podSetAssignments": [
                {"name": "main", "count": 1, "flavors": {GPU: "gpu"}, "resourceUsage": {GPU: str(gpus)}}]},
            "conditions": [{"type": k, "status": "True", "reason": k, "message": "",
                            "lastTransitionTime": _rfc3339(admitted)} for k in ("QuotaReserved", "Admitted")]}
    return doc


def live_state(current: dict[str, Any], workloads: list[dict[str, Any]]) -> Any:
    """What qm/live.py and qm.planning.inputs.read_live make of the listed objects (the same steps)."""
    from fairshare.policy import parse_policy, render
    from fairshare.policy.status import read_status
    from qm.live import LiveCluster, build_state
    from qm.planning.inputs import Live, object_key

    documents = [dict(o) for o in render(parse_policy(current))] + workloads
    state, skipped = build_state(documents, {}, source="bench")
    cluster = LiveCluster("https://bench.invalid", NOW, state, tuple(documents), skipped=tuple(skipped))
    doc = {**current, "metadata": {**current["metadata"], "generation": 1}}
    status, warnings = read_status(doc.get("status"))
    index = {object_key(d): d for d in documents if d.get("kind") != "Workload"}
    capacity = GPUS * 1000
    return Live(cluster, NOW, doc, parse_policy(current), status, 1, capacity,
                tuple(warnings) + tuple(skipped), index)


def _env_number(name: str, default: float, kind: Callable[[str], float]) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = -1
    if not (0 < value < math.inf):
        raise SystemExit(f"{name}={raw!r}: must be a positive {'whole ' if kind is int else ''}number")
    return value


def ledger_reads(lives: list[Any], directory: Path) -> None:
    """qm plan's read of the ledger (qm.planning.inputs.read_history): the bench's lives written into a SQLite
    ledger, read whole, then through the lives cache an hour later (qm/planning/lives_cache.py)."""
    from sqlalchemy import create_engine, insert

    from ledger import schema
    from ledger.ledger import open_ledger
    from qm.planning.inputs import read_history

    url = f"sqlite:///{directory / 'ledger.db'}"
    open_ledger(url, spool_dir=directory / "spool").close()
    rows = []
    for i, life in enumerate(lives):
        ms = round(life.submitted * 1000)
        started = None if life.started is None else round(life.started * 1000)
        ended = None if life.ended is None else round(life.ended * 1000)
        ns, lq = life.local_queue.split("/")
        rows.append(dict(
            uid=f"uid-{i:07d}", namespace=ns, name=f"w-{i}", local_queue=lq, team=ns, owner_kind=None,
            owner_name=None, user_name=None, priority_class=life.priority_class, priority=10, project=None,
            team_label=None, cost_center=None, labels={}, pod_sets=[
                {"name": "main", "count": life.count, "requests": dict(life.requests), "flavors": {}}],
            phase="Finished" if ended else "Admitted" if started else "Pending", seq=1,
            attempts=0 if started is None else 1, submitted_ms=ms, first_seen_ms=ms, observed_ms=ms,
            first_admitted_ms=started, last_admitted_ms=started,
            attempt_start_ms=started if ended is None else None, last_evicted_ms=None, eviction_reason=None,
            evictions=0, eviction_stats=[], accumulated_s=None, finished_ms=ended,
            finish_reason="Succeeded" if ended else None, deleted_ms=None, ended_ms=ended, recovered=False))
    engine = create_engine(url)
    with engine.begin() as conn:
        for k in range(0, len(rows), 10_000):
            conn.execute(insert(schema.workloads), rows[k:k + 10_000])
    engine.dispose()
    since = NOW - HISTORY_DAYS * DAY
    cache = directory / "cache"
    _timed("ledger read, whole window (SQLite)",
           lambda: read_history(url, since=since, until=NOW, look_back=since))
    read_history(url, since=since, until=NOW, look_back=since, cache=cache)  # a first plan fills the cache
    later = _timed("ledger read, an hour later, through the cache",
                   lambda: read_history(url, since=since + HOUR, until=NOW + HOUR, look_back=since + HOUR,
                                        cache=cache))
    print(f"    {len(later.lives):,} lives, {later.reused:,} of them from the cache", flush=True)


def _change(lives: list[Any]) -> tuple[Any, Any]:
    """qm plan's inputs besides the live state: the edited policy (as a file) and the ledger's history."""
    from fairshare.policy import parse_policy
    from qm.planning.inputs import History, PolicyFile

    edited = policy(CUT)
    since = NOW - HISTORY_DAYS * DAY
    return (PolicyFile("new.yaml", edited, parse_policy(edited, file="new.yaml")),
            History(since, NOW, since, tuple(lives), "bench (in memory)"))


def loaded_scenario(horizon_days: float, replications: int, directory: Path) -> Any:
    """The scenario qm plan builds for this cluster and change (its LoadedScenario: current vs new), as
    main() builds it; for the controller's differential check (benchmarks/differential.py --controller)."""
    from qm.planning import scenario

    lives, present = history(random.Random(SEED))
    live = live_state(policy(0), present)
    new, hist = _change(lives)
    settings = scenario.Settings(horizon_days * DAY, replications, 0, None)
    return scenario.build(live, hist, new, [], settings, directory / "scenario.json").loaded


def main() -> None:
    from qm.planning import diff, scenario, show, transitions
    from simulations.gate import evaluate, parse_condition, sequential
    from simulations.runner import run_scenario

    jobs_env = os.environ.get("QM_BENCH_PLAN_JOBS")
    workers = int(jobs_env) if jobs_env else None
    # A shorter measurement of the same path (the issue's figure is the default, 14 days x 5).
    horizon_days = _env_number("QM_BENCH_PLAN_HORIZON_DAYS", HORIZON_DAYS, float)
    replications = int(_env_number("QM_BENCH_PLAN_REPLICATIONS", REPLICATIONS, int))
    print(f"{GPUS:,} GPUs, {COHORTS * TEAMS_PER_COHORT} ClusterQueues, {HISTORY_DAYS} days of history, "
          f"{horizon_days}-day horizon, "
          f"2 variants x {replications} replications, jobs {workers or os.cpu_count()}, load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    lives, present = history(random.Random(SEED))
    running = sum(1 for d in present if "status" in d)
    print(f"  history: {len(lives):,} lives; at t=0 {running} running, {len(present) - running} pending")
    wall0, cpu0 = time.perf_counter(), _cpu()
    live = _timed("live state (render, build_state)", lambda: live_state(policy(0), present))
    new, hist = _change(lives)
    decided = _timed("decision now (observe, history, decide)", lambda: diff.decide_now(new, live, {}))
    objects = _timed("object diffs (now and final)", lambda: (diff.policy_diff(new, live, decided.generation),
                                                              diff.object_diffs(decided, live),
                                                              diff.object_diffs(decided, live, final=True)))
    steps = _timed("transition plan (its simulated run)",
                   lambda: transitions.plan(live, new, decided, horizon_days * DAY, Path("new.yaml")).steps)
    settings = scenario.Settings(horizon_days * DAY, replications, 0, None)
    with tempfile.TemporaryDirectory() as tmp:
        built = _timed("calibration and scenario (load_document)",
                       lambda: scenario.build(live, hist, new, [], settings, Path(tmp) / "scenario.json"))
    # The asked run's gate (`--fail-if`): the runs stop once it is decided (simulations/gate.py: Sequential).
    condition = parse_condition(GATE)
    until = sequential([condition], built.names[new.path], replications)
    outcome = _timed("the runs", lambda: run_scenario(built.loaded, workers=workers, progress=False,
                                                      log=None, until=until))
    verdicts: list[Any] = []
    fc = _timed("forecast, gate, report text", lambda: (
        f := show.forecast(new.policy, live, outcome, built, None),
        verdicts.extend(evaluate([condition], outcome.summary.variants, built.names[new.path])),
        show.forecast_text(live=live, horizon=settings.horizon, built=built, fc=f, history=hist, replay=None,
                           replications=replications, seed=0, verdicts=verdicts, budgets_now=[],
                           stopped=outcome.stopped)))[0]
    wall, cpu = time.perf_counter() - wall0, _cpu() - cpu0
    runs = [r.run for v in outcome.summary.variants for r in v.replications]
    print(f"    {len(runs)} runs: {sum(r.wall_seconds for r in runs):.2f} s of run wall in all, longest "
          f"{max(r.wall_seconds for r in runs):.2f} s; {len(objects[1])} objects changed now, {len(steps)} "
          f"plan steps; {len(built.calibration.groups)} calibrated kinds")
    target = "60 s" if SCALE == 1 else "5 min at ten times the size" if SCALE == 10 else "none at this size"
    print(f"  {'total (the plan path)':<44} {wall:7.2f} s wall {cpu:7.2f} s CPU  (target <= {target})")
    print("  " + show.replication_lines(replications, outcome.stopped, verdicts)[0])
    print("  Not in the total: what qm plan reads from the ledger (the lives above, in SQLite).")
    with tempfile.TemporaryDirectory() as tmp:
        ledger_reads(lives, Path(tmp))
    print("  gate: " + "; ".join(f"{v.outcome.value.upper()} {v.condition.text} ({v.detail})"
                                 for v in verdicts))
    print("  " + fc.recommendation[:300])
