"""Small builders of Kueue objects as the API server returns them (dicts), for operator tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fairshare.manifests import parse_object
from fairshare.models import Workload


def ts(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def workload_dict(ns: str, name: str, *, queue: str, gpus: int = 1, priority: int = 100,
                  priority_class: str | None = None, admitted_to: str | None = None,
                  flavor: str = "gpu", reserved_at: float = 0.0, finished_at: float | None = None,
                  created: float = 0.0, labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "queueName": queue, "priority": priority,
        "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
            {"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]}}}],
    }
    if priority_class:
        spec["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                    "name": priority_class}
    status: dict[str, Any] = {"conditions": []}
    if admitted_to is not None:
        status["admission"] = {"clusterQueue": admitted_to, "podSetAssignments": [
            {"name": "main", "count": 1, "flavors": {"nvidia.com/gpu": flavor},
             "resourceUsage": {"nvidia.com/gpu": str(gpus)}}]}
        status["conditions"].append({"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                     "lastTransitionTime": ts(reserved_at)})
        status["conditions"].append({"type": "Admitted", "status": "True", "reason": "Admitted",
                                     "lastTransitionTime": ts(reserved_at)})
    else:
        status["conditions"].append({"type": "QuotaReserved", "status": "False", "reason": "Pending",
                                     "lastTransitionTime": ts(created)})
    if finished_at is not None:
        status["conditions"].append({"type": "Finished", "status": "True", "reason": "Succeeded",
                                     "lastTransitionTime": ts(finished_at)})
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": ts(created),
                         "uid": f"uid-{name}", "generation": 1, "labels": labels or {}},
            "spec": spec, "status": status}


def workload(ns: str, name: str, **kwargs: Any) -> Workload:
    parsed = parse_object(workload_dict(ns, name, **kwargs))
    if not isinstance(parsed, Workload):
        raise TypeError("not a workload")
    return parsed
