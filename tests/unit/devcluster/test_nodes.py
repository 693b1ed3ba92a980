"""Fake GPU nodes for KWOK."""

from __future__ import annotations

from devcluster.nodes import NodeShape, fake_node, node_ready, run_for


def test_a_fake_node_is_annotated_for_kwok_and_advertises_its_gpus() -> None:
    node = fake_node("kwok-gpu-0", NodeShape(gpus=4, cpu="32", memory="256Gi", pods="50"))
    capacity = {"cpu": "32", "memory": "256Gi", "pods": "50", "nvidia.com/gpu": "4"}
    assert node == {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "kwok-gpu-0",
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"type": "kwok", "kubernetes.io/hostname": "kwok-gpu-0", "kubernetes.io/os": "linux"},
        },
        "spec": {},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def test_run_for_sets_delay_and_jitter_equal_so_the_duration_is_exact() -> None:
    assert run_for(2.5) == {
        "pod-complete.stage.kwok.x-k8s.io/delay": "2500ms",
        "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "2500ms",
    }


def test_a_node_is_ready_only_with_a_true_ready_condition() -> None:
    def with_ready(status: str) -> dict[str, object]:
        return {"status": {"conditions": [{"type": "Ready", "status": status}]}}

    assert [node_ready(with_ready("True")), node_ready(with_ready("False")), node_ready({})] == [
        True,
        False,
        False,
    ]
