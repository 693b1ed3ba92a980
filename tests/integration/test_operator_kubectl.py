"""kubectl tells the story (issue 13, items 2 and 5), on the real control plane: `kubectl get qp` shows the
phase and the next step, every transition phase change is one Event on the policy in human units, a policy
the operator refuses says so once (with `qm policy check`'s message), a hand edit is one DriftCorrected
naming the object, and qm_preemption_blocked_total counts the reason that happened."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s

from qm.cli import main as qm_main
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

KUBECTL = Path(sys.executable).parent / "kubectl"
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def _get_qp(kubeconfig: Path, name: str) -> dict[str, str]:
    """`kubectl get qp NAME` as {column: value} (the columns the CRD's printer columns make)."""
    out = subprocess.run([str(KUBECTL), "get", "qp", name], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "KUBECONFIG": str(kubeconfig)}, check=True).stdout.splitlines()
    header, row = out[0], out[1]
    starts = [m.start() for m in re.finditer(r"\S+(?: \S+)*", header)]
    names = [m.group() for m in re.finditer(r"\S+(?: \S+)*", header)]
    bounds = [*starts[1:], None]
    return {n: row[a:b].strip() for n, a, b in zip(names, starts, bounds, strict=True)}


def _policy_events(cluster: Cluster, name: str) -> list[Any]:
    """The policy's Events in the order they were posted: by resourceVersion (etcd's revision of the create;
    the timestamps have whole seconds, and a step and the finish of its transition share one)."""
    return sorted(cluster.events("default", name=name), key=lambda e: int(e.metadata.resource_version))


def _set_research(cluster: Cluster, name: str, gpus: int) -> None:
    teams = cluster.policy(name)["spec"]["teams"]
    for r in teams[0]["quotas"][0]["resources"]:
        if r["name"] == "nvidia.com/gpu":
            r["nominal"] = gpus
    cluster.patch_policy(name, {"spec": {"teams": teams}})


def test_a_draining_cut_shows_its_phase_next_step_and_one_event_per_phase_change(
    operator: OperatorProcess, cluster: Cluster, kubeconfig: Path, wait_until: Callable[..., Any]
) -> None:
    s = suffix()
    research = cluster.namespace("research")
    policy = two_team_policy(s, research_ns=research, business_ns=cluster.namespace("business"),
                             transition={"duration": "30s", "stepInterval": "10s", "curve": "linear",
                                         "drain": True})
    cluster.create_policy(policy)
    name, cq = policy["metadata"]["name"], f"research-{s}"
    wait_until(lambda: _get_qp(kubeconfig, name).get("PHASE") == "Ready", timeout=30, what="PHASE Ready")
    for i in range(3):
        cluster.create_job(research, f"exp-{i}", cq, f"experiment-{s}", 1)
    wait_until(lambda: sum(condition_true(w, "Admitted") for w in cluster.workloads(research)) == 3,
               timeout=30, what="3 experiments admitted")
    _set_research(cluster, name, 1)
    row = wait_until(lambda: (r := _get_qp(kubeconfig, name)).get("PHASE") == "Transitioning" and r,
                     timeout=30, what="PHASE Transitioning")
    # NEXT STEP says what the transition waits for and when: its next step, the step's time and value.
    step = re.fullmatch(rf"{cq} gpu-{s}/nvidia\.com/gpu: step [12]/3 to [32] GPUs at (\S+)", row["NEXT STEP"])
    assert step and RFC3339.match(step.group(1)) and row["TRANSITIONS"] == "1", row
    # 3 GPUs stay in use: step 2 (2 GPUs) waits for them.
    row = wait_until(lambda: (r := _get_qp(kubeconfig, name)).get("PHASE") == "Draining" and r, timeout=40,
                     what="Draining")
    # What must drain, held by whom, and that there is no deadline after which it would be cut.
    held = ", ".join([rf"{research}/\S+"] * 3)
    due = r"the step to (2 GPUs waits for 1 GPU|1 GPU waits for 2 GPUs)"  # step 2, or 3 once due
    assert re.fullmatch(rf"{cq} gpu-{s}/nvidia\.com/gpu: {due} of the 3 GPUs held by {held} to drain; "
                        r"no deadline: it waits for them", row["NEXT STEP"]), row
    batch = k8s.BatchV1Api(cluster.api)
    for i in range(3):
        batch.delete_namespaced_job(f"exp-{i}", research, propagation_policy="Background")
    for wl in cluster.workloads(research):  # no garbage collector on this control plane
        cluster.custom.delete_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", research, "workloads",
                                                       wl["metadata"]["name"])
    row = wait_until(lambda: (r := _get_qp(kubeconfig, name)).get("PHASE") == "Ready" and r, timeout=60,
                     what="PHASE Ready again")
    # Nothing to wait for: status.nextStep is absent, and kubectl prints an absent printer column as empty.
    assert (row["NEXT STEP"], row["TRANSITIONS"], row["READY"]) == ("", "0", "True")
    time.sleep(2)  # a few more ticks: nothing is reported again
    events = _policy_events(cluster, name)
    story = [(e.reason, e.message.split("; why:")[0]) for e in events if e.reason.startswith("Transition")]
    reasons = [r for r, _ in story]
    flavor = f"gpu-{s}"
    assert reasons[0] == "TransitionStarted" and reasons[-1] == "TransitionFinished", story
    assert story[0][1] == f"transition of {cq} {flavor}/nvidia.com/gpu from 4 GPUs to 1 GPU in 3 step(s)"
    assert reasons.count("TransitionWaiting") == 1 and reasons.count("TransitionFinished") == 1, story
    steps = [m for r, m in story if r == "TransitionStep"]
    assert steps[0] == f"nominalQuota {flavor}/nvidia.com/gpu 4 GPUs -> 3 GPUs (step 1/3)", steps
    assert steps[-1].endswith("-> 1 GPU (step 3/3)") and len(steps) == len(set(steps)), steps
    assert all(int(e.count or 1) == 1 for e in events)
    assert not [m for _, m in story if re.search(r"\d000m|\d{10}", m)], story  # human units, no epochs


def test_a_target_changed_mid_transition_is_one_cancel_event_on_the_policy(
    operator: OperatorProcess, cluster: Cluster, wait_until: Callable[..., Any]
) -> None:
    s = suffix()
    policy = two_team_policy(s, research_ns=cluster.namespace("r"), business_ns=cluster.namespace("b"),
                             transition={"duration": "60s", "stepInterval": "20s", "curve": "linear",
                                         "drain": False})
    cluster.create_policy(policy)
    name, cq, flavor = policy["metadata"]["name"], f"research-{s}", f"gpu-{s}"
    wait_until(lambda: cluster.gpu_quota(cq, flavor) == "4", timeout=30, what="rendered")
    _set_research(cluster, name, 1)
    wait_until(lambda: cluster.gpu_quota(cq, flavor) == "3", timeout=40, what="step 1")
    _set_research(cluster, name, 4)
    wait_until(lambda: cluster.gpu_quota(cq, flavor) == "4", timeout=30, what="back to 4")
    time.sleep(2)
    cancels = [e for e in _policy_events(cluster, name) if e.reason == "TransitionCancelled"]
    assert [e.message.split("; why:")[0] for e in cancels] == [
        f"transition of {cq} {flavor}/nvidia.com/gpu to 1 GPU cancelled at 3 GPUs"]


def test_a_policy_the_operator_refuses_is_invalid_once_with_qm_policy_checks_message(
    operator: OperatorProcess, cluster: Cluster, kubeconfig: Path, wait_until: Callable[..., Any],
    tmp_path: Path, capsys: Any
) -> None:
    s = suffix()
    policy = two_team_policy(s, research_ns=cluster.namespace("r"), business_ns=cluster.namespace("b"),
                             transition={"duration": "14d", "stepInterval": "15d"})  # CEL cannot compare d
    cluster.create_policy(policy)  # the API server accepts it
    name = policy["metadata"]["name"]
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(policy))
    assert qm_main(["policy", "check", str(path)]) == 2
    checked = capsys.readouterr().err.strip()
    row = wait_until(lambda: (r := _get_qp(kubeconfig, name)).get("PHASE") == "Invalid" and r, timeout=30,
                     what="PHASE Invalid")
    assert row["READY"] == "False"
    time.sleep(3)  # six ticks: still one Event
    rejected = [e for e in _policy_events(cluster, name) if e.reason == "PolicyRejected"]
    assert len(rejected) == 1 and int(rejected[0].count or 1) == 1
    # The same rule, the same words: after where it is (the file and document for qm policy check, the
    # policy for the operator), the field, the message and the value are the operator's.
    why = rejected[0].message.split("; why: ")[1].rsplit("; policy ", 1)[0]
    assert checked.startswith(f"qm policy: error: {path}: document 1 (QuotaPolicy {name}): field ")
    assert checked.split(": field ", 1)[1] == why.split(": field ", 1)[1] == (
        "spec.transitions.defaults.stepInterval: stepInterval must not exceed duration (14d) (got '15d')")


def test_a_hand_edit_is_one_drift_event_naming_the_object_on_the_policy(
    operator: OperatorProcess, cluster: Cluster, wait_until: Callable[..., Any]
) -> None:
    s = suffix()
    policy = two_team_policy(s, research_ns=cluster.namespace("r"), business_ns=cluster.namespace("b"))
    cluster.create_policy(policy)
    name, cq, flavor = policy["metadata"]["name"], f"research-{s}", f"gpu-{s}"
    wait_until(lambda: cluster.gpu_quota(cq, flavor) == "4", timeout=30, what="rendered")

    def hold_by_hand() -> None:
        cluster.custom.patch_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", cq,
                                                   {"spec": {"stopPolicy": "Hold"}},
                                                   _content_type="application/merge-patch+json",
                                                   field_manager="kubectl-edit")
        wait_until(lambda: (cluster.kueue("clusterqueues", cq) or {})["spec"].get("stopPolicy")
                   in (None, "None"), timeout=20, what="edit reverted")
        time.sleep(2)  # Kueue's status write for the held queue and a few ticks: nothing more is posted

    def drift_events() -> tuple[list[Any], list[Any]]:
        return ([e for e in _policy_events(cluster, name) if e.reason == "DriftCorrected"],
                [e for e in cluster.events("default", name=cq) if e.reason == "DriftCorrected"])

    hold_by_hand()
    on_policy, on_object = drift_events()
    assert (len(on_policy), len(on_object)) == (1, 1)
    assert on_policy[0].message.startswith(f"reverted hand edit of ClusterQueue {cq}: spec.stopPolicy")
    hold_by_hand()  # the same edit made again is another edit: one more Event on each
    on_policy, on_object = drift_events()
    assert (len(on_policy), len(on_object)) == (2, 2)


def test_a_blocked_preemption_is_counted_under_the_reason_that_happened(
    operator: OperatorProcess, cluster: Cluster, wait_until: Callable[..., Any]
) -> None:
    s = suffix()
    research, business = cluster.namespace("research"), cluster.namespace("business")
    policy = two_team_policy(s, research_ns=research, business_ns=business, research_gpus=4, business_gpus=4,
                             preemption={"protectedClasses": [f"business-{s}"], "minRuntime": "0s",
                                         "starvationGrace": "1s",
                                         "budget": {"maxVictims": 0, "window": "1h"}})
    cluster.create_policy(policy)
    name = policy["metadata"]["name"]
    wait_until(lambda: condition_true(cluster.kueue("localqueues", f"research-{s}", research), "Active"),
               timeout=30, what="LocalQueue Active")
    for i in range(8):
        cluster.create_job(research, f"exp-{i}", f"research-{s}", f"experiment-{s}", 1)
    wait_until(lambda: sum(condition_true(w, "Admitted") for w in cluster.workloads(research)) == 8,
               timeout=40, what="8 experiments admitted (4 borrowed)")
    cluster.create_job(business, "serve", f"business-{s}", f"business-{s}", 2)

    def blocked() -> dict[str, float]:
        out = {}
        for line in operator.metrics().splitlines():
            m = re.match(r'qm_preemption_blocked_total\{policy="([^"]+)",reason="([^"]+)"\} (\S+)', line)
            if m and m.group(1) == name:
                out[m.group(2)] = float(m.group(3))
        return out

    counted = wait_until(blocked, timeout=40, what="a blocked preemption counted")
    time.sleep(2)
    reasons = [b["reason"] for b in cluster.policy(name)["status"]["blockedPreemptions"]]
    assert (blocked(), counted) == ({"budget": 1.0}, {"budget": 1.0}), reasons
    assert reasons and all("the budget allows 0 more" in r for r in reasons)
