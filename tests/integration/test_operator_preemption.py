"""Experiment preemption on the real control plane: business work starved by borrowing experiments
gets its room back through evictions Kueue performs; dry-run only reports."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.integration.test_operator_harness import (  # noqa: F401 - the *_fixture names register fixtures
    Cluster,
    OperatorProcess,
    cluster_fixture,
    condition_true,
    operator_factory_fixture,
    operator_fixture,
    operator_kubeconfig_fixture,
    suffix,
    two_team_policy,
)


def _starved_business(
    cluster: Cluster, wait_until: Callable[..., Any], *, dry_run: bool
) -> tuple[str, str, str, str]:
    """Research (4 GPUs) runs 8 one-GPU experiments by borrowing business's idle 4 GPUs; then business
    asks for 2 GPUs. Neither ClusterQueue lets Kueue reclaim by itself (reclaimWithinCohort: Never)."""
    s = suffix()
    research, business = cluster.namespace("research"), cluster.namespace("business")
    policy = two_team_policy(
        s,
        research_ns=research,
        business_ns=business,
        research_gpus=4,
        business_gpus=4,
        preemption={
            "protectedClasses": [f"business-{s}"],
            "minRuntime": "0s",
            "budget": {"maxVictims": 10, "window": "1h"},
            "dryRun": dry_run,
        },
    )
    cluster.create_policy(policy)
    for team in ("research", "business"):
        wait_until(
            lambda t=team: condition_true(
                cluster.kueue("localqueues", f"{t}-{s}", research if t == "research" else business), "Active"
            ),
            timeout=20,
            what=f"{team} LocalQueue Active",
        )
    for i in range(8):
        cluster.create_job(research, f"exp-{i}", f"research-{s}", f"experiment-{s}", 1)
    wait_until(
        lambda: sum(condition_true(w, "Admitted") for w in cluster.workloads(research)) == 8,
        timeout=40,
        what="8 experiments admitted (4 borrowed)",
    )
    cluster.create_job(business, "serve-1", f"business-{s}", f"business-{s}", 2)
    return s, research, business, policy["metadata"]["name"]


def test_a_starved_business_workload_gets_experiments_evicted_by_kueue_and_is_admitted(
    operator: OperatorProcess, cluster: Cluster, wait_until: Callable[..., Any]
) -> None:
    _, research, business, name = _starved_business(cluster, wait_until, dry_run=False)
    beneficiary = wait_until(
        lambda: (w := cluster.workload_of_job(business, "serve-1")) and condition_true(w, "Admitted") and w,
        timeout=60,
        what="business admitted",
    )
    victims = [
        w
        for w in cluster.workloads(research)
        if not w["spec"].get("active", True)
        or any(c["type"] == "QueueManagerPreempted" for c in w["status"].get("conditions", []))
    ]
    names = sorted(w["metadata"]["name"] for w in victims)
    # Two one-GPU experiments are the smallest set that frees 2 GPUs.
    assert len(names) == 2
    for w in victims:
        ours = next(c for c in w["status"]["conditions"] if c["type"] == "QueueManagerPreempted")
        assert ours["message"].startswith(f"preempt {research}/{w['metadata']['name']}")
        assert cluster.events(research, name=w["metadata"]["name"], reason="PreemptionRequested") != []
    assert cluster.events(business, name=beneficiary["metadata"]["name"], reason="PreemptionRequested") != []

    # Kueue evicted them (its own Evicted condition) and, once reactivated, requeued them.
    def verified() -> bool:
        ws = {w["metadata"]["name"]: w for w in cluster.workloads(research)}
        return all(
            ws[n]["spec"].get("active", True)
            and condition_true(ws[n], "Requeued")
            and any(
                e.get("reason") == "Deactivated"
                for e in (ws[n]["status"].get("schedulingStats") or {}).get("evictions") or []
            )
            for n in names
        )

    wait_until(verified, timeout=30, what="victims evicted by Kueue, reactivated and requeued")
    expected = sorted((f"{research}/{n}", "Requeued", False) for n in names)

    def recorded() -> list[tuple[str, str, bool]]:
        records = cluster.policy(name)["status"]["lastPreemptions"]
        return sorted((r["victim"], r["state"], r["dryRun"]) for r in records)

    # The operator's bookkeeping follows what Kueue did (it reads Requeued=True on its next tick).
    wait_until(lambda: recorded() == expected, timeout=10, what=f"records {expected}")
    running = sum(condition_true(w, "Admitted") for w in cluster.workloads(research))
    assert running == 6


def test_dry_run_reports_the_victims_and_evicts_nothing(
    operator: OperatorProcess, cluster: Cluster, wait_until: Callable[..., Any]
) -> None:
    _, research, business, name = _starved_business(cluster, wait_until, dry_run=True)

    def reported() -> list[dict[str, Any]]:
        return [
            r
            for r in (cluster.policy(name).get("status") or {}).get("lastPreemptions") or []
            if r.get("dryRun")
        ]

    records = wait_until(reported, timeout=60, what="dry-run preemption records")
    beneficiary = cluster.workload_of_job(business, "serve-1")
    assert beneficiary is not None
    assert cluster.events(business, name=beneficiary["metadata"]["name"], reason="PreemptionDryRun") != []
    workloads = cluster.workloads(research)
    assert (
        len(records),
        sum(condition_true(w, "Admitted") for w in workloads),
        [w["metadata"]["name"] for w in workloads if not w["spec"].get("active", True)],
        condition_true(cluster.workload_of_job(business, "serve-1"), "Admitted"),
    ) == (2, 8, [], False)
    assert 'mode="dry-run"' in operator.metrics()
