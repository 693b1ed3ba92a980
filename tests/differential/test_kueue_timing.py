"""Kueue's requeue timing on the real Kueue v0.19.2, which the model's settle loop follows and the
simulator must follow (tests/unit/sim/test_kueue_timing.py holds the simulator's side).

After a quota release Kueue requeues the workloads it parked as inadmissible only after its batch
period (1 s, pkg/cache/queue/inadmissible_workloads.go ``requeueBatchPeriod`` / ``AddAfter``),
while a workload created meanwhile is tried at once: a GPU freed at t goes to a workload that
arrives before t + 1 s, not to the one that waited for it.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from devcluster import ControlPlane
from fairshare.settle import REQUEUE_BATCH_SECONDS
from tests.differential.cluster import GROUP, VERSION, holds_quota
from tests.integration.controlplanes import POOL, binaries_or_skip

Obj = dict[str, Any]


def _workload(name: str, queue: str, cpu: str) -> Obj:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": {
            "queueName": queue,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {"name": "c", "image": "x.invalid/x", "resources": {"requests": {"cpu": cpu}}}
                            ],
                        }
                    },
                }
            ],
        },
    }


def _cq(name: str, flavor: str, cohort: str, cpu: str) -> Obj:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": flavor, "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
                }
            ],
        },
    }


def _until(fn: Any, timeout: float, what: str) -> float:
    began = time.monotonic()
    while not fn():
        if time.monotonic() - began > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)
    return time.monotonic()


def test_a_freed_quota_goes_to_a_new_workload_before_the_parked_one_is_requeued() -> None:
    cp: ControlPlane = POOL.default(binaries_or_skip())
    api = k8s_config.new_client_from_config(config_file=str(cp.kubeconfig))
    custom, core = k8s.CustomObjectsApi(api), k8s.CoreV1Api(api)
    s = uuid.uuid4().hex[:6]
    ns, flavor, cohort, a, b = f"timing-{s}", f"timing-{s}", f"timing-{s}", f"timing-a-{s}", f"timing-b-{s}"
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=ns)))
    cluster: list[tuple[str, str]] = []
    try:
        custom.create_cluster_custom_object(
            GROUP,
            VERSION,
            "resourceflavors",
            {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor", "metadata": {"name": flavor}},
        )
        cluster.append(("resourceflavors", flavor))
        for name, cpu in ((a, "1"), (b, "0")):
            custom.create_cluster_custom_object(
                GROUP, VERSION, "clusterqueues", _cq(name, flavor, cohort, cpu)
            )
            cluster.append(("clusterqueues", name))
            custom.create_namespaced_custom_object(
                GROUP,
                VERSION,
                ns,
                "localqueues",
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "LocalQueue",
                    "metadata": {"name": name},
                    "spec": {"clusterQueue": name},
                },
            )

        def get(name: str) -> Obj:
            obj: Obj = custom.get_namespaced_custom_object(GROUP, VERSION, ns, "workloads", name)
            return obj

        def tried(name: str) -> bool:
            return any(
                c["type"] == "QuotaReserved" for c in get(name).get("status", {}).get("conditions", [])
            )

        custom.create_namespaced_custom_object(GROUP, VERSION, ns, "workloads", _workload("holder", a, "1"))
        _until(lambda: holds_quota(get("holder")), 20, "holder admitted")
        # "parked" (b, borrows a's cpu) cannot fit: Kueue parks it as inadmissible.
        custom.create_namespaced_custom_object(GROUP, VERSION, ns, "workloads", _workload("parked", b, "1"))
        _until(lambda: tried("parked"), 20, "parked evaluated")
        time.sleep(REQUEUE_BATCH_SECONDS + 0.5)  # nothing pending: any earlier requeue has fired
        holder = get("holder")
        conds = [c for c in holder["status"]["conditions"] if c["type"] != "Finished"]
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        conds.append(
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded",
                "message": "done",
                "lastTransitionTime": now,
            }
        )
        released = time.monotonic()
        custom.replace_namespaced_custom_object_status(
            GROUP,
            VERSION,
            ns,
            "workloads",
            "holder",
            {**holder, "status": {**holder["status"], "conditions": conds}},
        )
        # Were "parked" requeued at the release, Kueue would admit it within a cycle or two (a few
        # milliseconds); 0.3 s later it still waits for the batch.
        time.sleep(0.3)
        waiting = not holds_quota(get("parked"))
        # Within the batch period a new workload of a arrives: tried at once, it takes the cpu.
        custom.create_namespaced_custom_object(GROUP, VERSION, ns, "workloads", _workload("newcomer", a, "1"))
        admitted = _until(lambda: holds_quota(get("newcomer")), 20, "newcomer admitted")
        time.sleep(REQUEUE_BATCH_SECONDS + 1.0)
        assert (waiting, admitted - released < REQUEUE_BATCH_SECONDS, holds_quota(get("parked"))) == (
            True,
            True,
            False,
        )
    finally:
        for name in ("holder", "parked", "newcomer"):
            with contextlib.suppress(ApiException):
                custom.patch_namespaced_custom_object(
                    GROUP, VERSION, ns, "workloads", name, {"metadata": {"finalizers": None}}
                )
                custom.delete_namespaced_custom_object(GROUP, VERSION, ns, "workloads", name)
        for plural, name in reversed(cluster):
            with contextlib.suppress(ApiException):
                custom.delete_cluster_custom_object(GROUP, VERSION, plural, name)
        api.close()
