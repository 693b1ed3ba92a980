"""A budget's `deprioritize` on the real control plane, in compressed time (a rolling window of 60 s),
against a SQLite file and a real PostgreSQL server: at 100% the team's borrowingLimit goes to 0 (its work
is no longer admitted on borrowed quota) while its nominal quota stays and its running work finishes;
when the window has moved past the usage, the spec's borrowing is back."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.integration.ledger_operator import (
    QP,
    create_job,
    delete_policy,
    ledger_admin,
    ledger_plane,
    namespaces,
    operator,
    policy,
    ready,
    true,
    workload_of,
)
from tests.integration.test_ledger_operator_budget import _gpu
from tests.integration.test_operator_harness import suffix

pytestmark = pytest.mark.integration
__all__ = ["ledger_admin", "ledger_plane"]  # the fixtures, used by name

# 2 jobs x 1 GPU x 30 s = 60 GPU-seconds; the limit is 36 (0.01 GPU-hours): reached after about 18 s.
BUDGET = {"name": "research-borrow", "period": {"rolling": "60s"}, "limit": {"gpuHours": "0.01"},
          "thresholds": [{"percent": 100, "action": "deprioritize"}]}


def test_deprioritize_stops_borrowing_keeps_the_nominal_quota_and_restores_when_the_window_moves_on(
    ledger_admin: tuple[k8s.ApiClient, Path], ledger_url: str, tmp_path: Path, wait_until: Callable[..., Any],
) -> None:
    api, kubeconfig = ledger_admin
    s = suffix()
    ns = team = f"research-{s}"
    cleanup = namespaces(api, ns)
    body = policy(s, ns, budgets=[dict(BUDGET, selector={"team": team})])
    name = body["metadata"]["name"]
    op = operator(kubeconfig, tmp_path, ledger_url, "--budget-refresh", "1s").start()
    seen: list[tuple[str, str | None]] = []
    try:
        k8s.CustomObjectsApi(api).create_cluster_custom_object(*QP[:2], QP[2], body)
        wait_until(lambda: ready(api, name), timeout=30, what="the policy Ready")
        for i in range(2):
            create_job(api, ns, team, f"job-{i}", 1, 30)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            seen.append(_gpu(api, team))
            done = all(true(workload_of(api, ns, f"job-{i}"), "Finished") for i in range(2))
            if done and ("4", "0") in seen and seen[-1] == ("4", None):
                break
            time.sleep(0.5)
        jobs = [workload_of(api, ns, f"job-{i}") for i in range(2)]
        logged = [r for r in op.log_records() if r.get("audit") and r.get("policy") == name]
    finally:
        op.stop()
        delete_policy(api, name)
        cleanup()

    # Borrowing stops (0), the nominal quota never moves, and the spec's borrowing (none) comes back.
    diagnosis = [(r["action"], r.get("what") or r.get("message")) for r in logged]
    assert seen[0] == ("4", None) and ("4", "0") in seen and seen[-1] == ("4", None), diagnosis
    assert {quota for quota, _ in seen} == {"4"}
    assert all(true(w, "Finished") and not true(w, "Evicted") for w in jobs)
    actions = [(r["action"], r["what"]) for r in logged]
    assert [w.split(": ")[-1] for a, w in actions if a == "budget-crossed"] == ["deprioritize"]
    assert [w for a, w in actions if a == "budget-lifted"] == ["budget research-borrow: deprioritize lifted"]
