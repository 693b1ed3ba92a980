"""Quota transitions on the real control plane: a cut rolls out step by step, waits for running
work to drain instead of evicting it, and survives an operator crash mid-transition."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kubernetes import client as k8s

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

FAST = {"duration": "30s", "stepInterval": "10s", "curve": "linear", "drain": True}


def _cut_research_to(cluster: Cluster, name: str, gpus: int) -> None:
    policy = cluster.policy(name)
    teams = policy["spec"]["teams"]
    for r in teams[0]["quotas"][0]["resources"]:
        if r["name"] == "nvidia.com/gpu":
            r["nominal"] = gpus
    cluster.patch_policy(name, {"spec": {"teams": teams}})


def _transition(cluster: Cluster, name: str) -> dict[str, Any]:
    entries = (cluster.policy(name).get("status") or {}).get("transitions") or []
    gpu = [e for e in entries if e["resource"] == "nvidia.com/gpu" and e["team"].startswith("research")]
    return gpu[0] if gpu else {}


def _watch_quota(cluster: Cluster, cq: str, flavor: str, seen: list[str]) -> str | None:
    value = cluster.gpu_quota(cq, flavor)
    if value is not None and (not seen or seen[-1] != value):
        seen.append(value)
    return value


def _step_numbers(cluster: Cluster, cq: str) -> list[int]:
    events = cluster.events("default", name=cq, reason="TransitionStep")
    steps = []
    for e in sorted(events, key=lambda e: e.metadata.creation_timestamp):
        m = re.search(r"\(step (\d+)/\d+\)", e.message)
        if m:
            steps.append(int(m.group(1)))
    return steps


def test_a_cut_from_4_to_1_gpus_shrinks_step_by_step_and_drains_without_evictions(
    operator: OperatorProcess, cluster: Cluster, wait_until: Callable[..., Any]
) -> None:
    s = suffix()
    research, business = cluster.namespace("research"), cluster.namespace("business")
    policy = two_team_policy(s, research_ns=research, business_ns=business, transition=FAST)
    cluster.create_policy(policy)
    name, cq, flavor = policy["metadata"]["name"], f"research-{s}", f"gpu-{s}"
    wait_until(
        lambda: condition_true(cluster.kueue("clusterqueues", cq), "Active"),
        timeout=20,
        what="research ClusterQueue Active",
    )
    for i in range(3):
        cluster.create_job(research, f"exp-{i}", cq, f"experiment-{s}", 1)
    wait_until(
        lambda: sum(condition_true(w, "Admitted") for w in cluster.workloads(research)) == 3,
        timeout=30,
        what="3 experiments admitted",
    )
    seen: list[str] = []
    _watch_quota(cluster, cq, flavor, seen)
    _cut_research_to(cluster, name, 1)
    # 3 GPUs stay in use: the cut goes 4 -> 3, then holds while step 2 (2 GPUs) would strand work.
    wait_until(
        lambda: (
            _watch_quota(cluster, cq, flavor, seen) and _transition(cluster, name).get("phase") == "Draining"
        ),
        timeout=40,
        what="transition draining at 3 GPUs",
    )
    assert seen == ["4", "3"]
    batch = k8s.BatchV1Api(cluster.api)
    for i in range(2):  # two experiments finish
        batch.delete_namespaced_job(f"exp-{i}", research, propagation_policy="Background")
    wait_until(
        lambda: (
            _watch_quota(cluster, cq, flavor, seen) == "1"
            and _transition(cluster, name).get("phase") == "Complete"
        ),
        timeout=60,
        what="quota reaches 1",
    )
    workloads = cluster.workloads(research)
    evicted = [w["metadata"]["name"] for w in workloads if condition_true(w, "Evicted")]
    still_running = [
        w["metadata"]["name"]
        for w in workloads
        if condition_true(w, "Admitted") and not condition_true(w, "Finished")
    ]
    assert (seen[0], seen[-1], sorted(seen, key=int, reverse=True) == seen, evicted, len(still_running)) == (
        "4",
        "1",
        True,
        [],
        1,
    )
    assert cluster.events("default", name=cq, reason="TransitionWaiting") != []
    # A step's Event goes out after its ClusterQueue write (queue_manager/reconcile.py), so it can trail
    # the quota the test has just seen.
    wait_until(lambda: len(_step_numbers(cluster, cq)) >= len(seen) - 1, timeout=10, what="step Events")
    steps = _step_numbers(cluster, cq)
    assert steps == sorted(set(steps)) and len(steps) == len(seen) - 1


def test_an_operator_killed_mid_transition_resumes_without_duplicating_or_skipping_a_step(
    operator_factory: Callable[..., OperatorProcess], cluster: Cluster, wait_until: Callable[..., Any]
) -> None:
    s = suffix()
    policy = two_team_policy(
        s,
        research_ns=cluster.namespace("research"),
        business_ns=cluster.namespace("business"),
        transition=FAST,
    )
    first = operator_factory().start()
    cluster.create_policy(policy)
    name, cq, flavor = policy["metadata"]["name"], f"research-{s}", f"gpu-{s}"
    wait_until(lambda: cluster.gpu_quota(cq, flavor) == "4", timeout=20, what="ClusterQueue rendered")
    _cut_research_to(cluster, name, 1)
    wait_until(lambda: cluster.gpu_quota(cq, flavor) == "3", timeout=30, what="step 1 applied")
    first.kill()
    second = operator_factory().start()
    seen: list[str] = ["3"]
    wait_until(lambda: _watch_quota(cluster, cq, flavor, seen) == "1", timeout=60, what="transition resumed")
    wait_until(
        lambda: _transition(cluster, name).get("phase") == "Complete", timeout=10, what="transition complete"
    )
    # Step 3's Event goes out after its ClusterQueue write, so it can trail the quota seen above.
    wait_until(lambda: len(_step_numbers(cluster, cq)) >= 3, timeout=10, what="the Event of step 3")
    assert (seen, _step_numbers(cluster, cq)) == (["3", "2", "1"], [1, 2, 3])
    assert second.healthy()
