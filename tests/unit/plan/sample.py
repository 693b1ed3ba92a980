"""The shipped sample policy (manifests/samples/quotapolicy.yaml) running in a cluster, as `qm plan` reads
it, and the shipped edit (manifests/samples/quotapolicy-shift.yaml: research 4 -> 1 GPU and no borrowing,
business 16 -> 19, a transition of a minute, a budget): the live QuotaPolicy and Kueue objects as the API
server returns them (its CRD defaults applied, keys in its order, server metadata, Kueue's own defaults on
the ClusterQueues), Workloads of both teams, and the ledger's history the way qm/planning/inputs.py hands it
over."""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path
from typing import Any

import yaml

from fairshare.policy import parse_policy, render
from fairshare.policy.status import read_status
from fairshare.policy.tenancy import render_tenancy
from qm.live import LiveCluster, build_state
from qm.planning.inputs import History, Live, PolicyFile, object_key
from qm.planning.semantic import defaulted, policy_spec_schema
from simulations.calibrate import RecordedLife

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "manifests" / "samples" / "quotapolicy.yaml"
SHIFT = ROOT / "manifests" / "samples" / "quotapolicy-shift.yaml"
GPU = "nvidia.com/gpu"
NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z: the read of the cluster
RESEARCH, BUSINESS = "ai-frontier-research", "biz-model-serving"
EXPERIMENT, PROTECTED = "low-priority-experiment", "high-priority-business"
PRIORITY = {EXPERIMENT: 100, PROTECTED: 1_000_000}
FLAVOR = "gpu-a100"


def rfc3339(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def sample() -> dict[str, Any]:
    return dict(yaml.safe_load(SAMPLE.read_text()))


def shift() -> PolicyFile:
    from qm.planning.inputs import read_policy_file

    return read_policy_file(str(SHIFT))


def as_served(doc: dict[str, Any], generation: int = 1) -> dict[str, Any]:
    """The QuotaPolicy as the API server returns it after `kubectl apply -f`: the CRD's defaults set, keys
    sorted (Go's JSON of a map), server metadata, kubectl's last-applied annotation."""
    served = copy.deepcopy(doc)
    served["spec"] = defaulted(served["spec"], policy_spec_schema())
    served["metadata"] = {
        **served["metadata"], "generation": generation, "uid": "6f1c2d4e-0000-4000-8000-000000000001",
        "resourceVersion": "4211", "creationTimestamp": rfc3339(NOW - 3600),
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": json.dumps(doc)},
        "managedFields": [{"manager": "kubectl-client-side-apply", "operation": "Update"}]}
    return dict(json.loads(json.dumps(served, sort_keys=True)))


def kueue_objects(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The policy's Kueue objects (and its tenancy's admission rules and RoleBindings) as the operator
    applied them and the API server returns them, with Kueue's webhook defaults the rendering does not set
    (they must never show in a diff)."""
    out = []
    policy = parse_policy(doc)
    for obj in [*render(policy), *render_tenancy(policy)]:  # spec.tenancy's rules and RoleBindings too
        o = copy.deepcopy(dict(obj))
        if o["kind"] == "ClusterQueue":
            o["spec"].setdefault("flavorFungibility", {"whenCanBorrow": "MayStopSearch",
                                                      "whenCanPreempt": "TryNextFlavor"})
            o["spec"].setdefault("stopPolicy", "None")
            o["spec"]["preemption"].setdefault("borrowWithinCohort", {"policy": "Never"})
        o["metadata"] = {**o["metadata"], "uid": f"uid-{o['metadata']['name']}", "resourceVersion": "17",
                         "generation": 1, "creationTimestamp": rfc3339(NOW - 3600)}
        out.append(dict(json.loads(json.dumps(o, sort_keys=True))))
    return out


def workload(ns: str, name: str, gpus: int, klass: str, created: float, admitted: float | None = None,
             ) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
        "metadata": {"namespace": ns, "name": name, "uid": f"uid-{name}",
                     "creationTimestamp": rfc3339(created), "labels": {"kueue.x-k8s.io/queue-name": ns}},
        "spec": {"queueName": ns, "active": True, "priority": PRIORITY[klass],
                 "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                      "name": klass},
                 "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                     {"name": "c", "resources": {"requests": {GPU: str(gpus), "cpu": "4"}}}]}}}]},
    }
    if admitted is not None:
        doc["status"] = {
            "admission": {"clusterQueue": ns, "podSetAssignments": [
                {"name": "main", "count": 1, "flavors": {GPU: FLAVOR, "cpu": FLAVOR},
                 "resourceUsage": {GPU: str(gpus), "cpu": "4"}}]},
            "conditions": [{"type": k, "status": "True", "reason": k, "message": "",
                            "lastTransitionTime": rfc3339(admitted)} for k in ("QuotaReserved", "Admitted")]}
    return doc


def busy() -> list[dict[str, Any]]:
    """Research runs two 2-GPU experiments (its 4 GPUs, started 4 min ago); business runs four 4-GPU jobs (its
    16) and waits with one more: nothing Kueue would change on its own (business is within its nominal and
    cannot borrow: research uses its own)."""
    return [workload(RESEARCH, f"exp-{i}", 2, EXPERIMENT, NOW - 300, NOW - 240 + 10 * i)
            for i in range(2)] + \
        [workload(BUSINESS, f"serve-{i}", 4, PROTECTED, NOW - 400, NOW - 360) for i in range(4)] + \
        [workload(BUSINESS, "serve-waiting", 4, PROTECTED, NOW - 100)]


def live(doc: dict[str, Any], workloads: list[dict[str, Any]], status: dict[str, Any] | None = None) -> Live:
    """What qm/live.py and qm.planning.inputs.read_live make of this cluster."""
    served = as_served(doc)
    if status is not None:
        served["status"] = status
    objects = kueue_objects(doc)
    # qm/planning/inputs.py read_live: the tenancy's rules and RoleBindings go to the index, not the state.
    documents = [o for o in objects if o["apiVersion"].startswith("kueue.x-k8s.io/")] + workloads
    state, skipped = build_state(documents, {}, source="test")
    assert not skipped, skipped
    cluster = LiveCluster("https://cluster.test:6443", NOW, state, tuple(documents))
    parsed, warnings = read_status(served.get("status"))
    index = {object_key(d): d for d in objects}
    current = parse_policy({k: v for k, v in served.items() if k != "status"})
    return Live(cluster, NOW, served, current, parsed, 1, 20_000, tuple(warnings), index)


def short_ledger() -> History:
    """The ledger the issue's user had: 12 lives of 25-second jobs of both teams, in the last quarter hour."""
    lives = []
    for i in range(12):
        queue, klass, gpus = (RESEARCH, EXPERIMENT, 2) if i % 2 == 0 else (BUSINESS, PROTECTED, 4)
        t = NOW - 900 + 40 * i
        lives.append(RecordedLife(f"{queue}/{queue}", klass, t, 1, ((GPU, gpus * 1000), ("cpu", 4000)),
                                  started=t + 2, ended=t + 27))
    return History(NOW - 28 * 86400, NOW, NOW - 56 * 86400, tuple(lives), "test ledger")


def young_ledger(workloads: list[dict[str, Any]]) -> History:
    """A ledger as young as the cluster: the lives of the work present, none finished yet."""
    lives = []
    for w in workloads:
        meta, spec = w["metadata"], w["spec"]
        requests = spec["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]
        created = dt.datetime.fromisoformat(meta["creationTimestamp"].replace("Z", "+00:00")).timestamp()
        conditions = (w.get("status") or {}).get("conditions") or []
        started = next((dt.datetime.fromisoformat(c["lastTransitionTime"].replace("Z", "+00:00")).timestamp()
                        for c in conditions if c["type"] == "QuotaReserved"), None)
        lives.append(RecordedLife(
            f"{meta['namespace']}/{spec['queueName']}", spec["priorityClassRef"]["name"], created, 1,
            tuple(sorted((r, int(q) * 1000) for r, q in requests.items())), started=started,
            running=started is not None))
    return History(NOW - 28 * 86400, NOW, NOW - 56 * 86400, tuple(lives), "test ledger")
