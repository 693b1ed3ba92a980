"""Usage accounting: workloads holding quota become history intervals, restart-safe."""

from __future__ import annotations

import math

import pytest

from fairshare.history import NodePath
from fairshare.models import FlavorResource
from fairshare.policy import QuotaPolicy, parse_policy
from queue_manager.usage import PolicyHistory, cluster_queue_paths, history_weights

from .kube_objects import workload

T0 = 1_800_000_000.0
GPU = FlavorResource("gpu", "nvidia.com/gpu")


def _policy(half_life: str = "1h", project_label: str | None = "queuemanager.dev/project") -> QuotaPolicy:
    fair_share: dict[str, object] = {"halfLife": half_life}
    if project_label:
        fair_share["projectLabel"] = project_label
    return parse_policy({
        "apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy", "metadata": {"name": "p"},
        "spec": {
            "flavors": [{"name": "gpu"}],
            "teams": [
                {"name": "research", "namespaces": ["r"], "cohort": "org/gpu", "fairShareWeight": 1,
                 "quotas": [{"flavor": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominal": 4}]}]},
                {"name": "business", "namespaces": ["b"], "cohort": "org/gpu", "fairShareWeight": 4,
                 "quotas": [{"flavor": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominal": 16}]}]}],
            "fairShare": fair_share,
        }})


def test_cluster_queue_paths_follow_the_cohort_path() -> None:
    assert {k: str(v) for k, v in cluster_queue_paths(_policy()).items()} == {
        "research": "/cohort:org/cohort:gpu/cq:research", "business": "/cohort:org/cohort:gpu/cq:business"}


def test_a_workload_holding_quota_accrues_until_it_finishes() -> None:
    policy = _policy()
    h = PolicyHistory.restore_or_new(policy, None, T0)
    running = {"r/a": workload("r", "a", queue="research", gpus=2, admitted_to="research", reserved_at=T0)}
    assert h.sync(policy, running, T0 + 10) == (1, 0)
    done = {"r/a": workload("r", "a", queue="research", gpus=2, admitted_to="research", reserved_at=T0,
                            finished_at=T0 + 60)}
    assert h.sync(policy, done, T0 + 100) == (0, 1)
    lq = NodePath.parse("/cohort:org/cohort:gpu/cq:research/lq:r/research")
    # 2000 milli-GPU held over [0 s, 60 s], read at 100 s: the integral of 2000 * 2^(-(100-s)/H) ds.
    half_life = 3600
    expected = 2000 * half_life / math.log(2) * (2 ** (-40 / half_life) - 2 ** (-100 / half_life))
    assert h.graph.usage_at(lq, T0 + 100)[GPU] == pytest.approx(expected, abs=1)


def test_syncing_twice_changes_nothing() -> None:
    policy = _policy()
    h = PolicyHistory.restore_or_new(policy, None, T0)
    wls = {"r/a": workload("r", "a", queue="research", admitted_to="research", reserved_at=T0)}
    first = h.sync(policy, wls, T0 + 5)
    second = h.sync(policy, wls, T0 + 6)
    assert (first, second) == ((1, 0), (0, 0))


def test_pending_and_foreign_workloads_are_not_accounted() -> None:
    policy = _policy()
    h = PolicyHistory.restore_or_new(policy, None, T0)
    wls = {"r/pending": workload("r", "pending", queue="research"),
           "x/other": workload("x", "other", queue="q", admitted_to="not-ours", reserved_at=T0)}
    assert (h.sync(policy, wls, T0 + 5), h.graph.running()) == ((0, 0), [])


def test_the_project_label_adds_a_project_node() -> None:
    policy = _policy()
    h = PolicyHistory.restore_or_new(policy, None, T0)
    wls = {"r/a": workload("r", "a", queue="research", admitted_to="research", reserved_at=T0,
                           labels={"queuemanager.dev/project": "llm"})}
    h.sync(policy, wls, T0 + 5)
    assert [str(i.path) for i in h.graph.running()] == [
        "/cohort:org/cohort:gpu/cq:research/lq:r/research/project:llm"]


def test_history_restored_from_status_continues_exactly() -> None:
    policy = _policy()
    h = PolicyHistory.restore_or_new(policy, None, T0)
    wls = {"r/a": workload("r", "a", queue="research", gpus=3, admitted_to="research", reserved_at=T0)}
    h.sync(policy, wls, T0 + 30)
    restored = PolicyHistory.restore_or_new(policy, h.serialize(), T0 + 40)
    # The running interval survives the restart: syncing the same cluster starts nothing new.
    assert restored.sync(policy, wls, T0 + 50) == (0, 0)
    assert restored.graph.usage_all(T0 + 50) == h.graph.usage_all(T0 + 50)


def test_a_changed_half_life_restarts_the_history() -> None:
    h = PolicyHistory.restore_or_new(_policy("1h"), None, T0)
    h.sync(_policy("1h"), {"r/a": workload("r", "a", queue="research", admitted_to="research",
                                           reserved_at=T0)}, T0 + 1)
    other = PolicyHistory.restore_or_new(_policy("2h"), h.serialize(), T0 + 2)
    assert other.graph.running() == []


def test_pushed_weights_favour_the_team_history_says_is_owed() -> None:
    policy = _policy()
    h = PolicyHistory.restore_or_new(policy, None, T0)
    wls = {"r/a": workload("r", "a", queue="research", gpus=4, admitted_to="research", reserved_at=T0),
           "b/a": workload("b", "a", queue="business", gpus=1, admitted_to="business", reserved_at=T0)}
    h.sync(policy, wls, T0 + 600)
    # Shares 1:4 -> research's fair share is 20% but it used 80%: 4x over, weight /4 (bounded).
    # Business used 20% of a 80% share: 0.25x, weight x4 (bounded).
    assert history_weights(policy, h, T0 + 600) == {"business": "16", "research": "250m"}


def test_without_any_usage_the_policy_weights_are_pushed_unchanged() -> None:
    policy = _policy()
    h = PolicyHistory.restore_or_new(policy, None, T0)
    assert history_weights(policy, h, T0 + 1) == {"business": "4", "research": "1"}
