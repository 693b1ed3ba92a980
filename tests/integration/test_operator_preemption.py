"""Experiment preemption on the real control plane: business work starved by borrowing experiments
gets its room back through evictions Kueue performs; dry-run only reports."""

from __future__ import annotations

import time
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
from tests.unit.policy.helpers import sample, without_tenancy


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
    # The model followed the Configuration this Kueue runs with (no fairSharing), read through the shipped
    # ClusterRole: no --kueue-fair-sharing flag was given.
    read = [r["message"] for r in operator.log_records() if "Kueue's Configuration" in str(r.get("message"))]
    assert read == ["Kueue's Configuration: fair sharing off (ConfigMap kueue-system/kueue-manager-config); "
                    "the controller's model of Kueue follows it"], read
    exported = operator.metrics()
    assert "qm_kueue_fair_sharing 0.0" in exported and "qm_kueue_configuration_known 1.0" in exported


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
    # The status that records a decision is written before its Events are posted (queue_manager/reconcile.py:
    # write_status, then apply_rest), so the Event may follow the record by a moment.
    wait_until(
        lambda: cluster.events(business, name=beneficiary["metadata"]["name"], reason="PreemptionDryRun"),
        timeout=30,
        what="the PreemptionDryRun Event on the beneficiary",
    )
    workloads = cluster.workloads(research)
    assert (
        len(records),
        sum(condition_true(w, "Admitted") for w in workloads),
        [w["metadata"]["name"] for w in workloads if not w["spec"].get("active", True)],
        condition_true(cluster.workload_of_job(business, "serve-1"), "Admitted"),
    ) == (2, 8, [], False)
    assert 'mode="dry-run"' in operator.metrics()


def _sample_policy(s: str, research: str, business: str) -> dict[str, Any]:
    """The shipped sample policy (manifests/samples/quotapolicy.yaml) with names unique to this test (its
    cluster-scoped objects are shared) and minRuntime 0s (the sample's 10m would make the test wait), without
    its tenancy (tests/integration/test_tenancy.py: its rule for the namespaces outside the teams would
    outlive the test on the shared control plane)."""
    doc = without_tenancy(sample())
    spec = doc["spec"]
    doc["metadata"]["name"] = f"sample-{s}"
    flavor = spec["flavors"][0]
    old_flavor, flavor["name"] = flavor["name"], f"{flavor['name']}-{s}"
    flavor.pop("nodeLabels", None)  # no node carries them here: Kueue admits on quota alone
    flavor.pop("nodeTaints", None)
    flavor.pop("tolerations", None)
    classes = {c["name"]: f"{c['name']}-{s}" for c in spec["priorityClasses"]}
    for c in spec["priorityClasses"]:
        c["name"] = classes[c["name"]]
    spec["preemption"]["protectedClasses"] = [classes[c] for c in spec["preemption"]["protectedClasses"]]
    spec["preemption"]["minRuntime"] = "0s"
    for team, ns in zip(spec["teams"], (research, business), strict=True):
        team["name"] = f"{team['name']}-{s}"
        team["namespaces"] = [ns]
        team["cohort"] = f"{team['cohort']}-{s}"
        for q in team["quotas"]:
            assert q["flavor"] == old_flavor
            q["flavor"] = flavor["name"]
    return doc


def test_with_the_sample_policy_business_work_that_must_borrow_is_admitted_once_its_victims_are_evicted(
    operator: OperatorProcess, cluster: Cluster, wait_until: Callable[..., Any]
) -> None:
    """Business fills its 16 GPUs, research its 4 with two more experiments waiting; then business asks
    for 2 GPUs more. Kueue cannot help (research borrows nothing to reclaim); the operator evicts two
    experiments and holds research's two waiting ones meanwhile (within its nominal quota, Kueue orders
    them first and would give them the freed GPUs); reclaimWithinCohort: LowerPriority keeps research from
    taking the GPUs back from the higher-priority beneficiary."""
    s = suffix()
    research, business = cluster.namespace("research"), cluster.namespace("business")
    policy = _sample_policy(s, research, business)
    cluster.create_policy(policy)
    r_team, b_team = (t["name"] for t in policy["spec"]["teams"])
    exp, biz = (f"low-priority-experiment-{s}", f"high-priority-business-{s}")
    for team, ns in ((r_team, research), (b_team, business)):
        wait_until(lambda t=team, n=ns: condition_true(cluster.kueue("localqueues", t, n), "Active"),
                   timeout=20, what=f"{team} LocalQueue Active")
    for i in range(16):
        cluster.create_job(business, f"serve-{i}", b_team, biz, 1)
    wait_until(lambda: sum(condition_true(w, "Admitted") for w in cluster.workloads(business)) == 16,
               timeout=60, what="16 business workloads admitted")
    for i in range(4):
        cluster.create_job(research, f"exp-{i}", r_team, exp, 1)
    wait_until(lambda: sum(condition_true(w, "Admitted") for w in cluster.workloads(research)) == 4,
               timeout=40, what="4 experiments admitted")
    for i in range(4, 6):
        cluster.create_job(research, f"exp-{i}", r_team, exp, 1)
    wait_until(lambda: len(cluster.workloads(research)) == 6, timeout=20, what="6 research workloads")
    cluster.create_job(business, "burst", b_team, biz, 2)
    beneficiary = wait_until(
        lambda: (w := cluster.workload_of_job(business, "burst")) and condition_true(w, "Admitted") and w,
        timeout=60, what="the business burst admitted")
    victims = sorted(
        w["metadata"]["name"] for w in cluster.workloads(research)
        if any(c["type"] == "QueueManagerPreempted" for c in w["status"].get("conditions", [])))
    assert len(victims) == 2
    assert cluster.events(business, name=beneficiary["metadata"]["name"], reason="PreemptionRequested") != []
    # Research's 2 waiting experiments fit within its nominal quota once the victims are gone: Kueue would
    # have admitted them first. They were held (spec.active=false) until the burst got in, then released.
    held = sorted(e.involved_object.name for e in cluster.events(research, reason="WorkloadHeld"))
    waiting = sorted(w["metadata"]["name"] for w in cluster.workloads(research)
                     if (w["metadata"].get("ownerReferences") or [{}])[0].get("name") in ("exp-4", "exp-5"))
    assert held == waiting
    wait_until(lambda: all(w["spec"].get("active", True) for w in cluster.workloads(research)),
               timeout=30, what="victims and held experiments active again")
    # Research runs the 2 experiments left; its 4 waiting ones (2 victims requeued, 2 never admitted)
    # cannot reclaim from business (LowerPriority: 100 < 1000000); business keeps all 18 GPUs.
    time.sleep(3)
    admitted = {ns: sum(condition_true(w, "Admitted") for w in cluster.workloads(ns))
                for ns in (research, business)}
    assert admitted == {research: 2, business: 17}
