"""Calibration of future load from recorded workload lives (`qm plan`): who submits what, how often, at which
hours, and for how long it runs. The simulator keeps no books: `qm` reads the ledger and hands the lives in
as plain `RecordedLife` values; what comes out are scenario workload sources (simulations/scenario.py) and
named duration distributions (`durations:`, drawn from by the workloads present at t=0).

The model (docs/plan.md, "Calibration"), per group = (LocalQueue, priority class, shape):

- shape: the pod count and the primary resource (GPUs) per pod of a workload with one pod set (a workload
  with several is one pod holding their totals: Kueue's quota counts the sum); the group's other requests
  (cpu, memory...) are the medians of its workloads'.
- arrivals: a Poisson process whose rate is the group's count over the window, `rate = n / W` (the maximum
  likelihood estimate; relative standard error 1/√n), times its LocalQueue's weekly profile.
- weekly profile (168 hourly factors, Monday 00:00 UTC first, mean 1 over the week): hour of day x weekday,
  fitted multiplicatively to the LocalQueue's arrivals (a Poisson log-linear model solved by iterative
  proportional fitting, Bishop, Fienberg & Holland 1975, ch. 3) against each hour of week's exposure in the
  window, with PSEUDO_ARRIVALS pseudo-arrivals spread by the cluster-wide profile (itself fitted the same
  way with flat pseudo-arrivals): a queue with few arrivals follows the cluster's rhythm, one with many its
  own.
- durations: the run time of the attempt that ended the life (finished, or deleted while running: it held
  its quota that long); a life still running at the end of the window is right-censored at its run time so
  far. The distribution is the Kaplan-Meier estimate (Kaplan & Meier 1958) over the group's lives, as at
  most DURATION_POINTS equally likely values (its quantiles). The mass the estimate leaves beyond the last
  finished life (the longest lives are still running: a young ledger, or long jobs) is spread past the
  longest observation as an exponential tail at the group's constant-hazard rate (finished lives over all
  observed run time, the censored maximum-likelihood estimate): put at the longest observation, as a lower
  bound, it made every long-running workload end within moments of the forecast's start. With no finished
  life there is no rate: that mass runs on past any horizon (RUNS_ON, simulations/durations.py).
  A group with fewer than MIN_DURATIONS observations pools with its (queue, class), then its queue, then
  the cluster.

`replay_sources` instead replays the lives submitted in the last `span` as recorded (`qm plan --replay`):
their times, shapes and run times; a life without a known run time (never admitted, or still running)
draws one from its group's distribution (conditioned on exceeding the time it has run).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fairshare.durations import format_duration
from fairshare.timestamps import rfc3339

from .durations import RUNS_ON

HOUR = 3600.0
WEEK = 7 * 24 * HOUR
BINS = 168  # hours of a week
EPOCH_MONDAY = 4 * 24 * HOUR  # 1970-01-01 was a Thursday: Monday 1970-01-05 00:00 UTC
PSEUDO_ARRIVALS = 168.0  # one per hour of the week: a queue with fewer leans on the cluster's profile
IPF_ROUNDS = 25
# A history too short to forecast from (`Calibration.too_short`, a warning in qm plan and in the operator's
# forecasts): fewer finished lives than this (a rate's relative error is 1/sqrt(n): 18% at 30; run-time
# tails from fewer are mostly the censoring) ...
MIN_FINISHED = 30
# ... or less history than a weekly cycle (the profile has not seen every hour of the week once).
MIN_SPAN = 7 * 24 * 3600.0
DURATION_POINTS = 200
MIN_DURATIONS = 5
PRIMARY = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class RecordedLife:
    """One workload life as the ledger recorded it (times in seconds since the epoch)."""

    local_queue: str  # "namespace/name"
    priority_class: str | None
    submitted: float
    count: int  # pods (1 for a workload of several pod sets: their totals)
    requests: tuple[tuple[str, int], ...]  # per pod, milli-units, sorted by resource
    started: float | None = None  # when the attempt that ended it (or runs now) started
    ended: float | None = None  # finished, or deleted while holding quota
    running: bool = False  # holds quota at the end of the window (censored)


@dataclass(frozen=True, slots=True)
class Shape:
    count: int
    primary_milli: int  # per pod

    def describe(self, resource: str = PRIMARY) -> str:
        unit = "GPU" if resource == PRIMARY else resource
        per = self.primary_milli / 1000
        return f"{self.count}x{per:g} {unit}"


@dataclass(frozen=True)
class Durations:
    """An empirical distribution: `values` equally likely (seconds); with how many lives it was fitted."""

    values: tuple[float, ...]
    finished: int
    censored: int
    pooled: str | None = None  # fitted on a wider group (too few of its own), named

    def median(self) -> float:
        v = sorted(self.values)
        return v[len(v) // 2]

    def median_text(self) -> str:
        """The median for a person: a duration, or "runs on" when it is past any horizon (RUNS_ON)."""
        m = self.median()
        return "runs on (none finished)" if m >= RUNS_ON else format_duration(m)

    def document(self) -> dict[str, Any]:
        return {"kind": "empirical", "values": list(self.values)}


@dataclass(frozen=True)
class GroupFit:
    """One (LocalQueue, priority class, shape): its arrival rate, other requests and durations."""

    name: str  # the scenario source's name (also its random stream's)
    local_queue: str
    priority_class: str | None
    shape: Shape
    requests: tuple[tuple[str, int], ...]  # per pod, the primary resource and the medians of the others
    arrivals: int
    rate_per_hour: float
    durations: Durations | None  # None: no life of it (or its pools) ever ran

    @property
    def rate_rel_error(self) -> float | None:
        """Relative standard error of the rate (Poisson: 1/√n)."""
        return 1 / math.sqrt(self.arrivals) if self.arrivals else None


@dataclass(frozen=True)
class Calibration:
    since: float
    until: float
    groups: tuple[GroupFit, ...]
    profiles: dict[str, tuple[float, ...]]  # per LocalQueue, 168 factors from Monday 00:00 UTC
    cluster_profile: tuple[float, ...]
    lives: int  # lives read
    skipped: dict[str, int] = field(default_factory=dict)  # left out, by reason
    pools: dict[str, Durations] = field(default_factory=dict)  # pooled distributions, by name
    first: float | None = None  # the earliest submission of a life used (None: no life)
    finished: int = 0  # lives used whose run ended (finished, or deleted while holding quota)

    @property
    def span(self) -> float:
        """Seconds of recorded history the fit rests on: from the earliest life used to the window's end."""
        return 0.0 if self.first is None else max(0.0, self.until - self.first)

    def too_short(self) -> str | None:
        """One line when the history is too short to forecast from (fewer than MIN_FINISHED finished lives,
        or less than MIN_SPAN of them), saying how many lives over what span; None otherwise."""
        if self.finished >= MIN_FINISHED and self.span >= MIN_SPAN:
            return None
        asked = format_duration(self.until - self.since)
        since = "" if self.first is None else f" (since {rfc3339(self.first)})"
        return (f"the ledger's history is too short to forecast from: {self.lives:,} lives, "
                f"{self.finished:,} of them finished, over {format_duration(self.span)}{since} of the "
                f"{asked} asked; a forecast wants at least {MIN_FINISHED} finished lives over "
                f"{format_duration(MIN_SPAN)} (a weekly cycle). Arrivals and run times are fitted from what "
                "there is; running work that has outlived every recorded run time of its kind runs on past "
                "the horizon")

    def sources(self, at: float) -> list[dict[str, Any]]:
        """Scenario workload sources, one per group with arrivals, t=0 at wall-clock `at`."""
        offset = (at - EPOCH_MONDAY) % WEEK
        out = []
        for g in self.groups:
            if g.arrivals == 0 or g.durations is None:
                continue
            profile = self.profiles.get(g.local_queue, self.cluster_profile)
            out.append({
                "name": g.name,
                "localQueue": g.local_queue,
                "generator": {
                    "arrivals": {"kind": "profile", "period": WEEK, "offset": offset,
                                 "ratesPerHour": [_round(g.rate_per_hour * f) for f in profile]},
                    "durations": g.durations.document(),
                    "requests": [{"count": g.shape.count, "resources": _quantities(g.requests)}],
                    "priorityClasses": [{"priorityClass": g.priority_class}],
                },
            })
        return out

    def distributions(self) -> dict[str, dict[str, Any]]:
        """Named duration distributions (`durations:`): every group's and every pool's."""
        out = {g.name: g.durations.document() for g in self.groups if g.durations is not None}
        out.update({name: d.document() for name, d in self.pools.items()})
        return out

    def own_work_from(self, local_queue: str, priority_class: str | None, count: int,
                      requests: Sequence[tuple[str, int]]) -> str | None:
        """The distribution of this kind's own recorded lives (at least MIN_DURATIONS of them), for a
        workload already running; None when its kind has fewer. How much longer a workload runs that has run
        so long is its kind's business: a pool of other kinds' lives (their tail past the time it has run)
        says nothing about it, and drew ends for long jobs from a young ledger's short ones."""
        shape = shape_of(count, requests)
        for g in self.groups:
            if (g.local_queue, g.priority_class, g.shape) == (local_queue, priority_class, shape) \
                    and g.durations is not None and g.durations.pooled is None:
                return g.name
        return None

    def work_from(self, local_queue: str, priority_class: str | None, count: int,
                  requests: Sequence[tuple[str, int]]) -> str | None:
        """The distribution a workload of this kind draws its work from: its group's, else the narrowest pool
        that has one; None when no recorded life ever ran."""
        shape = shape_of(count, requests)
        for g in self.groups:
            if (g.local_queue, g.priority_class, g.shape) == (local_queue, priority_class, shape) \
                    and g.durations is not None:
                return g.name
        for name in (_pool_name(local_queue, priority_class), _pool_name(local_queue, None), "cluster"):
            if name in self.pools:
                return name
        return None


def _round(x: float) -> float:
    return float(f"{x:.6g}")


def _quantities(requests: Sequence[tuple[str, int]]) -> dict[str, str]:
    return {r: (str(m // 1000) if m % 1000 == 0 else f"{m}m") for r, m in requests}


def shape_of(count: int, requests: Sequence[tuple[str, int]], resource: str = PRIMARY) -> Shape:
    return Shape(count, dict(requests).get(resource, 0))


def hour_of_week(t: float) -> int:
    """0 = Monday 00:00-01:00 UTC."""
    return int(((t - EPOCH_MONDAY) % WEEK) // HOUR)


def exposure(since: float, until: float) -> list[float]:
    """Seconds of [since, until) in each hour of the week: whole weeks at once (an hour each per bin), then
    the rest hour by hour (at most a week of it), so a long window costs no more than a short one."""
    out = [0.0] * BINS
    if until <= since:
        return out
    weeks = math.floor((until - since) / WEEK)
    if weeks > 0:
        out = [weeks * HOUR] * BINS
        since += weeks * WEEK
    t = since
    while t < until:
        b = hour_of_week(t)
        edge = t - ((t - EPOCH_MONDAY) % HOUR) + HOUR
        end = min(edge, until)
        if end <= t:  # pragma: no cover - float rounding at an edge: the rest is less than a microsecond
            break
        out[b] += end - t
        t = end
    return out


def fit_profile(times: Sequence[float], expo: Sequence[float], prior: Sequence[float] | None = None,
                pseudo: float = PSEUDO_ARRIVALS) -> tuple[float, ...]:
    """168 factors (hour of day x weekday), mean 1 over the week, fitted to arrival `times` against the
    exposure; `pseudo` pseudo-arrivals spread by `prior` (flat when None) keep a sparse queue sensible."""
    base = list(prior) if prior is not None else [1.0] * BINS
    counts = [0.0] * BINS
    for t in times:
        counts[hour_of_week(t)] += 1.0
    weight = sum(e * p for e, p in zip(expo, base, strict=True))
    if weight <= 0:
        return tuple(base)
    counts = [c + pseudo * e * p / weight for c, e, p in zip(counts, expo, base, strict=True)]
    total = sum(counts)
    lam = total / sum(expo)
    day = [1.0] * 24
    week = [1.0] * 7
    for _ in range(IPF_ROUNDS):
        for h in range(24):
            num = sum(counts[d * 24 + h] for d in range(7))
            den = sum(expo[d * 24 + h] * lam * week[d] for d in range(7))
            day[h] = num / den if den > 0 else 1.0
        for d in range(7):
            num = sum(counts[d * 24 + h] for h in range(24))
            den = sum(expo[d * 24 + h] * lam * day[h] for h in range(24))
            week[d] = num / den if den > 0 else 1.0
    factors = [week[b // 24] * day[b % 24] for b in range(BINS)]
    mean = sum(factors) / BINS
    return tuple(f / mean for f in factors)


def kaplan_meier(observations: Iterable[tuple[float, bool]],
                 points: int = DURATION_POINTS) -> Durations | None:
    """Equally likely values of the product-limit estimate over (duration, ended) pairs; ended=False is
    right-censored. Survival left beyond the last ended observation is an exponential tail past the longest
    observation, at the rate finished / total observed time (the exponential MLE under right-censoring);
    with nothing finished there is no rate: it is RUNS_ON (the work runs on past any horizon)."""
    obs = sorted(observations, key=lambda o: (o[0], not o[1]))
    if not obs:
        return None
    finished = sum(1 for _, e in obs if e)
    # The estimate's jumps: (value, probability mass).
    masses: list[tuple[float, float]] = []
    at_risk = len(obs)
    survival = 1.0
    i = 0
    while i < len(obs):
        t = obs[i][0]
        events = censored = 0
        while i < len(obs) and obs[i][0] == t:
            if obs[i][1]:
                events += 1
            else:
                censored += 1
            i += 1
        if events:
            drop = survival * events / at_risk
            masses.append((t, drop))
            survival -= drop
        at_risk -= events + censored
    longest = max(t for t, _ in obs)
    exposure = sum(t for t, _ in obs)
    tail_mean = exposure / finished if finished and exposure > 0 else None
    tail = survival if survival > 1e-12 else 0.0
    if tail and tail_mean is None:
        # Nothing finished: no rate to extrapolate, and the longest observation is only a lower bound. The
        # mass runs on (RUNS_ON), as the transition plan assumes: put at the longest observation, it ended
        # the younger of the running workloads as soon as they reached the oldest one's age.
        masses.append((RUNS_ON, tail))
        tail = 0.0
    values: list[float] = []
    acc = 0.0
    k = 0
    for j in range(points):
        q = (j + 0.5) / points
        if tail and q > 1.0 - tail and tail_mean is not None:
            # The q-quantile of longest + Exp(mean tail_mean) over the tail's share of the probability.
            u = (q - (1.0 - tail)) / tail
            values.append(max(1.0, longest - tail_mean * math.log(1.0 - u)))
            continue
        while k < len(masses) - 1 and acc + masses[k][1] < q:
            acc += masses[k][1]
            k += 1
        values.append(max(1.0, masses[k][0]))
    return Durations(tuple(values), finished, len(obs) - finished)


def _pool_name(local_queue: str, priority_class: str | None) -> str:
    return f"pool:{local_queue}" + (f":{priority_class}" if priority_class else "")


def _source_name(local_queue: str, priority_class: str | None, shape: Shape, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9.-]+", "-", f"{local_queue}.{priority_class or 'none'}.{shape.count}x"
                  f"{shape.primary_milli / 1000:g}gpu").strip("-")
    name, k = base, 2
    while name in taken:
        name, k = f"{base}-{k}", k + 1
    taken.add(name)
    return name


def _observation(life: RecordedLife, until: float) -> tuple[float, bool] | None:
    """(run time, ended) of a life, or None when it says nothing about how long it runs."""
    if life.started is None:
        return None
    if life.ended is not None:
        return max(0.0, life.ended - life.started), True
    if life.running:
        return max(0.0, until - life.started), False
    return None


def calibrate(lives: Sequence[RecordedLife], *, since: float, until: float,
              durations_since: float | None = None) -> Calibration:
    """Fit arrivals (lives submitted in [since, until)) and durations (lives submitted from
    `durations_since`, default `since`: a longer look back keeps long jobs in the distribution)."""
    look_back = since if durations_since is None else min(durations_since, since)
    expo = exposure(since, until)
    skipped: dict[str, int] = defaultdict(int)
    arrivals: dict[tuple[str, str | None, Shape], list[RecordedLife]] = defaultdict(list)
    observed: dict[tuple[str, str | None, Shape], list[tuple[float, bool]]] = defaultdict(list)
    by_queue: dict[str, list[float]] = defaultdict(list)
    for life in lives:
        if life.submitted < look_back or life.submitted >= until:
            skipped["submitted outside the window"] += 1
            continue
        shape = shape_of(life.count, life.requests)
        key = (life.local_queue, life.priority_class, shape)
        if life.submitted >= since:
            arrivals[key].append(life)
            by_queue[life.local_queue].append(life.submitted)
        obs = _observation(life, until)
        if obs is not None:
            observed[key].append(obs)
    cluster = fit_profile([t for ts in by_queue.values() for t in ts], expo)
    profiles = {q: fit_profile(ts, expo, cluster) for q, ts in sorted(by_queue.items())}
    pools = _pools(observed)
    hours = (until - since) / HOUR
    taken: set[str] = set()
    groups = []
    for key in sorted(set(arrivals) | set(observed), key=_sort_key):
        queue, klass, shape = key
        members = arrivals.get(key, [])
        own = kaplan_meier(observed.get(key, []))
        fitted = own if own is not None and own.finished + own.censored >= MIN_DURATIONS else None
        if fitted is None:
            for name in (_pool_name(queue, klass), _pool_name(queue, None), "cluster"):
                if name in pools:
                    fitted = Durations(pools[name].values, pools[name].finished, pools[name].censored, name)
                    break
        groups.append(GroupFit(
            name=_source_name(queue, klass, shape, taken),
            local_queue=queue,
            priority_class=klass,
            shape=shape,
            requests=_median_requests(members or [], shape),
            arrivals=len(members),
            rate_per_hour=len(members) / hours if hours > 0 else 0.0,
            durations=fitted if fitted is not None else own,
        ))
    used = [life for life in lives if look_back <= life.submitted < until]
    return Calibration(since, until, tuple(groups), profiles, cluster, len(lives), dict(skipped), pools,
                       first=min((life.submitted for life in used), default=None),
                       finished=sum(1 for life in used if life.ended is not None))


def _sort_key(key: tuple[str, str | None, Shape]) -> tuple[str, str, int, int]:
    return key[0], key[1] or "", key[2].count, key[2].primary_milli


def _pools(observed: dict[tuple[str, str | None, Shape], list[tuple[float, bool]]]) -> dict[str, Durations]:
    pooled: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    for (queue, klass, _), obs in observed.items():
        pooled[_pool_name(queue, klass)].extend(obs)
        if klass is not None:
            pooled[_pool_name(queue, None)].extend(obs)
        pooled["cluster"].extend(obs)
    out = {}
    for name in sorted(pooled):
        fit = kaplan_meier(pooled[name])
        if fit is not None and fit.finished + fit.censored >= MIN_DURATIONS:
            out[name] = Durations(fit.values, fit.finished, fit.censored, name)
    return out


def _median_requests(members: Sequence[RecordedLife], shape: Shape) -> tuple[tuple[str, int], ...]:
    """The primary resource of the shape, and the median of every other request of the group's lives."""
    values: dict[str, list[int]] = defaultdict(list)
    for life in members:
        for r, milli in life.requests:
            if r != PRIMARY:
                values[r].append(milli)
    out = {r: sorted(v)[len(v) // 2] for r, v in values.items()}
    if shape.primary_milli or not out:
        out[PRIMARY] = shape.primary_milli
    return tuple(sorted(out.items()))


# -------------------------------------------------------------------------------------------------- replay


def replay_sources(lives: Sequence[RecordedLife], calibration: Calibration, *, since: float,
                   until: float) -> list[dict[str, Any]]:
    """One `recorded:` source per LocalQueue: the lives submitted in [since, until), at their offset from
    `since` (t=0 replays `since`), with their recorded run time, or a draw from their kind's distribution
    (beyond the time run, for one still running) when it is unknown; lives of a kind that never ran
    anywhere are left out (counted by the caller from `calibrate`'s skipped)."""
    per_queue: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for life in lives:
        if not since <= life.submitted < until:
            continue
        job: dict[str, Any] = {"at": life.submitted - since, "count": life.count,
                               "resources": _quantities(life.requests)}
        if life.priority_class is not None:
            job["priorityClass"] = life.priority_class
        obs = _observation(life, until)
        if obs is not None and obs[1]:
            job["work"] = max(1.0, obs[0])
        else:
            name = calibration.work_from(life.local_queue, life.priority_class, life.count, life.requests)
            if name is None:
                continue
            job["workFrom"] = name
            if obs is not None:
                job["workAtLeast"] = obs[0]
        per_queue[life.local_queue].append(job)
    return [{"name": f"replay.{re.sub(r'[^A-Za-z0-9.-]+', '-', q)}", "localQueue": q, "recorded": jobs}
            for q, jobs in sorted(per_queue.items())]
