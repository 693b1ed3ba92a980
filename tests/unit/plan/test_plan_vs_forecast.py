"""Seams (a) and (b) of issue 31 inside `qm plan`, on the shipped edit (manifests/samples/
quotapolicy-shift.yaml, over the sample policy running with business starved): the forecast's quota
timeline and victims (replication 1 of the new policy, which starts from the live state) are the transition
plan's steps and victims, and its lost GPU-hours are the victims' GPUs x their run time since their attempt
started (the plan's scenario has no checkpoints: an evicted workload restarts from zero).

With every ledger the plan can meet: none (`--no-ledger`), the issue's (12 lives of 25-second jobs: the
running experiments have outlived every recorded run time of their kind), and one as young as the cluster
(the lives of the work present, none finished). A forecast that draws an end for the running work departs
from the plan, and says where and why."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fairshare.scheduler import SchedulerConfig
from qm.planning import diff, scenario, show, transitions
from qm.planning.inputs import History, Live
from qm.planning.transitions import Plan
from simulations.calibrate import RecordedLife
from simulations.record import RunResult
from simulations.runner import ScenarioOutcome, run_scenario
from tests.unit.plan.sample import (
    BUSINESS,
    EXPERIMENT,
    GPU,
    NOW,
    RESEARCH,
    busy,
    live,
    sample,
    shift,
    short_ledger,
    young_ledger,
)

HORIZON = 2 * 3600.0
SHIFT_FILE = "quotapolicy-shift.yaml"


def plan_and_forecast(history: History | None, tmp: Path, replications: int = 2
                      ) -> tuple[Live, Plan, ScenarioOutcome, show.Forecast]:
    """qm plan's steps (qm/commands/plan.py run) over the sample cluster, without the API server."""
    here = live(sample(), busy())
    new = shift()
    decided = diff.decide_now(new, here, {})
    planned = transitions.plan(here, new, decided, HORIZON, Path(new.path))
    settings = scenario.Settings(HORIZON, replications, 0, None)
    built = scenario.build(here, history, new, [], settings, tmp / "scenario.json")
    outcome = run_scenario(built.loaded, workers=1, progress=False, log=None)
    fc = show.forecast(new.policy, here, outcome, built, planned, built.names[new.path])
    return here, planned, outcome, fc


def first_run(outcome: ScenarioOutcome) -> RunResult:
    return next(r for r in outcome.first_runs if r.variant == SHIFT_FILE)


def young_beside_short_jobs() -> History:
    """The young ledger, and 40 finished 15-second jobs of another team of the cluster: pooled, their tail
    past the time the running experiments have run would end them within a minute."""
    young = young_ledger(busy())
    other = tuple(RecordedLife("other/other", None, NOW - 3600 + 60 * i, 1, ((GPU, 1000),), started=NOW - 3600
                               + 60 * i + 1, ended=NOW - 3600 + 60 * i + 16) for i in range(40))
    return History(young.since, young.until, young.look_back, young.lives + other, young.source)


LEDGERS = {"no ledger": lambda: None, "the issue's 12 lives of 25 s": short_ledger,
           "a ledger as young as the cluster": lambda: young_ledger(busy()),
           "a young ledger beside another team's short jobs": young_beside_short_jobs}


@pytest.mark.parametrize("ledger", list(LEDGERS))
def test_the_forecast_lands_the_transition_plans_steps_and_evicts_its_victims(
    ledger: str, tmp_path: Path
) -> None:
    _, planned, outcome, fc = plan_and_forecast(LEDGERS[ledger](), tmp_path)
    run = first_run(outcome)
    # The plan: research drains (its 4 GPUs are in use), the deadline (90 s) cuts it and evicts both
    # experiments, business receives what research frees at once.
    assert planned.how == transitions.SIMULATED
    research = [s for s in planned.steps
                if s.key is not None and s.key.team == RESEARCH and s.key.resource == GPU]
    assert [(s.at - NOW, s.kind) for s in research][:3] == [(0.0, "start"), (20.0, "wait"), (90.0, "step")]
    granted = [s for s in planned.steps if s.key is not None and s.key.team == BUSINESS and s.kind == "step"]
    assert [(s.at - NOW, s.what) for s in granted] == [
        (90.0, "+3 GPUs at once: 16 GPUs -> 19 GPUs, freed by ai-frontier-research (paired move)")]
    first = [(s.at - NOW, s.victim) for s in planned.evictions if s.at - NOW == 90.0]
    assert sorted(first) == [(90.0, f"{RESEARCH}/exp-0"), (90.0, f"{RESEARCH}/exp-1")]
    # (a) the forecast's quota timeline and victims are the plan's.
    assert [(q.time, q.cluster_queue, q.flavor, q.resource, q.nominal_milli) for q in run.quota_changes] == \
        planned.quotas
    assert [(p.time, p.victim) for p in run.preemptions] == \
        [(s.at - NOW, s.victim) for s in planned.evictions]
    assert fc.against_plan is not None and fc.against_plan.same, fc.against_plan
    # (b) its lost GPU-hours are the victims' GPUs x their run time since their attempt started: at the
    # deadline, each experiment had run since it was admitted (4 min before the read, 10 s apart).
    admitted = {f"{RESEARCH}/exp-{i}": NOW - 240 + 10 * i for i in range(2)}
    for p in run.preemptions:
        if p.time == 90.0:
            assert p.lost_seconds == NOW + 90.0 - admitted[p.victim]
            assert p.gpus_milli == 2000
    lost = sum(p.gpus_milli / 1000 * p.lost_seconds for p in run.preemptions) / 3600
    summary = next(v for v in outcome.summary.variants if v.name == SHIFT_FILE).replications[0]
    assert summary.lost_work.gpu_hours == pytest.approx(lost)
    assert fc.against_plan.lost_gpu_hours == pytest.approx(lost)
    assert planned.lost_gpu_hours == pytest.approx(lost)


def test_a_forecast_whose_running_work_ends_departs_from_the_plan_and_says_where(tmp_path: Path) -> None:
    # A ledger of 40 finished experiments of 5 minutes: the two running for 4 minutes end within a minute in
    # the forecast, so research's steps land before its deadline; the plan (nothing ends) holds them for
    # drain until the deadline cuts research at once.
    lives = tuple(RecordedLife(f"{RESEARCH}/{RESEARCH}", EXPERIMENT, NOW - 86400 + 600 * i, 1,
                               ((GPU, 2000), ("cpu", 4000)), started=NOW - 86400 + 600 * i + 5,
                               ended=NOW - 86400 + 600 * i + 305) for i in range(40))
    history = History(NOW - 28 * 86400, NOW, NOW - 56 * 86400, lives, "test ledger")
    _, planned, outcome, fc = plan_and_forecast(history, tmp_path)
    assert fc.against_plan is not None and not fc.against_plan.same
    assert fc.against_plan.detail.startswith(
        "replication 1 departs from the transition plan at +1m: the plan has ")
    assert "by then 1 workload(s) running at t=0 had finished" in fc.against_plan.detail
    cut = [(q.time, q.nominal_milli) for q in first_run(outcome).quota_changes if q.cluster_queue == RESEARCH]
    assert [t for t, m in cut if t < 90.0 and m < 4000][:1] == [60.0]  # steps land before the deadline
    assert [(t, m) for t, team, _, _, m in planned.quotas if team == RESEARCH] == [(0.0, 4000), (90.0, 1000)]


@pytest.mark.parametrize("ledger", ["no ledger", "the issue's 12 lives of 25 s"])
def test_with_kueue_running_fair_sharing_the_plan_and_forecast_model_it_and_agree(
    ledger: str, tmp_path: Path
) -> None:
    """Kueue's Configuration has fairSharing (qm plan reads it, as the operator does): the decision now, the
    transition plan's run and the forecast's runs all follow it, and (a) still holds between them."""
    here = dataclasses.replace(live(sample(), busy()), scheduler=SchedulerConfig(fair_sharing=True))
    new = shift()
    decided = diff.decide_now(new, here, {})
    assert decided.observed.config.fair_sharing
    planned = transitions.plan(here, new, decided, HORIZON, Path(new.path))
    built = scenario.build(here, LEDGERS[ledger](), new, [], scenario.Settings(HORIZON, 2, 0, None),
                           tmp_path / "scenario.json")
    assert built.loaded.base.scheduler.fair_sharing
    assert list(built.loaded.base.scheduler.preemption_strategies or ()) == [
        "LessThanOrEqualToFinalShare", "LessThanInitialShare"]
    outcome = run_scenario(built.loaded, workers=1, progress=False, log=None)
    fc = show.forecast(new.policy, here, outcome, built, planned, built.names[new.path])
    run = first_run(outcome)
    assert planned.how == transitions.SIMULATED and planned.evictions
    assert [(q.time, q.cluster_queue, q.flavor, q.resource, q.nominal_milli) for q in run.quota_changes] == \
        planned.quotas
    assert [(p.time, p.victim) for p in run.preemptions] == \
        [(s.at - NOW, s.victim) for s in planned.evictions]
    assert fc.against_plan is not None and fc.against_plan.same, fc.against_plan
