"""The --fail-if language (simulations/gate.py): parsed, never evaluated; a condition holds only when the
whole 95% confidence interval is beyond its bound."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fairshare.errors import InputError
from simulations.gate import Op, Outcome, check_names, evaluate, parse_condition
from simulations.loader import LoadedScenario, ResolvedVariant
from simulations.runner import run_scenario
from simulations.scenario import Scenario
from tests.unit.plan.world import GPU, policy

PARSED = [
    # text, metric key, op, value, change, percent
    ("wait_p95[business] > +10%", "wait_p95[business]", Op.GT, 0.10, True, True),
    ("lost_gpu_hours > 50", "lost_gpu_hours", Op.GT, 50.0, False, False),
    ("goodput[research] < -200", "goodput[research]", Op.LT, -200.0, True, False),
    ("team_wait_p50[research] >= 30m", "team_wait_p50[research]", Op.GE, 0.5, False, False),
    ("wait_p95 [business]<=+1h30m", "wait_p95[business]", Op.LE, 1.5, True, False),
    ("evictions[research] > 0", "evictions[research]", Op.GT, 0.0, False, False),
    ("utilization < -5%", "utilization", Op.LT, -0.05, True, True),
]


@pytest.mark.parametrize(("text", "key", "op", "value", "change", "percent"), PARSED)
def test_a_condition_is_parsed_into_its_metric_bound_and_kind(
        text: str, key: str, op: Op, value: float, change: bool, percent: bool) -> None:
    c = parse_condition(text)
    assert (c.ref.key, c.op, c.value, c.change, c.percent) == (key, op, pytest.approx(value), change, percent)


BAD = [
    ("wait_p95[business] = 1", "must be METRIC OP BOUND"),
    ("__import__('os') > 1", "must be NAME or NAME[ARGUMENT]"),
    ("wait_p99[business] > 1", "unknown metric 'wait_p99'"),
    ("wait_p95[business] > 10%", "a percentage is a change vs the current policy"),
    ("lost_gpu_hours > 5h", "lost_gpu_hours is measured in GPU-h: a unit 'h' does not apply"),
    ("wait_p95[x] > 1.5d", "weeks and days are whole numbers"),
    ("utilization[research] > 1", "utilization is cluster-wide"),
    ("demand_met > 1", "demand_met needs a team in brackets"),
    ("lost_gpu_hours > ", "must be METRIC OP BOUND"),
]


@pytest.mark.parametrize(("text", "why"), BAD)
def test_a_bad_condition_is_one_line_naming_the_flag_and_the_expression(text: str, why: str) -> None:
    with pytest.raises(InputError) as info:
        parse_condition(text)
    line = info.value.one_line()
    assert line.startswith("field --fail-if: ") and why in line and repr(text) in line


def test_a_condition_naming_a_class_or_team_the_policy_lacks_is_refused_before_simulating() -> None:
    with pytest.raises(InputError) as info:
        check_names([parse_condition("wait_p95[gold] > +1%")], classes={"business", "experiment"},
                    teams={"research"})
    assert info.value.one_line() == ("field --fail-if: no priority class 'gold' in the policy; known: "
                                     "business, experiment (got 'wait_p95[gold] > +1%')")


def _variants() -> Any:
    """Current (research 4 GPUs) vs a cut to 1 GPU at t=0, research busy with 1-GPU jobs, 4 replications."""
    doc = policy(transitions={"defaults": {"curve": "immediate", "drain": False}})
    base = {
        "name": "gate",
        "seed": 11,
        "replications": 4,
        "horizon": "2d",
        "cluster": {"quotaPolicy": doc},
        "workloads": [{"name": "r", "localQueue": "research/research", "generator": {
            "arrivals": {"kind": "poisson", "ratePerHour": 2},
            "durations": {"kind": "exponential", "mean": "1h30m"},
            "requests": [{"resources": {GPU: 1}}],
            "priorityClasses": [{"priorityClass": "experiment"}]}}],
    }
    cut = {**base, "events": [{"at": 0, "policyPatch": {"spec": {"teams": [{"name": "research", "quotas": [
        {"flavor": "gpu", "resources": [{"name": GPU, "nominal": 1}]}]}]}}}]}
    for team in doc["spec"]["teams"]:
        team.pop("cohort")  # no borrowing: the cut bites
    current = Scenario.model_validate(base)
    loaded = LoadedScenario(Path("gate.yaml"), current, (
        ResolvedVariant("current", "", True, current),
        ResolvedVariant("new", "", False, Scenario.model_validate(cut))))
    return run_scenario(loaded, workers=1).summary.variants


@pytest.fixture(scope="module")
def variants() -> Any:
    return _variants()


OUTCOMES = [
    ("team_wait_p95[research] > +10%", Outcome.HOLDS),  # waits behind 1 GPU instead of 4
    ("team_wait_p95[research] < -10%", Outcome.DOES_NOT_HOLD),
    ("finished[research] < -5%", Outcome.HOLDS),
    ("lost_gpu_hours > 0", Outcome.DOES_NOT_HOLD),  # nothing is evicted: no preemption, no deadline
    ("goodput[business] < -1", Outcome.DOES_NOT_HOLD),  # business has no work: no change at all
    ("team_wait_p95[research] > 1000h", Outcome.DOES_NOT_HOLD),
]


@pytest.mark.parametrize(("text", "outcome"), OUTCOMES)
def test_a_condition_holds_only_when_its_whole_confidence_interval_is_beyond_the_bound(
        variants: Any, text: str, outcome: Outcome) -> None:
    (verdict,) = evaluate([parse_condition(text)], variants, "new")
    assert verdict.outcome == outcome, verdict.detail
    assert "95% CI" in verdict.detail


def test_a_change_straddling_its_bound_is_uncertain(variants: Any) -> None:
    # The change in research's p95 wait, with its own CI half-width as the bound: the CI straddles it.
    (probe,) = evaluate([parse_condition("team_wait_p95[research] > +0")], variants, "new")
    mean = float(probe.detail.split()[1])
    (verdict,) = evaluate([parse_condition(f"team_wait_p95[research] > +{mean:.2f}")], variants, "new")
    assert verdict.outcome == Outcome.UNCERTAIN, verdict.detail
