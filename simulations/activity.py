"""What the simulated GPUs do: each workload source's activity profile (a scenario's `workloads[].activity`),
drawn per job, and the telemetry the policy controller observes from it (`SimActivity`).

A profile is a utilization while the job works and, optionally, a time after which it goes idle (a notebook
left open, a crashed loop, a job waiting on data) and the utilization it then shows, until its run ends;
`measured: false` models pods dcgm-exporter never maps (no series: the controller's "unknown"). The time is
counted from the start of each attempt (an evicted and re-admitted job works again first).

The telemetry: for spec.idle, the shell hands the controller (fairshare.control.idle) a reading of each
admitted workload as the operator would get it from Prometheus, computed from the profile instead of from
samples (`reading_of`): one series per GPU, sampled every scrapeInterval from the attempt's start, its last
busy sample the last moment it worked at or above the threshold. A test checks that this equals the core's
`read_series` over the sampled profile (tests/unit/sim/test_activity.py).
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Iterator, Mapping, Sequence

from fairshare.control.telemetry import ActivityReading, GpuReading
from fairshare.policy.settings import IdleSettings

from .generators import sampler
from .jobs import JobSpec, Profile
from .rng import RandomStreams
from .scenario import WorkloadSource

FULLY_ACTIVE = Profile()  # a job of a source without activity, in a run that models others'


def with_activity(source: WorkloadSource, jobs: list[JobSpec], streams: RandomStreams) -> list[JobSpec]:
    """The source's jobs with their activity drawn from its mix (its own stream, "activity:<source>": the
    arrivals, run times and sizes are the same with or without it)."""
    if not source.activity:
        return jobs
    rng = streams.stream(f"activity:{source.name}")
    mix = [(m.weight, Profile(m.utilization, None, m.idle_utilization, m.measured),
            sampler(m.idle_after, rng) if m.idle_after is not None else None) for m in source.activity]
    profiles = draw_profiles(jobs, mix, rng)
    return [dataclasses.replace(j, activity=p) for j, p in zip(jobs, profiles, strict=True)]


def draw_profiles(jobs: Sequence[JobSpec], mix: Sequence[tuple[float, Profile, Callable[[], float] | None]],
                  rng: random.Random) -> list[Profile]:
    """One profile per job: a mix entry by weight, then its idle time from its sampler (if any)."""
    weights = [w for w, _, _ in mix]
    out: list[Profile] = []
    for _ in jobs:
        _, base, idle = mix[rng.choices(range(len(mix)), weights)[0]] if len(mix) > 1 else mix[0]
        if idle is None:
            out.append(base)
        else:
            out.append(Profile(base.utilization, idle(), base.idle_utilization, base.measured))
    return out


def reading_of(profile: Profile, devices: int, pod: str, start: float, now: float,
               settings: IdleSettings) -> tuple[GpuReading, ...]:
    """The workload's series over the window before `now`, as `read_series` reduces them: samples every
    scrapeInterval from the attempt's `start` (wall clock), each at the profile's utilization then."""
    c = settings.scrape_interval_s
    lo = now - settings.window_s
    if now < start:
        return ()
    # Samples at start + k*c, k >= 0, within [lo, now].
    k0 = max(0, math.ceil((lo - start) / c))
    k1 = math.floor((now - start) / c)
    if k1 < k0:
        return tuple(GpuReading(pod, str(i), 0, 0, math.inf, -math.inf, math.nan, None, 0.0)
                     for i in range(devices))
    first, last = start + k0 * c, start + k1 * c
    value = profile.at(last - start)
    h = settings.threshold_percent
    busy: float | None = None
    if value >= h:
        busy = last
    elif profile.utilization >= h and profile.idle_after is not None:
        # The last sample before it went idle.
        k = math.ceil(profile.idle_after / c) - 1
        if k >= k0:
            busy = start + k * c
    gap = c if k1 > k0 else 0.0
    return tuple(GpuReading(pod, str(i), k1 - k0 + 1, 0, first, last, value, busy, gap)
                 for i in range(devices))


class SimActivity(Mapping[str, tuple[GpuReading, ...]]):
    """The readings of the admitted, measured workloads at `now`, computed when the controller asks for one
    (it asks only for its candidates)."""

    def __init__(self, lookup: Callable[[str], tuple[Profile, int, float] | None],
                 keys: Callable[[], list[str]], now: float, settings: IdleSettings) -> None:
        # key -> (profile, devices, the attempt's start on the wall clock); None: not admitted
        self._lookup = lookup
        self._keys = keys
        self._now = now
        self._settings = settings

    def __getitem__(self, key: str) -> tuple[GpuReading, ...]:
        found = self._lookup(key)
        if found is None or not found[0].measured:
            raise KeyError(key)
        profile, devices, start = found
        return reading_of(profile, devices, key.rsplit("/", 1)[-1], start, self._now, self._settings)

    def __iter__(self) -> Iterator[str]:
        for key in self._keys():
            found = self._lookup(key)
            if found is not None and found[0].measured:
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)


def sim_reading(activity: SimActivity, now: float, settings: IdleSettings) -> ActivityReading:
    return ActivityReading(measured_at=now, window=settings.window_s, threshold=settings.threshold_percent,
                           workloads=activity, source="simulated")
