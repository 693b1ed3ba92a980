"""What `qm plan` prints, writes and exits with for the shipped edit over the sample cluster, the reads (API
server, ledger) made in memory (qm/commands/plan.py `plan_read`): the text, plan.json and report.html each
carry the diff, the transition plan, the forecast (with the calibration warning of a short ledger) and the
gate; receiving-team lines say what they receive; the exit code is the gate's."""

from __future__ import annotations

import dataclasses
import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

from qm.cli import build_parser
from qm.commands.plan import _check, plan_read
from qm.planning.semantic import show
from tests.unit.plan.sample import RESEARCH, SHIFT, busy, live, sample, shift, short_ledger
from tests.unit.plan.test_semantic_diff import THE_SHIFT

GATE = "lost_gpu_hours > 0.1"
WARNING = ("the ledger's history is too short to forecast from: 12 lives, 12 of them finished, over "
           "15m (since 2027-01-15T07:45:00Z) of the 28d asked; a forecast wants at least 30 finished lives "
           "over 7d")


def plan(tmp: Path, capsys: pytest.CaptureFixture[str], *flags: str,
         replications: int = 2) -> tuple[int, str]:
    args = build_parser().parse_args(["plan", str(SHIFT), "--horizon", "2h", "--replications",
                                      str(replications), "--jobs", "1", "--fail-if", GATE, *flags])
    conditions = _check(args)
    code = plan_read(args, conditions, shift(), [], live(sample(), busy()), short_ledger(), {})
    return code, capsys.readouterr().out


def text_of(path: Path) -> str:
    """report.html as a reader sees it: tags dropped, entities decoded, blanks collapsed."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", path.read_text())))


def test_the_text_shows_the_diff_the_plan_the_forecast_and_the_gate_and_exits_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = plan(tmp_path, capsys)
    assert code == 1  # the plan's evictions lose more than 0.1 GPU-h in every replication
    diff = out.split("== diff", 1)[1].split("== transition plan", 1)[0]
    assert [line.strip() for line in diff.splitlines()[1:] if line.strip()] == [
        "QuotaPolicy gpu-cluster: update (generation 1 -> 2)",
        *(f"{op} {path}: " + (f"{show(before)} -> {show(after)}" if op == "~" else show(after))
          for op, path, before, after in THE_SHIFT),
        f"ClusterQueue {RESEARCH}: update",
        "+ spec.resourceGroups[0].flavors[gpu-a100].resources[nvidia.com/gpu].borrowingLimit: '0'",
        "(1 Kueue object(s) updated, 0 created, 0 deleted, at once)"]
    assert "step 0/0" not in out
    assert "+1m30s  +3 GPUs at once: 16 GPUs -> 19 GPUs, freed by ai-frontier-research (paired move)" in out
    assert f"warning: {WARNING}" in out
    assert "against the transition plan (quotapolicy-shift.yaml): replication 1 follows the transition " \
        "plan" in out
    assert re.search(r"HOLDS  lost_gpu_hours > 0\.1 ", out), out[-2000:]
    assert "replications: ran all 2 (too few to stop earlier: an early stop needs more than 3)" in out


STOPPED = ("decided after 3 of 6: every --fail-if condition's interval is clear of its bound (98.8% "
           "intervals: 95% over 4 looks, Bonferroni)")


def test_a_plan_whose_gate_is_decided_early_says_after_how_many_replications_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The plan's evictions lose the same work in every replication: the gate is decided at the first look.
    out_dir = tmp_path / "out"
    code, out = plan(tmp_path, capsys, "--out", str(out_dir), replications=6)
    assert code == 1
    assert f"replications: {STOPPED}" in out
    assert "over 2h, 3 replications (seed 0)" in out
    doc = json.loads((out_dir / "plan.json").read_text())["forecast"]
    assert (doc["replications"], doc["replicationsAsked"], doc["stoppedEarly"]) == (3, 6, True)
    assert doc["replicationsWhy"] == STOPPED
    assert f"replications: {STOPPED}" in text_of(out_dir / "report.html")
    assert json.loads((out_dir / "summary.json").read_text())["replications"] == 3


def test_plan_json_carries_the_warning_and_the_plans_lost_work_equals_the_forecasts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = plan(tmp_path, capsys, "-o", "json")
    doc: dict[str, Any] = json.loads(out)
    assert doc["exitCode"] == code == 1
    assert doc["kueue"] == {"fairSharing": False, "preemptionStrategies": []}  # the model's Kueue, as read
    assert [c["path"] for c in doc["diff"]["policyChanges"]] == [path for _, path, _, _ in THE_SHIFT]
    assert doc["forecast"]["calibration"]["warning"].startswith(WARNING)
    assert doc["forecast"]["calibration"]["lives"] == 12 and doc["forecast"]["calibration"]["finished"] == 12
    against = doc["forecast"]["againstPlan"]
    assert against["same"] is True
    assert against["lostGpuHours"] == pytest.approx(doc["transitionPlan"]["lostGpuHours"])
    assert [e["victim"] for e in against["evictions"]] == \
        [e["victim"] for e in doc["transitionPlan"]["evictions"]]
    assert doc["gate"] == [{"condition": GATE, "outcome": "holds", "detail": doc["gate"][0]["detail"]}]


def test_report_html_holds_the_diff_the_transition_plan_the_forecast_and_the_gate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "out"
    code, _ = plan(tmp_path, capsys, "--out", str(out_dir))
    page = text_of(out_dir / "report.html")
    for heading in ("The change", "Diff", "Transition plan", "Forecast", "Gate", "Comparison"):
        assert f" {heading} " in page, heading
    assert f"spec.teams[{RESEARCH}].quotas[gpu-a100].resources[nvidia.com/gpu].nominal 4 1" in page
    assert "spec.transitions.defaults.deadline 408h 90s" in page
    assert "+3 GPUs at once: 16 GPUs -> 19 GPUs" in page
    assert f"Calibration warning: {WARNING}" in page
    assert "replication 1 follows the transition plan" in page
    assert f"{GATE} holds" in page and f"Exit code {code}" in page
    assert json.loads((out_dir / "plan.json").read_text())["exitCode"] == code


def test_a_plan_read_through_the_lives_cache_says_how_many_lives_it_reused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(["plan", str(SHIFT), "--horizon", "2h", "--replications", "2", "--jobs",
                                      "1", "-o", "json"])
    history = dataclasses.replace(short_ledger(), reused=11)
    plan_read(args, _check(args), shift(), [], live(sample(), busy()), history, {})
    doc = json.loads(capsys.readouterr().out)
    assert doc["forecast"]["calibration"]["fromCache"] == 11
    args = build_parser().parse_args(["plan", str(SHIFT), "--horizon", "2h", "--replications", "2", "--jobs",
                                      "1"])
    plan_read(args, _check(args), shift(), [], live(sample(), busy()), history, {})
    assert "in test ledger (through the lives cache: 11 ended lives reused)" in capsys.readouterr().out
