"""The suspended batch/v1 Job the integration tests submit to Kueue: one pod asking for GPUs (and a
core), in a LocalQueue, optionally in a priority class, that KWOK completes `seconds` after it runs.
A pure builder; the caller creates it (`k8s.BatchV1Api(api).create_namespaced_job(ns, body)`)."""

from __future__ import annotations

from typing import Any

from devcluster.nodes import run_for

GPU = "nvidia.com/gpu"


def gpu_job(name: str, namespace: str, queue: str, *, gpus: int = 1, seconds: float,
            priority_class: str | None = None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """`labels` go on the Job and on its pod template (Kueue copies them to the Workload from either)."""
    meta_labels = {"kueue.x-k8s.io/queue-name": queue}
    if priority_class is not None:
        meta_labels["kueue.x-k8s.io/priority-class"] = priority_class
    template: dict[str, Any] = {"annotations": run_for(seconds)}
    if labels is not None:
        meta_labels.update(labels)
        template["labels"] = dict(labels)
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": meta_labels},
        "spec": {
            "suspend": True, "parallelism": 1, "completions": 1, "backoffLimit": 0,
            "template": {
                "metadata": template,
                "spec": {"restartPolicy": "Never", "containers": [{
                    "name": "main", "image": "registry.invalid/work",
                    "resources": {"requests": {GPU: str(gpus), "cpu": "1"}, "limits": {GPU: str(gpus)}}}]},
            },
        },
    }
