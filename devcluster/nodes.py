"""Fake GPU nodes for KWOK (stretch): Nodes that KWOK's stages make Ready and whose pods "run".

KWOK manages only Nodes carrying the annotation ``kwok.x-k8s.io/node: fake`` (its
--manage-nodes-with-annotation-selector), so nothing else in the cluster is affected. Pods owned by
a Job complete after the delay in their annotation ``pod-complete.stage.kwok.x-k8s.io/delay``
(KWOK's "general" pod stages, copied from its module by build.sh).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

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


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint (core/v1 Taint): pods that do not tolerate it are not scheduled there."""

    key: str
    effect: str  # NoSchedule | PreferNoSchedule | NoExecute
    value: str | None = None


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """``count`` fake nodes named ``<prefix>-<i>`` of one shape, with extra labels and taints: the nodes of
    one ResourceFlavor (its nodeLabels, which Kueue turns into the admitted pods' nodeSelector, and its
    nodeTaints, which only pods with the flavor's tolerations pass)."""

    count: int
    shape: NodeShape = field(default_factory=NodeShape)
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Taint] = ()
    prefix: str = "kwok-gpu"

    def names(self) -> list[str]:
        return [f"{self.prefix}-{i}" for i in range(self.count)]

    def describe(self) -> str:
        shape = self.shape
        labels = ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        taints = ",".join(f"{t.key}{'=' + t.value if t.value else ''}:{t.effect}" for t in self.taints)
        return (f"{self.count} x {self.prefix} ({shape.gpus} {GPU_RESOURCE}, {shape.cpu} cpu, "
                f"{shape.memory} memory" + (f"; labels {labels}" if labels else "")
                + (f"; taints {taints}" if taints else "") + ")")


def fake_node(name: str, shape: NodeShape, *, labels: Mapping[str, str] | None = None,
              taints: Sequence[Taint] = ()) -> JSON:
    capacity = {"cpu": shape.cpu, "memory": shape.memory, "pods": shape.pods, GPU_RESOURCE: str(shape.gpus)}
    spec: JSON = {}
    if taints:
        spec["taints"] = [{"key": t.key, "effect": t.effect, **({"value": t.value} if t.value else {})}
                          for t in taints]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {**dict(labels or {}), "type": "kwok", "kubernetes.io/hostname": name,
                       "kubernetes.io/os": "linux"},
        },
        "spec": spec,
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
