"""A what-if shows when a budget would bite: the simulator measures each budget's consumption and the one
controller (fairshare.control.budgets) alerts at 80% and, at 100%, holds the team's new work and shrinks
its quota through the ordinary transition (drain), restoring it at the period boundary."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from qm.cli import main
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
    match = re.search(r": ([0-9.]+) of 200\.00 GPU-hours", detail)
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


def test_qm_simulate_puts_the_budget_crossings_in_summary_json_and_the_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "budget.yaml"
    doc = _scenario()
    doc["replications"] = 1
    scenario.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    assert main(["simulate", str(scenario), "--out", str(out), "--quiet", "--no-progress"]) == 0
    capsys.readouterr()
    (run,) = json.loads((out / "summary.json").read_text())["variants"][0]["replications"]
    events = [(b["budget"], b["kind"], b["detail"].split("threshold): ")[-1][:5]) for b in run["budgets"]]
    assert events == [("research-week", "crossed", "alert"), ("research-week", "crossed", "hold "),
                      ("research-week", "crossed", "shrin"), ("research-week", "lifted", "hold:"),
                      ("research-week", "lifted", "shrin")]
    times = [b["time"] for b in run["budgets"]]
    assert times == sorted(times) and times[-2:] == [WEEK_BOUNDARY, WEEK_BOUNDARY]
    html = (out / "report.html").read_text()
    section = html[html.index("<h2>Budgets</h2>"):html.index("<h2>Data</h2>")]
    assert section.count("<tr><td>") == 5 and "(80% threshold): alert" in section
    assert f"<td>{WEEK_BOUNDARY / 86400:.2f}</td><td>research-week</td><td>lifted</td>" in section


def test_the_report_has_no_budget_section_without_budgets(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "plain.yaml"
    doc = _doc(_policy(), exp_rate=1.0)
    doc.update(horizon="2d", replications=1)
    scenario.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    assert main(["simulate", str(scenario), "--out", str(out), "--quiet", "--no-progress"]) == 0
    capsys.readouterr()
    assert json.loads((out / "summary.json").read_text())["variants"][0]["replications"][0]["budgets"] == []
    assert "<h2>Budgets</h2>" not in (out / "report.html").read_text()
