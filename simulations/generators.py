"""Synthetic workload sources: arrival processes, durations, request and priority mixes."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator
from itertools import accumulate
from typing import TypeVar

from fairshare.quantity import parse_quantity

from .jobs import JobSpec
from .scenario import (
    ConstantDurations,
    DiurnalArrivals,
    Durations,
    EmpiricalDurations,
    ExponentialDurations,
    GeneratorSpec,
    LognormalDurations,
    PoissonArrivals,
    ProfileArrivals,
    WorkloadSource,
)

_DAY = 86400.0
T = TypeVar("T")
Shape = tuple[int, tuple[tuple[str, int], ...]]


def poisson_times(rate_per_s: float, start: float, until: float, rng: random.Random) -> Iterator[float]:
    """Homogeneous Poisson process: exponential gaps of mean 1/rate."""
    t = start
    while True:
        t += rng.expovariate(rate_per_s)
        if t >= until:
            return
        yield t


def diurnal_times(spec: DiurnalArrivals, start: float, until: float, rng: random.Random) -> Iterator[float]:
    """Non-homogeneous Poisson process by thinning (Lewis & Shedler 1979).

    Candidates come at the peak rate mean*(1+a); each is kept with probability rate(t)/peak.
    """
    mean = spec.mean_rate_per_hour / 3600.0
    peak = mean * (1.0 + spec.amplitude)
    phase = spec.peak_hour * 3600.0
    t = start
    while True:
        t += rng.expovariate(peak)
        if t >= until:
            return
        rate = mean * (1.0 + spec.amplitude * math.cos(2.0 * math.pi * (t - phase) / _DAY))
        if rng.random() * peak <= rate:
            yield t


def profile_times(spec: ProfileArrivals, start: float, until: float, rng: random.Random) -> Iterator[float]:
    """Non-homogeneous Poisson process with a piecewise-constant rate repeating every `period`
    (`ratesPerHour[i]` over the i-th of the equal bins; t=0 lies `offset` into the period), by thinning as
    `diurnal_times`."""
    rates = [r / 3600.0 for r in spec.rates_per_hour]
    peak = max(rates)
    width = spec.period / len(rates)
    t = start
    while True:
        t += rng.expovariate(peak)
        if t >= until:
            return
        rate = rates[min(len(rates) - 1, int(((t + spec.offset) % spec.period) // width))]
        if rng.random() * peak <= rate:
            yield t


def duration_sampler(spec: GeneratorSpec, rng: random.Random) -> Callable[[], float]:
    return sampler(spec.durations, rng)


def sampler(d: Durations, rng: random.Random) -> Callable[[], float]:
    """Draws from a duration distribution (one `rng` call pattern per kind: reproducible streams)."""
    if isinstance(d, ExponentialDurations):
        rate = 1.0 / d.mean
        return lambda: rng.expovariate(rate)
    if isinstance(d, LognormalDurations):
        mu = math.log(d.median)
        sigma = d.sigma
        return lambda: rng.lognormvariate(mu, sigma)
    if isinstance(d, EmpiricalDurations):
        values = list(d.values)
        cum = list(accumulate(d.weights)) if d.weights is not None else None
        return lambda: rng.choices(values, cum_weights=cum)[0]
    if isinstance(d, ConstantDurations):
        value = d.value
        return lambda: value
    raise TypeError(f"unknown duration kind {d!r}")  # pragma: no cover - the schema is closed


def _weighted_picker(items: list[T], weights: list[float], rng: random.Random) -> Callable[[], T]:
    if len(items) == 1:
        only = items[0]
        return lambda: only
    cum = list(accumulate(weights))
    return lambda: rng.choices(items, cum_weights=cum)[0]


def generate(source: WorkloadSource, *, horizon: float, rng: random.Random) -> list[JobSpec]:
    """All jobs of one generator source, in arrival order.

    One stream per source drives arrivals, durations and mixes in a fixed order per job,
    so a source's jobs depend only on (seed, replication, source name).
    """
    spec = source.generator
    if spec is None or source.local_queue is None:
        raise ValueError("not a generator source")  # pragma: no cover - validated by the schema
    namespace, lq = source.local_queue.split("/", 1)
    until = min(spec.until if spec.until is not None else horizon, horizon)
    times: Iterator[float]
    if isinstance(spec.arrivals, PoissonArrivals):
        times = poisson_times(spec.arrivals.rate_per_hour / 3600.0, spec.start, until, rng)
    elif isinstance(spec.arrivals, ProfileArrivals):
        times = profile_times(spec.arrivals, spec.start, until, rng)
    else:
        times = diurnal_times(spec.arrivals, spec.start, until, rng)
    durations = duration_sampler(spec, rng)
    shapes: list[Shape] = [
        (mix.count, tuple(sorted((r, parse_quantity(q)) for r, q in mix.resources.items())))
        for mix in spec.requests
    ]
    pick_shape = _weighted_picker(shapes, [m.weight for m in spec.requests], rng)
    classes: list[str | None] = [p.priority_class for p in spec.priority_classes] or [None]
    pick_class = _weighted_picker(classes, [p.weight for p in spec.priority_classes] or [1.0], rng)
    out: list[JobSpec] = []
    limit = spec.count
    for i, t in enumerate(times):
        if limit is not None and i >= limit:
            break
        count, requests = pick_shape()
        pc = pick_class()
        out.append(
            JobSpec(
                name=f"{source.name}-{i:07d}",
                namespace=namespace,
                local_queue=lq,
                arrival=t,
                duration=durations(),
                count=count,
                requests=requests,
                priority_class=pc,
                source=source.name,
            )
        )
    return out
