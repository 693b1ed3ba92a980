"""The forecasts `qm run` records when a transition starts (docs/forecasts.md): the `Forecaster`
and `Scorer` of queue_manager/forecast.py, made of the simulator and the ledger. Both run in a child
process of the operator, so everything heavy is imported inside the calls: the operator's own start-up
imports nothing of the simulator (tests/unit/operator/test_run_imports.py).

The forecast (`LiveForecaster`) is `qm plan` of the policy as it is, for one window:

1. the live cluster (qm/live.py): the QuotaPolicy (its generation must still be the one that started the
   transition), its Kueue objects as in force, its status (the transition just planned, the usage
   history), the Workloads of its queues;
2. the ledger's recent history (`history`, default 28 days), calibrated into arrivals per (LocalQueue,
   priority class, shape) with their weekly profile and run-time distributions (simulations/calibrate.py);
3. a scenario starting from that state (simulations/initial.py: running work runs on with a run time
   drawn beyond what it has run, pending work waits in Kueue's order), simulated `replications` times
   through the one controller, to the window's end;
4. per replication, each metric over the window (`window_metrics`), then the mean, its 95% CI and the 95%
   prediction interval of one outcome (Student t over the replications).

The score (`LedgerScorer`) reads the same metrics over the same window from the ledger, with the same
definitions (`window_metrics`), once the window has passed:

- waits (`wait_mean`, `wait_p50`, `wait_p95`, hours; `never_admitted`, %): of the workloads of the
  policy's teams submitted in the window; wait = first admission - submission, a workload not admitted
  by the window's end counts with the wait it had then (censored at the end, simulations/waits.py);
  `[CLASS]` restricts to a priority class;
- `gpu_hours[TEAM]`: resource-hours of the primary resource (the GPUs) held by the team's workloads
  inside the window (the ledger's segments clipped to it; the simulator's usage integral, the seconds
  between the transition's start and the read of the cluster counted at the usage then);
- `lost_gpu_hours[TEAM]`: of those, the hours of attempts evicted in the window, clipped to it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from queue_manager.forecast import ForecastRequest, ForecastResult, Prediction, ScoreRequest

if TYPE_CHECKING:
    from ledger.queries import LifeSummary
    from simulations.calibrate import RecordedLife
    from simulations.record import RunResult

HOUR = 3600.0
DEFAULT_HISTORY_S = 28 * 24 * HOUR
NO_CLASS = "(none)"  # simulations/summary.py NO_CLASS: the argument naming workloads without a class
UNITS = {"wait_mean": "h", "wait_p50": "h", "wait_p95": "h", "never_admitted": "%", "gpu_hours": "GPU-h",
         "lost_gpu_hours": "GPU-h"}


# ------------------------------------------------------------------------------------------- the metrics


class Submission(NamedTuple):
    """One workload as either side saw it (epoch seconds)."""

    team: str | None
    priority_class: str | None
    submitted: float
    admitted: float | None  # first admission; None: never


def split_metric(metric: str) -> tuple[str, str | None]:
    name, _, rest = metric.partition("[")
    return name, rest[:-1] if rest.endswith("]") else None


def window_metrics(metrics: Sequence[str], *, start: float, end: float, submissions: Sequence[Submission],
                   gpu_seconds: Mapping[str, float], lost_gpu_seconds: Mapping[str, float],
                   teams: Sequence[str], classes: Sequence[str] | None = None) -> dict[str, float | None]:
    """Each metric over [start, end) (module docstring); None where it has no value (no workload of the
    class submitted in the window). A team or class (`classes`, when given) the policy does not have is a
    ValueError naming the metric."""
    from simulations.waits import Observation, censored_waits

    mine = set(teams)
    out: dict[str, float | None] = {}
    for metric in metrics:
        name, arg = split_metric(metric)
        if name in ("gpu_hours", "lost_gpu_hours"):
            table = gpu_seconds if name == "gpu_hours" else lost_gpu_seconds
            if arg is not None and arg not in mine:
                raise ValueError(f"{metric}: no team {arg!r} in the policy (teams: {', '.join(teams)})")
            chosen = [arg] if arg is not None else sorted(mine)
            out[metric] = math.fsum(table.get(t, 0.0) for t in chosen) / HOUR
            continue
        if arg is not None and classes is not None and arg not in classes and arg != NO_CLASS:
            raise ValueError(f"{metric}: no priority class {arg!r} in the policy (classes: "
                             f"{', '.join([*classes, NO_CLASS])})")
        observations = []
        for s in submissions:
            if s.team not in mine or not start <= s.submitted < end:
                continue
            if arg is not None and (s.priority_class or NO_CLASS) != arg:
                continue
            admitted = s.admitted is not None and s.admitted < end
            observations.append(Observation(((s.admitted if admitted and s.admitted is not None else end)
                                             - s.submitted), admitted))
        waits = censored_waits(observations)
        if name == "never_admitted":
            out[metric] = 100.0 * waits.censored / waits.n if waits.n else None
        else:
            value = {"wait_mean": waits.mean, "wait_p50": waits.p50, "wait_p95": waits.p95}[name]
            out[metric] = None if value is None else max(0.0, value) / HOUR
    return out


def prediction(metric: str, values: Sequence[float | None]) -> Prediction:
    """Mean over the replications, half-width of its 95% CI, and the 95% prediction interval of one more
    outcome: mean ± t(0.975, n-1)·s·√(1 + 1/n) (what the one observed realization falls in)."""
    from simulations.stats import mean_ci95, t975

    xs = [v for v in values if v is not None]
    name, _ = split_metric(metric)
    mean, ci = mean_ci95(xs)
    low = high = None
    if len(xs) >= 2 and mean is not None:
        s = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (len(xs) - 1))
        half = t975(len(xs) - 1) * s * math.sqrt(1 + 1 / len(xs))
        low, high = mean - half, mean + half
        if name != "wait_mean":  # none of these can be negative
            low = max(0.0, low)
    return Prediction(metric, UNITS.get(name), mean, ci, low, high)


def run_metrics(run: RunResult, metrics: Sequence[str], *, origin: float, start: float, end: float,
                teams: Sequence[str], usage_at_origin: Mapping[str, float],
                classes: Sequence[str] | None = None) -> dict[str, float | None]:
    """The window's metrics of one simulated run that started at wall-clock `origin` (>= `start`): the
    seconds before it are counted at the usage the cluster had when it was read."""
    submissions = []
    for i, job in enumerate(run.jobs):
        admitted = run.admitted_at[i]
        submissions.append(Submission(run.cluster_queue[i], job.priority_class, origin + job.arrival,
                                      None if math.isnan(admitted) else origin + admitted))
    gap = max(0.0, origin - start)
    gpu = {cq: s + gap * usage_at_origin.get(cq, 0.0) for cq, s in run.usage_seconds.items()}
    lost: dict[str, float] = {}
    for p in run.preemptions:
        clipped = min(p.lost_seconds, p.time + (origin - start))  # the attempt's part inside the window
        lost[p.victim_cluster_queue] = lost.get(p.victim_cluster_queue, 0.0) + max(0.0, clipped) * (
            p.gpus_milli / 1000)
    return window_metrics(metrics, start=start, end=end, submissions=submissions, gpu_seconds=gpu,
                          lost_gpu_seconds=lost, teams=teams, classes=classes)


# ------------------------------------------------------------------------------------------- the ledger


def recorded_lives(lives: Sequence[LifeSummary], *, until: float) -> list[RecordedLife]:
    """The ledger's lives as the calibration reads them (simulations/calibrate.py RecordedLife)."""
    from simulations.calibrate import RecordedLife

    out = []
    for life in lives:
        sets = [p for p in life.pod_sets if isinstance(p.get("requests"), dict)]
        if not sets:
            continue
        if len(sets) == 1:
            count = int(sets[0].get("count") or 1)
            requests = {str(r): int(m) for r, m in sets[0]["requests"].items()}
        else:  # several pod sets: one pod holding their totals (Kueue's quota counts the sum)
            count, requests = 1, {}
            for p in sets:
                for r, m in p["requests"].items():
                    requests[str(r)] = requests.get(str(r), 0) + int(m) * int(p.get("count") or 1)
        started = life.last_admitted_ms / 1000 if life.last_admitted_ms is not None else None
        ended = life.finished_ms if life.finished_ms is not None else (
            life.deleted_ms if life.attempt_start_ms is not None else None)
        out.append(RecordedLife(
            local_queue=f"{life.namespace}/{life.local_queue}", priority_class=life.priority_class,
            submitted=life.submitted_ms / 1000, count=count, requests=tuple(sorted(requests.items())),
            started=started, ended=ended / 1000 if ended is not None else None,
            running=life.attempt_start_ms is not None and ended is None and started is not None
            and started < until))
    return out


def _open_ledger(url: str | None) -> Any:
    from ledger.ledger import open_ledger

    return open_ledger(url, read_only=True)


@dataclass(frozen=True)
class LedgerScorer:
    """The observed values of a forecast's metrics, from the ledger (module docstring)."""

    ledger_url: str | None

    def __call__(self, request: ScoreRequest) -> dict[str, float | None]:
        from ledger.queries import Dim, UsageQuery
        from ledger.records import to_millis

        with _open_ledger(self.ledger_url) as ledger:
            lives = ledger.lives(since=request.started_at, until=request.horizon_end)
            rows = ledger.usage(UsageQuery(
                since_ms=to_millis(request.started_at), until_ms=to_millis(request.horizon_end),
                # A segment still held counts up to now, clipped to the window: scored once the window passed.
                now_ms=to_millis(max(time.time(), request.horizon_end)), by=(Dim.TEAM,),
                filters=((Dim.RESOURCE, request.resource),)))
        submissions = [Submission(life.team, life.priority_class, life.submitted_ms / 1000,
                                  None if life.first_admitted_ms is None else life.first_admitted_ms / 1000)
                       for life in lives]
        gpu = {r.key[0]: float(r.held_seconds) for r in rows}
        lost = {r.key[0]: float(r.lost_seconds) for r in rows}
        return window_metrics(request.metrics, start=request.started_at, end=request.horizon_end,
                              submissions=submissions, gpu_seconds=gpu, lost_gpu_seconds=lost,
                              teams=request.teams)


# ------------------------------------------------------------------------------------------- the forecast


@dataclass(frozen=True)
class LiveForecaster:
    """The simulator's forecast of a transition, from the live cluster and the ledger (module docstring)."""

    kubeconfig: str | None
    context: str | None
    ledger: bool  # False: the operator keeps no ledger (no arrivals, no recorded run times)
    ledger_url: str | None = None  # None: $QM_LEDGER_URL, else the default file (ledger/db.py)
    history_s: float = DEFAULT_HISTORY_S
    request_timeout_s: float = 30.0

    def __call__(self, request: ForecastRequest) -> ForecastResult:
        from qm.live import connect

        with connect(self.kubeconfig, self.context, timeout=self.request_timeout_s) as reader:
            live = reader.read_cluster()
        origin = live.read_at
        policy = next((p for p in live.policies if (p.get("metadata") or {}).get("name") == request.policy),
                      None)
        if policy is None:
            raise LookupError(f"QuotaPolicy {request.policy} is gone")
        generation = (policy.get("metadata") or {}).get("generation")
        if generation != request.generation:
            raise LookupError(f"QuotaPolicy {request.policy} is at generation {generation}, not "
                              f"{request.generation}, when read: the forecast's transition was superseded")
        lives: list[LifeSummary] = []
        if self.ledger:
            with _open_ledger(self.ledger_url) as ledger:
                lives = ledger.lives(since=origin - self.history_s, until=origin)
        return forecast(request, policy, live.documents, origin=origin, lives=lives, history_s=self.history_s)


def forecast(request: ForecastRequest, policy: dict[str, Any], documents: Sequence[dict[str, Any]], *,
             origin: float, lives: Sequence[LifeSummary], history_s: float) -> ForecastResult:
    """Simulate the window from the state read at `origin` (pure given its inputs: the tests call it)."""
    from pathlib import Path

    from fairshare.policy import parse_policy, render_index
    from simulations.calibrate import calibrate
    from simulations.model import simulate_run
    from simulations.runner import build_jobs
    from simulations.scenario import Scenario

    started = time.perf_counter()
    parsed = parse_policy({k: v for k, v in policy.items() if k != "status"})
    teams = [t.name for t in parsed.spec.teams]
    classes = [c.name for c in parsed.spec.priority_classes]
    keys = {(k.kind, k.namespace or "", k.name) for k in render_index(parsed)}
    objects = [d for d in documents if d.get("kind") != "Workload"
               and (d["kind"], (d.get("metadata") or {}).get("namespace") or "",
                    (d.get("metadata") or {}).get("name")) in keys]
    queues = {f"{(d.get('metadata') or {}).get('namespace')}/{(d.get('metadata') or {}).get('name')}"
              for d in objects if d["kind"] == "LocalQueue"}
    calibration = calibrate(recorded_lives(lives, until=origin), since=origin - history_s, until=origin)
    notes: list[str] = []
    short = calibration.too_short() if lives else None
    if short is not None:
        notes.append(f"warning: {short}")
    present, usage = _present(documents, queues, set(teams), calibration, origin, request, notes)
    sources = [s for s in calibration.sources(origin) if s["localQueue"] in queues]
    if not sources:
        notes.append("no arrivals: the ledger has no workloads of the policy's queues in its history")
        sources = [{"name": "none", "localQueue": sorted(queues)[0] if queues else "default/none",
                    "recorded": []}]
    horizon = request.horizon_end - origin
    if horizon <= 0:
        raise ValueError("the window ended before the cluster was read")
    meta = policy.get("metadata") or {}
    kept = {k: meta[k] for k in ("name", "generation", "uid") if k in meta}
    doc = {
        "name": f"forecast-{request.policy}-{request.generation}",
        "seed": request.seed,
        "horizon": horizon,
        "cluster": {"quotaPolicy": {"apiVersion": policy.get("apiVersion"), "kind": "QuotaPolicy",
                                    "metadata": kept,
                                    "spec": policy.get("spec")}},
        "initial": {"at": origin, "objects": objects, "status": policy.get("status") or {},
                    "generation": request.generation, "workloads": present},
        "durations": calibration.distributions(),
        "workloads": sources,
        "scheduler": {"fairSharing": request.fair_sharing,
                      **({"preemptionStrategies": list(request.fair_sharing_strategies)}
                         if request.fair_sharing_strategies else {})},
    }
    scenario = Scenario.model_validate(doc)
    if scenario.scheduler.fair_sharing:
        notes.append("Kueue modelled with fair sharing (its Configuration, as the operator reads it)")
    per_metric: dict[str, list[float | None]] = {m: [] for m in request.metrics}
    resource = "nvidia.com/gpu"
    for rep in range(request.replications):
        jobs = build_jobs(scenario, Path("."), rep)
        run = simulate_run(scenario, jobs, base_dir=Path("."), variant="forecast", replication=rep)
        resource = run.primary_resource
        values = run_metrics(run, request.metrics, origin=origin, start=request.started_at,
                             end=request.horizon_end, teams=teams, classes=classes,
                             usage_at_origin={cq: u.get(resource, 0.0) for cq, u in usage.items()})
        for m in request.metrics:
            per_metric[m].append(values.get(m))
        notes.extend(n for n in run.notes if n not in notes)
    notes.append(f"{len(present)} workloads at the start, {len(calibration.groups)} calibrated groups from "
                 f"{calibration.lives} recorded lives; simulated in {time.perf_counter() - started:.1f}s")
    return ForecastResult(tuple(prediction(m, per_metric[m]) for m in request.metrics), request.replications,
                          resource, tuple(notes))


def _present(documents: Sequence[dict[str, Any]], queues: set[str], teams: set[str], calibration: Any,
             origin: float, request: ForecastRequest,
             notes: list[str]) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]]]:
    """The policy's Workloads at t=0 as the scenario's `initial.workloads` (each with the distribution its
    run time is drawn from), and what each team holds then, per resource (in units: GPUs, cores)."""
    from fairshare.errors import InputError
    from fairshare.manifests import parse_object
    from fairshare.models import Workload

    out: list[dict[str, Any]] = []
    usage: dict[str, dict[str, float]] = {}
    unknown = 0
    for doc in documents:
        if doc.get("kind") != "Workload":
            continue
        try:
            wl = parse_object(doc)
        except InputError:
            continue
        if not isinstance(wl, Workload) or wl.is_finished:
            continue
        admitted_to = wl.admission.cluster_queue if wl.admission is not None and wl.has_quota_reservation \
            else None
        if wl.local_queue_key not in queues and admitted_to not in teams:
            continue
        requests = _per_pod(wl)
        count = wl.pod_sets[0].count if len(wl.pod_sets) == 1 else 1
        # Running: its own kind's lives only (Calibration.own_work_from); pending: its kind's or a pool's.
        pick = calibration.own_work_from if admitted_to is not None else calibration.work_from
        name = pick(wl.local_queue_key, wl.priority_class, count, requests)
        entry: dict[str, Any] = {"workload": {k: v for k, v in doc.items() if k != "managedFields"}}
        if name is not None:
            entry["workFrom"] = name
        else:  # no recorded life of its kind ever ran: it runs past the window (stated in the notes)
            unknown += 1
            entry["work"] = max(1.0, request.horizon_end - min(origin, wl.creation_timestamp)) + HOUR
        out.append(entry)
        if admitted_to is not None:
            held = usage.setdefault(admitted_to, {})
            for fr, milli in wl.admitted_usage().items():
                held[fr.resource] = held.get(fr.resource, 0.0) + milli / 1000
    if unknown:
        notes.append(f"{unknown} workload(s) at the start have no recorded run time of their kind: they run "
                     "past the window")
    return out, usage


def _per_pod(wl: Any) -> tuple[tuple[str, int], ...]:
    if len(wl.pod_sets) == 1:
        return tuple(sorted(wl.pod_sets[0].requests))
    return tuple(sorted(wl.total_requests().items()))
