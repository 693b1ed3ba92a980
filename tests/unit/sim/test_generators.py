from __future__ import annotations

import itertools
import math
import statistics

import pytest

from simulations.generators import generate
from simulations.rng import RandomStreams
from simulations.scenario import WorkloadSource

DAY = 86400.0


def _source(generator: dict[str, object]) -> WorkloadSource:
    base: dict[str, object] = {
        "arrivals": {"kind": "poisson", "ratePerHour": 60},
        "durations": {"kind": "exponential", "mean": "10m"},
        "requests": [{"resources": {"nvidia.com/gpu": 1}}],
    }
    return WorkloadSource.model_validate(
        {"name": "s", "localQueue": "ns/q", "generator": {**base, **generator}}
    )


def _within(observed: float, expected: float, stderr: float, k: float = 4.0) -> bool:
    return abs(observed - expected) <= k * stderr


def test_poisson_arrival_counts_match_the_rate_within_four_standard_errors() -> None:
    jobs = generate(_source({}), horizon=10 * DAY, rng=RandomStreams(1).stream("a"))
    expected = 60 * 24 * 10  # Var(N) = E(N) for a Poisson count
    assert _within(len(jobs), expected, math.sqrt(expected))
    assert all(a.arrival < b.arrival for a, b in itertools.pairwise(jobs))


@pytest.mark.parametrize(
    ("durations", "mean", "sd"),
    [
        ({"kind": "exponential", "mean": "10m"}, 600.0, 600.0),
        (
            {"kind": "lognormal", "median": "10m", "sigma": 0.5},
            600.0 * math.exp(0.125),
            600.0 * math.exp(0.125) * math.sqrt(math.exp(0.25) - 1),
        ),
        ({"kind": "empirical", "values": [60, 120], "weights": [3, 1]}, 75.0, math.sqrt(0.75 * 0.25) * 60),
        ({"kind": "constant", "value": "5m"}, 300.0, 0.0),
    ],
    ids=["exponential", "lognormal", "empirical", "constant"],
)
def test_duration_samples_have_the_distribution_mean(
    durations: dict[str, object], mean: float, sd: float
) -> None:
    jobs = generate(
        _source({"durations": durations, "count": 5000}), horizon=30 * DAY, rng=RandomStreams(2).stream("d")
    )
    values = [j.duration for j in jobs]
    assert len(values) == 5000
    assert _within(statistics.fmean(values), mean, sd / math.sqrt(len(values)) + 1e-9)


def test_diurnal_arrivals_peak_at_the_peak_hour() -> None:
    src = _source({"arrivals": {"kind": "diurnal", "meanRatePerHour": 30, "amplitude": 0.9, "peakHour": 14}})
    jobs = generate(src, horizon=20 * DAY, rng=RandomStreams(3).stream("x"))
    by_hour = [0] * 24
    for j in jobs:
        by_hour[int(j.arrival % DAY // 3600)] += 1
    assert max(range(24), key=by_hour.__getitem__) in {13, 14, 15}
    assert min(range(24), key=by_hour.__getitem__) in {1, 2, 3}
    expected = 30 * 24 * 20
    assert _within(len(jobs), expected, math.sqrt(expected))


def test_request_and_priority_mixes_follow_their_weights_and_until_stops_arrivals() -> None:
    src = _source(
        {
            "requests": [
                {"weight": 3, "resources": {"nvidia.com/gpu": 1}},
                {"weight": 1, "count": 2, "resources": {"nvidia.com/gpu": "500m", "cpu": 4}},
            ],
            "priorityClasses": [{"priorityClass": "hi", "weight": 1}, {"priorityClass": None, "weight": 1}],
            "until": "2d",
        }
    )
    jobs = generate(src, horizon=10 * DAY, rng=RandomStreams(4).stream("m"))
    n = len(jobs)
    small = sum(j.requests == (("nvidia.com/gpu", 1000),) for j in jobs)
    big = [j for j in jobs if j.count == 2]
    assert big[0].requests == (("cpu", 4000), ("nvidia.com/gpu", 500))
    assert small + len(big) == n
    assert _within(small / n, 0.75, math.sqrt(0.75 * 0.25 / n))
    assert _within(sum(j.priority_class == "hi" for j in jobs) / n, 0.5, math.sqrt(0.25 / n))
    assert max(j.arrival for j in jobs) < 2 * DAY


def test_the_same_seed_gives_the_same_jobs_and_another_seed_different_ones() -> None:
    src = _source({"count": 50})
    a = generate(src, horizon=DAY, rng=RandomStreams(9).stream("s"))
    b = generate(src, horizon=DAY, rng=RandomStreams(9).stream("s"))
    c = generate(src, horizon=DAY, rng=RandomStreams(10).stream("s"))
    assert a == b
    assert a != c
