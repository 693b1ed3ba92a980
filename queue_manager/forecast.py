"""Forecasts of transitions, made in the background and scored later (docs/forecasts.md).

When a reconcile starts a transition (the controller's `StartTransition`) of a policy with
`spec.forecasts.enabled`, a `ForecastRequest` is queued and a `Computing` entry goes to
`status.forecasts`; the transition's first step is applied by the same reconcile as without forecasts (the
request is a few fields; nothing waits for it). The forecast is computed by a `Forecaster`, the score (the
values the ledger observed once the window has passed) by a `Scorer`.

The operator cannot simulate by itself: `queue_manager` never imports `simulations` (import-linter), and
the operator image has no simulator dependencies beyond the base ones. So `qm run` hands both in as plain
callables (these Protocols; qm/forecaster.py implements them with the simulator, calibrated from the
ledger, and with the ledger's records). `ForecastRunner` runs one job at a time from a bounded queue, each
in a child process (spawn): a CPU-bound simulation must not hold this process's GIL, which kopf's event
loop and every reconcile share, and one that hangs or crashes is killed at its timeout and never takes the
operator with it. A failure is one line (logged, in the entry's message and the `ForecastFailed`
condition), never fatal, never retried. Results are collected by the next reconcile, which writes them.

A forecast whose computation was lost (the operator restarted meanwhile) is marked Failed: its inputs were
the cluster at the transition's start, which cannot be read again.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import multiprocessing
import os
import queue
import threading
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from fairshare.control import Action, StartTransition
from fairshare.policy import QuotaPolicy
from fairshare.policy.status import Condition, Forecast, ForecastPhase, ForecastValue, TransitionStatus
from fairshare.policy.units import duration_seconds
from fairshare.timestamps import rfc3339

from .conditions import condition
from .kueue_config import FairSharingSetting
from .metrics import Metrics

log = logging.getLogger("queue_manager.forecast")

MAX_FORECASTS = 10  # entries kept in status.forecasts (oldest dropped)
DEFAULT_TIMEOUT_S = 600.0
DEFAULT_QUEUE = 8


# ------------------------------------------------------------------------------------------- the contract


@dataclass(frozen=True, slots=True)
class ForecastRequest:
    """Forecast `metrics` of `policy` over [started_at, horizon_end] (epoch seconds), from the cluster as the
    generation that started the transition left it."""

    policy: str
    generation: int
    started_at: float
    horizon_end: float
    metrics: tuple[str, ...]
    replications: int
    seed: int
    # Kueue runs fairSharing (with these preemptionStrategies; empty: its default), as the operator read it
    # (queue_manager/kueue_config.py).
    fair_sharing: bool = False
    fair_sharing_strategies: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Prediction:
    metric: str
    unit: str | None
    mean: float | None
    ci95: float | None  # half-width of the 95% CI of the mean over replications
    low: float | None  # the 95% prediction interval of one outcome
    high: float | None


@dataclass(frozen=True, slots=True)
class ForecastResult:
    predictions: tuple[Prediction, ...]
    replications: int
    resource: str  # what the GPU-hours count
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ScoreRequest:
    """The observed values of `metrics` over [started_at, horizon_end] for the workloads of `teams`."""

    policy: str
    generation: int
    started_at: float
    horizon_end: float
    metrics: tuple[str, ...]
    resource: str
    teams: tuple[str, ...]


class Forecaster(Protocol):
    """Picklable: it runs in a child process."""

    def __call__(self, request: ForecastRequest) -> ForecastResult: ...


class Scorer(Protocol):
    """Picklable: it runs in a child process. Returns metric -> observed value (None: nothing observed)."""

    def __call__(self, request: ScoreRequest) -> Mapping[str, float | None]: ...


# ------------------------------------------------------------------------------------------- the runner

Kind = Literal["forecast", "score"]


@dataclass(frozen=True, slots=True)
class Outcome:
    kind: Kind
    policy: str
    generation: int
    value: Any  # ForecastResult | Mapping[str, float | None] | None
    error: str | None
    seconds: float


@dataclass
class _Job:
    kind: Kind
    policy: str
    generation: int
    fn: Callable[[Any], Any]
    arg: Any


CHILD_NICENESS = 10  # added to the child's nice value (nice(2)): lowering one's priority needs no privilege


def _child(fn: Callable[[Any], Any], arg: Any, conn: Any) -> None:
    """The child process: one call, one message back (never an exception across the pipe). It runs at a
    lower CPU priority: on a node with one or two cores a simulation at the operator's priority would take
    half the CPU from the reconciles, and the transition's steps must never wait for a forecast."""
    with contextlib.suppress(OSError, AttributeError):  # AttributeError: no os.nice (not POSIX)
        os.nice(CHILD_NICENESS)
    try:
        value = fn(arg)
    except Exception as err:  # every failure is reported as a line, the traceback's last frame included
        frames = traceback.extract_tb(err.__traceback__)
        where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
        message = " ".join(str(err).split()) or type(err).__name__
        conn.send(("error", f"{type(err).__name__}: {message[:500]}{where}"))
    else:
        conn.send(("ok", value))
    conn.close()


class ForecastRunner:
    """One background thread; jobs from a bounded queue, one at a time, each in a child process (or, with
    `isolation="thread"`, in that thread: for callables that neither hold the GIL for long nor can hang)."""

    def __init__(self, forecaster: Forecaster, scorer: Scorer | None, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 max_queue: int = DEFAULT_QUEUE, isolation: Literal["process", "thread"] = "process",
                 before_score: Callable[[], object] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 on_done: Callable[[Outcome], None] | None = None) -> None:
        self.forecaster = forecaster
        self.scorer = scorer
        self.timeout_s = timeout_s
        self.isolation = isolation
        self.before_score = before_score  # e.g. the ledger's flush: the window's records in the database
        self.clock = clock
        self.on_done = on_done
        self._jobs: queue.Queue[_Job | None] = queue.Queue(maxsize=max_queue)
        self._lock = threading.Lock()
        self._done: list[Outcome] = []
        self._known: set[tuple[Kind, str, int]] = set()  # queued, running or done and not collected
        self._stop = threading.Event()
        self._current: Any = None  # the child process running now
        self._thread = threading.Thread(target=self._loop, name="forecasts", daemon=True)
        self._thread.start()

    # --- submitting and collecting (reconcile threads) ----------------------------------------------

    def submit_forecast(self, request: ForecastRequest) -> bool:
        return self._submit(_Job("forecast", request.policy, request.generation, self.forecaster, request))

    def submit_score(self, request: ScoreRequest) -> bool:
        if self.scorer is None:
            return False
        return self._submit(_Job("score", request.policy, request.generation, self.scorer, request))

    def _submit(self, job: _Job) -> bool:
        """False when the queue is full (the caller records the forecast as failed: bounded, not queued)."""
        key = (job.kind, job.policy, job.generation)
        with self._lock:
            if key in self._known:
                return True
            try:
                self._jobs.put_nowait(job)
            except queue.Full:
                return False
            self._known.add(key)
        return True

    def knows(self, kind: Kind, policy: str, generation: int) -> bool:
        """Queued, running, or finished and not yet collected."""
        with self._lock:
            return (kind, policy, generation) in self._known

    def collect(self, policy: str) -> list[Outcome]:
        """The finished jobs of `policy` (each handed out once)."""
        with self._lock:
            mine = [o for o in self._done if o.policy == policy]
            self._done = [o for o in self._done if o.policy != policy]
            for o in mine:
                self._known.discard((o.kind, o.policy, o.generation))
        return mine

    def close(self, timeout: float = 5.0) -> None:
        """Stop: the job running is killed (its result would be written by nobody), queued ones dropped."""
        self._stop.set()
        with contextlib.suppress(queue.Full):
            self._jobs.put_nowait(None)
        proc = self._current
        if proc is not None and proc.is_alive():
            proc.kill()
        self._thread.join(timeout)

    # --- the worker --------------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.is_set():
            job = self._jobs.get()
            if job is None or self._stop.is_set():
                return
            started = self.clock()
            if job.kind == "score" and self.before_score is not None:
                try:
                    self.before_score()
                except Exception as err:  # the score reads what the database has
                    log.warning("forecasts: could not flush before scoring: %s", err)
            value, error = self._run(job)
            outcome = Outcome(job.kind, job.policy, job.generation, value, error, self.clock() - started)
            if error is not None:
                log.error("forecast %s of %s generation %s failed: %s", job.kind, job.policy, job.generation,
                          error)
            with self._lock:
                self._done.append(outcome)
            if self.on_done is not None:
                self.on_done(outcome)

    def _run(self, job: _Job) -> tuple[Any, str | None]:
        if self.isolation == "thread":
            try:
                return job.fn(job.arg), None
            except Exception as err:
                return None, f"{type(err).__name__}: {' '.join(str(err).split())[:500]}"
        ctx = multiprocessing.get_context("spawn")
        receive, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_child, args=(job.fn, job.arg, send), name=f"qm-{job.kind}", daemon=True)
        try:
            proc.start()
        except Exception as err:  # e.g. the callable cannot be pickled, or no process can be started
            return None, f"could not start the {job.kind} process: {type(err).__name__}: {err}"
        self._current = proc
        send.close()
        try:
            if receive.poll(self.timeout_s):
                kind, value = receive.recv()
                return (value, None) if kind == "ok" else (None, str(value))
            return None, f"timed out after {self.timeout_s:g}s"
        except EOFError:  # the pipe closes before the process is reaped: wait for its exit code
            proc.join(5)
            return None, f"the {job.kind} process died (exit code {proc.exitcode})"
        finally:
            if proc.is_alive():
                proc.kill()
            proc.join(5)
            receive.close()
            self._current = None


@dataclass(frozen=True)
class ForecastSetup:
    """What `qm run` hands the operator: the two callables and the runner's bounds."""

    forecaster: Forecaster
    scorer: Scorer | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    max_queue: int = DEFAULT_QUEUE

    def runner(self, *, metrics: Metrics | None = None,
               flush: Callable[[], object] | None = None) -> ForecastRunner:
        def done(o: Outcome) -> None:
            if metrics is not None:
                metrics.forecast_duration.labels(o.kind).observe(o.seconds)

        return ForecastRunner(self.forecaster, self.scorer, timeout_s=self.timeout_s,
                              max_queue=self.max_queue, before_score=flush, on_done=done)


# ------------------------------------------------------------------------------------------- status


def seed_of(policy: str, uid: str | None, generation: int) -> int:
    """A seed per forecast, stable across restarts (the same transition forecast again draws the same)."""
    digest = hashlib.sha256(f"{uid or policy}|{generation}".encode()).hexdigest()
    return int(digest[:8], 16)


def horizon_of(policy: QuotaPolicy, records: Sequence[TransitionStatus], generation: int) -> float | None:
    """spec.forecasts.horizon, else the longest duration of the transitions `generation` started."""
    spec = policy.spec.forecasts
    if spec.horizon is not None:
        return float(duration_seconds(spec.horizon))
    durations = [float(r.plan.spec.duration) for r in records
                 if r.policy_generation == generation and r.plan is not None and r.plan.spec is not None
                 and r.plan.spec.duration]
    return max(durations) if durations else None


def start_of(records: Sequence[TransitionStatus], generation: int, now: float) -> float:
    starts = [float(r.plan.start) for r in records if r.policy_generation == generation and r.plan is not None
              and r.plan.start is not None]
    return min(starts) if starts else now


def error_ratio(predicted: float | None, ci95: float | None, observed: float | None) -> float | None:
    """|observed - predicted| / max(|predicted|, ci95): relative error, measured against the CI's width
    when the prediction is near zero (a predicted wait of 0 h is not infinitely wrong at 0.01 h)."""
    if predicted is None or observed is None:
        return None
    scale = max(abs(predicted), ci95 or 0.0)
    diff = abs(observed - predicted)
    if scale == 0.0:
        return 0.0 if diff == 0.0 else math.inf
    return diff / scale


SCORE_RETRY_S = 60.0  # a score that failed (e.g. the database did not answer) is asked again this late
SCORE_ATTEMPTS = 10


@dataclass
class ForecastBook:
    """The operator's side of forecasting: from each reconcile's decision to `status.forecasts`."""

    runner: ForecastRunner
    scoring: bool = True  # a scorer exists (the operator keeps a ledger)
    clock: Callable[[], float] = time.monotonic  # for the score retries only
    _score_tries: dict[tuple[str, int], tuple[int, float]] = field(default_factory=dict)

    def step(self, policy: QuotaPolicy, uid: str | None, generation: int | None, actions: Sequence[Action],
             records: Sequence[TransitionStatus], stored: Sequence[Forecast], now: float,
             on_scored: Callable[[str, Forecast], None] | None = None, *,
             kueue: FairSharingSetting | None = None) -> list[Forecast]:
        """The new status.forecasts: a request for a transition just started, results collected, a score
        asked for once a window has passed, lost computations marked failed. `kueue`: how Kueue runs, as the
        controller models it (the forecast models it the same way; None: without fair sharing)."""
        name = policy.name
        entries = list(stored)
        spec = policy.spec.forecasts
        if spec.enabled and generation is not None and any(isinstance(a, StartTransition) for a in actions) \
                and not any(e.policy_generation == generation for e in entries):
            entries.append(self._request(policy, uid, generation, records, now, kueue))
        for o in self.runner.collect(name):
            entries = [self._merge(e, o, now, on_scored) if e.policy_generation == o.generation else e
                       for e in entries]
        out = []
        for e in entries:
            gen = e.policy_generation
            if e.phase == ForecastPhase.COMPUTING and gen is not None \
                    and not self.runner.knows("forecast", name, gen):
                e = _failed(e, "the operator restarted while it was computed (its inputs were the cluster at "
                            "the transition's start)")
            elif e.phase == ForecastPhase.FORECAST and gen is not None and e.horizon_end_at is not None \
                    and now >= e.horizon_end_at:
                if self.scoring:
                    self._ask_score(policy, e)
                elif e.message != NO_LEDGER:
                    e = e.model_copy(update={"message": NO_LEDGER})
            out.append(e)
        return out[-MAX_FORECASTS:]

    def _request(self, policy: QuotaPolicy, uid: str | None, generation: int,
                 records: Sequence[TransitionStatus], now: float,
                 kueue: FairSharingSetting | None) -> Forecast:
        spec = policy.spec.forecasts
        start = start_of(records, generation, now)
        horizon = horizon_of(policy, records, generation)
        base = Forecast(policy_generation=generation, started_at=rfc3339(start), at=start,
                        replications=spec.replications)
        if horizon is None or horizon <= 0:
            return _failed(base, "no horizon: the transition has no duration; set spec.forecasts.horizon")
        end = start + horizon
        base = base.model_copy(update={"horizon_end": rfc3339(end), "horizon_end_at": end})
        request = ForecastRequest(policy.name, generation, start, end, tuple(spec.metrics), spec.replications,
                                  seed_of(policy.name, uid, generation), kueue is not None and kueue.on,
                                  kueue.strategies if kueue is not None and kueue.on else ())
        if not self.runner.submit_forecast(request):
            return _failed(base, "the forecast queue is full (forecasts run one at a time)")
        log.info("forecast of %s generation %d queued: %s over %.0fs", policy.name, generation,
                 ", ".join(spec.metrics), horizon)
        return base.model_copy(update={"phase": ForecastPhase.COMPUTING})

    def _ask_score(self, policy: QuotaPolicy, e: Forecast) -> None:
        gen = e.policy_generation
        if gen is None or e.at is None or e.horizon_end_at is None:
            return
        key = (policy.name, gen)
        tries, last = self._score_tries.get(key, (0, -math.inf))
        if self.runner.knows("score", policy.name, gen) or tries >= SCORE_ATTEMPTS \
                or self.clock() - last < SCORE_RETRY_S:
            return
        request = ScoreRequest(policy.name, gen, e.at, e.horizon_end_at, tuple(v.metric for v in e.values),
                               e.resource or "nvidia.com/gpu", tuple(t.name for t in policy.spec.teams))
        if self.runner.submit_score(request):
            self._score_tries[key] = (tries + 1, self.clock())

    def _merge(self, e: Forecast, o: Outcome, now: float,
               on_scored: Callable[[str, Forecast], None] | None) -> Forecast:
        if o.kind == "forecast":
            if o.error is not None or not isinstance(o.value, ForecastResult):
                return _failed(e, o.error or "no result")
            r = o.value
            values = [ForecastValue(metric=p.metric, unit=p.unit, predicted=_finite(p.mean),
                                    ci95=_finite(p.ci95), low=_finite(p.low), high=_finite(p.high))
                      for p in r.predictions]
            log.info("forecast of %s generation %d computed in %.1fs", o.policy, o.generation, o.seconds)
            return e.model_copy(update={
                "phase": ForecastPhase.FORECAST, "values": values, "replications": r.replications,
                "resource": r.resource, "computed_seconds": round(o.seconds, 3),
                "message": "; ".join(r.notes)[:2000] or None})
        if o.error is not None or not isinstance(o.value, Mapping):
            # Not fatal: asked again after SCORE_RETRY_S (the database may not have answered).
            tries = self._score_tries.get((o.policy, o.generation), (0, 0.0))[0]
            return e.model_copy(update={"message": f"not scored yet (attempt {tries} of {SCORE_ATTEMPTS}): "
                                        f"{o.error or 'no result'}"[:2000]})
        observed: Mapping[str, float | None] = o.value
        values = []
        for v in e.values:
            seen = _finite(observed.get(v.metric))
            within = None if seen is None or v.predicted is None else \
                abs(seen - v.predicted) <= (v.ci95 or 0.0)
            inside = None if seen is None or v.low is None or v.high is None else v.low <= seen <= v.high
            values.append(v.model_copy(update={
                "observed": seen, "within_ci": within, "within_interval": inside,
                "error_ratio": _finite(error_ratio(v.predicted, v.ci95, seen))}))
        self._score_tries.pop((o.policy, o.generation), None)
        scored = e.model_copy(update={"phase": ForecastPhase.SCORED, "values": values,
                                      "scored_at": rfc3339(now), "message": None})
        if on_scored is not None:
            on_scored(o.policy, scored)
        return scored


NO_LEDGER = "not scored: the operator keeps no ledger (qm run --no-ledger)"


def latest_failure(entries: Sequence[Forecast]) -> str | None:
    """Why the latest forecast failed (the ForecastFailed condition), or None when it did not."""
    if not entries or entries[-1].phase != ForecastPhase.FAILED:
        return None
    return entries[-1].message or "failed"


def _failed(e: Forecast, why: str) -> Forecast:
    return e.model_copy(update={"phase": ForecastPhase.FAILED, "message": why[:2000]})


def _finite(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None


FORECAST_FAILED = "ForecastFailed"  # the policy's latest forecast could not be made (docs/forecasts.md)


def forecast_condition(entries: Sequence[Forecast], generation: int | None, now: float,
                       previous: Sequence[Condition]) -> Condition:
    """ForecastFailed: True while the latest forecast failed (why in the message), never fatal."""
    why = latest_failure(entries)
    return condition(FORECAST_FAILED, why is not None, "ForecastFailed" if why else "ForecastsMade",
                     why or "the latest forecast was made", generation=generation, now=now, previous=previous)
