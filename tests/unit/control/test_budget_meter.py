"""The simulator's budget meter (fairshare.control.budget_meter) counts exactly what the ledger counts: what
the selected workloads hold, for as long as they hold it, within the budget's period."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from fairshare.control.budget_meter import BudgetMeter
from fairshare.models import FlavorResource
from fairshare.policy import QuotaPolicy, parse_policy

GPU = "nvidia.com/gpu"
A100 = FlavorResource("a100", GPU)
CPU = FlavorResource("a100", "cpu")
MARCH = dt.datetime(2026, 3, 31, 23, 0, tzinfo=dt.UTC).timestamp()


def _policy(*budgets: dict[str, Any]) -> QuotaPolicy:
    return parse_policy({
        "apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy", "metadata": {"name": "p"},
        "spec": {
            "flavors": [{"name": "a100", "pricePerUnitHour": {GPU: "2.5", "cpu": "0.0004"}}],
            "teams": [{"name": "research", "namespaces": ["r"], "quotas": [
                {"flavor": "a100", "resources": [{"name": GPU, "nominal": 8},
                                                 {"name": "cpu", "nominal": 64}]}]}],
            "budgets": [{"name": b.pop("name"), "thresholds": [{"percent": 100, "action": "alert"}], **b}
                        for b in budgets],
        }})


def _used(meter: BudgetMeter, now: float) -> dict[str, Decimal]:
    return {name: u.consumed for name, u in meter.usage(now).items()}


def test_gpu_hours_and_money_of_a_team_in_a_calendar_month_count_only_this_month() -> None:
    meter = BudgetMeter(_policy(
        {"name": "gpu", "selector": {"team": "research"}, "period": {"calendar": "Month"},
         "limit": {"gpuHours": "100"}},
        {"name": "money", "selector": {"team": "research"}, "period": {"calendar": "Month"},
         "limit": {"cost": "100"}}))
    # 2 GPUs + 4 cores from 23:00 on March 31st; April starts at midnight UTC.
    meter.start("r/a", "research", {}, {A100: 2000, CPU: 4000}, MARCH)
    assert _used(meter, MARCH + 1800) == {"gpu": Decimal("1.000000000"), "money": Decimal("2.500800000")}
    meter.stop("r/a", MARCH + 5400)  # 30 min into April
    assert _used(meter, MARCH + 7200) == {"gpu": Decimal("1.000000000"), "money": Decimal("2.500800000")}


def test_a_rolling_window_forgets_what_ended_before_it_and_counts_the_part_inside() -> None:
    meter = BudgetMeter(_policy({"name": "w", "selector": {"team": "research"}, "period": {"rolling": "1h"},
                                 "limit": {"gpuHours": "10"}}))
    meter.start("r/a", "research", {}, {A100: 1000}, 0.0)
    meter.stop("r/a", 1800.0)
    meter.start("r/b", "research", {}, {A100: 3000}, 1800.0)
    assert _used(meter, 3600.0) == {"w": Decimal("2.000000000")}  # 0.5 + 1.5
    assert _used(meter, 4500.0) == {"w": Decimal("2.500000000")}  # window [900, 4500]: 0.25 + 2.25
    meter.stop("r/b", 4500.0)
    assert _used(meter, 9000.0) == {"w": Decimal("0E-9")}


def test_a_label_budget_counts_only_the_workloads_of_its_project() -> None:
    meter = BudgetMeter(_policy({"name": "recsys", "selector": {"project": "recsys"},
                                 "period": {"rolling": "1d"}, "limit": {"gpuHours": "10"}}))
    meter.start("r/a", "research", {"project": "recsys"}, {A100: 1000}, 0.0)
    meter.start("r/b", "research", {"project": "vision"}, {A100: 4000}, 0.0)
    assert _used(meter, 3600.0) == {"recsys": Decimal("1.000000000")}


def test_a_new_policy_generation_keeps_an_unchanged_budget_and_a_changed_one_counts_what_is_held() -> None:
    budget = {"name": "gpu", "selector": {"team": "research"}, "period": {"rolling": "1d"},
              "limit": {"gpuHours": "10"}}
    meter = BudgetMeter(_policy(dict(budget)))
    meter.start("r/a", "research", {}, {A100: 1000}, 0.0)
    meter.stop("r/a", 1800.0)
    meter.start("r/b", "research", {}, {A100: 2000}, 1800.0)
    kept = BudgetMeter.follow(meter, _policy(dict(budget)))
    changed = BudgetMeter.follow(meter, _policy(dict(budget, limit={"gpuHours": "20"})))
    # Unchanged: the whole count; changed: r/b from when it took its GPUs (r/a was released before).
    assert (_used(kept, 3600.0), _used(changed, 3600.0)) == ({"gpu": Decimal("1.500000000")},
                                                              {"gpu": Decimal("1.000000000")})
