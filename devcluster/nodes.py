"""Fake GPU nodes for KWOK (stretch): Nodes that KWOK's stages make Ready and whose pods "run".

KWOK manages only Nodes carrying the annotation ``kwok.x-k8s.io/node: fake`` (its
--manage-nodes-with-annotation-selector), so nothing else in the cluster is affected. Pods owned by
a Job complete after the delay in their annotation ``pod-complete.stage.kwok.x-k8s.io/delay``
(KWOK's "general" pod stages, copied from its module by build.sh).
"""

from __future__ import annotations

from dataclasses import dataclass

from devcluster.rest import JSON

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
GPU_RESOURCE = "nvidia.com/gpu"
# Annotations read by KWOK's general pod-complete stage (kustomize/stage/pod/general/pod-complete.yaml).
COMPLETE_DELAY = "pod-complete.stage.kwok.x-k8s.io/delay"
COMPLETE_JITTER = "pod-complete.stage.kwok.x-k8s.io/jitter-delay"


@dataclass(frozen=True, slots=True)
class NodeShape:
    """Capacity of each fake node (Kubernetes quantity strings)."""

    gpus: int = 8
    cpu: str = "64"
    memory: str = "512Gi"
    pods: str = "110"


def fake_node(name: str, shape: NodeShape) -> JSON:
    capacity = {"cpu": shape.cpu, "memory": shape.memory, "pods": shape.pods, GPU_RESOURCE: str(shape.gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
        },
        "spec": {},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def run_for(seconds: float) -> dict[str, str]:
    """Pod-template annotations that make KWOK complete the pod ``seconds`` after it runs (no jitter)."""
    delay = f"{int(seconds * 1000)}ms"
    return {COMPLETE_DELAY: delay, COMPLETE_JITTER: delay}


def node_ready(node: JSON) -> bool:
    status = node.get("status")
    if not isinstance(status, dict):
        return False
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready" and cond.get("status") == "True":
            return True
    return False
