"""Calibration (simulations/calibrate.py): rates, weekly profiles, shapes and durations recovered from a
synthetic ledger whose generating process is known, each within a stated error:

- a group's rate within 3 Poisson standard errors (sqrt(n)/W);
- each hour of day's factor within 4 of its standard errors (1/sqrt(expected arrivals in that hour over
  the window)), the weekend factor likewise;
- a shape's share of its queue's arrivals within 3 binomial standard errors;
- a duration median within 10% (Kaplan-Meier over finished and still-running lives; the naive median of
  the finished ones alone is shown to miss by more, so the test can fail).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path

import pytest

from simulations.calibrate import (
    EPOCH_MONDAY,
    HOUR,
    MIN_DURATIONS,
    RecordedLife,
    calibrate,
    exposure,
    fit_profile,
    hour_of_week,
    kaplan_meier,
    replay_sources,
)
from simulations.runner import build_jobs
from simulations.scenario import Scenario

GPU = "nvidia.com/gpu"
DAY = 24 * HOUR
UNTIL = EPOCH_MONDAY + 2900 * 7 * DAY  # a Monday 00:00 UTC
SINCE = UNTIL - 28 * DAY
RATE = 30.0  # arrivals per hour in research/research
SHAPES = [((1, 1000), 0.7, 2 * HOUR), ((2, 4000), 0.3, 8 * HOUR)]  # (count, GPU milli), share, median


def day_factor(hour: int) -> float:
    return 1.0 + 0.5 * math.cos(2 * math.pi * (hour - 14) / 24)


def week_factor(weekday: int) -> float:  # Monday = 0; weekends at 0.4, the week's mean is 1
    return 0.4 if weekday >= 5 else (7 - 2 * 0.4) / 5


def synthetic_ledger(seed: int = 7) -> list[RecordedLife]:
    """Poisson arrivals by thinning at RATE x day x week factors; shapes by share; lognormal durations
    (sigma 0.7) by shape; every life starts at once and runs to its end or past UNTIL (still running)."""
    rng = random.Random(seed)
    peak = RATE * 1.5 * week_factor(0)
    out = []
    t = SINCE
    while True:
        t += rng.expovariate(peak / HOUR)
        if t >= UNTIL:
            break
        b = hour_of_week(t)
        if rng.random() * peak > RATE * day_factor(b % 24) * week_factor(b // 24):
            continue
        (count, gpu), _, median = rng.choices(SHAPES, weights=[s[1] for s in SHAPES])[0]
        d = rng.lognormvariate(math.log(median), 0.7)
        ended = t + d if t + d <= UNTIL else None
        out.append(RecordedLife("research/research", "experiment", t, count,
                                (("cpu", 8000 * gpu // 1000), (GPU, gpu)), started=t, ended=ended,
                                running=ended is None))
    return out


@pytest.fixture(scope="module")
def lives() -> list[RecordedLife]:
    return synthetic_ledger()


def test_each_groups_rate_is_recovered_within_three_poisson_standard_errors(
        lives: list[RecordedLife]) -> None:
    fit = calibrate(lives, since=SINCE, until=UNTIL)
    hours = 28 * 24
    assert {g.shape.describe() for g in fit.groups} == {"1x1 GPU", "2x4 GPU"}
    for g in fit.groups:
        share = next(s[1] for s in SHAPES if s[0] == (g.shape.count, g.shape.primary_milli))
        true = RATE * share
        assert abs(g.rate_per_hour - true) <= 3 * math.sqrt(true * hours) / hours


def test_a_shapes_share_is_recovered_within_three_binomial_standard_errors(lives: list[RecordedLife]) -> None:
    fit = calibrate(lives, since=SINCE, until=UNTIL)
    n = sum(g.arrivals for g in fit.groups)
    for g in fit.groups:
        p = next(s[1] for s in SHAPES if s[0] == (g.shape.count, g.shape.primary_milli))
        assert abs(g.arrivals / n - p) <= 3 * math.sqrt(p * (1 - p) / n)
        assert dict(g.requests)["cpu"] == 8 * g.shape.primary_milli  # the other requests: the medians


def test_the_hour_of_day_and_weekday_profile_is_recovered_within_four_standard_errors(
        lives: list[RecordedLife]) -> None:
    fit = calibrate(lives, since=SINCE, until=UNTIL)
    profile = fit.profiles["research/research"]
    for h in range(24):
        fitted = sum(profile[d * 24 + h] for d in range(7)) / 7
        expected = RATE * 28 * day_factor(h)  # arrivals in this hour of day over the window
        assert abs(fitted - day_factor(h)) <= 4 * day_factor(h) / math.sqrt(expected), h
    weekend = sum(profile[5 * 24:]) / 48
    expected = RATE * 8 * 24 * week_factor(5)
    assert abs(weekend - week_factor(5)) <= 4 * week_factor(5) / math.sqrt(expected)


def test_a_sparse_queue_follows_the_clusters_profile() -> None:
    expo = exposure(SINCE, UNTIL)
    cluster = tuple(day_factor(b % 24) for b in range(168))
    three_night_arrivals = [SINCE + 3 * HOUR + k * DAY for k in range(3)]
    fitted = fit_profile(three_night_arrivals, expo, cluster)
    assert fitted[14] > fitted[3]  # 168 pseudo-arrivals by the cluster's rhythm outweigh three at 03:00


def exponential_lives(rng: random.Random, n: int, *, window: float, mean: float) -> list[tuple[float, bool]]:
    """(run time, ended) at UNTIL of `n` lives started uniformly in the `window` before it, with exponential
    durations of `mean`: the ones still running are right-censored at their run time so far."""
    obs = []
    for _ in range(n):
        start = UNTIL - rng.uniform(0, window)
        d = rng.expovariate(1 / mean)
        obs.append((min(d, UNTIL - start), start + d <= UNTIL))
    return obs


def test_a_duration_median_is_recovered_within_ten_percent_with_long_lives_still_running() -> None:
    # Exponential durations of mean 10 h over two days of arrivals: a fifth of the lives are still running
    # at the end of the window. Kaplan-Meier counts them; the finished ones alone are the short ones.
    obs = exponential_lives(random.Random(3), 3000, window=2 * DAY, mean=10 * HOUR)
    true = 10 * HOUR * math.log(2)
    km = kaplan_meier(obs)
    assert km is not None and km.censored > 500
    assert abs(km.median() - true) <= 0.10 * true
    naive = sorted(d for d, ended in obs if ended)[sum(1 for _, e in obs if e) // 2]
    assert abs(naive - true) > 0.10 * true


def test_a_workload_running_longer_than_a_young_ledger_has_seen_is_forecast_to_run_on_not_to_end_at_once(
) -> None:
    # Half a day of ledger, durations exponential of mean 10 h: most lives are still running, so the
    # estimate leaves most of its mass past the longest observation. A workload that has run 11 h has a
    # median residual of 10 h x ln 2 (memoryless); putting that mass at the longest observation (about 12 h)
    # forecast it to end within the hour.
    from simulations.initial import draw_work
    from simulations.scenario import EmpiricalDurations

    obs = exponential_lives(random.Random(5), 2000, window=12 * HOUR, mean=10 * HOUR)
    km = kaplan_meier(obs)
    assert km is not None and km.censored > 1000
    spec = EmpiricalDurations(kind="empirical", values=list(km.values))
    draws = random.Random(1)
    residual = sorted(draw_work(spec, draws, 11 * HOUR) - 11 * HOUR for _ in range(2001))[1000]
    true = 10 * HOUR * math.log(2)
    assert abs(residual - true) <= 0.25 * true


def test_the_fitted_durations_of_each_shape_have_its_median(lives: list[RecordedLife]) -> None:
    fit = calibrate(lives, since=SINCE, until=UNTIL)
    for g in fit.groups:
        median = next(s[2] for s in SHAPES if s[0] == (g.shape.count, g.shape.primary_milli))
        assert g.durations is not None and g.durations.pooled is None
        assert abs(g.durations.median() - median) <= 0.10 * median


def test_a_group_with_too_few_lives_draws_from_its_queues_pool() -> None:
    lives = [RecordedLife("a/main", "experiment", SINCE + k * HOUR, 1, ((GPU, 1000),),
                          started=SINCE + k * HOUR, ended=SINCE + k * HOUR + 600) for k in range(10)]
    lives.append(RecordedLife("a/main", "experiment", SINCE + 50 * HOUR, 1, ((GPU, 8000),),
                              started=SINCE + 50 * HOUR, ended=SINCE + 60 * HOUR))
    fit = calibrate(lives, since=SINCE, until=UNTIL)
    big = next(g for g in fit.groups if g.shape.primary_milli == 8000)
    assert MIN_DURATIONS > 1 and big.durations is not None
    assert big.durations.pooled == "pool:a/main:experiment"
    assert fit.work_from("a/main", "experiment", 1, [(GPU, 8000)]) == big.name
    assert fit.work_from("a/main", "business", 1, [(GPU, 2000)]) == "pool:a/main"
    assert fit.work_from("b/main", None, 1, [(GPU, 1000)]) == "cluster"


def test_the_calibrated_sources_regenerate_the_recorded_arrival_counts(lives: list[RecordedLife]) -> None:
    fit = calibrate(lives, since=SINCE, until=UNTIL)
    doc = {
        "name": "round-trip",
        "horizon": "28d",
        "seed": 5,
        "cluster": {"objects": [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                                 "metadata": {"name": "gpu"}}]},
        "workloads": fit.sources(SINCE),
    }
    sc = Scenario.model_validate(doc)
    jobs = build_jobs(sc, Path("."), 0)
    counts = Counter(j.source for j in jobs)
    for g in fit.groups:
        n = g.arrivals
        assert abs(counts[g.name] - n) <= 4 * math.sqrt(2 * n)  # two Poisson counts of the same mean
    # ... at the recorded hours: the busiest hour of day is the one the ledger had.
    by_hour = Counter(int(((j.arrival + SINCE - EPOCH_MONDAY) % DAY) // HOUR) for j in jobs)
    assert max(by_hour, key=lambda h: by_hour[h]) in (13, 14, 15)


def test_replay_places_the_recorded_lives_at_their_offset_with_their_run_times() -> None:
    lives = [
        RecordedLife("a/main", None, SINCE + 100, 1, ((GPU, 1000),), started=SINCE + 200, ended=SINCE + 800),
        RecordedLife("a/main", None, SINCE + 300, 1, ((GPU, 1000),), started=SINCE + 400, running=True),
        *[RecordedLife("a/main", None, SINCE - DAY + k, 1, ((GPU, 1000),), started=SINCE - DAY + k,
                       ended=SINCE - DAY + k + 500) for k in range(MIN_DURATIONS)],
    ]
    fit = calibrate(lives, since=SINCE, until=UNTIL, durations_since=SINCE - 2 * DAY)
    (source,) = replay_sources(lives, fit, since=SINCE, until=UNTIL)
    first, second = source["recorded"]
    assert (first["at"], first["work"]) == (100.0, 600.0)
    assert second["at"] == 300.0 and second["workAtLeast"] == UNTIL - SINCE - 400
    assert second["workFrom"] == fit.work_from("a/main", None, 1, [(GPU, 1000)])


def _exposure_hour_by_hour(since: float, until: float) -> list[float]:
    """The definition: each second of [since, until) in its hour of the week."""
    out = [0.0] * 168
    t = since
    while t < until:
        end = min(t - ((t - 4 * 86400) % 3600) + 3600, until)
        out[int(((t - 4 * 86400) % (7 * 86400)) // 3600)] += end - t
        t = end
    return out


@pytest.mark.parametrize("span", [0.0, 1800.0, 5 * 86400 + 1234.5, 3 * 7 * 86400, 9 * 7 * 86400 + 77777.0])
def test_exposure_counts_whole_weeks_at_once_and_the_rest_hour_by_hour(span: float) -> None:
    since = 1_800_001_234.0
    assert exposure(since, since + span) == pytest.approx(_exposure_hour_by_hour(since, since + span))
    assert sum(exposure(since, since + span)) == pytest.approx(span)


def test_a_ten_year_window_costs_no_more_than_a_week() -> None:
    # qm plan --history 3650d: 87,600 hours, one pass over the 168 bins plus at most a week of hours.
    expo = exposure(0.0, 3650 * 86400.0)
    assert sum(expo) == pytest.approx(3650 * 86400.0)
    assert max(expo) - min(expo) <= 3600.0


def test_with_nothing_finished_the_run_times_run_on_instead_of_ending_at_the_oldest_ones_age() -> None:
    # A ledger as young as the work: three lives still running for 4, 3 and 2 minutes. The estimate's mass
    # past them has no rate to extrapolate: it runs on, so the youngest is not ended at the oldest's age.
    from simulations.durations import RUNS_ON
    from simulations.initial import draw_work
    from simulations.scenario import EmpiricalDurations

    km = kaplan_meier([(240.0, False), (180.0, False), (120.0, False)])
    assert km is not None and set(km.values) == {RUNS_ON} and km.median_text() == "runs on (none finished)"
    spec = EmpiricalDurations(kind="empirical", values=list(km.values))
    assert draw_work(spec, random.Random(0), at_least=120.0) == RUNS_ON
