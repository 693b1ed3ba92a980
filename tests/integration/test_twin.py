"""The twin test: the operator on a real cluster and the simulator on the equivalent scenario run the same
QuotaPolicy, the same policy edit and the same job stream, and the one controller takes the same actions
in both.

(a) The operator: `qm run`, bound only to the shipped ClusterRole, on the real control plane with
    kube-controller-manager, kube-scheduler and KWOK fake GPU nodes; Jobs whose pods run for given
    durations; time compressed to seconds (the policy's durations are seconds).
(b) The simulator: the same policy, the same edit at the same offset, the same Jobs (name, namespace,
    GPUs, arrival offset, run time plus the cluster's measured start/finish overhead).

Compared: the sequence of controller actions (transition start and steps with their values, eviction
requests with victims and kinds, reactivations): identical victims and steps; times within a tolerance of
one reconcile tick plus Kueue's batching and the pods' start/stop latency (TOLERANCE below).

The scenario: research (4 GPUs, experiments) and business (4 GPUs, protected) share one cohort; research
starts 4 one-GPU experiments 2.5 s apart, business 3 one-GPU jobs. At t=10 s the policy cuts research to
1 GPU with a borrowingLimit of 0 (its usage must fall) over 36 s (steps of 12 s from 22 s, drain, a
deadline at 40 s, 2 victims per hour). At
t=12 s a 2-GPU business job arrives that runs past the horizon: it does not fit, starves (2 s grace) and
research's last experiment is evicted for it and reactivated once it holds quota (parked: the cohort is
full). Step 1 applies (22 s); step 2 (due at 34 s) waits for research's running work to drain until the
deadline (40 s), then applies with one transition eviction, and step 3 one interval later (52 s) with the
second (the budget).

Every action is at least 5 s from any state change it could race with (a reactivation follows its own
eviction), and none depends on when a job ends (the first ends at ~60 s, after the last action): two
actions within the cluster's latency of each other, or one that depends on how long the cluster takes to
start and finish a pod, are a race on a real cluster
that the simulator breaks one way (the CI failures of earlier timelines: a business job's end near the
deadline decided which experiments were evicted).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from devcluster import ControlPlane
from fairshare.policy.patch import patch_policy
from simulations.jobs import JobSpec
from simulations.model import simulate_run
from simulations.scenario import Scenario
from tests.integration.jobs import gpu_job
from tests.integration.test_operator_harness import (
    OPERATOR_GROUPS,
    OPERATOR_USER,
    OperatorProcess,
    install_operator,
    suffix,
)

pytestmark = pytest.mark.integration

GPU = "nvidia.com/gpu"
EDIT_AT = 10.0
HORIZON = 85.0
# One reconcile tick (0.5 s) + Kueue's batching (~1 s) + a pod's start and stop on KWOK (~1-2 s).
TOLERANCE = 4.0


@dataclass(frozen=True)
class JobPlan:
    team: str
    name: str
    at: float
    gpus: int
    seconds: float
    priority_class: str


def _policy(s: str, research_ns: str, business_ns: str) -> dict[str, Any]:
    flavor = f"kwok-{s}"
    quota = [{"flavor": flavor, "resources": [{"name": GPU, "nominal": 4}, {"name": "cpu", "nominal": 64}]}]
    never = {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"}
    return {
        "apiVersion": "queuemanager.dev/v1alpha1",
        "kind": "QuotaPolicy",
        "metadata": {"name": f"twin-{s}"},
        "spec": {
            "flavors": [{"name": flavor, "nodeLabels": {"type": "kwok"}}],
            "priorityClasses": [
                {"name": f"business-{s}", "value": 1000000},
                {"name": f"experiment-{s}", "value": 100, "experiment": True},
            ],
            "teams": [
                {
                    "name": f"research-{s}",
                    "namespaces": [research_ns],
                    "cohort": f"org-{s}",
                    "quotas": quota,
                    "preemption": never,
                },
                {
                    "name": f"business-{s}",
                    "namespaces": [business_ns],
                    "cohort": f"org-{s}",
                    "quotas": quota,
                    "preemption": never,
                },
            ],
            "fairShare": {"halfLife": "1h"},
            "preemption": {
                "protectedClasses": [f"business-{s}"],
                "experimentPriorityThreshold": 1000,
                "minRuntime": "0s",
                "starvationGrace": "2s",
                "victimHold": "20s",
                "budget": {"maxVictims": 10, "window": "1h"},
            },
            "transitions": {
                "defaults": {
                    "duration": "36s",
                    "stepInterval": "12s",
                    "curve": "linear",
                    "drain": True,
                    "deadline": "30s",
                    "maxVictimsPerHour": 2,
                }
            },
        },
    }


def _cut(s: str) -> dict[str, Any]:
    return {
        "spec": {
            "teams": [
                {
                    "name": f"research-{s}",
                    # borrowingLimit 0: research's usage must fall to its quota (docs/policy.md, "What a cut
                    # means"), so past the deadline what it holds above it is evicted: the transition's
                    # evictions the twins compare. Without it research may borrow, and nobody needs its GPUs.
                    "quotas": [{"flavor": f"kwok-{s}",
                                "resources": [{"name": GPU, "nominal": 1, "borrowingLimit": 0}]}],
                }
            ]
        }
    }


def _jobs(s: str) -> list[JobPlan]:
    exp, biz = f"experiment-{s}", f"business-{s}"
    # Research jobs 2.5 s apart: Kueue's condition times have 1 s resolution, and the victim order (most
    # recently admitted first) must not hang on a tie the real cluster breaks by name, even when admission
    # takes a second longer on a loaded machine. They end (~60 s) after the last action (52 s).
    plan = [JobPlan("research", f"r{i}", 2.5 * (i - 1), 1, 60.0, exp) for i in range(1, 5)]
    plan += [JobPlan("business", f"b{i}", 1.0 + 0.2 * i, 1, 65.0, biz) for i in range(1, 4)]
    # b4 holds its quota past the horizon: what research holds at each step and at the deadline is then
    # decided by the timeline alone, not by how long this cluster takes to start and finish a pod.
    plan.append(JobPlan("business", "b4", 12.0, 2, 300.0, biz))
    return plan


# ------------------------------------------------------------------------------------------------ cluster


@pytest.fixture(scope="module")
def twin_admin(control_plane_with_nodes: ControlPlane) -> Iterator[k8s.ApiClient]:
    client = k8s_config.new_client_from_config(config_file=str(control_plane_with_nodes.kubeconfig))
    try:
        install_operator(client)
        yield client
    finally:
        client.close()


def _create_job(api: k8s.ApiClient, ns: str, queue: str, job: JobPlan) -> None:
    body = gpu_job(job.name, ns, queue, gpus=job.gpus, seconds=job.seconds, priority_class=job.priority_class)
    k8s.BatchV1Api(api).create_namespaced_job(ns, body)


@dataclass(frozen=True, order=True)
class Step:
    """One controller action, normalized across the shells."""

    at: float
    kind: str  # transition-start | transition-step | evict | reactivate
    subject: str  # "research 4 GPUs -> 1 GPU", "research step 1: 3 GPUs", or a Job's name
    detail: str = ""  # eviction kind: "experiment" | "transition"


_WORKLOAD = re.compile(r"^job-(?P<job>.+)-[0-9a-z]{5}$")


def _job_of(workload_key: str) -> str:
    name = workload_key.rsplit("/", 1)[-1].removeprefix("Workload ").split("/")[-1]
    m = _WORKLOAD.match(name)
    return m.group("job") if m else name


def _team(name: str, s: str) -> str:
    return name.removesuffix(f"-{s}")


def _operator_steps(op: OperatorProcess, t0: float, s: str) -> list[Step]:
    out: list[Step] = []
    for rec in op.log_records():
        if not rec.get("audit"):
            continue
        at = _epoch(rec["time"]) - t0
        action, target, what = rec["action"], rec["target"], rec["what"]
        if action == "transition-started" and f"{GPU} " in what:
            m = re.search(r"transition of (\S+) \S+ from (.+) to (.+) in", what)
            if m:
                out.append(
                    Step(at, "transition-start", f"{_team(m.group(1), s)} {m.group(2)} -> {m.group(3)}")
                )
        elif action == "transition-step" and target.startswith("ClusterQueue") and GPU in what:
            m = re.search(r"-> (.+) \(step (\d+)/", what)
            if m:
                out.append(
                    Step(
                        at,
                        "transition-step",
                        f"{_team(target.split()[-1], s)} step {m.group(2)}: {m.group(1)}",
                    )
                )
        elif action == "preempt":
            kind = "transition" if "quota transition" in what else "experiment"
            out.append(Step(at, "evict", _job_of(target.split(" ", 1)[1]), kind))
        elif action == "reactivated":
            out.append(Step(at, "reactivate", _job_of(target.split(" ", 1)[1])))
    return sorted(out, key=lambda x: x.at)  # log order (stable for lines of one instant)


def _epoch(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text).timestamp()


# ------------------------------------------------------------------------------------------------ simulator


def _measured_overhead(
    custom: k8s.CustomObjectsApi, namespaces: tuple[str, ...], seconds: dict[str, float]
) -> float:
    """How much longer than its pod's run time a Workload holds quota on this cluster (Kueue's admission to
    the Job's unsuspend, pod creation and scheduling, KWOK's stages, the Job's completion and Kueue's
    Finished): the median over the Jobs that ran once, uninterrupted. The simulator is given the same
    durations, so that the two run the same job stream."""
    from datetime import datetime

    spans = []
    for ns in namespaces:
        for w in custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", ns, "workloads")["items"]:
            conds = {c["type"]: c for c in w["status"].get("conditions", [])}
            job = _job_of(w["metadata"]["name"])
            if "Evicted" in conds or "Finished" not in conds or job not in seconds:
                continue
            held = (
                datetime.fromisoformat(conds["Finished"]["lastTransitionTime"])
                - datetime.fromisoformat(conds["QuotaReserved"]["lastTransitionTime"])
            ).total_seconds()
            spans.append(held - seconds[job])
    assert spans, "no Job ran uninterrupted: nothing to measure the cluster's overhead on"
    return sorted(spans)[len(spans) // 2]


def _simulated_steps(s: str, research_ns: str, business_ns: str, overhead: float) -> list[Step]:
    policy = _policy(s, research_ns, business_ns)
    doc = {
        "name": "twin",
        "horizon": f"{HORIZON}s",
        "seed": 1,
        "cluster": {"quotaPolicy": policy},
        "workloads": [
            {
                "name": "twin",
                "localQueue": f"{research_ns}/research-{s}",
                "generator": {
                    "arrivals": {"kind": "poisson", "ratePerHour": 1},
                    "durations": {"kind": "constant", "value": 1},
                    "requests": [{"resources": {GPU: 1}}],
                    "count": 1,
                },
            }
        ],
        "events": [{"at": EDIT_AT, "policyPatch": _cut(s)}],
    }
    scenario = Scenario.model_validate(doc)
    jobs = []
    for j in _jobs(s):
        ns = research_ns if j.team == "research" else business_ns
        jobs.append(
            JobSpec(
                name=j.name,
                namespace=ns,
                local_queue=f"{j.team}-{s}",
                arrival=j.at,
                duration=j.seconds + overhead,
                count=1,
                requests=(("cpu", 1000), (GPU, j.gpus * 1000)),
                priority_class=j.priority_class,
                source="twin",
            )
        )
    jobs.sort(key=lambda j: (j.arrival, j.name))
    run = simulate_run(scenario, jobs, base_dir=Path("."), variant="twin", replication=0)
    out: list[Step] = []
    for a in run.actions:
        if a.kind == "transition-start" and a.target.endswith(GPU):
            before, after = a.detail.split(" in ")[0].split(" -> ")
            out.append(
                Step(a.time, "transition-start", f"{_team(a.target.split('/')[0], s)} {before} -> {after}")
            )
        elif a.kind == "transition-step" and a.target.endswith(GPU):
            step = a.detail.split(":")[0].removeprefix("step ").split("/")[0]
            value = next(
                q.nominal_milli
                for q in run.quota_changes
                if abs(q.time - a.time) < 1e-9 and q.resource == GPU
            )
            shown = f"{value // 1000} GPU" + ("" if value == 1000 else "s")
            out.append(
                Step(a.time, "transition-step", f"{_team(a.target.split('/')[0], s)} step {step}: {shown}")
            )
        elif a.kind == "evict":
            kind = "experiment" if " for " in a.detail and "transition of" not in a.detail else "transition"
            out.append(Step(a.time, "evict", a.target.split("/")[-1], kind))
        elif a.kind == "reactivate":
            out.append(Step(a.time, "reactivate", a.target.split("/")[-1]))
    return out  # in the order the controller emitted them


# ------------------------------------------------------------------------------------------------ the test


def test_the_operator_on_a_real_cluster_and_the_simulator_take_the_same_actions(
    control_plane_with_nodes: ControlPlane,
    twin_admin: k8s.ApiClient,
    tmp_path: Path,
    wait_until: Callable[..., Any],
) -> None:
    s = suffix()
    core = k8s.CoreV1Api(twin_admin)
    research_ns, business_ns = f"research-{s}", f"business-{s}"
    for ns in (research_ns, business_ns):
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=ns)))
    kubeconfig = control_plane_with_nodes.mint_kubeconfig(OPERATOR_USER, list(OPERATOR_GROUPS))
    # The harness overrides the starvation grace for its own tests; here the policy's own (2 s) counts.
    op = OperatorProcess(kubeconfig, tmp_path, ("--starvation-grace", "2")).start()
    custom = k8s.CustomObjectsApi(twin_admin)
    qp = ("queuemanager.dev", "v1alpha1", "quotapolicies")
    policy = _policy(s, research_ns, business_ns)
    try:
        custom.create_cluster_custom_object(*qp, policy)

        def ready() -> bool:
            body = custom.get_cluster_custom_object(*qp, policy["metadata"]["name"])
            return any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (body.get("status") or {}).get("conditions") or []
            )

        wait_until(ready, timeout=30, what="the policy Ready")
        wait_until(
            lambda: custom.get_namespaced_custom_object(
                "kueue.x-k8s.io", "v1beta2", research_ns, "localqueues", f"research-{s}"
            ),
            timeout=20,
            what="the LocalQueues",
        )
        t0 = time.time()
        timers = []
        for j in _jobs(s):
            ns = research_ns if j.team == "research" else business_ns
            timers.append(threading.Timer(j.at, _create_job, (twin_admin, ns, f"{j.team}-{s}", j)))
        # The edit as a user makes it: the whole teams list (a JSON merge patch replaces lists; the scenario's
        # policyPatch merges them by name, the same result).
        cut = patch_policy(policy, _cut(s))
        timers.append(
            threading.Timer(
                EDIT_AT,
                lambda: custom.patch_cluster_custom_object(
                    *qp,
                    policy["metadata"]["name"],
                    {"spec": {"teams": cut["spec"]["teams"]}},
                    _content_type="application/merge-patch+json",
                ),
            )
        )
        for timer in timers:
            timer.start()
        time.sleep(HORIZON)
        for timer in timers:
            timer.join()
        real = _operator_steps(op, t0, s)
        overhead = _measured_overhead(
            custom, (research_ns, business_ns), {j.name: j.seconds for j in _jobs(s)}
        )
    finally:
        op.stop()
        custom.delete_cluster_custom_object(*qp, policy["metadata"]["name"])
        for ns in (research_ns, business_ns):
            core.delete_namespace(ns)
    simulated = _simulated_steps(s, research_ns, business_ns, overhead)
    report = "\n".join(
        f"  real {r.at:6.1f}s {r.kind} {r.subject} {r.detail}   |   sim "
        f"{m.at:6.1f}s {m.kind} {m.subject} {m.detail}"
        for r, m in zip(real, simulated, strict=False)
    )
    print(
        f"\ntwin: {len(real)} real actions, {len(simulated)} simulated; the cluster's start/finish "
        f"overhead {overhead:.0f}s\n{report}"
    )
    assert [(r.kind, r.subject, r.detail) for r in real] == [(m.kind, m.subject, m.detail) for m in simulated]
    late = [(r, m) for r, m in zip(real, simulated, strict=True) if abs(r.at - m.at) > TOLERANCE]
    assert late == []
    kinds = {r.kind for r in real}
    assert {"transition-start", "transition-step", "evict", "reactivate"} <= kinds
    assert {r.detail for r in real if r.kind == "evict"} == {"experiment", "transition"}
