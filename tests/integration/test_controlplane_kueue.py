"""Smoke tests against the real Kueue manager (issue 3, item 4).

Each test makes its own ResourceFlavor / ClusterQueue (unique names, deleted afterwards) and a
LocalQueue in its own namespace, so tests never share quota.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
Obj = dict[str, Any]
Wait = Callable[..., Any]


@dataclass(frozen=True)
class Queue:
    """A ResourceFlavor + ClusterQueue (cpu quota) + LocalQueue in the test's namespace."""

    flavor: str
    cluster_queue: str
    local_queue: str
    namespace: str


def _conditions(obj: Obj) -> dict[str, str]:
    """{type: status} of an object's status.conditions."""
    return {c["type"]: c["status"] for c in obj.get("status", {}).get("conditions", [])}


def _condition(obj: Obj, kind: str) -> Obj:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), {})


class Kueue:
    """Thin helpers over CustomObjectsApi for kueue.x-k8s.io/v1beta2."""

    def __init__(self, api_client: k8s.ApiClient) -> None:
        self.api = k8s.CustomObjectsApi(api_client)

    def create_cluster(self, plural: str, body: Obj) -> Obj:
        return self.api.create_cluster_custom_object(GROUP, VERSION, plural, body)  # type: ignore[no-any-return]

    def get_cluster(self, plural: str, name: str) -> Obj:
        return self.api.get_cluster_custom_object(GROUP, VERSION, plural, name)  # type: ignore[no-any-return]

    def patch_cluster(self, plural: str, name: str, body: Obj) -> Obj:
        return self.api.patch_cluster_custom_object(GROUP, VERSION, plural, name, body)  # type: ignore[no-any-return]

    def delete_cluster(self, plural: str, name: str) -> None:
        try:
            self.api.delete_cluster_custom_object(GROUP, VERSION, plural, name)
        except ApiException as err:
            if err.status != 404:
                raise

    def create(self, ns: str, plural: str, body: Obj) -> Obj:
        return self.api.create_namespaced_custom_object(GROUP, VERSION, ns, plural, body)  # type: ignore[no-any-return]

    def get(self, ns: str, plural: str, name: str) -> Obj:
        return self.api.get_namespaced_custom_object(GROUP, VERSION, ns, plural, name)  # type: ignore[no-any-return]

    def list(self, ns: str, plural: str) -> list[Obj]:
        return self.api.list_namespaced_custom_object(GROUP, VERSION, ns, plural)["items"]  # type: ignore[no-any-return]

    def patch(self, ns: str, plural: str, name: str, body: Obj) -> Obj:
        return self.api.patch_namespaced_custom_object(GROUP, VERSION, ns, plural, name, body)  # type: ignore[no-any-return]

    def replace_status(self, ns: str, plural: str, name: str, body: Obj) -> Obj:
        return self.api.replace_namespaced_custom_object_status(  # type: ignore[no-any-return]
            GROUP, VERSION, ns, plural, name, body
        )


def _workload(name: str, queue: str, cpu: str, priority: int = 0) -> Obj:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": {
            "queueName": queue,
            "priority": priority,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "registry.invalid/x",
                                    "resources": {"requests": {"cpu": cpu}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }


def _job(name: str, queue: str, cpu: str) -> k8s.V1Job:
    return k8s.V1Job(
        metadata=k8s.V1ObjectMeta(name=name, labels={QUEUE_LABEL: queue}),
        spec=k8s.V1JobSpec(
            suspend=True,
            parallelism=1,
            completions=1,
            template=k8s.V1PodTemplateSpec(
                spec=k8s.V1PodSpec(
                    restart_policy="Never",
                    containers=[
                        k8s.V1Container(
                            name="c",
                            image="registry.invalid/x",
                            resources=k8s.V1ResourceRequirements(requests={"cpu": cpu}),
                        )
                    ],
                )
            ),
        ),
    )


@pytest.fixture
def kueue(api_client: k8s.ApiClient) -> Kueue:
    return Kueue(api_client)


@pytest.fixture
def queue(kueue: Kueue, namespace: str, wait_until: Wait) -> Iterator[Queue]:
    """RF + CQ with 4 cpu nominal quota + LQ; the CQ is Active before the test starts."""
    suffix = uuid.uuid4().hex[:6]
    q = Queue(f"rf-{suffix}", f"cq-{suffix}", "lq", namespace)
    kueue.create_cluster(
        "resourceflavors",
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor", "metadata": {"name": q.flavor}},
    )
    kueue.create_cluster(
        "clusterqueues",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "ClusterQueue",
            "metadata": {"name": q.cluster_queue},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": q.flavor, "resources": [{"name": "cpu", "nominalQuota": "4"}]}],
                    }
                ],
            },
        },
    )
    kueue.create(
        namespace,
        "localqueues",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "LocalQueue",
            "metadata": {"name": q.local_queue},
            "spec": {"clusterQueue": q.cluster_queue},
        },
    )
    wait_until(
        lambda: _conditions(kueue.get_cluster("clusterqueues", q.cluster_queue)).get("Active") == "True",
        what=f"ClusterQueue {q.cluster_queue} Active",
    )
    try:
        yield q
    finally:
        kueue.delete_cluster("clusterqueues", q.cluster_queue)
        kueue.delete_cluster("resourceflavors", q.flavor)


def _admitted(kueue: Kueue, ns: str, name: str) -> Obj | None:
    wl = kueue.get(ns, "workloads", name)
    conds = _conditions(wl)
    return wl if conds.get("QuotaReserved") == "True" and conds.get("Admitted") == "True" else None


def test_kueue_reserves_quota_for_and_admits_a_workload_that_fits(
    kueue: Kueue, queue: Queue, wait_until: Wait
) -> None:
    kueue.create(queue.namespace, "workloads", _workload("wl", queue.local_queue, "1"))
    wl = wait_until(lambda: _admitted(kueue, queue.namespace, "wl"), what="workload admitted")
    admission = wl["status"]["admission"]
    assert {
        "clusterQueue": admission["clusterQueue"],
        "flavors": [a["flavors"] for a in admission["podSetAssignments"]],
        "usage": [a["resourceUsage"] for a in admission["podSetAssignments"]],
    } == {"clusterQueue": queue.cluster_queue, "flavors": [{"cpu": queue.flavor}], "usage": [{"cpu": "1"}]}


def test_a_suspended_job_with_a_queue_name_gets_a_workload_and_is_unsuspended_on_admission(
    kueue: Kueue, queue: Queue, api_client: k8s.ApiClient, wait_until: Wait
) -> None:
    batch = k8s.BatchV1Api(api_client)
    job = batch.create_namespaced_job(queue.namespace, _job("job", queue.local_queue, "2"))
    wait_until(
        lambda: not batch.read_namespaced_job(job.metadata.name, queue.namespace).spec.suspend,
        what="job unsuspended by Kueue",
    )
    workloads = kueue.list(queue.namespace, "workloads")
    assert [
        (
            [(o["kind"], o["name"], o["uid"]) for o in w["metadata"]["ownerReferences"]],
            w["spec"]["queueName"],
            _conditions(w).get("Admitted"),
            w["status"]["admission"]["clusterQueue"],
        )
        for w in workloads
    ] == [([("Job", "job", job.metadata.uid)], queue.local_queue, "True", queue.cluster_queue)]


def test_lowering_nominal_quota_below_usage_keeps_admitted_workloads_and_blocks_new_ones(
    kueue: Kueue, queue: Queue, wait_until: Wait
) -> None:
    kueue.create(queue.namespace, "workloads", _workload("running", queue.local_queue, "3"))
    wait_until(lambda: _admitted(kueue, queue.namespace, "running"), what="first workload admitted")
    cq = kueue.patch_cluster(
        "clusterqueues",
        queue.cluster_queue,
        {
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": queue.flavor, "resources": [{"name": "cpu", "nominalQuota": "2"}]}
                        ],
                    }
                ]
            }
        },
    )
    # Kueue has taken the new quota into its cache once the Active condition observes the generation.
    wait_until(
        lambda: (
            _condition(kueue.get_cluster("clusterqueues", queue.cluster_queue), "Active").get(
                "observedGeneration"
            )
            == cq["metadata"]["generation"]
        ),
        what="ClusterQueue quota change observed",
    )
    kueue.create(queue.namespace, "workloads", _workload("new", queue.local_queue, "1"))
    pending = wait_until(
        lambda: _condition(kueue.get(queue.namespace, "workloads", "new"), "QuotaReserved") or None,
        what="new workload found inadmissible",
    )
    running = kueue.get(queue.namespace, "workloads", "running")
    usage = kueue.get_cluster("clusterqueues", queue.cluster_queue)["status"]["flavorsUsage"]
    assert {
        "running": {k: _conditions(running).get(k) for k in ("QuotaReserved", "Admitted", "Evicted")},
        "new": (pending["status"], pending["reason"], "insufficient unused quota" in pending["message"]),
        "usage": usage,
    } == {
        "running": {"QuotaReserved": "True", "Admitted": "True", "Evicted": None},
        "new": ("False", "Pending", True),
        "usage": [{"name": queue.flavor, "resources": [{"name": "cpu", "total": "3", "borrowed": "0"}]}],
    }


def _settle(observe: Callable[[], Obj], expected: Obj, timeout: float = 10.0) -> Obj:
    """Poll ``observe()`` until it equals ``expected`` or the deadline passes; return the last value
    (the caller asserts equality, so a timeout shows the full difference)."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while (last := observe()) != expected and time.monotonic() < deadline:
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)
    return last


def _deactivate(kueue: Kueue, ns: str, name: str) -> None:
    kueue.patch(ns, "workloads", name, {"spec": {"active": False}})


def _deactivate_then_reactivate(kueue: Kueue, ns: str, name: str) -> None:
    _deactivate(kueue, ns, name)
    deadline = time.monotonic() + 10
    while (
        _conditions(kueue.get(ns, "workloads", name)).get("Evicted") != "True" and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    kueue.patch(ns, "workloads", name, {"spec": {"active": True}})


def _set_evicted(reason: str, preempted: bool) -> Callable[[Kueue, str, str], None]:
    """Write Evicted=True (and Preempted=True) through the status subresource, as Kueue's own
    preemption does (pkg/workload/evict.Evict with SetPreemptedCondition)."""

    def evict(kueue: Kueue, ns: str, name: str) -> None:
        wl = kueue.get(ns, "workloads", name)
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        message = "Preempted by the queue manager (test)"
        conditions = [c for c in wl["status"]["conditions"] if c["type"] not in ("Evicted", "Preempted")]
        conditions.append(
            {
                "type": "Evicted",
                "status": "True",
                "reason": reason,
                "message": message,
                "lastTransitionTime": now,
                "observedGeneration": wl["metadata"]["generation"],
            }
        )
        if preempted:
            conditions.append(
                {
                    "type": "Preempted",
                    "status": "True",
                    "reason": "InClusterQueue",
                    "message": message,
                    "lastTransitionTime": now,
                }
            )
        wl["status"]["conditions"] = conditions
        kueue.replace_status(ns, "workloads", name, wl)

    return evict


DEACTIVATED = [{"count": 1, "reason": "Deactivated", "underlyingCause": ""}]


@pytest.mark.parametrize(
    ("evict", "expected"),
    [
        pytest.param(
            _deactivate,
            {
                "active": False,
                "evicted": ("True", "Deactivated"),
                "requeued": ("False", "Deactivated"),
                "admitted": "False",
                "job_suspended": True,
                "evictions": DEACTIVATED,
            },
            id="deactivation-evicts-suspends-the-job-and-does-not-requeue",
        ),
        pytest.param(
            _deactivate_then_reactivate,
            {
                "active": True,
                "evicted": ("False", "QuotaReserved"),
                "requeued": ("True", "Reactivated"),
                "admitted": "True",
                "job_suspended": False,
                "evictions": DEACTIVATED,
            },
            id="reactivation-requeues-and-kueue-admits-again",
        ),
        pytest.param(
            _set_evicted("Preempted", preempted=True),
            {
                "active": True,
                "evicted": ("False", "QuotaReserved"),
                "requeued": ("True", "Preempted"),
                "admitted": "True",
                "job_suspended": False,
                "evictions": None,
            },
            id="evicted-condition-reason-preempted-stops-the-job-and-requeues-at-once",
        ),
        pytest.param(
            _set_evicted("QueueManager", preempted=False),
            {
                "active": True,
                "evicted": ("True", "QueueManager"),
                "requeued": ("False", "QueueManager"),
                "admitted": "False",
                "job_suspended": True,
                "evictions": None,
            },
            id="evicted-condition-with-another-reason-evicts-but-never-requeues",
        ),
    ],
)
def test_evicting_an_admitted_job_workload_through_the_workload_api(
    kueue: Kueue,
    queue: Queue,
    api_client: k8s.ApiClient,
    wait_until: Wait,
    evict: Callable[[Kueue, str, str], None],
    expected: Obj,
) -> None:
    batch = k8s.BatchV1Api(api_client)
    ns = queue.namespace
    batch.create_namespaced_job(ns, _job("job", queue.local_queue, "1"))
    wait_until(
        lambda: not batch.read_namespaced_job("job", ns).spec.suspend, what="job admitted and unsuspended"
    )
    [wl] = kueue.list(ns, "workloads")
    name = wl["metadata"]["name"]

    def observe() -> Obj:
        w = kueue.get(ns, "workloads", name)
        conds = {c["type"]: (c["status"], c["reason"]) for c in w["status"].get("conditions", [])}
        return {
            "active": w["spec"].get("active"),
            "evicted": conds.get("Evicted"),
            "requeued": conds.get("Requeued"),
            "admitted": conds.get("Admitted", ("", ""))[0],
            "job_suspended": bool(batch.read_namespaced_job("job", ns).spec.suspend),
            "evictions": w["status"].get("schedulingStats", {}).get("evictions"),
        }

    evict(kueue, ns, name)
    assert _settle(observe, expected) == expected
