"""A budget on the real control plane, in compressed time (a rolling window of 60 s), against a SQLite
file and a real PostgreSQL server: consumption measured in the ledger crosses 80% and the alert is
raised (a BudgetThresholdCrossed Event, the BudgetThresholdReached condition, qm_budget_used_ratio); at
100% the team's borrowingLimit goes to 0 and its quota shrinks step by step (the ordinary transition)
while its running work finishes; when the window has moved past the usage, the budget lifts and the
quota is restored."""

from __future__ import annotations

import contextlib
import io
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from qm.cli import main
from tests.integration.ledger_operator import (
    GPU,
    KUEUE,
    QP,
    create_job,
    delete_policy,
    get_policy,
    ledger_admin,
    ledger_plane,
    namespaces,
    operator,
    policy,
    ready,
    true,
    workload_of,
)
from tests.integration.test_operator_harness import OperatorProcess, suffix

pytestmark = pytest.mark.integration
__all__ = ["ledger_admin", "ledger_plane"]  # the fixtures, used by name

# 4 jobs x 1 GPU x 25 s = 100 GPU-seconds in the window; the limit is 90 (0.025 GPU-hours): 80% is 72.
BUDGET = {"name": "research-minute", "selector": {"team": ""}, "period": {"rolling": "60s"},
          "limit": {"gpuHours": "0.025"},
          "thresholds": [{"percent": 80, "action": "alert"}, {"percent": 100, "action": "shrink"}]}


def _ratio(op: OperatorProcess) -> float | None:
    pattern = r'^qm_budget_used_ratio\{[^}]*budget="research-minute"[^}]*\} ([0-9.e+-]+)$'
    match = re.search(pattern, op.metrics(), re.M)
    return float(match.group(1)) if match else None


def _condition(api: k8s.ApiClient, name: str) -> dict[str, Any] | None:
    for c in (get_policy(api, name).get("status") or {}).get("conditions") or []:
        if c.get("type") == "BudgetThresholdReached":
            return dict(c)
    return None


def _budget_status(kubeconfig: Path, name: str) -> list[dict[str, str]]:
    """`qm budget status --kubeconfig`: the operator's status.budgets as a user reads them."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["budget", "status", "--kubeconfig", str(kubeconfig), "--policy", name, "-o", "json"])
    assert code == 0
    rows: list[dict[str, str]] = json.loads(out.getvalue())["rows"]
    return rows


def _gpu(api: k8s.ApiClient, cq: str) -> tuple[str, str | None]:
    obj = k8s.CustomObjectsApi(api).get_cluster_custom_object(*KUEUE, "clusterqueues", cq)
    for group in obj["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for r in flavor["resources"]:
                if r["name"] == GPU:
                    return str(r["nominalQuota"]), r.get("borrowingLimit")
    raise AssertionError("no GPU quota")


def test_a_budget_alerts_at_80_percent_shrinks_gradually_at_100_and_restores_when_the_window_moves_on(
    ledger_admin: tuple[k8s.ApiClient, Path], ledger_url: str, tmp_path: Path, wait_until: Callable[..., Any],
) -> None:
    api, kubeconfig = ledger_admin
    s = suffix()
    ns = team = f"research-{s}"
    cleanup = namespaces(api, ns)
    body = policy(s, ns, budgets=[dict(BUDGET, selector={"team": team})],
                  transition={"duration": "20s", "stepInterval": "10s", "curve": "linear", "drain": False,
                              "floor": {GPU: 1}})
    name = body["metadata"]["name"]
    op = operator(kubeconfig, tmp_path, ledger_url, "--budget-refresh", "1s").start()
    seen: list[tuple[float, str, str | None, float | None]] = []
    enforcing: list[dict[str, str]] = []  # qm budget status while the shrink was in force
    try:
        k8s.CustomObjectsApi(api).create_cluster_custom_object(*QP[:2], QP[2], body)
        wait_until(lambda: ready(api, name), timeout=30, what="the policy Ready")
        started = time.monotonic()
        for i in range(4):
            create_job(api, ns, team, f"job-{i}", 1, 25)
        deadline = started + 150
        while time.monotonic() < deadline:
            quota, borrowing = _gpu(api, team)
            seen.append((time.monotonic() - started, quota, borrowing, _ratio(op)))
            if not enforcing:
                enforcing = [r for r in _budget_status(kubeconfig, name) if r["enforcing"] == "shrink"]
            done = all(true(workload_of(api, ns, f"job-{i}"), "Finished") for i in range(4))
            if done and quota == "4" and any(q == "1" for _, q, _, _ in seen) and borrowing is None:
                break
            time.sleep(0.5)
        # The status is written just after the objects are applied (one reconcile): a moment later.
        settle = time.monotonic() + 10
        condition = _condition(api, name)
        while (condition is None or condition["reason"] not in ("WithinBudget", "BudgetAlert")) \
                and time.monotonic() < settle:
            time.sleep(0.2)
            condition = _condition(api, name)
        events = [e for e in k8s.CoreV1Api(api).list_namespaced_event("default").items
                  if name in (e.involved_object.name or "") or team in (e.involved_object.name or "")]
        logged = [r for r in op.log_records() if r.get("audit") and r.get("policy") == name]
    finally:
        op.stop()
        delete_policy(api, name)
        cleanup()

    actions = [(r["action"], r["what"]) for r in logged]
    crossed = [w for a, w in actions if a == "budget-crossed"]
    assert [w.split(": ")[-1] for w in crossed] == ["alert", "shrink"]
    assert "budget research-minute reached 80%" in crossed[0] and "reached 100%" in crossed[1]
    reasons = {e.reason for e in events}
    assert {"BudgetThresholdCrossed", "BudgetEnforcementLifted", "TransitionStarted",
            "TransitionStep"} <= reasons
    # The gauge users see crossed what enforcement crossed.
    ratios = [r for _, _, _, r in seen if r is not None]
    assert max(ratios) >= 1.0
    # 100%: borrowing stops and the quota shrinks to the floor in steps (4 -> ... -> 1), never at once.
    quotas = [q for _, q, _, _ in seen]
    first_cut = next(i for i, q in enumerate(quotas) if q != "4")
    shrink = [q for q in quotas[first_cut:] if q != "4"]
    assert shrink[0] not in ("1", "4") and "1" in shrink
    assert any(b == "0" for _, _, b, _ in seen)
    # qm budget status showed it as the operator decided it: both thresholds with their times, the shrink.
    assert [(r["budget"], r["team"], r["unit"], r["period_end"], r["dry_run"]) for r in enforcing] == [
        ("research-minute", team, "GPU-hours", "", "no")]
    assert re.fullmatch(r"80%:alert@\S+Z 100%:shrink@\S+Z", enforcing[0]["reached"]), enforcing[0]
    assert float(enforcing[0]["used_percent"]) >= 100.0
    # Then the window moves past the usage: lifted, and the spec's quota and borrowing back at once.
    lifted = [w for a, w in actions if a == "budget-lifted"]
    assert lifted == ["budget research-minute: shrink lifted"]
    assert (quotas[-1], seen[-1][2]) == ("4", None)
    # The condition says which budget crossed what, and is back to WithinBudget (or still alerting) after.
    assert condition is not None and condition["reason"] in ("WithinBudget", "BudgetAlert")
