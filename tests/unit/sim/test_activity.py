"""GPU activity in the simulator (simulations/activity.py): per-source profiles drawn per job, utilization as
allocated and as active in the summary, and spec.idle run by the controller on the telemetry the simulator
hands it. The seam with the operator: the reading the simulator computes from a profile is the one the
core's `read_series` makes from the samples the profile would give (what the operator reads from
Prometheus)."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest

from fairshare.control.telemetry import GpuReading, read_series
from fairshare.policy import parse_policy
from fairshare.policy.settings import idle_settings
from simulations.activity import reading_of
from simulations.jobs import Profile
from simulations.metrics import headline
from simulations.runner import build_jobs
from simulations.scenario import Scenario
from simulations.summary import summarize
from tests.unit.policy.helpers import sample
from tests.unit.sim.test_policy_scenarios import GPU, _doc, _policy, _run

SCRAPE, WINDOW = 30.0, 1800.0


def _settings() -> Any:
    doc = sample()
    doc["spec"]["idle"] = {"enabled": True, "thresholdPercent": 10, "window": "30m", "scrapeInterval": "30s"}
    return idle_settings(parse_policy(doc))


def _sampled(profile: Profile, start: float, now: float) -> GpuReading:
    """What the operator would read: a sample every scrape interval from the attempt's start, reduced by the
    core over the window before `now`."""
    samples = []
    k = 0
    while start + k * SCRAPE <= now:
        t = start + k * SCRAPE
        if t >= now - WINDOW:
            samples.append((t, profile.at(t - start)))
        k += 1
    return read_series(samples, pod="p", gpu="0", scale=1.0, threshold=10.0)


@pytest.mark.parametrize("profile", [
    pytest.param(Profile(80.0), id="busy throughout"),
    pytest.param(Profile(60.0, 2700.0, 2.0), id="busy for 45 min, then idle at 2%"),
    pytest.param(Profile(60.0, 2710.0, 0.0), id="idle after 45 min 10 s (between two samples)"),
    pytest.param(Profile(3.0), id="idle from the start"),
    pytest.param(Profile(60.0, 600.0, 40.0), id="busy, then less busy but above the threshold"),
])
@pytest.mark.parametrize("ran", [0.0, 15.0, 600.0, 1800.0, 2730.0, 4500.0, 4515.0, 9000.0])
def test_the_simulators_reading_of_a_profile_is_the_cores_reduction_of_its_samples(
    profile: Profile, ran: float
) -> None:
    start = 1_800_000_000.0
    [got] = reading_of(profile, 1, "p", start, start + ran, _settings())
    want = _sampled(profile, start, start + ran)
    assert dataclasses.astuple(got)[2:] == pytest.approx(dataclasses.astuple(want)[2:], nan_ok=True)


def _idle_doc(**idle: Any) -> dict[str, Any]:
    """Research runs 4 one-GPU jobs, one of each profile below, for 10 h each; spec.idle on."""
    policy = _policy(preemption={"experimentPriorityThreshold": 1000, "minRuntime": "10m"},
                     idle={"enabled": True, "dryRun": False, "thresholdPercent": 10, "window": "30m",
                           "grace": "15m", **idle})
    doc = _doc(policy, horizon="1d")
    doc["workloads"] = [{
        "name": "exp", "localQueue": "r/q",
        "generator": {"arrivals": {"kind": "poisson", "ratePerHour": 60}, "count": 4,
                      "durations": {"kind": "constant", "value": "10h"},
                      "requests": [{"resources": {GPU: 1}}], "priorityClasses": [{"priorityClass": "exp"}]},
        "activity": [{"utilization": 80}]}]
    return doc


PROFILES = [Profile(80.0), Profile(60.0, 3600.0, 0.0), Profile(70.0, 3600.0, 0.0, measured=False),
            Profile(60.0, 3600.0, 20.0)]


def _run_profiles(doc: dict[str, Any]) -> Any:
    from simulations.model import simulate_run

    sc = Scenario.model_validate(doc)
    jobs = [dataclasses.replace(j, activity=p) for j, p in zip(build_jobs(sc, Path("."), 0), PROFILES,
                                                                strict=True)]
    return simulate_run(sc, jobs, base_dir=Path("."), variant="v", replication=0), jobs


def test_an_idle_experiment_is_warned_and_reclaimed_and_busy_or_unmeasured_ones_run_to_their_end() -> None:
    run, jobs = _run_profiles(_idle_doc())
    keys = [j.key for j in jobs]
    actions = [(a.kind, a.target) for a in run.actions if a.kind.startswith(("idle", "evict"))]
    # Only the measured one idle at 0% after an hour (the unmeasured one idles too, but its activity is
    # unknown; the last stays above the threshold): warned once its last busy sample (59 min 30 s, the
    # scrape before it went idle) is a window (30 min) old, reclaimed a grace (15 min) later.
    assert actions == [("idle-warned", keys[1]), ("evict", keys[1])]
    [warned] = [a for a in run.actions if a.kind == "idle-warned"]
    [evicted] = [a for a in run.actions if a.kind == "evict"]
    start = run.admitted_at[1]
    assert (warned.time - start, evicted.time - start) == (3570.0 + 1800.0, 3570.0 + 1800.0 + 900.0)
    [p] = run.preemptions
    assert (p.victim, p.by) == (keys[1], "idle")
    s = summarize(run)
    # The others (busy, unmeasured, above the threshold) ran their 10 h; the reclaimed one is not pending.
    assert (s.cluster.finished, s.cluster.reclaimed, s.cluster.pending_at_horizon) == (3, 1, 0)
    # Active GPU-hours: 80% x 10 h + 60% x 1 h (then 0% until reclaimed) + 70% x 1 h (then 0%, unmeasured)
    # + (60% x 1 h + 20% x 9 h).
    assert s.cluster.active_gpu_hours == pytest.approx(8.0 + 0.6 + 0.7 + 0.6 + 1.8)
    assert s.cluster.gpu_hours == pytest.approx(30.0 + (3570.0 + 1800.0 + 900.0) / 3600.0)


def test_dry_run_reclaims_nothing_and_a_run_without_idle_rules_warns_nothing() -> None:
    run, _ = _run_profiles(_idle_doc(dryRun=True))
    assert [a.kind for a in run.actions if a.kind.startswith(("idle", "evict"))] == ["idle-warned",
                                                                                     "evict-dry-run"]
    assert run.preemptions == []
    doc = _idle_doc()
    del doc["cluster"]["quotaPolicy"]["spec"]["idle"]
    run, _ = _run_profiles(doc)
    assert [a.kind for a in run.actions if a.kind.startswith(("idle", "evict"))] == []
    s = summarize(run)
    assert s.capacity.active_gpu_hours == pytest.approx(8.0 + 0.6 + 0.7 + 0.6 + 1.8)  # measured all the same


def test_a_run_without_activity_reports_no_active_figures_and_its_jobs_are_drawn_as_before() -> None:
    doc = _doc(_policy(), horizon="2d")
    run = _run(doc)
    s = summarize(run)
    assert (s.capacity.active_gpu_hours, s.capacity.utilization_active, s.cluster.active_gpu_hours) == \
        (None, None, None)
    rows = {r.key for r in headline(s)}
    assert not any(k.startswith(("utilization_active", "active_gpu", "allocated_idle")) for k in rows)
    # The same source with activity: the same arrivals, run times and sizes (its own random stream).
    with_activity = _doc(_policy(), horizon="2d")
    with_activity["workloads"][0]["activity"] = [{"weight": 1, "utilization": 90},
                                                 {"weight": 1, "utilization": 50,
                                                  "idleAfter": {"kind": "exponential", "mean": "1h"}}]
    plain = build_jobs(Scenario.model_validate(doc), Path("."), 0)
    drawn = build_jobs(Scenario.model_validate(with_activity), Path("."), 0)
    assert [dataclasses.replace(j, activity=None) for j in drawn] == plain
    profiles = [j.activity for j in drawn if j.source == "exp"]
    assert all(p is not None for p in profiles)
    assert {p.utilization for p in profiles if p is not None} == {90.0, 50.0}
    assert all(p.idle_after is not None and p.idle_after > 0 for p in profiles if p and p.utilization == 50.0)
    s = summarize(_run(with_activity))
    assert s.capacity.utilization_active is not None
    assert s.capacity.utilization_active < s.capacity.utilization  # active below allocated
    assert all(math.isfinite(g.active_gpu_hours or 0.0) for g in s.queues.values())
    rows = {r.key for r in headline(s)}
    assert {"utilization_active", "active_gpu_hours", "allocated_idle_gpu_hours"} <= rows
