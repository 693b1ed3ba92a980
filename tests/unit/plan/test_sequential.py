"""`qm plan` stops replicating once its gate is decided (simulations/gate.py: Sequential): the rule, and the
outcome it stops at being the very outcome of running exactly that many replications."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulations import runner
from simulations.executor import RunJob
from simulations.gate import MIN_REPLICATIONS, Outcome, evaluate, evaluate_arms, parse_condition, sequential
from simulations.loader import LoadedScenario, ResolvedVariant
from simulations.metrics import parse_ref
from simulations.runner import RunBrief, ScenarioOutcome, Stopped, run_brief, run_scenario
from simulations.scenario import Scenario
from simulations.stats import _T975, t_two_sided
from simulations.summary import Interval
from simulations.whatif import compare
from tests.unit.plan.world import GPU, policy
from tests.unit.sim.test_parallel import _without_wall_time

MAXIMUM = 6
WAIT = parse_ref("team_wait_p95[research]")


def _loaded() -> LoadedScenario:
    """Current (research 4 GPUs) vs a cut to 1 GPU at t=0, research busy with 1-GPU jobs (test_gate.py's)."""
    doc = policy(transitions={"defaults": {"curve": "immediate", "drain": False}})
    for team in doc["spec"]["teams"]:
        team.pop("cohort")  # no borrowing: the cut bites
    base = {
        "name": "sequential", "seed": 11, "replications": MAXIMUM, "horizon": "2d",
        "cluster": {"quotaPolicy": doc},
        "workloads": [{"name": "r", "localQueue": "research/research", "generator": {
            "arrivals": {"kind": "poisson", "ratePerHour": 2},
            "durations": {"kind": "exponential", "mean": "1h30m"},
            "requests": [{"resources": {GPU: 1}}],
            "priorityClasses": [{"priorityClass": "experiment"}]}}],
    }
    cut = {**base, "events": [{"at": 0, "policyPatch": {"spec": {"teams": [{"name": "research", "quotas": [
        {"flavor": "gpu", "resources": [{"name": GPU, "nominal": 1}]}]}]}}}]}
    current = Scenario.model_validate(base)
    return LoadedScenario(Path("sequential.yaml"), current, (
        ResolvedVariant("current", "", True, current),
        ResolvedVariant("new", "", False, Scenario.model_validate(cut))))


@pytest.fixture(scope="module")
def loaded() -> LoadedScenario:
    return _loaded()


@pytest.fixture(scope="module")
def full(loaded: LoadedScenario) -> ScenarioOutcome:
    """Every replication, no rule, one process."""
    return _run(loaded)


def _run(loaded: LoadedScenario, *conditions: str, replications: int | None = None,
         workers: int = 1) -> ScenarioOutcome:
    rule = sequential([parse_condition(c) for c in conditions], "new", MAXIMUM) if conditions else None
    return run_scenario(loaded, workers=workers, progress=False, until=rule, replications=replications)


def _delta(outcome: ScenarioOutcome) -> Interval:
    """The new policy's paired change in research's p95 wait."""
    arms = [(v.name, v.description, v.baseline, v.replications) for v in outcome.summary.variants]
    new = next(v for v in compare(arms, [WAIT]) if v.name == "new")
    return new.deltas[WAIT.key]


def _same(a: ScenarioOutcome, b: ScenarioOutcome) -> None:
    # (less what measures the machine, not the model: wall seconds, workloads per second)
    assert _without_wall_time(a.summary.model_dump()) == _without_wall_time(b.summary.model_dump())
    assert a.digests == b.digests


def test_a_gate_decided_at_the_first_look_stops_there_with_the_outcome_of_exactly_that_many(
        loaded: LoadedScenario) -> None:
    # research waits behind 1 GPU instead of 4: its p95 wait rises far beyond +10% in every replication.
    early = _run(loaded, "team_wait_p95[research] > +10%", "lost_gpu_hours > 0")
    assert early.stopped == Stopped(ran=MIN_REPLICATIONS, maximum=MAXIMUM, decided=True,
                                    level=pytest.approx(1 - 0.05 / 4), looks=4)
    assert early.summary.replications == MIN_REPLICATIONS
    _same(early, _run(loaded, replications=MIN_REPLICATIONS))
    verdicts = evaluate([parse_condition("team_wait_p95[research] > +10%")], early.summary.variants, "new")
    assert [v.outcome for v in verdicts] == [Outcome.HOLDS]


def test_an_undecided_gate_runs_every_replication_asked_with_the_outcome_of_a_run_without_the_rule(
        loaded: LoadedScenario) -> None:
    # The bound at the change's own mean over the maximum: its interval straddles it at every look.
    full = _run(loaded)
    assert full.stopped is None and full.summary.replications == MAXIMUM
    mean = _delta(full).mean
    assert mean is not None
    undecided = _run(loaded, f"team_wait_p95[research] > +{mean:.4f}")
    assert undecided.stopped == Stopped(ran=MAXIMUM, maximum=MAXIMUM, decided=False,
                                        level=pytest.approx(1 - 0.05 / 4), looks=4)
    _same(undecided, full)


def _failing_after_the_first_look(job: RunJob) -> RunBrief:
    """run_brief, but a replication past the first look fails (in the pool's worker)."""
    if job.replication >= MIN_REPLICATIONS:
        raise RuntimeError(f"{job.label} failed")
    return run_brief(job)


def test_a_pool_starts_the_next_looks_runs_early_and_stops_at_the_same_look_with_the_same_outcome(
        loaded: LoadedScenario) -> None:
    # Two processes start the next look's runs while the first look's last ones run: the rule still reads
    # each look whole, in order, and stops where one process stops.
    early = _run(loaded, "team_wait_p95[research] > +10%", "lost_gpu_hours > 0", workers=2)
    assert early.stopped is not None and early.stopped.ran == MIN_REPLICATIONS and early.stopped.decided
    _same(early, _run(loaded, "team_wait_p95[research] > +10%", "lost_gpu_hours > 0"))


def test_a_pool_run_of_an_undecided_gate_reads_every_look_with_the_outcome_of_one_process(
        loaded: LoadedScenario, full: ScenarioOutcome) -> None:
    mean = _delta(full).mean
    assert mean is not None
    pooled = _run(loaded, f"team_wait_p95[research] > +{mean:.4f}", workers=2)
    assert pooled.stopped is not None and pooled.stopped.ran == MAXIMUM and not pooled.stopped.decided
    _same(pooled, full)


def test_a_failure_in_a_look_the_rule_never_reads_is_dropped_with_its_runs_and_one_it_reads_is_raised(
        loaded: LoadedScenario, full: ScenarioOutcome, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "run_brief", _failing_after_the_first_look)
    # Decided at the first look: the later looks' runs (started early, failing) are never read.
    early = _run(loaded, "team_wait_p95[research] > +10%", "lost_gpu_hours > 0", workers=2)
    assert early.stopped is not None and early.stopped.ran == MIN_REPLICATIONS
    # Undecided there: the second look is read, and its first failure finished (in job order among those
    # finished together) is the error.
    mean = _delta(full).mean
    assert mean is not None
    with pytest.raises(RuntimeError, match=f"(current|new) #{MIN_REPLICATIONS + 1} failed"):
        _run(loaded, f"team_wait_p95[research] > +{mean:.4f}", workers=2)


def test_the_looks_start_at_three_replications_and_split_the_five_percent_between_them() -> None:
    c = [parse_condition("lost_gpu_hours > 0")]
    assert sequential(c, "new", MIN_REPLICATIONS) is None  # nothing to stop before the maximum
    assert sequential([], "new", 10) is None  # no gate: nothing to decide
    rule = sequential(c, "new", 5)
    assert rule is not None and rule.looks == (3, 4, 5) and rule.level == pytest.approx(1 - 0.05 / 3)


def test_a_look_reads_a_wider_interval_than_the_verdict_shown(loaded: LoadedScenario) -> None:
    # At 3 replications, research's p95 wait change with a bound just below its 95% interval: the verdict
    # shown (95%) holds, the look (98.75%, about twice as wide with 2 degrees of freedom) does not decide.
    three = _run(loaded, replications=3)
    arms = [(v.name, v.description, v.baseline, v.replications) for v in three.summary.variants]
    delta = _delta(three)
    assert delta.mean is not None and delta.ci95 is not None and delta.ci95 > 0
    bound = delta.mean - delta.ci95 * 1.01
    cond = [parse_condition(f"team_wait_p95[research] > {bound:+.6f}")]
    assert [v.outcome for v in evaluate_arms(cond, arms, "new")] == [Outcome.HOLDS]
    assert [v.outcome for v in evaluate_arms(cond, arms, "new", level=1 - 0.05 / 4)] == [Outcome.UNCERTAIN]


@pytest.mark.parametrize("df", sorted(_T975))
def test_the_t_quantile_matches_the_printed_table(df: int) -> None:
    assert t_two_sided(0.95, df) == pytest.approx(_T975[df], abs=6e-4)


def test_the_t_quantile_at_other_levels_matches_published_values() -> None:
    # t_0.995 with 1 df, t_0.99 with 2 and 10 df (Abramowitz & Stegun, table 26.10)
    assert t_two_sided(0.99, 1) == pytest.approx(63.657, abs=1e-3)
    assert t_two_sided(0.98, 2) == pytest.approx(6.965, abs=1e-3)
    assert t_two_sided(0.99, 10) == pytest.approx(3.169, abs=1e-3)


