"""The budget and ledger alerts of the PrometheusRule (manifests/monitoring/prometheusrule.yaml) under
`promtool test rules` (Debian's promtool, as tests/integration/
test_monitoring_rules.py runs it): nearly spent from 80% and below 100%, spent from 100%, an action in
force named by its label, a dry-run budget (used but not enforcing) never "enforced", and the ledger's
database down only after 5 minutes."""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.integration.test_monitoring_rules import RULE, _alert, _promtool, _series

NEAR, SPENT = "QueueManagerBudgetNearlySpent", "QueueManagerBudgetSpent"
ENFORCED, DB_DOWN = "QueueManagerBudgetEnforced", "QueueManagerLedgerDatabaseDown"


def _budget(budget: str, team: str, ratio: str, enforcing: str | None = None) -> list[dict[str, str]]:
    labels = {"policy": "p", "budget": budget, "team": team}
    out = [_series("qm_budget_used_ratio", ratio, **labels)]
    if enforcing is not None:
        out.append(_series("qm_budget_enforcing", enforcing, **labels, action="shrink"))
    return out


TESTS: list[dict[str, Any]] = [
    {   # research climbs 0.70 -> 1.30 by 0.05 a minute: >= 0.8 from 2m, >= 1 from 6m; business stays at 0.5;
        # a dry-run budget is over its limit but enforces nothing.
        "interval": "1m",
        "input_series": [
            *_budget("research-week", "research", "0.7+0.05x12", enforcing="0 0 0 0 0 0 1 1 1 1 1 1 1"),
            *_budget("business-week", "business", "0.5x12", enforcing="0x12"),
            *_budget("research-money", "research", "1.3x12", enforcing="0x12"),
        ],
        "alert_rule_test": [
            # 0.8 from 2m, pending for 5m: not yet at 6m (and by then spent, which it leaves to SPENT).
            {"eval_time": "5m", "alertname": NEAR, "exp_alerts": []},
            {"eval_time": "7m", "alertname": SPENT, "exp_alerts": [
                _alert(SPENT, "critical", "Budget research-week (policy p) is spent: 105%",
                       policy="p", budget="research-week", team="research"),
                _alert(SPENT, "critical", "Budget research-money (policy p) is spent: 130%",
                       policy="p", budget="research-money", team="research")]},
            {"eval_time": "7m", "alertname": NEAR, "exp_alerts": []},
            {"eval_time": "6m", "alertname": ENFORCED, "exp_alerts": [
                _alert(ENFORCED, "info", "Budget research-week: shrink in force on team research",
                       policy="p", budget="research-week", team="research", action="shrink")]},
        ],
    },
    {   # Held at 85% for 10 minutes: nearly spent once the 5 minutes have passed, never spent.
        "interval": "1m",
        "input_series": [*_budget("research-week", "research", "0.85x10")],
        "alert_rule_test": [
            {"eval_time": "4m", "alertname": NEAR, "exp_alerts": []},
            {"eval_time": "5m", "alertname": NEAR, "exp_alerts": [
                _alert(NEAR, "warning", "Budget research-week (policy p) is 85% spent",
                       policy="p", budget="research-week", team="research")]},
            {"eval_time": "10m", "alertname": SPENT, "exp_alerts": []},
        ],
    },
    {   # The database down for 8 minutes on one replica, for 3 on the other.
        "interval": "1m",
        "input_series": [
            _series("qm_ledger_database_up", "1 0 0 0 0 0 0 0 0 1", namespace="qm", pod="a"),
            _series("qm_ledger_database_up", "1 0 0 0 1 1 1 1 1 1", namespace="qm", pod="b"),
        ],
        "alert_rule_test": [
            {"eval_time": "5m", "alertname": DB_DOWN, "exp_alerts": []},
            {"eval_time": "6m", "alertname": DB_DOWN, "exp_alerts": [
                _alert(DB_DOWN, "warning", "The ledger's database does not take records (a)", namespace="qm",
                       pod="a")]},
            {"eval_time": "9m", "alertname": DB_DOWN, "exp_alerts": []},
        ],
    },
]


def test_the_budget_alert_rules_pass_promtool_test_rules(tmp_path: Path) -> None:
    promtool = _promtool()
    doc = yaml.safe_load(RULE.read_text())
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": doc["spec"]["groups"]}, sort_keys=False))
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(
        {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": TESTS}, sort_keys=False))
    check = subprocess.run([str(promtool), "check", "rules", "rules.yaml"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    done = subprocess.run([str(promtool), "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr



DASHBOARD = RULE.parent / "grafana-dashboard.json"
ROW = "Cost and budgets (the ledger)"
# Grafana's variables as a dashboard on policy p, GPUs, the last hour would have them.
VARIABLES = {"$policy": "p", "$resource": "nvidia.com/gpu", "$__rate_interval": "5m", "$__range": "1h"}


def _panels() -> dict[str, list[str]]:
    """The expressions of the dashboard's cost-and-budget row, by panel title, variables substituted."""
    panels = json.loads(DASHBOARD.read_text())["panels"]
    start = next(i for i, p in enumerate(panels) if p["title"] == ROW)
    out = {}
    for p in itertools.takewhile(lambda p: p["type"] != "row", panels[start + 1:]):
        exprs = [str(t["expr"]) for t in p["targets"]]
        for var, value in VARIABLES.items():
            exprs = [e.replace(var, value) for e in exprs]
        out[str(p["title"])] = exprs
    return out


def _at_60m(expr: str, samples: list[tuple[str, float]]) -> dict[str, Any]:
    return {"expr": expr, "eval_time": "60m",
            "exp_samples": [{"labels": labels, "value": value} for labels, value in samples]}


GPU_A100 = {"flavor": "a100", "resource": "nvidia.com/gpu", "unit": "GPU-hours"}
# An hour, a sample a minute: research spends 0.5 a minute, business 0.25 (steps exact in binary).
HOUR_OF_SERIES = [
    _series("qm_cost_total", "0+0.5x60", team="research", project="llm", flavor="a100", currency="USD"),
    _series("qm_cost_total", "0+0.25x60", team="business", project="recsys", flavor="l4", currency="USD"),
    _series("qm_resource_hours_total", "0+0.125x60", team="research", project="llm", kind="useful",
            **GPU_A100),
    _series("qm_resource_hours_total", "0+0.0625x60", team="research", project="llm", kind="lost",
            **GPU_A100),
    _series("qm_resource_hours_total", "0+1x60", team="research", project="llm", kind="useful",
            flavor="a100", resource="cpu", unit="core-hours"),
    _series("qm_budget_limit", "200x60", policy="p", budget="research-week", unit="GPU-hours"),
    _series("qm_budget_used", "150+1x60", policy="p", budget="research-week", unit="GPU-hours"),
    _series("qm_budget_limit", "20x60", policy="p", budget="research-money", unit="USD"),
    _series("qm_budget_used", "13x60", policy="p", budget="research-money", unit="USD"),
    _series("qm_budget_limit", "10x60", policy="q", budget="other", unit="USD"),
    _series("qm_budget_used", "1x60", policy="q", budget="other", unit="USD"),
    _series("qm_budget_used_ratio", "0.75x59 1.05", policy="p", budget="research-week", team="research"),
    _series("qm_budget_enforcing", "0x30 1x30", policy="p", budget="research-week", team="research",
            action="shrink"),
    _series("qm_ledger_database_up", "1x60", namespace="qm", pod="a"),
    _series("qm_ledger_spooled_records", "0x59 7", namespace="qm", pod="a"),
]


def test_the_cost_and_budget_panels_compute_what_their_titles_say(tmp_path: Path) -> None:
    promtool = _promtool()
    panels = _panels()
    research = '{currency="USD", project="llm", team="research"}'
    business = '{currency="USD", project="recsys", team="business"}'
    expected: dict[str, list[list[tuple[str, float]]]] = {
        "Cost per hour by team / project": [[(research, 30.0), (business, 15.0)]],
        "Cost in the time range by team / project": [[(research, 30.0), (business, 15.0)]],
        # GPUs only ($resource); the cpu series is left out.
        "Resource-hours useful vs lost by team": [[
            ('{kind="useful", resource="nvidia.com/gpu", team="research", unit="GPU-hours"}', 7.5),
            ('{kind="lost", resource="nvidia.com/gpu", team="research", unit="GPU-hours"}', 3.75)]],
        "Budget burn-down: used / limit": [[
            ('{__name__="qm_budget_used_ratio", budget="research-week", policy="p", team="research"}',
             1.05)]],
        # 200 - 210 is spent: 0, never negative; 20 - 13 = 7; policy q is not selected.
        "Budget left in the period": [[
            ('{budget="research-money", policy="p", unit="USD"}', 7.0),
            ('{budget="research-week", policy="p", unit="GPU-hours"}', 0.0)]],
        "Budget actions in force": [[('{action="shrink", budget="research-week", team="research"}', 1.0)]],
        "Ledger database up / records spooled": [[("{}", 1.0)], [("{}", 7.0)]],
    }
    assert sorted(panels) == sorted(expected)
    cases = [_at_60m(expr, samples) for title, exprs in panels.items()
             for expr, samples in zip(exprs, expected[title], strict=True)]
    tests = [{"interval": "1m", "input_series": HOUR_OF_SERIES, "promql_expr_test": cases}]
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump({"tests": tests}, sort_keys=False))
    done = subprocess.run([str(promtool), "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
