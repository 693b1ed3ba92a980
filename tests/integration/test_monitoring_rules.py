"""The PrometheusRule (manifests/monitoring/prometheusrule.yaml) under `promtool test rules`: the promtool of
Debian's `prometheus` package (`make ensure-prometheus` installs it), or the one `$QM_PROMTOOL` names.

What the rules must do (issue 13, "kubectl tells the story"): a transition is stuck relative to its OWN step
interval (a step one interval late pages for a 10-minute schedule, not for a 24-hour one), draining is
information, not "stuck"; pending protected work is the policy's protectedClasses, not a class named in the
rule; the budget alert follows qm_preemption_blocked_total{reason="budget"}, not the other reasons.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.controlplanes import ci

ROOT = Path(__file__).resolve().parents[2]
RULE = ROOT / "manifests" / "monitoring" / "prometheusrule.yaml"
MIN_VERSION = (2, 42)  # Debian 12's package: it runs every rule test here


def _promtool() -> Path:
    """promtool: `$QM_PROMTOOL`, else the one on PATH (Debian's `prometheus` package: /usr/bin/promtool)."""
    named = os.environ.get("QM_PROMTOOL") or shutil.which("promtool")
    reason = None
    if named is None:
        reason = ("promtool not found: install Debian's prometheus package (make ensure-prometheus) "
                  "or set QM_PROMTOOL")
    else:
        out = subprocess.run([named, "--version"], capture_output=True, text=True, timeout=30)
        found = re.search(r"version (\d+)\.(\d+)", out.stdout + out.stderr)
        if found is None or (int(found.group(1)), int(found.group(2))) < MIN_VERSION:
            said = (out.stdout or out.stderr)[:80]
            reason = f"{named} is not promtool >= {MIN_VERSION[0]}.{MIN_VERSION[1]} ({said!r})"
    if reason is not None:
        if ci():
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason)
    assert named is not None
    return Path(named)


def _rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULE.read_text())
    return [r for g in doc["spec"]["groups"] for r in g["rules"]]


def _description(alert: str, labels: dict[str, str]) -> str:
    """The alert's description with its label placeholders filled (the summaries are asserted literally)."""
    text = next(r for r in _rules() if r.get("alert") == alert)["annotations"]["description"]
    return re.sub(r"\{\{ \$labels\.([a-z_]+) \}\}", lambda m: labels[m.group(1)], text)


def _alert(alert: str, severity: str, summary: str, **labels: str) -> dict[str, Any]:
    return {"exp_labels": {"severity": severity, **labels},
            "exp_annotations": {"summary": summary, "description": _description(alert, labels)}}


GPU = {"policy": "p", "flavor": "gpu", "resource": "nvidia.com/gpu"}


def _series(name: str, values: str, **labels: str) -> dict[str, str]:
    shown = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return {"series": f"{name}{{{shown}}}", "values": values}


def _transition(cq: str, *, interval: int, next_at: int, draining: int) -> list[dict[str, str]]:
    labels = {**GPU, "cluster_queue": cq}
    return [
        _series("qm_transition_next_step_timestamp_seconds", f"{next_at}x60", **labels),
        _series("qm_transition_step_interval_seconds", f"{interval}x60", **labels),
        _series("qm_transition_waiting_for_drain", f"{draining}x60", **labels),
    ]


STUCK, DRAIN = "QueueManagerTransitionStuck", "QueueManagerTransitionWaitingForDrain"
PROTECTED, BUDGET = "QueueManagerProtectedWorkPendingTooLong", "QueueManagerPreemptionBudgetExhausted"

TESTS: list[dict[str, Any]] = [
    {   # Each transition's next step was due at t=60s; evaluation time is seconds since 0.
        "interval": "1m",
        "input_series": [
            *_transition("fast", interval=600, next_at=60, draining=0),  # 10-minute steps
            *_transition("slow", interval=86400, next_at=60, draining=0),  # daily steps: 29 minutes is fine
            *_transition("drain", interval=600, next_at=60, draining=1),  # waits for running work
            *_transition("done", interval=600, next_at=0, draining=0),  # no step to come
        ],
        "alert_rule_test": [
            # Late by more than one interval from 11m on; `for: 10m` makes it fire from 21m.
            {"eval_time": "20m", "alertname": STUCK, "exp_alerts": []},
            {"eval_time": "30m", "alertname": STUCK, "exp_alerts": [
                _alert(STUCK, "warning",
                       "Transition of fast nvidia.com/gpu (policy p): a step is 29m 0s late",
                       **GPU, cluster_queue="fast")]},
            {"eval_time": "30m", "alertname": DRAIN, "exp_alerts": [
                _alert(DRAIN, "info", "Transition of drain nvidia.com/gpu waits for running work (29m 0s)",
                       **GPU, cluster_queue="drain")]},
        ],
    },
    {   # Policy p protects class biz, policy q protects exp: the same ages, different verdicts.
        "interval": "1m",
        "input_series": [
            _series("qm_protected_priority_class", "1x20", policy="p", priority_class="biz"),
            _series("qm_protected_priority_class", "1x20", policy="q", priority_class="exp"),
            _series("qm_oldest_pending_workload_age_seconds", "900x20", policy="p", cluster_queue="a",
                    priority_class="biz"),
            _series("qm_oldest_pending_workload_age_seconds", "5000x20", policy="p", cluster_queue="b",
                    priority_class="exp"),
            _series("qm_oldest_pending_workload_age_seconds", "5000x20", policy="q", cluster_queue="c",
                    priority_class="biz"),
        ],
        "alert_rule_test": [
            {"eval_time": "10m", "alertname": PROTECTED, "exp_alerts": [
                _alert(PROTECTED, "critical", "biz work in a pending for 15m 0s", policy="p",
                       cluster_queue="a", priority_class="biz")]},
        ],
    },
    {   # The budget alert: only blocks for the budget's reason, with no victim left in the window.
        "interval": "1m",
        "input_series": [
            _series("qm_preemption_budget_remaining", "0x30", policy="p"),
            _series("qm_preemption_blocked_total", "0+1x30", policy="p", reason="budget"),
            _series("qm_preemption_budget_remaining", "0x30", policy="q"),
            _series("qm_preemption_blocked_total", "0+1x30", policy="q", reason="no-set"),
        ],
        "alert_rule_test": [
            {"eval_time": "20m", "alertname": BUDGET, "exp_alerts": [
                {"exp_labels": {"severity": "warning", "policy": "p"},
                 "exp_annotations": {
                     "summary": "Experiment preemption budget of policy p is exhausted",
                     "description": _description(BUDGET, {"policy": "p"})}}]},
        ],
    },
]


def test_the_alert_rules_pass_promtool_test_rules(tmp_path: Path) -> None:
    promtool = _promtool()
    doc = yaml.safe_load(RULE.read_text())
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": doc["spec"]["groups"]}, sort_keys=False))
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(
        {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": TESTS}, sort_keys=False))
    shutil.copy(RULE, tmp_path / "prometheusrule.yaml")  # kept beside them when a run fails (tmp_path)
    check = subprocess.run([str(promtool), "check", "rules", "rules.yaml"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    done = subprocess.run([str(promtool), "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
