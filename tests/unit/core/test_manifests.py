from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fairshare.errors import InputError, UnsupportedError
from fairshare.manifests import load_manifests, parse_manifests
from fairshare.models import FlavorResource, ResourceQuota

CQ = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohortName: all
  namespaceSelector: {}
  queueingStrategy: StrictFIFO
  preemption:
    withinClusterQueue: LowerPriority
    reclaimWithinCohort: Any
    borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}
  flavorFungibility: {whenCanBorrow: TryNextFlavor, whenCanPreempt: MayStopSearch}
  fairSharing: {weight: "2"}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: default
      resources:
      - {name: cpu, nominalQuota: "1.5", borrowingLimit: 500m}
      - {name: memory, nominalQuota: 4Gi, lendingLimit: 1Gi}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {namespace: team-a, name: main}
spec: {clusterQueue: team-a}
"""

WORKLOAD = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {namespace: team-a, name: w, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  queueName: main
  priority: 5
  podSets:
  - name: main
    count: 3
    template:
      spec:
        initContainers:
        - {name: init, resources: {requests: {cpu: "4"}}}
        - {name: sidecar, restartPolicy: Always, resources: {requests: {cpu: 500m, memory: 1Gi}}}
        containers:
        - {name: a, resources: {requests: {cpu: "1"}}}
        - {name: b, resources: {limits: {cpu: "2", memory: 2Gi}}}
"""


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "objects.yaml"
    path.write_text(text)
    return str(path)


def test_a_cluster_queue_is_parsed_with_every_admission_field(tmp_path: Path) -> None:
    state = load_manifests([write(tmp_path, CQ)])
    cq = state.cluster_queues["team-a"]
    assert (
        cq.cohort,
        cq.queueing_strategy.value,
        cq.preemption.within_cluster_queue.value,
        cq.preemption.borrow_within_cohort.value,
        cq.preemption.max_priority_threshold,
        cq.flavor_fungibility.when_can_borrow.value,
        cq.fair_sharing_weight,
    ) == ("all", "StrictFIFO", "LowerPriority", "LowerPriority", 100, "TryNextFlavor", 2000)
    assert cq.quotas() == {
        FlavorResource("default", "cpu"): ResourceQuota(1500, 500, None),
        FlavorResource("default", "memory"): ResourceQuota(4 * 2**30 * 1000, None, 2**30 * 1000),
    }


def test_pod_requests_follow_kubernetes_rules_for_init_containers_sidecars_and_limits(tmp_path: Path) -> None:
    state = load_manifests([write(tmp_path, CQ + "---" + WORKLOAD)])
    ps = state.workloads["team-a/w"].pod_sets[0]
    # containers 1 + 2 (limit as request) + sidecar 0.5 = 3.5 cpu; the init container needs
    # 4 + nothing started before it = 4 -> max 4. memory: 2Gi + 1Gi sidecar.
    assert dict(ps.requests) == {"cpu": 4000, "memory": 3 * 2**30 * 1000}
    assert ps.total() == {"cpu": 12000, "memory": 9 * 2**30 * 1000}


BAD = [
    (
        "quantity",
        CQ.replace('nominalQuota: "1.5"', "nominalQuota: lots"),
        "document 1 (ClusterQueue team-a): field spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
        "'lots'",
    ),
    ("enum", CQ.replace("StrictFIFO", "Random"), "field spec.queueingStrategy", "'Random'"),
    (
        "missing flavor",
        CQ.replace(
            "kind: ResourceFlavor\nmetadata: {name: default}", "kind: ResourceFlavor\nmetadata: {name: other}"
        ),
        "field spec.resourceGroups[0].flavors[0].name",
        "ResourceFlavor 'default' does not exist",
    ),
    (
        "missing cq",
        CQ.replace("spec: {clusterQueue: team-a}", "spec: {clusterQueue: nope}"),
        "document 3 (LocalQueue team-a/main): field spec.clusterQueue",
        "ClusterQueue 'nope' does not exist",
    ),
    ("yaml", "a: [1, 2", "invalid YAML at line", "objects.yaml"),
    ("kind", "apiVersion: v1\nkind: Pod\nmetadata: {name: p}", "field kind", "'Pod'"),
    (
        "version",
        CQ.replace(
            "kueue.x-k8s.io/v1beta2\nkind: ClusterQueue", "kueue.x-k8s.io/v1beta1\nkind: ClusterQueue"
        ),
        "field apiVersion",
        "v1beta1",
    ),
]


@pytest.mark.parametrize(("text", "where", "what"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_input_names_the_file_document_field_and_value(
    tmp_path: Path, text: str, where: str, what: str
) -> None:
    with pytest.raises(InputError) as err:
        load_manifests([write(tmp_path, text)])
    message = str(err.value)
    assert "objects.yaml" in message
    assert where in message
    assert what in message
    assert "\n" not in message


UNSUPPORTED = [
    (
        "topologyRequest",
        CQ
        + "---"
        + WORKLOAD.replace("  - name: main\n", "  - name: main\n    topologyRequest: {required: rack}\n"),
        "spec.podSets[0].topologyRequest.required",
    ),
    (
        "required node affinity",
        CQ
        + "---"
        + WORKLOAD.replace(
            "        initContainers:",
            "        affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {}}}\n"
            "        initContainers:",
        ),
        "spec.podSets[0].template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
    ),
    (
        "topology-aware flavor",
        CQ.replace("metadata: {name: default}", "metadata: {name: default}\nspec: {topologyName: racks}"),
        "spec.topologyName",
    ),
]


@pytest.mark.parametrize(("text", "field"), [u[1:] for u in UNSUPPORTED], ids=[u[0] for u in UNSUPPORTED])
def test_fields_that_change_admission_but_are_not_modelled_are_rejected(
    tmp_path: Path, text: str, field: str
) -> None:
    with pytest.raises(UnsupportedError) as err:
        load_manifests([write(tmp_path, text)])
    assert f"unsupported: {field}" in str(err.value)


def test_plain_dicts_are_accepted_and_priority_comes_from_the_priority_class() -> None:
    docs = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "q"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": 4}]}],
                    }
                ]
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"namespace": "ns", "name": "lq"},
            "spec": {"clusterQueue": "q"},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"namespace": "ns", "name": "w"},
            "spec": {
                "queueName": "lq",
                "priorityClassRef": {
                    "group": "kueue.x-k8s.io",
                    "kind": "WorkloadPriorityClass",
                    "name": "high",
                },
                "podSets": [
                    {
                        "name": "main",
                        "count": 1,
                        "template": {
                            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                        },
                    }
                ],
            },
        },
    ]
    state = parse_manifests(docs)
    assert state.workloads["ns/w"].priority == 1000


def test_a_priority_that_disagrees_with_its_class_is_an_error() -> None:
    docs = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"namespace": "ns", "name": "w"},
            "spec": {
                "queueName": "lq",
                "priority": 3,
                "priorityClassRef": {"kind": "WorkloadPriorityClass", "name": "high"},
                "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}],
            },
        },
    ]
    with pytest.raises(InputError, match="disagrees with WorkloadPriorityClass"):
        parse_manifests(docs, check_references=False)


def test_duplicate_objects_are_reported_with_both_places(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="duplicate ClusterQueue 'team-a'"):
        load_manifests([write(tmp_path, CQ + "---" + CQ.split("---")[0])])


def test_the_priority_boost_annotation_raises_the_effective_priority() -> None:
    from fairshare.workload import WorkloadInfo

    doc = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"namespace": "ns", "name": "w", "annotations": {"kueue.x-k8s.io/priority-boost": "7"}},
        "spec": {
            "queueName": "lq",
            "priority": 3,
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": []}}}],
        },
    }
    wl = parse_manifests([doc], check_references=False).workloads["ns/w"]
    assert (wl.priority, WorkloadInfo.pending(wl, "cq").priority) == (3, 10)


def test_reclaimable_pods_no_longer_count_toward_usage_or_requests(tmp_path: Path) -> None:
    from fairshare.workload import WorkloadInfo

    admitted = (
        WORKLOAD.replace("name: w,", "name: done,")
        + """
status:
  reclaimablePods: [{name: main, count: 2}]
  admission:
    clusterQueue: team-a
    podSetAssignments: [{name: main, count: 3, flavors: {cpu: default, memory: default},
                         resourceUsage: {cpu: "12", memory: 9Gi}}]
  conditions:
  - {type: QuotaReserved, status: "True", lastTransitionTime: "2026-01-01T00:00:00Z"}
"""
    )
    state = load_manifests([write(tmp_path, CQ + "---" + admitted)])
    info = WorkloadInfo.admitted(state.workloads["team-a/done"])
    assert {str(fr): v for fr, v in info.usage.items()} == {
        "default/cpu": 4000,
        "default/memory": 3 * 2**30 * 1000,
    }


def test_a_label_only_topology_request_as_kueue_writes_for_every_job_is_accepted() -> None:
    # Kueue's batch/job integration sets topologyRequest.podIndexLabel on every Workload it
    # creates, TAS or not; it names a pod label and does not change admission.
    text = CQ + "---" + WORKLOAD.replace(
        "  - name: main\n",
        "  - name: main\n    topologyRequest: {podIndexLabel: batch.kubernetes.io/job-completion-index}\n",
    )
    state = parse_manifests(list(yaml.safe_load_all(text)), file="job.yaml")
    assert len(state.workloads) == 1
