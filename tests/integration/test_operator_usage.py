"""Usage accounting on the real control plane: admitted Workloads become running intervals of the
history graph, which the operator writes to QuotaPolicy status on shutdown and restores on start."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.integration.test_operator_harness import (  # noqa: F401 - the *_fixture names register fixtures
    Cluster,
    OperatorProcess,
    cluster_fixture,
    condition_true,
    operator_factory_fixture,
    operator_kubeconfig_fixture,
    suffix,
    two_team_policy,
)


def _running(cluster: Cluster, name: str) -> list[str]:
    history = (cluster.policy(name).get("status") or {}).get("history") or {}
    return sorted(str(r[0]) for r in history.get("running") or [])


def test_usage_history_is_written_on_shutdown_and_restored_on_start(
        operator_factory: Callable[..., OperatorProcess], cluster: Cluster,
        wait_until: Callable[..., Any]) -> None:
    s = suffix()
    research = cluster.namespace("research")
    policy = two_team_policy(s, research_ns=research, business_ns=cluster.namespace("business"))
    name = policy["metadata"]["name"]
    # Periodic writes effectively off: only the shutdown write can put the intervals in status.
    first = operator_factory("--history-persist", "3600").start()
    cluster.create_policy(policy)
    wait_until(lambda: condition_true(cluster.policy(name), "Ready"), timeout=20, what="policy Ready")
    for i in range(2):
        cluster.create_job(research, f"exp-{i}", f"research-{s}", f"experiment-{s}", 1)

    def admitted() -> list[str] | None:
        keys = sorted(f"{research}/{w['metadata']['name']}" for w in cluster.workloads(research)
                      if condition_true(w, "Admitted"))
        return keys if len(keys) == 2 else None

    keys = wait_until(admitted, timeout=30, what="2 experiments admitted")
    assert _running(cluster, name) == []
    assert first.stop() == 0
    assert _running(cluster, name) == keys
    # A new operator restores them: it neither starts them again nor loses them.
    second = operator_factory("--history-persist", "1").start()
    wait_until(lambda: "qm_decayed_usage_resource_seconds" in second.metrics()
               and f"lq:{research}/research-{s}" in second.metrics(), timeout=20, what="usage exported")
    assert _running(cluster, name) == keys
