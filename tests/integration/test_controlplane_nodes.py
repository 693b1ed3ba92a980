"""Stretch: with kube-controller-manager, kube-scheduler and KWOK fake GPU nodes, a Job admitted
by Kueue gets a pod that is scheduled on a fake node, "runs" for its given duration and completes."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from devcluster import ControlPlane
from devcluster.nodes import GPU_RESOURCE, run_for
from tests.integration.test_controlplane_kueue import GROUP, QUEUE_LABEL, VERSION, Kueue

Wait = Callable[..., Any]


@pytest.fixture(scope="module")
def nodes_client(control_plane_with_nodes: ControlPlane) -> Iterator[k8s.ApiClient]:
    client = k8s_config.new_client_from_config(config_file=str(control_plane_with_nodes.kubeconfig))
    try:
        yield client
    finally:
        client.close()


def test_an_admitted_gpu_job_runs_on_a_fake_node_and_completes_after_its_duration(
    nodes_client: k8s.ApiClient, wait_until: Wait
) -> None:
    kueue, core, batch = Kueue(nodes_client), k8s.CoreV1Api(nodes_client), k8s.BatchV1Api(nodes_client)
    suffix = uuid.uuid4().hex[:6]
    ns, flavor, cq = f"gpu-{suffix}", f"gpu-{suffix}", f"cq-gpu-{suffix}"
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=ns)))
    # nodeLabels: Kueue injects them as a nodeSelector on admission, so pods land on KWOK nodes.
    kueue.create_cluster(
        "resourceflavors",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor},
            "spec": {"nodeLabels": {"type": "kwok"}},
        },
    )
    kueue.create_cluster(
        "clusterqueues",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ClusterQueue",
            "metadata": {"name": cq},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": [GPU_RESOURCE],
                        "flavors": [
                            {"name": flavor, "resources": [{"name": GPU_RESOURCE, "nominalQuota": "8"}]}
                        ],
                    }
                ],
            },
        },
    )
    kueue.create(
        ns,
        "localqueues",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "LocalQueue",
            "metadata": {"name": "lq"},
            "spec": {"clusterQueue": cq},
        },
    )
    gpus = {GPU_RESOURCE: "2"}
    batch.create_namespaced_job(
        ns,
        k8s.V1Job(
            metadata=k8s.V1ObjectMeta(name="train", labels={QUEUE_LABEL: "lq"}),
            spec=k8s.V1JobSpec(
                suspend=True,
                backoff_limit=0,
                template=k8s.V1PodTemplateSpec(
                    metadata=k8s.V1ObjectMeta(annotations=run_for(1.0)),
                    spec=k8s.V1PodSpec(
                        restart_policy="Never",
                        containers=[
                            k8s.V1Container(
                                name="c",
                                image="registry.invalid/train",
                                resources=k8s.V1ResourceRequirements(requests=gpus, limits=gpus),
                            )
                        ],
                    ),
                ),
            ),
        ),
    )
    try:
        job = wait_until(
            lambda: (j := batch.read_namespaced_job("train", ns)).status.succeeded and j,
            timeout=30.0,
            what="the Job to complete",
        )
        [pod] = core.list_namespaced_pod(ns).items
        [wl] = kueue.list(ns, "workloads")
        finished = wait_until(
            lambda: next(
                (
                    c
                    for c in kueue.get(ns, "workloads", wl["metadata"]["name"])["status"].get(
                        "conditions", []
                    )
                    if c["type"] == "Finished" and c["status"] == "True"
                ),
                None,
            ),
            what="Kueue to mark the Workload Finished",
        )
        assert {
            "job_succeeded": job.status.succeeded,
            "pod_phase": pod.status.phase,
            "pod_node_is_fake": pod.spec.node_name.startswith("kwok-gpu-"),
            "pod_node_selector": pod.spec.node_selector,
            "workload_finished": finished["reason"],
        } == {
            "job_succeeded": 1,
            "pod_phase": "Succeeded",
            "pod_node_is_fake": True,
            "pod_node_selector": {"type": "kwok"},
            "workload_finished": "Succeeded",
        }
    finally:
        kueue.delete_cluster("clusterqueues", cq)
        kueue.delete_cluster("resourceflavors", flavor)
