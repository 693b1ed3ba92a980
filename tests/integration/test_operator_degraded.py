"""A policy the operator cannot serve is never shown Ready (issue 33), on the real control plane: real
kube-apiserver, real Kueue with its validating webhooks, `qm run` bound to the shipped ClusterRole.

- An exception in the controller: a ClusterQueue of the team's name, made by hand before the policy, holds a
  quota Kueue's webhook takes but no int64 holds (observing it fails); a restarted operator finds a status
  whose transition starts in the year 10000 (deciding fails). Each: Degraded within one tick, with the field
  and value when the error names them, one Warning Event, qm_policy_degraded; served again once fixed.
- A Kueue webhook refusal at a step: the hand-made ClusterQueue the policy adopts has an admission check on a
  flavor the policy does not render, so Kueue's webhook refuses the ClusterQueue the operator applies
  (clusterqueue_webhook.go validateAdmissionCheckOnFlavorsUpdate) - no check of ours could know. Degraded
  within one tick with Kueue's words; no TransitionStarted or TransitionStep Event or audit row, the quota
  stays; once the field is removed the step is applied, then reported once.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client as k8s

from tests.integration.test_operator_harness import (  # noqa: F401 - the *_fixture names register fixtures
    KUEUE,
    ROOT,
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

TICK = 0.5  # the harness runs `qm run --tick 0.5`
GPU = "nvidia.com/gpu"


def _condition(policy: dict[str, Any], type_: str) -> dict[str, Any]:
    return next((c for c in (policy.get("status") or {}).get("conditions") or [] if c["type"] == type_), {})


def _degraded(cluster: Cluster, name: str, reason: str) -> dict[str, Any] | None:
    """The Ready condition when the policy shows Degraded for `reason` (Ready False), else None."""
    policy = cluster.policy(name)
    ready, degraded = _condition(policy, "Ready"), _condition(policy, "Degraded")
    if (ready.get("status"), ready.get("reason"), degraded.get("status")) == ("False", reason, "True"):
        return {**ready, "phase": policy["status"].get("phase")}
    return None


def _hand_made_cluster_queue(cluster: Cluster, name: str, groups: list[dict[str, Any]],
                             **spec: Any) -> None:
    """A ClusterQueue made by hand (no owner labels), as a platform team had before adopting a policy."""
    body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"namespaceSelector": {}, "resourceGroups": groups, **spec}}
    cluster.custom.create_cluster_custom_object(*KUEUE, "clusterqueues", body)
    cluster.cleanup.append(lambda: _delete_cluster_queue(cluster, name))


def _delete_cluster_queue(cluster: Cluster, name: str) -> None:
    with contextlib.suppress(k8s.ApiException):
        cluster.custom.delete_cluster_custom_object(*KUEUE, "clusterqueues", name)


def _group(flavors: dict[str, str]) -> dict[str, Any]:
    entries = [{"name": f, "resources": [{"name": GPU, "nominalQuota": q}]} for f, q in flavors.items()]
    return {"coveredResources": [GPU], "flavors": entries}


def _warnings(cluster: Cluster, name: str, reason: str) -> list[Any]:
    return [e for e in cluster.events("default", name=name, reason=reason) if e.type == "Warning"]


def _gauge(op: OperatorProcess, policy: str, reason: str) -> float | None:
    for line in op.metrics().splitlines():
        if line.startswith(f'qm_policy_degraded{{policy="{policy}",reason="{reason}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return None


def _audit(op: OperatorProcess, action: str, policy: str) -> list[dict[str, Any]]:
    """The ledger's audit rows of `action` for `policy`, as `qm audit` reads them from the operator's
    database (which also holds rows of other tests' policies: a starting operator records again what the
    Events of the shared control plane carry, queue_manager/ledger_feed.py recover)."""
    argv = ["audit", "--db", str(op.logdir / "ledger.db"), "--since", "1h", "--action", action, "-o", "json"]
    done = subprocess.run([sys.executable, "-m", "qm", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout).get("rows", [])
    assert isinstance(rows, list)
    return [r for r in rows if r.get("policy") == policy]


def test_an_exception_while_observing_makes_the_policy_degraded_within_a_tick_and_never_ready(
    operator: OperatorProcess, cluster: Cluster, wait_until: Callable[..., Any]
) -> None:
    s = suffix()
    research, business = cluster.namespace("research"), cluster.namespace("business")
    policy = two_team_policy(s, research_ns=research, business_ns=business)
    name, flavor = policy["metadata"]["name"], f"gpu-{s}"
    # Kueue's webhook takes it (it checks no upper bound); the API server stores it as 10e18.
    _hand_made_cluster_queue(cluster, f"research-{s}", [_group({flavor: "1e19"})])
    created = time.monotonic()
    cluster.create_policy(policy)
    ready = wait_until(lambda: _degraded(cluster, name, "ReconcileFailed"), timeout=20, what="Degraded")
    took = time.monotonic() - created
    assert ready["message"] == (
        f"observing the cluster: document 1 (ClusterQueue research-{s}): field spec.resourceGroups[0]"
        ".flavors[0].resources[0].nominalQuota: quantity too large (Kueue counts at most 2^63-1 units) "
        "(got '10e18')")
    assert ready["phase"] == "Degraded" and took < 2 * TICK + 2.0, f"{took:.2f} s"  # the create's reconcile
    wait_until(lambda: _gauge(operator, name, "ReconcileFailed") == 1.0, timeout=10, what="the gauge at 1")
    time.sleep(4 * TICK)  # more ticks, the same failure: still one Event
    assert len(_warnings(cluster, name, "ReconcileFailed")) == 1
    assert not condition_true(cluster.policy(name), "Ready")
    # Fixed by hand: served at the next tick, and the gauge says so.
    _delete_cluster_queue(cluster, f"research-{s}")
    wait_until(lambda: condition_true(cluster.policy(name), "Ready"), timeout=20, what="Ready again")
    assert cluster.gpu_quota(f"research-{s}", flavor) == "4"
    wait_until(lambda: _gauge(operator, name, "ReconcileFailed") == 0.0, timeout=10, what="the gauge at 0")


def test_a_status_the_controller_cannot_decide_from_makes_the_restarted_operator_report_degraded(
    operator_factory: Callable[..., OperatorProcess], cluster: Cluster, wait_until: Callable[..., Any]
) -> None:
    s = suffix()
    research, business = cluster.namespace("research"), cluster.namespace("business")
    policy = two_team_policy(s, research_ns=research, business_ns=business,
                             transition={"duration": "1h", "stepInterval": "20m", "curve": "linear",
                                         "drain": False})
    name = policy["metadata"]["name"]
    first = operator_factory().start()
    cluster.create_policy(policy)
    wait_until(lambda: condition_true(cluster.policy(name), "Ready"), timeout=20, what="Ready")
    cluster.patch_policy(name, {"spec": {"teams": [{**policy["spec"]["teams"][0], "quotas": [{
        "flavor": f"gpu-{s}", "resources": [{"name": GPU, "nominal": 1}, {"name": "cpu", "nominal": 64}]}]},
        policy["spec"]["teams"][1]]}})
    wait_until(lambda: (cluster.policy(name).get("status") or {}).get("transitions"), timeout=20,
               what="a transition recorded")
    first.stop()
    # The status as a damaged backup or a hand edit left it: the plan starts in the year 10000.
    stored = cluster.policy(name)["status"]["transitions"]
    stored[0]["plan"]["start"] = 253402300800.0
    cluster.custom.patch_cluster_custom_object_status(
        "queuemanager.dev", "v1alpha1", "quotapolicies", name, {"status": {"transitions": stored}},
        _content_type="application/merge-patch+json")
    second = operator_factory().start()
    ready = wait_until(lambda: _degraded(cluster, name, "ReconcileFailed"), timeout=10 * TICK + 5,
                       what="Degraded after the restart")
    assert ready["message"] == "deciding: ValueError: year 10000 is out of range"
    wait_until(lambda: _gauge(second, name, "ReconcileFailed") == 1.0, timeout=10, what="the gauge at 1")
    assert len(_warnings(cluster, name, "ReconcileFailed")) == 1


def test_a_step_kueues_webhook_refuses_makes_the_policy_degraded_and_is_reported_only_once_applied(
    operator: OperatorProcess, cluster: Cluster, wait_until: Callable[..., Any]
) -> None:
    s = suffix()
    research, business = cluster.namespace("research"), cluster.namespace("business")
    policy = two_team_policy(s, research_ns=research, business_ns=business, research_gpus=18)
    name, flavor, team = policy["metadata"]["name"], f"gpu-{s}", f"research-{s}"
    # The platform team's own ClusterQueue of that name: 16 GPUs, and an admission check on another flavor.
    _hand_made_cluster_queue(cluster, team, [_group({flavor: "16", f"h100-{s}": "0"})], cohortName=f"org-{s}",
                             admissionChecksStrategy={"admissionChecks": [
                                 {"name": f"prov-{s}", "onFlavors": [f"h100-{s}"]}]})
    created = time.monotonic()
    cluster.create_policy(policy)
    ready = wait_until(lambda: _degraded(cluster, name, "ApplyRefused"), timeout=20, what="Degraded")
    took = time.monotonic() - created
    message = ready["message"]
    assert message.startswith(f"ClusterQueue {team} not applied: 403 admission webhook "
                              "\"vclusterqueue.kb.io\" denied the request: ")
    assert f'spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]: Unsupported value: "h100-{s}"' \
        in message, message
    assert took < 2 * TICK + 2.0, f"{took:.2f} s"
    time.sleep(4 * TICK)  # ticks go by, Kueue keeps refusing
    # Nothing says the step happened: no Event, no audit row, and the quota is still 16.
    assert cluster.gpu_quota(team, flavor) == "16"
    assert [e.reason for e in cluster.events("default", name=name) if e.reason.startswith("Transition")] == []
    assert [e.reason for e in cluster.events("default", name=team) if e.reason.startswith("Transition")] == []
    assert (_audit(operator, "transition*", name), len(_warnings(cluster, name, "ApplyRefused"))) == ([], 1)
    assert _gauge(operator, name, "ApplyRefused") == 1.0
    assert not condition_true(cluster.policy(name), "Ready")
    # The platform team drops its admission check: the step is applied, then reported, once.
    cluster.custom.patch_cluster_custom_object(*KUEUE, "clusterqueues", team,
                                               {"spec": {"admissionChecksStrategy": None}},
                                               _content_type="application/merge-patch+json")
    wait_until(lambda: condition_true(cluster.policy(name), "Ready"), timeout=20, what="Ready")
    assert cluster.gpu_quota(team, flavor) == "18"
    steps = wait_until(lambda: cluster.events("default", name=team, reason="TransitionStep"), timeout=10,
                       what="the step's Event")
    assert [(e.message.split(";")[0], e.count) for e in steps] == [
        (f"nominalQuota {flavor}/{GPU} 16 GPUs -> 18 GPUs (step 0/6)", 1)]  # growth: at once
    assert [r["action"] for r in _audit(operator, "transition-step", name)] == ["transition-step"]
    wait_until(lambda: _gauge(operator, name, "ApplyRefused") == 0.0, timeout=10, what="qm_policy_degraded 0")


def test_a_second_policy_declaring_the_same_flavor_is_refused_by_the_owner_name_and_nothing_flaps(
    operator: OperatorProcess, cluster: Cluster, wait_until: Callable[..., Any]
) -> None:
    """Both policies render the ResourceFlavor they declare. Before, each took it from the other on every
    reconcile (a write each tick, both Ready); now the second is Degraded naming the owner, once."""
    s, t = suffix(), suffix()
    research, business, other = cluster.namespace("research"), cluster.namespace("business"), \
        cluster.namespace("other")
    first = two_team_policy(s, research_ns=research, business_ns=business)
    cluster.create_policy(first)
    wait_until(lambda: condition_true(cluster.policy(f"policy-{s}"), "Ready"), timeout=20, what="Ready")
    flavor = f"gpu-{s}"
    second = {"apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy",
              "metadata": {"name": f"policy-{t}"},
              "spec": {"flavors": [{"name": flavor}], "teams": [{
                  "name": f"other-{t}", "namespaces": [other],
                  "quotas": [{"flavor": flavor, "resources": [{"name": GPU, "nominal": 1}]}]}]}}
    cluster.create_policy(second)
    ready = wait_until(lambda: _degraded(cluster, f"policy-{t}", "ApplyRefused"), timeout=20, what="Degraded")
    assert ready["message"] == (
        f"ResourceFlavor {flavor} not applied: it belongs to QuotaPolicy policy-{s} (label "
        f"queuemanager.dev/policy=policy-{s}); each Kueue object is rendered by one policy: name it "
        "differently in one of the two")

    def flavor_now() -> tuple[str, str]:
        obj = cluster.custom.get_cluster_custom_object(*KUEUE, "resourceflavors", flavor)
        return obj["metadata"]["resourceVersion"], obj["metadata"]["labels"]["queuemanager.dev/policy"]

    before = flavor_now()
    time.sleep(6 * TICK)  # ticks of both policies
    assert (flavor_now(), before[1]) == (before, f"policy-{s}")
    assert condition_true(cluster.policy(f"policy-{s}"), "Ready")
    assert len(_warnings(cluster, f"policy-{t}", "ApplyRefused")) == 1
