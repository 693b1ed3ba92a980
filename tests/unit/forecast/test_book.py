"""status.forecasts from the operator's decisions (queue_manager/forecast.py ForecastBook), driven by the
real controller's transition step (a cut of 4 -> 1 GPUs over 30 s) and a runner in thread isolation (the
callables are quick and cannot hang; the process isolation is tests/unit/forecast/test_runner.py's)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from fairshare.control.actions import StartTransition
from fairshare.control.rules import PolicyRules
from fairshare.control.transitions import step_transitions
from fairshare.models import FlavorResource, QuotaKey, ResourceQuota
from fairshare.policy import QuotaPolicy, parse_policy
from fairshare.policy.status import Forecast, ForecastPhase, TransitionStatus
from queue_manager.forecast import (
    NO_LEDGER,
    ForecastBook,
    ForecastRequest,
    ForecastResult,
    ForecastRunner,
    latest_failure,
    seed_of,
)
from queue_manager.kueue_config import FairSharingSetting
from tests.unit.forecast import helpers

T0 = 1_800_000_000.0
GPU = QuotaKey.of("research", "gpu", "nvidia.com/gpu")
FR = FlavorResource("gpu", "nvidia.com/gpu")


def team(name: str, gpus: int) -> dict[str, Any]:
    return {"name": name, "namespaces": [name[0]], "cohort": "org",
            "quotas": [{"flavor": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominal": gpus}]}]}


def policy(*, generation: int = 2, forecasts: dict[str, Any] | None = None) -> QuotaPolicy:
    return parse_policy({
        "apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy",
        "metadata": {"name": "p", "generation": generation, "uid": "uid-p"},
        "spec": {
            "flavors": [{"name": "gpu"}],
            "teams": [team("research", 1), team("business", 4)],
            "transitions": {"defaults": {"duration": "30s", "stepInterval": "10s", "curve": "linear"}},
            "forecasts": forecasts if forecasts is not None else {"enabled": True,
                                                                  "metrics": ["wait_p95", "gpu_hours"]},
        }})


def cut(p: QuotaPolicy, at: float = T0) -> tuple[list[Any], list[TransitionStatus]]:
    """The controller's first step of the cut (research 4 -> 1 GPUs): its actions and records."""
    res = step_transitions(PolicyRules.of(p), p.metadata.generation or 1, [],
                           {"research": {FR: ResourceQuota(4000)}}, {GPU: 0}, at)
    assert any(isinstance(a, StartTransition) for a in res.actions)
    return list(res.actions), list(res.records)


@pytest.fixture
def book() -> Iterator[ForecastBook]:
    runner = ForecastRunner(helpers.square_forecaster, helpers.constant_scorer, isolation="thread")
    yield ForecastBook(runner, clock=time.monotonic)
    runner.close()


def settle(book: ForecastBook, p: QuotaPolicy, entries: list[Forecast], now: float,
           **kw: Any) -> list[Forecast]:
    """Steps (no new actions) until the runner has nothing of the policy in flight."""
    deadline = time.monotonic() + 10
    while True:
        entries = book.step(p, "uid-p", p.metadata.generation, [], [], entries, now, **kw)
        busy = any(book.runner.knows(k, "p", e.policy_generation or 0) for e in entries
                   for k in ("forecast", "score"))
        if not busy or time.monotonic() > deadline:
            return entries
        time.sleep(0.02)


def test_a_transition_started_is_forecast_over_its_duration_then_scored_once_it_has_passed(
    book: ForecastBook,
) -> None:
    p = policy()
    actions, records = cut(p)
    [entry] = book.step(p, "uid-p", 2, actions, records, [], T0)
    assert (entry.phase, entry.policy_generation, entry.at, entry.horizon_end_at) == (
        ForecastPhase.COMPUTING, 2, T0, T0 + 30)
    [entry] = settle(book, p, [entry], T0 + 1)
    assert entry.phase == ForecastPhase.FORECAST
    # helpers.square_forecaster: 2 metrics -> 4.0 ± 0.5, interval [3, 5].
    assert [(v.metric, v.predicted, v.ci95, v.low, v.high) for v in entry.values] == [
        ("wait_p95", 4.0, 0.5, 3.0, 5.0), ("gpu_hours", 4.0, 0.5, 3.0, 5.0)]
    assert settle(book, p, [entry], T0 + 29) == [entry]  # the window has not passed: nothing asked
    scored: list[tuple[str, Forecast]] = []
    [entry] = settle(book, p, [entry], T0 + 30, on_scored=lambda name, f: scored.append((name, f)))
    assert entry.phase == ForecastPhase.SCORED and scored == [("p", entry)]
    # helpers.constant_scorer: 4.2 observed, nothing for the last metric.
    assert [(v.observed, v.within_ci, v.within_interval, v.error_ratio) for v in entry.values] == [
        (4.2, True, True, pytest.approx(0.05)), (None, None, None, None)]


@pytest.mark.parametrize("fair_sharing", [True, False], ids=["fair sharing", "classical"])
def test_the_forecast_asked_for_models_kueue_as_the_controller_does(fair_sharing: bool) -> None:
    asked: list[ForecastRequest] = []

    def recording(request: ForecastRequest) -> ForecastResult:
        asked.append(request)
        return helpers.square_forecaster(request)

    runner = ForecastRunner(recording, helpers.constant_scorer, isolation="thread")
    try:
        book = ForecastBook(runner, clock=time.monotonic)
        p = policy()
        actions, records = cut(p)
        kueue = FairSharingSetting(fair_sharing, "test", ("LessThanInitialShare",) if fair_sharing else ())
        [entry] = book.step(p, "uid-p", 2, actions, records, [], T0, kueue=kueue)
        [entry] = settle(book, p, [entry], T0 + 1)
    finally:
        runner.close()
    assert entry.phase == ForecastPhase.FORECAST
    assert [(r.fair_sharing, r.fair_sharing_strategies) for r in asked] == [
        (fair_sharing, ("LessThanInitialShare",) if fair_sharing else ())]


def test_nothing_is_forecast_when_the_policy_does_not_ask_or_for_a_step_that_starts_nothing(
    book: ForecastBook,
) -> None:
    p = policy(forecasts={"enabled": False})
    actions, records = cut(p)
    assert book.step(p, "uid-p", 2, actions, records, [], T0) == []
    p = policy()
    assert book.step(p, "uid-p", 2, [], records, [], T0) == []


def test_one_forecast_per_generation_however_many_reconciles_see_its_start(book: ForecastBook) -> None:
    p = policy()
    actions, records = cut(p)
    first = book.step(p, "uid-p", 2, actions, records, [], T0)
    again = book.step(p, "uid-p", 2, actions, records, first, T0 + 0.5)
    assert len(again) == 1 and again[0].policy_generation == 2


def test_a_forecast_lost_to_a_restart_is_failed_not_left_computing(book: ForecastBook) -> None:
    p = policy()
    stored = [Forecast(policy_generation=2, phase=ForecastPhase.COMPUTING, at=T0, horizon_end_at=T0 + 30)]
    [entry] = book.step(p, "uid-p", 2, [], [], stored, T0 + 5)
    assert entry.phase == ForecastPhase.FAILED
    assert entry.message == ("the operator restarted while it was computed (its inputs were the cluster at "
                             "the transition's start)")
    assert latest_failure([entry]) == entry.message


def test_a_transition_without_duration_and_no_horizon_is_a_failed_forecast_saying_what_to_set(
    book: ForecastBook,
) -> None:
    p = policy()
    actions, records = cut(p)
    no_plan = [r.model_copy(update={"plan": None}) for r in records]
    [entry] = book.step(p, "uid-p", 2, actions, no_plan, [], T0)
    assert (entry.phase, entry.message) == (
        ForecastPhase.FAILED, "no horizon: the transition has no duration; set spec.forecasts.horizon")
    p = policy(forecasts={"enabled": True, "horizon": "2h"})
    [entry] = book.step(p, "uid-p", 2, actions, no_plan, [], T0)
    assert (entry.phase, entry.horizon_end_at) == (ForecastPhase.COMPUTING, T0 + 7200)


def test_a_failed_forecast_is_recorded_with_its_reason(book: ForecastBook) -> None:
    book.runner.forecaster = helpers.failing_forecaster
    p = policy()
    actions, records = cut(p)
    entries = settle(book, p, book.step(p, "uid-p", 2, actions, records, [], T0), T0 + 1)
    assert entries[0].phase == ForecastPhase.FAILED
    message = entries[0].message
    assert message is not None and message.startswith("ValueError: no team 'ghost' in p")


def test_without_a_ledger_a_passed_window_is_not_scored_and_says_why() -> None:
    runner = ForecastRunner(helpers.square_forecaster, None, isolation="thread")
    try:
        book = ForecastBook(runner, scoring=False)
        p = policy()
        actions, records = cut(p)
        entries = settle(book, p, book.step(p, "uid-p", 2, actions, records, [], T0), T0 + 1)
        [entry] = settle(book, p, entries, T0 + 31)
        assert (entry.phase, entry.message) == (ForecastPhase.FORECAST, NO_LEDGER)
    finally:
        runner.close()


def test_only_the_latest_ten_forecasts_are_kept(book: ForecastBook) -> None:
    p = policy(generation=20)
    actions, records = cut(p)
    old = [Forecast(policy_generation=g, phase=ForecastPhase.SCORED) for g in range(1, 11)]
    entries = book.step(p, "uid-p", 20, actions, records, old, T0)
    assert [e.policy_generation for e in entries] == [*range(2, 11), 20]


def test_the_seed_is_stable_per_policy_and_generation() -> None:
    assert seed_of("p", "uid", 3) == seed_of("p", "uid", 3) != seed_of("p", "uid", 4)
