"""Rendering a QuotaPolicy into Kueue v1beta2 objects: shape, ownership, determinism, overrides."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings

from fairshare.manifests import parse_manifests
from fairshare.models import QuotaKey, ResourceQuota
from fairshare.policy import (
    KIND_ORDER,
    ObjectKey,
    format_milli,
    load_policy_file,
    object_key,
    owner_selector,
    parse_policy,
    render,
    render_index,
    spec_quotas,
)

from .helpers import SAMPLE, edited, minimal, policies, sample

GPU = "nvidia.com/gpu"
OWNED = {"app.kubernetes.io/managed-by": "queue-manager", "queuemanager.dev/policy": "gpu-cluster"}


def test_the_sample_renders_one_cohort_two_cluster_queues_and_their_local_queues() -> None:
    assert list(render_index(load_policy_file(SAMPLE))) == [
        ObjectKey("WorkloadPriorityClass", "", "high-priority-business"),
        ObjectKey("WorkloadPriorityClass", "", "low-priority-experiment"),
        ObjectKey("ResourceFlavor", "", "gpu-a100"),
        ObjectKey("Cohort", "", "gpu-cluster"),
        ObjectKey("ClusterQueue", "", "ai-frontier-research"),
        ObjectKey("ClusterQueue", "", "biz-model-serving"),
        ObjectKey("LocalQueue", "ai-frontier-research", "ai-frontier-research"),
        ObjectKey("LocalQueue", "biz-model-serving", "biz-model-serving"),
    ]


def test_the_frontier_cluster_queue_is_exactly_the_kueue_object_the_policy_implies() -> None:
    index = render_index(load_policy_file(SAMPLE))
    assert index[ObjectKey("ClusterQueue", "", "ai-frontier-research")] == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "ai-frontier-research",
                     "labels": {**OWNED, "queuemanager.dev/team": "ai-frontier-research"}},
        "spec": {
            "namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In",
                 "values": ["ai-frontier-research"]}]},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": [
                {"name": "gpu-a100", "resources": [{"name": "cpu", "nominalQuota": "32"},
                                                   {"name": "memory", "nominalQuota": "256Gi"},
                                                   {"name": GPU, "nominalQuota": "4"}]}]}],
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"},
            "fairSharing": {"weight": "1"},
            "cohortName": "gpu-cluster",
        },
    }
    assert index[ObjectKey("WorkloadPriorityClass", "", "low-priority-experiment")] == {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass",
        "metadata": {"name": "low-priority-experiment",
                     "labels": {**OWNED, "queuemanager.dev/experiment": "true"}},
        "value": 100, "description": "Research experiments; deferrable and preemptible."}
    assert index[ObjectKey("LocalQueue", "biz-model-serving", "biz-model-serving")]["spec"] == \
        {"clusterQueue": "biz-model-serving"}


def test_every_rendered_object_carries_the_ownership_labels() -> None:
    objects = render(load_policy_file(SAMPLE))
    selector = dict(kv.split("=") for kv in owner_selector("gpu-cluster").split(","))
    for obj in objects:
        labels = obj["metadata"]["labels"]  # type: ignore[index]
        assert {k: labels[k] for k in selector} == selector == OWNED


def test_rendering_does_not_depend_on_the_order_of_teams_flavors_or_classes() -> None:
    doc = sample()
    doc["spec"]["flavors"].append({"name": "cpu-only"})
    doc["spec"]["teams"].append({
        "name": "ops", "namespaces": ["ops-b", "ops-a"], "cohort": "gpu-cluster",
        "quotas": [{"flavor": "cpu-only", "resources": [{"name": "cpu", "nominal": 8}]}]})
    expected = render(parse_policy(doc))
    shuffler = random.Random(7)
    for _ in range(5):
        shuffled = edited(doc, lambda d: [d["spec"][k].sort(key=lambda _: shuffler.random())
                                          for k in ("teams", "flavors", "priorityClasses")])
        assert render(parse_policy(shuffled)) == expected
    assert [object_key(o).kind for o in expected] == sorted(
        (object_key(o).kind for o in expected), key=KIND_ORDER.index)


def test_a_cohort_path_becomes_nested_cohorts_with_the_cluster_queue_in_the_leaf() -> None:
    policy = parse_policy(minimal(a={"cohort": "org/gpu"}, b={"cohort": "org/cpu"}, c={"cohort": "org"}))
    objects: list[Any] = render(policy)
    cohorts = [(o["metadata"]["name"], o["spec"]) for o in objects if o["kind"] == "Cohort"]
    assert cohorts == [("org", {}), ("cpu", {"parentName": "org"}), ("gpu", {"parentName": "org"})]
    queues = {o["metadata"]["name"]: o["spec"].get("cohortName") for o in objects
              if o["kind"] == "ClusterQueue"}
    assert queues == {"a": "gpu", "b": "cpu", "c": "org"}


def test_flavors_sharing_a_resource_form_one_group_and_missing_resources_get_zero() -> None:
    doc = minimal(a={"quotas": [
        {"flavor": "a100", "resources": [{"name": GPU, "nominal": 4}, {"name": "cpu", "nominal": 32}]},
        {"flavor": "spot", "resources": [{"name": "cpu", "nominal": 64}]},
        {"flavor": "disk", "resources": [{"name": "ephemeral-storage", "nominal": "1Ti"}]},
    ]})
    doc["spec"]["flavors"] = [{"name": "a100"}, {"name": "spot"}, {"name": "disk"}]
    cq = render_index(parse_policy(doc))[ObjectKey("ClusterQueue", "", "a")]
    assert cq["spec"]["resourceGroups"] == [  # type: ignore[index]
        {"coveredResources": ["cpu", GPU], "flavors": [
            {"name": "a100", "resources": [{"name": "cpu", "nominalQuota": "32"},
                                           {"name": GPU, "nominalQuota": "4"}]},
            {"name": "spot", "resources": [{"name": "cpu", "nominalQuota": "64"},
                                           {"name": GPU, "nominalQuota": "0"}]},
        ]},
        {"coveredResources": ["ephemeral-storage"], "flavors": [
            {"name": "disk", "resources": [{"name": "ephemeral-storage", "nominalQuota": "1Ti"}]}]},
    ]


def test_quota_and_weight_overrides_replace_only_the_keys_given() -> None:
    policy = load_policy_file(SAMPLE)
    index = render_index(policy, quotas={
        QuotaKey.of("ai-frontier-research", "gpu-a100", GPU): ResourceQuota(2500, borrowing_limit=0,
                                                                       lending_limit=1000)},
        weights={"biz-model-serving": "2500m"})
    frontier: Any = index[ObjectKey("ClusterQueue", "", "ai-frontier-research")]["spec"]
    assert frontier["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "cpu", "nominalQuota": "32"}, {"name": "memory", "nominalQuota": "256Gi"},
        {"name": GPU, "nominalQuota": "2500m", "borrowingLimit": "0", "lendingLimit": "1"}]
    biz: Any = index[ObjectKey("ClusterQueue", "", "biz-model-serving")]["spec"]
    assert (frontier["fairSharing"], biz["fairSharing"]) == ({"weight": "1"}, {"weight": "2500m"})


def test_rendering_the_spec_quotas_as_overrides_changes_only_their_spelling() -> None:
    policy = load_policy_file(SAMPLE)
    plain = parse_manifests(render(policy))
    overridden = parse_manifests(render(policy, quotas=spec_quotas(policy)))
    assert plain.cluster_queues == overridden.cluster_queues


# ------------------------------------------------------------------------------ property: Kueue accepts it

@settings(max_examples=60, deadline=None)
@given(policies())
def test_every_valid_policy_renders_objects_the_kueue_model_accepts_with_the_same_quotas(doc: dict[str, Any],
                                                                                          ) -> None:
    policy = parse_policy(doc)
    state = parse_manifests(render(policy))
    assert sorted(state.cluster_queues) == sorted(t.name for t in policy.spec.teams)
    assert len(state.local_queues) == 2 * len(policy.spec.teams)
    rendered: dict[QuotaKey, ResourceQuota] = {}
    for cq in state.cluster_queues.values():
        for group in cq.resource_groups:
            for fq in group.flavors:
                for res, quota in fq.resources:
                    rendered[QuotaKey.of(cq.name, fq.name, res)] = ResourceQuota(
                        quota.nominal, quota.borrowing_limit, quota.lending_limit)
    expected = spec_quotas(policy)
    # Every spec quota is rendered as written; the only extra entries are the zero fills of a group.
    assert {k: v for k, v in rendered.items() if k in expected} == expected
    assert {v for k, v in rendered.items() if k not in expected} <= {ResourceQuota(0)}
    assert render(policy) == render(parse_policy(doc))


def test_format_milli_is_the_canonical_spelling() -> None:
    assert [format_milli(m) for m in (0, 1000, 4000, 1500, 1)] == ["0", "1", "4", "1500m", "1m"]


@settings(max_examples=40, deadline=None)
@given(policies())
def test_a_policy_survives_a_round_trip_through_its_own_serialization(doc: dict[str, Any]) -> None:
    policy = parse_policy(doc)
    dumped = policy.model_dump(by_alias=True, exclude_none=True, mode="json")
    again = parse_policy(dumped)
    assert again == policy
    assert render(again) == render(policy)
