"""A what-if shows when a budget would bite: the simulator measures each budget's consumption and the one
controller (fairshare.control.budgets) alerts at 80% and, at 100%, holds the team's new work and shrinks
its quota through the ordinary transition (drain), restoring it at the period boundary."""

from __future__ import annotations

import re
from decimal import Decimal

from tests.unit.sim.test_policy_scenarios import _doc, _policy, _run

HOUR = 3600.0
WEEK_BOUNDARY = 4 * 24 * HOUR  # simulated time 0 is Thursday 1970-01-01 00:00 UTC: Monday is 4 days later


def _scenario(*, dry_run: bool = False) -> dict[str, object]:
    policy = _policy(
        transitions={"defaults": {"curve": "linear", "duration": "6h", "stepInterval": "2h", "drain": True,
                                  "floor": {"nvidia.com/gpu": 1}}},
        budgets=[{"name": "research-week", "selector": {"team": "research"}, "period": {"calendar": "Week"},
                  "limit": {"gpuHours": "200"}, "dryRun": dry_run,
                  "thresholds": [{"percent": 80, "action": "alert"}, {"percent": 100, "action": "shrink"},
                                 {"percent": 100, "action": "hold"}]}])
    doc = _doc(policy, exp_rate=1.0)
    doc["horizon"] = "5d"
    return doc


def _used(detail: str) -> Decimal:
    match = re.search(r": ([0-9.]+) of 200\.00 nvidia\.com/gpu-hours", detail)
    assert match, detail
    return Decimal(match.group(1))


def test_a_weekly_gpu_budget_alerts_then_holds_and_shrinks_and_restores_on_monday() -> None:
    run = _run(_scenario())
    log = [(a.time, a.kind, a.detail) for a in run.actions if a.target in ("research-week", "research")
           or a.kind.startswith("transition")]
    crossed = [(t, d) for t, k, d in log if k == "budget-crossed"]
    alert_at, alert = crossed[0]
    assert "(80% threshold): alert" in alert and Decimal(160) <= _used(alert) < Decimal(200)
    act_at = crossed[1][0]
    assert alert_at < act_at < WEEK_BOUNDARY
    assert [d.split("(100% threshold): ")[1][:4] for t, d in crossed[1:3]] == ["hold", "shri"]
    assert all(_used(d) >= 200 for _, d in crossed[1:3])
    # The quota steps down from 4 GPUs to the floor (1), never all at once, then comes back on Monday.
    research = [(q.time, q.nominal_milli) for q in run.quota_changes if q.cluster_queue == "research"]
    before = [m for t, m in research if act_at <= t < WEEK_BOUNDARY]
    assert before[0] == 4000 and before[-1] == 1000 and sorted(before, reverse=True) == before
    assert (WEEK_BOUNDARY, 4000) in research
    kinds_on_monday = [k for t, k, _ in log if t == WEEK_BOUNDARY]
    assert kinds_on_monday.count("budget-lifted") == 2 and "release" in kinds_on_monday
    held = [t for t, k, _ in log if k == "hold"]
    assert held == [act_at]


def test_a_dry_run_budget_only_reports_when_it_would_bite() -> None:
    run = _run(_scenario(dry_run=True))
    kinds = [a.kind for a in run.actions]
    assert kinds.count("budget-crossed") >= 3 and "hold" not in kinds
    assert [q for q in run.quota_changes if q.cluster_queue == "research"] == []
