"""The operator renders a QuotaPolicy into Kueue objects it owns, rejects invalid policies and
reverts hand edits (real kube-apiserver + Kueue; operator bound only to the shipped ClusterRole)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

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

MANAGED = {"app.kubernetes.io/managed-by": "queue-manager"}


def test_a_policy_becomes_kueue_objects_owned_by_the_operator(
    operator: OperatorProcess, cluster: Cluster, wait_until: Callable[..., Any]
) -> None:
    s = suffix()
    research, business = cluster.namespace("research"), cluster.namespace("business")
    policy = two_team_policy(s, research_ns=research, business_ns=business)
    cluster.create_policy(policy)
    name = policy["metadata"]["name"]
    wait_until(lambda: condition_true(cluster.policy(name), "Ready"), timeout=20, what="policy Ready")
    owned = {
        ("resourceflavors", f"gpu-{s}", None),
        ("cohorts", f"org-{s}", None),
        ("clusterqueues", f"research-{s}", None),
        ("clusterqueues", f"business-{s}", None),
        ("workloadpriorityclasses", f"business-{s}", None),
        ("workloadpriorityclasses", f"experiment-{s}", None),
        ("localqueues", f"research-{s}", research),
        ("localqueues", f"business-{s}", business),
    }
    found = {(p, n, ns): cluster.kueue(p, n, ns) for p, n, ns in owned}
    assert {k: v is not None for k, v in found.items()} == {k: True for k in owned}
    assert {
        k: {**MANAGED, "queuemanager.dev/policy": name}.items() <= v["metadata"]["labels"].items()
        for k, v in found.items()
        if v is not None
    } == {k: True for k in owned}
    assert (
        cluster.gpu_quota(f"research-{s}", f"gpu-{s}"),
        cluster.gpu_quota(f"business-{s}", f"gpu-{s}"),
    ) == ("4", "16")
    # Kueue accepts them: both ClusterQueues become Active.
    wait_until(
        lambda: condition_true(cluster.kueue("clusterqueues", f"business-{s}"), "Active"),
        timeout=20,
        what="ClusterQueue Active",
    )
    status = cluster.policy(name)["status"]
    assert (status["observedGeneration"], status["teams"]) == (policy_generation(cluster, name), 2)


def policy_generation(cluster: Cluster, name: str) -> int:
    return int(cluster.policy(name)["metadata"]["generation"])


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda p: p["spec"]["teams"][0]["quotas"][0].__setitem__("flavor", "no-such-flavor"), "spec"),
        (
            lambda p: p["spec"]["teams"][0]["quotas"][0]["resources"][0].__setitem__("nominal", "-4"),
            "nominal",
        ),
        (lambda p: p["spec"]["transitions"]["defaults"].__setitem__("curve", "exponential"), "curve"),
    ],
    ids=["quota-on-undeclared-flavor", "negative-quota", "unknown-curve"],
)
def test_an_invalid_policy_is_rejected_by_the_api_server_naming_the_field(
    cluster: Cluster, mutate: Callable[[dict[str, Any]], None], field: str
) -> None:
    s = suffix()
    policy = two_team_policy(s, research_ns="r", business_ns="b")
    mutate(policy)
    with pytest.raises(ApiException) as info:
        cluster.create_policy(policy)
    assert (info.value.status, field in str(info.value.body)) == (422, True)


def test_a_policy_the_api_server_accepts_but_the_core_rejects_is_reported_and_not_applied(
    operator: OperatorProcess, cluster: Cluster, wait_until: Callable[..., Any]
) -> None:
    s = suffix()
    policy = two_team_policy(s, research_ns=cluster.namespace("r"), business_ns=cluster.namespace("b"))
    # A cohort with two parents: checked in Python only (too costly in CEL, docs/policy.md).
    policy["spec"]["teams"][0]["cohort"] = f"org-a-{s}/pool-{s}"
    policy["spec"]["teams"][1]["cohort"] = f"org-b-{s}/pool-{s}"
    cluster.create_policy(policy)
    name = policy["metadata"]["name"]

    def rejected() -> dict[str, Any] | None:
        conds = (cluster.policy(name).get("status") or {}).get("conditions") or []
        return next((c for c in conds if c["type"] == "Ready" and c["status"] == "False"), None)

    cond = wait_until(rejected, timeout=20, what="Ready=False")
    assert (cond["reason"], "cohort" in cond["message"]) == ("InvalidPolicy", True)
    assert cluster.events("default", name=name, reason="PolicyRejected") != []
    assert cluster.kueue("clusterqueues", f"research-{s}") is None


def test_a_hand_edit_of_a_managed_cluster_queue_is_reverted_and_reported(
    operator: OperatorProcess, cluster: Cluster, wait_until: Callable[..., Any]
) -> None:
    s = suffix()
    policy = two_team_policy(s, research_ns=cluster.namespace("r"), business_ns=cluster.namespace("b"))
    cluster.create_policy(policy)
    cq, flavor = f"research-{s}", f"gpu-{s}"
    wait_until(lambda: cluster.gpu_quota(cq, flavor) == "4", timeout=20, what="ClusterQueue rendered")
    obj = cluster.kueue("clusterqueues", cq)
    assert obj is not None
    groups = obj["spec"]["resourceGroups"]
    for fl in groups[0]["flavors"]:
        for r in fl["resources"]:
            if r["name"] == "nvidia.com/gpu":
                r["nominalQuota"] = "40"
    cluster.custom.patch_cluster_custom_object(
        "kueue.x-k8s.io",
        "v1beta2",
        "clusterqueues",
        cq,
        {"spec": {"resourceGroups": groups, "stopPolicy": "Hold"}},
        _content_type="application/merge-patch+json",
        field_manager="kubectl-edit",
    )
    wait_until(
        lambda: (
            cluster.gpu_quota(cq, flavor) == "4"
            and (cluster.kueue("clusterqueues", cq) or {})["spec"].get("stopPolicy") in (None, "None")
        ),
        timeout=20,
        what="hand edit reverted",
    )
    events = wait_until(
        lambda: cluster.events("default", name=cq, reason="DriftCorrected"),
        timeout=10,
        what="DriftCorrected event",
    )
    assert "nominalQuota" in events[0].message and "stopPolicy" in events[0].message
    # One edit, one report: the correction's own writes (an apply, then the patch removing the stopPolicy
    # the apply does not own) are not hand edits, even when their watch events come one at a time.
    time.sleep(2)
    assert len(cluster.events("default", name=cq, reason="DriftCorrected")) == 1
    records = [
        r
        for r in operator.log_records()
        if r.get("action") == "drift-corrected" and r.get("target") == f"ClusterQueue {cq}"
    ]
    assert len(records) == 1


def test_a_team_removed_from_the_policy_loses_its_queues_and_the_next_edit_prunes_nothing_again(
    operator: OperatorProcess, cluster: Cluster, wait_until: Callable[..., Any]
) -> None:
    """The first prune of a policy in the process LISTs; a later one (each new generation) reads the watch
    cache and what the process wrote (queue_manager/reconcile.py `prune`)."""
    s = suffix()
    research, business = cluster.namespace("research"), cluster.namespace("business")
    policy = two_team_policy(s, research_ns=research, business_ns=business)
    cluster.create_policy(policy)
    name = policy["metadata"]["name"]
    wait_until(lambda: condition_true(cluster.policy(name), "Ready"), timeout=20, what="policy Ready")

    def observed() -> bool:
        p = cluster.policy(name)
        return bool(p.get("status", {}).get("observedGeneration") == p["metadata"]["generation"]
                    and condition_true(p, "Ready"))

    teams = cluster.policy(name)["spec"]["teams"]
    cluster.patch_policy(name, {"spec": {"teams": [teams[0]]}})
    wait_until(lambda: cluster.kueue("clusterqueues", f"business-{s}") is None
               and cluster.kueue("localqueues", f"business-{s}", business) is None,
               timeout=20, what="the removed team's ClusterQueue and LocalQueue deleted")
    wait_until(observed, timeout=20, what="the edit observed")
    teams[0]["fairShareWeight"] = 2
    cluster.patch_policy(name, {"spec": {"teams": [teams[0]]}})
    wait_until(observed, timeout=20, what="the second edit observed")
    assert cluster.kueue("clusterqueues", f"research-{s}") is not None
    assert len(cluster.events("default", name=f"business-{s}", reason="Pruned")) == 1
