"""A transition's deadline in the simulator is no longer undone by borrowing (issue 31, item 4): the seed's
shift (research 4 -> 1 GPU, business 16 -> 19 in one cohort) with a short transition, research running long
experiments on what business leaves idle, business a daily cycle of short jobs. Every workload the policy
controller evicts is checked with the futile-eviction check (tests/futile.py) that the journey runs on a
live cluster's Events; the check itself is tested here on Events shaped as Kueue posts them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from simulations.model import simulate_run
from simulations.record import RunResult
from simulations.runner import build_jobs
from simulations.scenario import Scenario
from tests.builders import SeedShiftBuilder
from tests.futile import (
    Readmission,
    assert_no_futile_evictions,
    from_simulation,
    futile_evictions,
    holdings_from_events,
    readmissions,
)

GPU = SeedShiftBuilder.GPU
HOLD = 60.0  # the policy's victimHold (SeedShiftBuilder)


def _scenario(spec: SeedShiftBuilder, business_per_hour: float) -> dict[str, Any]:
    def source(name: str, team: str, arrivals: dict[str, Any], durations: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "localQueue": f"{team}/{team}", "generator": {
            "arrivals": arrivals, "durations": durations, "requests": [{"resources": {GPU: 1}}],
            "priorityClasses": [{"priorityClass": "biz" if team == "business" else "exp"}]}}

    teams = spec.after()["spec"]["teams"]  # type: ignore[index]
    return {
        "name": "seed-shift", "seed": 5, "horizon": "4d", "sampleInterval": "1h",
        "cluster": {"quotaPolicy": spec.before()},
        "workloads": [
            source("exp", "research", {"kind": "poisson", "ratePerHour": 1.2},
                   {"kind": "lognormal", "median": "10h", "sigma": 0.5}),
            source("biz", "business",
                   {"kind": "diurnal", "meanRatePerHour": business_per_hour, "amplitude": 0.9,
                    "peakHour": 14},
                   {"kind": "exponential", "mean": "2h"})],
        "events": [{"at": "1d", "policyPatch": {"spec": {"teams": teams}}}],
    }


def _run(spec: SeedShiftBuilder, business_per_hour: float) -> RunResult:
    sc = Scenario.model_validate(_scenario(spec, business_per_hour))
    return simulate_run(sc, build_jobs(sc, Path("."), 0), base_dir=Path("."), variant="v", replication=0)


SHIFT = SeedShiftBuilder().transition(duration="2h", stepInterval="1h", deadline="3h", maxVictimsPerHour=4)


@pytest.mark.parametrize(
    ("spec", "business_per_hour", "beneficiaries"),
    [
        pytest.param(SHIFT, 4.0, True,
                     id="evicted for another team's work that Kueue cannot admit, never straight back"),
        pytest.param(SeedShiftBuilder().transition(duration="2h", stepInterval="1h", deadline="3h",
                                                   maxVictimsPerHour=4).research_limit(0), 4.0, False,
                     id="evicted because the borrowing limit says the usage must fall, never back above it"),
    ],
)
def test_a_deadline_eviction_is_not_undone_by_borrowing(
    spec: SeedShiftBuilder, business_per_hour: float, beneficiaries: bool
) -> None:
    run = _run(spec, business_per_hour)
    evicted = [p for p in run.preemptions if p.by == "transition"]
    assert len(evicted) >= 5, "the scenario must make the deadline evict"
    assert all(p.preemptor.startswith("business/") for p in evicted) == beneficiaries
    assert all(p.preemptor == "quota transition" for p in evicted) == (not beneficiaries)
    # Not undone within the policy's hold (the journey's bound), and with the limit not at all.
    assert_no_futile_evictions(from_simulation(run), within=HOLD if beneficiaries else run.horizon)


def test_a_team_that_borrows_what_nobody_needs_past_the_deadline_loses_no_work() -> None:
    run = _run(SHIFT, 0.05)  # business hardly submits anything: research borrows its idle GPUs
    deadline = [a for a in run.actions if a.kind == "transition-deadline-passed"]
    assert ([p for p in run.preemptions if p.by == "transition"], len(deadline)) == ([], 1)
    assert "evicted only when another team's pending work needs" in deadline[0].detail


# --- the check itself ------------------------------------------------------------------------------------


def _event(ns: str, name: str, reason: str, at: str) -> dict[str, Any]:
    return {"involvedObject": {"kind": "Workload", "namespace": ns, "name": name}, "reason": reason,
            "eventTime": at, "metadata": {"creationTimestamp": at}}


def test_the_check_finds_the_live_clusters_futile_eviction_in_kueues_events() -> None:
    """The live defect: two experiments evicted at the deadline, re-admitted within 2 s on borrowed GPUs
    while research held 6 against its new 1-GPU quota (Events as Kueue v0.19.2 posts them: QuotaReserved,
    EvictedDueToDeactivated, as the API returns them; the Python client's objects work the same)."""
    events = [_event("r", f"exp-{i}", "QuotaReserved", "2026-12-05T10:00:00.000000Z") for i in range(6)]
    for i in (4, 5):
        events += [_event("r", f"exp-{i}", "EvictedDueToDeactivated", "2026-12-05T10:10:00.000000Z"),
                   _event("r", f"exp-{i}", "QuotaReserved", "2026-12-05T10:10:01.500000Z")]
    events.append(_event("b", "serve", "QuotaReserved", "2026-12-05T10:05:00.000000Z"))

    def team(key: str) -> str | None:
        return "research" if key.startswith("r/") else "business"

    held = holdings_from_events(events, team, lambda _: 1000)
    at = datetime(2026, 12, 5, 10, 10, tzinfo=UTC).timestamp()
    found = readmissions([("r/exp-4", at), ("r/exp-5", at)], held,
                         lambda t, _: 1000 if t == "research" else 19000)
    assert found == [Readmission("r/exp-4", "research", at, at + 1.5, 6000, 1000),
                     Readmission("r/exp-5", "research", at, at + 1.5, 6000, 1000)]
    assert futile_evictions(found, within=HOLD) == found
    with pytest.raises(AssertionError, match=r"r/exp-4 evicted at .* re-admitted 1.5 s later while research "
                                             r"held 6 GPUs against its quota of 1 GPU"):
        assert_no_futile_evictions(found, within=HOLD)
    # Re-admitted once the team is within its quota, or after the window: not futile.
    assert futile_evictions([Readmission("r/x", "research", 0.0, 1.0, 1000, 1000),
                             Readmission("r/y", "research", 0.0, HOLD + 1, 6000, 1000)], within=HOLD) == []
