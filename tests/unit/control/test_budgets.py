"""Budgets in the controller (fairshare.control.budgets): the one definition of a period, what each
threshold makes due and for how long, and the decision that carries it out through the transitions."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from fairshare.control import (
    BudgetCrossed,
    BudgetLifted,
    BudgetUsage,
    CancelTransition,
    HistoryBook,
    HoldQueues,
    Observed,
    PolicyRules,
    StartTransition,
    WakeAt,
    decide,
)
from fairshare.control.budgets import Period, budget_rules, consumed, evaluate, hold_teams, period_at
from fairshare.control.objects import in_force, kueue_objects
from fairshare.manifests import parse_manifests
from fairshare.models import QuotaKey, ResourceQuota
from fairshare.policy import QuotaPolicy, parse_policy, render, spec_quotas
from fairshare.policy.status import BudgetStatus, QuotaPolicyStatus
from fairshare.snapshot import Snapshot

GPU = "nvidia.com/gpu"
KEY = QuotaKey.of("research", "gpu", GPU)


def _at(text: str) -> float:
    return dt.datetime.fromisoformat(text).timestamp()


def _policy(*thresholds: tuple[int, str], period: dict[str, Any] | None = None, dry_run: bool = False,
            floor: int = 1, limit: dict[str, Any] | None = None) -> QuotaPolicy:
    return parse_policy({
        "apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy", "metadata": {"name": "p"},
        "spec": {
            "flavors": [{"name": "gpu", "pricePerUnitHour": {GPU: "2.5"}}],
            "teams": [
                {"name": "research", "namespaces": ["r1", "r2"], "cohort": "org", "quotas": [
                    {"flavor": "gpu", "resources": [{"name": GPU, "nominal": 4, "borrowingLimit": 2,
                                                     "lendingLimit": 3}]}]},
                {"name": "business", "namespaces": ["b"], "cohort": "org", "quotas": [
                    {"flavor": "gpu", "resources": [{"name": GPU, "nominal": 4}]}]}],
            "transitions": {"defaults": {"duration": "30s", "stepInterval": "10s", "drain": True,
                                         "floor": {GPU: floor}}},
            "budgets": [{"name": "research-gpu", "selector": {"team": "research"},
                         "period": period or {"calendar": "Month", "timeZone": "Europe/Paris"},
                         "limit": limit or {"gpuHours": "100"}, "dryRun": dry_run,
                         "thresholds": [{"percent": p, "action": a} for p, a in thresholds]}],
        }})


@pytest.mark.parametrize(("period", "t", "expected"), [
    # Europe/Paris is UTC+1 on March 1st and UTC+2 from March 29th (daylight saving): local midnights.
    ({"calendar": "Month", "timeZone": "Europe/Paris"}, "2026-03-15T12:00:00+00:00",
     Period(_at("2026-02-28T23:00:00+00:00"), _at("2026-03-31T22:00:00+00:00"))),
    ({"calendar": "Month", "timeZone": "UTC"}, "2026-12-31T23:30:00+00:00",
     Period(_at("2026-12-01T00:00:00+00:00"), _at("2027-01-01T00:00:00+00:00"))),
    # 2026-11-29 is a Sunday: its week started on Monday the 23rd.
    ({"calendar": "Week", "timeZone": "UTC"}, "2026-11-29T12:00:00+00:00",
     Period(_at("2026-11-23T00:00:00+00:00"), _at("2026-11-30T00:00:00+00:00"))),
    ({"calendar": "Week", "timeZone": "America/New_York"}, "2026-11-30T03:00:00+00:00",
     Period(_at("2026-11-23T05:00:00+00:00"), _at("2026-11-30T05:00:00+00:00"))),
    ({"rolling": "30d"}, "2026-11-29T12:00:00+00:00",
     Period(_at("2026-11-29T12:00:00+00:00") - 30 * 86400, None)),
], ids=["month-in-paris-across-dst", "december-to-january", "iso-week", "week-in-new-york", "rolling"])
def test_the_period_of_a_budget_is_its_calendar_unit_in_its_time_zone_or_a_window(
        period: dict[str, Any], t: str, expected: Period) -> None:
    (rule,) = budget_rules(_policy((80, "alert"), period=period))
    assert period_at(rule, _at(t)) == expected


def test_a_consumption_measured_in_the_previous_month_is_no_measurement_of_this_one() -> None:
    (rule,) = budget_rules(_policy((80, "alert"), period={"calendar": "Month", "timeZone": "UTC"}))
    now = _at("2026-12-01T00:00:05+00:00")
    assert consumed(rule, BudgetUsage(_at("2026-11-30T23:59:58+00:00"), Decimal(90)), now) is None
    assert consumed(rule, BudgetUsage(_at("2026-12-01T00:00:01+00:00"), Decimal(3)), now) == Decimal(3)


NOW = _at("2026-03-15T12:00:00+00:00")
SPEC = spec_quotas(_policy((80, "alert")))


def _eval(policy: QuotaPolicy, used: str | None, previous: list[BudgetStatus] | None = None,
          now: float = NOW, held_now: frozenset[str] = frozenset()) -> Any:
    """`held_now`: the teams whose LocalQueues are held in the cluster (as the last decision left them)."""
    usage = {} if used is None else {"research-gpu": BudgetUsage(now - 5, Decimal(used))}
    return evaluate(policy, budget_rules(policy), spec_quotas(policy), usage, previous or [], now, held_now)


def test_below_every_threshold_nothing_is_due_and_the_status_shows_the_figures() -> None:
    out = _eval(_policy((80, "alert"), (100, "shrink")), "79.5")
    (rec,) = out.records
    assert (out.actions, out.targets, out.held_teams) == ([], {}, frozenset())
    assert (rec.used, rec.limit, rec.unit, rec.used_ratio, rec.crossed, rec.enforcing, rec.period_start,
            rec.period_end) == ("79.50", "100.00", "GPU-hours", 0.795, [], [],
                                "2026-02-28T23:00:00Z", "2026-03-31T22:00:00Z")
    assert out.wake == _at("2026-03-31T22:00:00+00:00")  # the period's end


def test_an_alert_threshold_is_reported_once_per_period() -> None:
    policy = _policy((80, "alert"), (100, "shrink"))
    first = _eval(policy, "80")
    again = _eval(policy, "85", first.records, NOW + 60)
    assert [type(a).__name__ for a in first.actions] == ["BudgetCrossed"]
    (crossed,) = first.actions
    assert (crossed.percent, crossed.action, crossed.used, crossed.limit, crossed.dry_run) == (
        80, "alert", "80.00", "100.00", False)
    assert crossed.why == ("budget research-gpu: 80.00 of 100.00 GPU-hours used in the period "
                           "(80% threshold): alert")
    assert (again.actions, again.targets, [c.percent for c in again.records[0].crossed]) == ([], {}, [80])


def test_at_100_percent_shrink_lowers_the_borrowing_limit_and_the_nominal_quota_to_the_floor() -> None:
    out = _eval(_policy((80, "alert"), (100, "shrink")), "100")
    assert [(a.percent, a.action) for a in out.actions if isinstance(a, BudgetCrossed)] == \
        [(80, "alert"), (100, "shrink")]
    # Kueue: borrowingLimit 0 borrows nothing more; lendingLimit stays <= nominal.
    assert out.targets == {KEY: ResourceQuota(1000, 0, 1000)}
    assert out.records[0].enforcing == ["shrink"]


def test_deprioritize_only_stops_borrowing_and_hold_holds_every_local_queue_of_the_team() -> None:
    out = _eval(_policy((90, "deprioritize"), (100, "hold")), "120")
    assert out.targets == {KEY: ResourceQuota(4000, 0, 3000)}
    assert (out.held_teams, hold_teams(budget_rules(_policy((100, "hold"))))) == (
        frozenset({"research"}), frozenset({"research"}))
    assert [a for a in out.actions if isinstance(a, HoldQueues)] == [
        HoldQueues("research", ("r1/research", "r2/research"), True, "a budget's hold threshold is reached")]
    calm = _eval(_policy((90, "deprioritize"), (100, "hold")), "50", out.records, NOW + 60, out.held_teams)
    assert (calm.held_teams, calm.targets) == (frozenset(), {})
    assert [(type(a).__name__, getattr(a, "action", None)) for a in calm.actions] == [
        ("BudgetLifted", "deprioritize"), ("BudgetLifted", "hold"), ("HoldQueues", None)]


def test_a_dry_run_budget_reports_every_threshold_and_enforces_none() -> None:
    out = _eval(_policy((100, "shrink"), (100, "hold"), dry_run=True), "150")
    assert [(a.action, a.dry_run) for a in out.actions if isinstance(a, BudgetCrossed)] == \
        [("hold", True), ("shrink", True)]
    assert (out.targets, out.held_teams, out.records[0].enforcing) == ({}, frozenset(), [])
    assert "(dry-run: reported only)" in out.actions[0].why


def test_a_new_calendar_period_lifts_the_shrink_and_restarts_the_crossings() -> None:
    policy = _policy((80, "alert"), (100, "shrink"), period={"calendar": "Month", "timeZone": "UTC"})
    march = _eval(policy, "130")
    april = _at("2026-04-01T00:00:01+00:00")
    after = evaluate(policy, budget_rules(policy), spec_quotas(policy), {}, march.records, april)
    assert (after.targets, after.records[0].crossed, after.records[0].used) == ({}, [], None)
    assert after.actions == [BudgetLifted("research-gpu", "research", "shrink", "a new period started")]


def test_an_unmeasured_consumption_keeps_what_the_same_period_said() -> None:
    policy = _policy((100, "shrink"))
    shrunk = _eval(policy, "101")
    restarted = _eval(policy, None, shrunk.records, NOW + 30)  # e.g. the operator restarted; ledger not read
    assert (restarted.actions, restarted.targets) == ([], shrunk.targets)


def test_a_rolling_budget_is_rechecked_every_sixtieth_of_its_window_while_a_threshold_is_reached() -> None:
    policy = _policy((80, "alert"), period={"rolling": "60s"})
    assert _eval(policy, "90").wake == NOW + 1.0
    assert _eval(policy, "10").wake is None
    fell = _eval(policy, "10", _eval(policy, "90").records)
    assert (fell.actions, fell.records[0].crossed) == ([], [])  # an alert lifts nothing; re-crossing reports


def test_a_cost_budget_counts_money() -> None:
    out = _eval(_policy((100, "alert"), limit={"cost": "250"}), "250")
    assert (out.records[0].unit, [a.percent for a in out.actions]) == ("USD", [100])


# --------------------------------------------------------------------------------------------- decide


def _observed(policy: QuotaPolicy, used: str, at: float) -> Observed:
    snap = Snapshot.from_state(parse_manifests(render(policy), check_references=False))
    return Observed(snap, {}, HistoryBook.new(policy, at).graph,
                    budget_usage={"research-gpu": BudgetUsage(at, Decimal(used))})


def test_the_decision_shrinks_through_the_transition_and_restores_at_the_period_boundary() -> None:
    policy = _policy((80, "alert"), (100, "shrink"), period={"calendar": "Month", "timeZone": "UTC"})
    rules = PolicyRules.of(policy)
    t0 = _at("2026-03-31T23:59:00+00:00")
    book = HistoryBook.new(policy, t0)
    seen = _observed(policy, "100", t0)
    d0 = decide(rules, seen, QuotaPolicyStatus(), t0, history=book, generation=1)
    kinds = [type(a).__name__ for a in d0.actions]
    assert "StartTransition" in kinds and kinds.count("BudgetCrossed") == 2
    start = next(a for a in d0.actions if isinstance(a, StartTransition))
    assert (start.key, start.before, start.target, start.steps) == (KEY, 4000, 1000, 3)
    assert in_force(rules, seen, d0.actions).quotas[KEY] == ResourceQuota(4000, 0, 1000)  # nominal steps down
    assert d0.status.budgets[0].enforcing == ["shrink"]
    assert any(isinstance(a, WakeAt) for a in d0.actions)
    # The first step (10 s later) cuts one GPU; the new month lifts the shrink and restores the spec.
    seen = _observed(policy, "101", t0 + 10)
    d1 = decide(rules, seen, d0.status, t0 + 10, history=book, generation=1)
    assert in_force(rules, seen, d1.actions).quotas[KEY].nominal == 3000
    t2 = _at("2026-04-01T00:00:00+00:00")
    seen = _observed(policy, "101", t0 + 50)
    d2 = decide(rules, seen, d1.status, t2, history=book, generation=1)
    assert [a for a in d2.actions if isinstance(a, BudgetLifted)] == [
        BudgetLifted("research-gpu", "research", "shrink", "a new period started")]
    assert any(isinstance(a, CancelTransition) for a in d2.actions)
    assert in_force(rules, seen, d2.actions).quotas[KEY] == ResourceQuota(4000, 2000, 3000)  # at once
    assert in_force(rules, seen, d2.actions).held_quotas(rules) == {}


def test_a_budget_hold_is_rendered_as_stop_policy_on_the_teams_local_queues() -> None:
    policy = _policy((100, "hold"))
    rules = PolicyRules.of(policy)
    book = HistoryBook.new(policy, NOW)
    seen = _observed(policy, "100", NOW)
    held = decide(rules, seen, None, NOW, history=book)
    objects = kueue_objects(rules, in_force(rules, seen, held.actions))
    queues = {k.namespace: m["spec"] for k, m in objects.items() if k.kind == "LocalQueue"}
    # Kueue's default stopPolicy is None: a queue no hold acts on may carry it or not.
    assert {ns: (spec["clusterQueue"], spec.get("stopPolicy", "None")) for ns, spec in queues.items()} == {
        "r1": ("research", "Hold"), "r2": ("research", "Hold"), "b": ("business", "None")}
