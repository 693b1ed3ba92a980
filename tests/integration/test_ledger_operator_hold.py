"""A budget's `hold` on the real control plane, in compressed time (a rolling window of 60 s), against a
SQLite file and a real PostgreSQL server: at 100% the team's LocalQueue gets Kueue's `stopPolicy: Hold`,
so work submitted then waits while the running work finishes (never evicted, like Slurm's `safe`
enforcement); when the window has moved past the usage, the hold is lifted (`stopPolicy: None`) and the
waiting work is admitted. Audit rows say so."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes import client as k8s

from tests.integration.ledger_operator import (
    KUEUE,
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
from tests.integration.test_operator_harness import suffix

pytestmark = pytest.mark.integration
__all__ = ["ledger_admin", "ledger_plane"]  # the fixtures, used by name

# 2 jobs x 1 GPU x 30 s = 60 GPU-seconds; the limit is 36 (0.01 GPU-hours): reached after about 18 s.
BUDGET = {"name": "research-hold", "period": {"rolling": "60s"}, "limit": {"gpuHours": "0.01"},
          "thresholds": [{"percent": 100, "action": "hold"}]}


def _stop_policy(api: k8s.ApiClient, ns: str, queue: str) -> str:
    lq = cast("dict[str, Any]", k8s.CustomObjectsApi(api).get_namespaced_custom_object(
        *KUEUE, ns, "localqueues", queue))
    return str(lq["spec"].get("stopPolicy") or "None")


def test_a_budget_hold_stops_new_admissions_lets_running_work_finish_and_lifts_when_the_window_moves_on(
    ledger_admin: tuple[k8s.ApiClient, Path], ledger_url: str, tmp_path: Path, wait_until: Callable[..., Any],
) -> None:
    api, kubeconfig = ledger_admin
    s = suffix()
    ns = team = f"research-{s}"
    cleanup = namespaces(api, ns)
    body = policy(s, ns, budgets=[dict(BUDGET, selector={"team": team})])
    name = body["metadata"]["name"]
    op = operator(kubeconfig, tmp_path, ledger_url, "--budget-refresh", "1s").start()
    seen: list[tuple[float, str, bool, bool]] = []  # (t, stopPolicy, late admitted, early evicted)
    try:
        k8s.CustomObjectsApi(api).create_cluster_custom_object(*QP[:2], QP[2], body)
        wait_until(lambda: ready(api, name), timeout=30, what="the policy Ready")
        started = time.monotonic()
        for i in range(2):
            create_job(api, ns, team, f"early-{i}", 1, 30)
        wait_until(lambda: _stop_policy(api, ns, team) == "Hold", timeout=90, what="the LocalQueue held")
        create_job(api, ns, team, "late", 1, 5)
        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:
            late = workload_of(api, ns, "late")
            early = [workload_of(api, ns, f"early-{i}") for i in range(2)]
            seen.append((time.monotonic() - started, _stop_policy(api, ns, team), true(late, "QuotaReserved"),
                         any(true(w, "Evicted") for w in early)))
            if true(late, "Finished"):
                break
            time.sleep(0.5)
        early_finished = [true(workload_of(api, ns, f"early-{i}"), "Finished") for i in range(2)]
        late_finished = true(workload_of(api, ns, "late"), "Finished")
        logged = [r for r in op.log_records() if r.get("audit") and r.get("policy") == name]
    finally:
        op.stop()
        delete_policy(api, name)
        cleanup()

    # Running work is never evicted by the hold and finishes; the late job waits while the queue is held.
    assert early_finished == [True, True] and not any(evicted for *_, evicted in seen)
    assert not any(admitted for _, stop, admitted, _ in seen if stop == "Hold")
    # Then the window moves past the usage: the hold is lifted and the late job runs.
    held = [stop for _, stop, _, _ in seen]
    assert held[0] == "Hold" and held[-1] == "None" and late_finished
    actions = [r["action"] for r in logged]
    assert actions.count("budget-crossed") == 1 and "queues-held" in actions and "queues-released" in actions
    assert actions.index("queues-held") < actions.index("queues-released")
