"""Fake GPU nodes for KWOK."""

from __future__ import annotations

from devcluster.nodes import NodeGroup, NodeShape, Taint, fake_node, node_ready, run_for


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


def test_a_node_of_a_group_carries_the_flavor_labels_and_taints_besides_its_own() -> None:
    node = fake_node("kwok-a100-0", NodeShape(gpus=16), labels={"accelerator": "a100", "type": "other"},
                     taints=[Taint("nvidia.com/gpu", "NoSchedule", "present"), Taint("spot", "NoExecute")])
    assert (node["metadata"]["labels"], node["spec"]) == (  # type: ignore[index]
        {"accelerator": "a100", "type": "kwok", "kubernetes.io/hostname": "kwok-a100-0",
         "kubernetes.io/os": "linux"},
        {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule", "value": "present"},
                    {"key": "spot", "effect": "NoExecute"}]})


def test_a_group_names_its_nodes_by_prefix_and_says_what_they_hold() -> None:
    group = NodeGroup(2, NodeShape(gpus=16, cpu="128", memory="1024Gi"), {"a": "b"},
                      (Taint("nvidia.com/gpu", "NoSchedule", "present"),), prefix="kwok-a100")
    assert (group.names(), group.describe()) == (
        ["kwok-a100-0", "kwok-a100-1"],
        "2 x kwok-a100 (16 nvidia.com/gpu, 128 cpu, 1024Gi memory; labels a=b; "
        "taints nvidia.com/gpu=present:NoSchedule)")
