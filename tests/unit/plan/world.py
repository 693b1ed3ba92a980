"""A small two-team cluster as `qm plan` reads it (a QuotaPolicy, its Kueue objects, Workloads as the API
server returns them), for the plan's unit tests."""

from __future__ import annotations

import datetime as dt
from typing import Any

from fairshare.policy import parse_policy, render

GPU = "nvidia.com/gpu"
ORIGIN = 1_800_000_000.0  # 2027-01-15T08:00:00Z: t=0 of the tests' initial states


def rfc3339(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def policy(research: int = 4, business: int = 4, **spec: Any) -> dict[str, Any]:
    """research (experiments) and business (protected) in one cohort, `research`/`business` GPUs each."""
    def team(name: str, gpus: int) -> dict[str, Any]:
        return {
            "name": name,
            "namespaces": [name],
            "cohort": "org",
            "quotas": [{"flavor": "gpu", "resources": [{"name": GPU, "nominal": gpus}]}],
            "preemption": {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"},
        }

    return {
        "apiVersion": "queuemanager.dev/v1alpha1",
        "kind": "QuotaPolicy",
        "metadata": {"name": "plan-test"},
        "spec": {
            "flavors": [{"name": "gpu"}],
            "priorityClasses": [
                {"name": "business", "value": 1000},
                {"name": "experiment", "value": 10, "experiment": True},
            ],
            "teams": [team("research", research), team("business", business)],
            **spec,
        },
    }


def objects(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The policy's Kueue objects as the operator applied them."""
    return [dict(o) for o in render(parse_policy(doc))]


def workload(
    ns: str,
    name: str,
    gpus: int,
    created: float,
    *,
    admitted: float | None = None,
    klass: str = "experiment",
    active: bool = True,
    evicted: float | None = None,
) -> dict[str, Any]:
    """A Workload of one pod; admitted (QuotaReserved at `admitted`) when given."""
    doc: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"namespace": ns, "name": name, "uid": f"uid-{name}",
                     "creationTimestamp": rfc3339(created)},
        "spec": {
            "queueName": ns,
            "active": active,
            "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": klass},
            "priority": 1000 if klass == "business" else 10,
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                {"name": "c", "resources": {"requests": {GPU: str(gpus)}}}]}}}],
        },
    }
    conditions: list[dict[str, Any]] = []
    if admitted is not None:
        doc["status"] = {"admission": {"clusterQueue": ns, "podSetAssignments": [
            {"name": "main", "count": 1, "flavors": {GPU: "gpu"}, "resourceUsage": {GPU: str(gpus)}}]}}
        for kind in ("QuotaReserved", "Admitted"):
            conditions.append({"type": kind, "status": "True", "reason": kind, "message": "",
                               "lastTransitionTime": rfc3339(admitted)})
    if evicted is not None:
        conditions.append({"type": "Evicted", "status": "True", "reason": "Preempted", "message": "",
                           "lastTransitionTime": rfc3339(evicted)})
    if conditions:
        doc.setdefault("status", {})["conditions"] = conditions
    return doc


def quiet_source(local_queue: str = "business/business") -> dict[str, Any]:
    """A source that submits nothing within a day's horizon (a scenario needs one)."""
    return {
        "name": "quiet",
        "localQueue": local_queue,
        "generator": {
            "arrivals": {"kind": "poisson", "ratePerHour": 0.001},
            "durations": {"kind": "constant", "value": 60},
            "requests": [{"resources": {GPU: 1}}],
            "count": 1,
            "start": "400d",
        },
    }


def scenario(
    workloads: list[dict[str, Any]],
    *,
    doc: dict[str, Any] | None = None,
    live: list[dict[str, Any]] | None = None,
    horizon: str = "6h",
    events: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A scenario starting from the live state: the policy, its objects as they exist, these Workloads."""
    doc = doc or policy()
    out: dict[str, Any] = {
        "name": "plan-test",
        "horizon": horizon,
        "cluster": {"quotaPolicy": doc},
        "workloads": [quiet_source()],
        "initial": {"at": ORIGIN, "objects": live if live is not None else objects(doc),
                    "workloads": workloads},
        **extra,
    }
    if events:
        out["events"] = events
    return out
