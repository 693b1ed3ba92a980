"""The usage history of a policy: one layout rule for both shells, level-triggered sync, restore,
history-adjusted weights (fairshare.control.history)."""

from __future__ import annotations

import math

import pytest

from fairshare.control.history import HistoryBook, HistoryLayout, history_weights
from fairshare.history import NodePath
from fairshare.models import FlavorResource, Workload
from fairshare.policy import QuotaPolicy, parse_policy
from fairshare.workload import WorkloadInfo
from tests.unit.operator.kube_objects import workload

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


def holding(*wls: Workload) -> dict[str, WorkloadInfo]:
    return {w.key: WorkloadInfo.admitted(w) for w in wls if w.has_quota_reservation and not w.is_finished}


def never(_: str) -> float | None:
    return None


def test_cluster_queues_sit_under_their_cohort_path_with_the_team_weight() -> None:
    layout = HistoryLayout.of(_policy())
    assert ({k: str(v) for k, v in layout.cluster_queues.items()},
            {str(p): w for p, w in layout.weights.items()}) == (
        {"research": "/cohort:org/cohort:gpu/cq:research", "business": "/cohort:org/cohort:gpu/cq:business"},
        {"/cohort:org": 1000, "/cohort:org/cohort:gpu": 1000, "/cohort:org/cohort:gpu/cq:research": 1000,
         "/cohort:org/cohort:gpu/cq:business": 4000})


@pytest.mark.parametrize(("label", "labels", "expected"), [
    (None, {}, "/cohort:org/cohort:gpu/cq:research/lq:r/main"),
    ("queuemanager.dev/project", {"queuemanager.dev/project": "llm"},
     "/cohort:org/cohort:gpu/cq:research/lq:r/main/project:llm"),
    ("queuemanager.dev/project", {}, "/cohort:org/cohort:gpu/cq:research/lq:r/main/project:unlabelled"),
    ("queuemanager.dev/project", {"queuemanager.dev/project": "a:b"},
     "/cohort:org/cohort:gpu/cq:research/lq:r/main/project:unlabelled"),
], ids=["no-project-label", "labelled", "unlabelled", "invalid-value"])
def test_a_workload_is_charged_to_its_local_queue_or_a_project_node(
        label: str | None, labels: dict[str, str], expected: str) -> None:
    path = HistoryLayout.of(_policy(project_label=label)).path_of("research", "r/main", labels)
    assert str(path) == expected


def test_a_workload_holding_quota_accrues_until_it_finishes() -> None:
    book = HistoryBook.new(_policy(project_label=None), T0)
    running = workload("r", "a", queue="research", gpus=2, admitted_to="research", reserved_at=T0)
    assert book.sync(holding(running), never, T0 + 10) == (1, 0)
    assert book.sync({}, lambda _: T0 + 60, T0 + 100) == (0, 1)
    lq = NodePath.parse("/cohort:org/cohort:gpu/cq:research/lq:r/research")
    # 2000 milli-GPU held over [0 s, 60 s], read at 100 s: the integral of 2000 * 2^(-(100-s)/H) ds.
    half_life = 3600
    expected = 2000 * half_life / math.log(2) * (2 ** (-40 / half_life) - 2 ** (-100 / half_life))
    assert book.graph.usage_at(lq, T0 + 100)[GPU] == pytest.approx(expected, abs=1)


def test_syncing_twice_changes_nothing() -> None:
    book = HistoryBook.new(_policy(), T0)
    wls = holding(workload("r", "a", queue="research", admitted_to="research", reserved_at=T0))
    assert (book.sync(wls, never, T0 + 5), book.sync(wls, never, T0 + 6)) == ((1, 0), (0, 0))


def test_workloads_of_other_cluster_queues_are_not_accounted() -> None:
    book = HistoryBook.new(_policy(), T0)
    other = holding(workload("x", "other", queue="q", admitted_to="not-ours", reserved_at=T0))
    assert (book.sync(other, never, T0 + 5), book.graph.running()) == ((0, 0), [])


def test_edge_triggered_and_level_triggered_feeding_charge_the_same() -> None:
    """The simulator reports admissions and releases; the operator syncs: the graphs agree."""
    wl = workload("r", "a", queue="research", gpus=3, admitted_to="research", reserved_at=T0,
                  labels={"queuemanager.dev/project": "llm"})
    edge, level = HistoryBook.new(_policy(), T0), HistoryBook.new(_policy(), T0)
    edge.start(WorkloadInfo.admitted(wl), T0)
    edge.stop(wl.key, T0 + 30)
    level.sync(holding(wl), never, T0 + 1)
    level.sync({}, lambda _: T0 + 30, T0 + 40)
    assert edge.graph.usage_all(T0 + 50) == level.graph.usage_all(T0 + 50)


def test_history_restored_from_status_continues_exactly() -> None:
    policy = _policy()
    book = HistoryBook.new(policy, T0)
    wls = holding(workload("r", "a", queue="research", gpus=3, admitted_to="research", reserved_at=T0))
    book.sync(wls, never, T0 + 30)
    restored, warning = HistoryBook.restore(policy, book.serialize(), T0 + 40)
    # The running interval survives the restart: syncing the same cluster starts nothing new.
    assert (warning, restored.sync(wls, never, T0 + 50)) == (None, (0, 0))
    assert restored.graph.usage_all(T0 + 50) == book.graph.usage_all(T0 + 50)


def test_a_changed_half_life_restarts_the_history_and_says_so() -> None:
    book = HistoryBook.new(_policy("1h"), T0)
    running = workload("r", "a", queue="research", admitted_to="research", reserved_at=T0)
    book.sync(holding(running), never, T0 + 1)
    other, warning = HistoryBook.restore(_policy("2h"), book.serialize(), T0 + 2)
    assert (other.graph.running(), warning) == ([], "the half-life changed: usage history restarts")


def test_pushed_weights_favour_the_team_history_says_is_owed() -> None:
    policy = _policy()
    book = HistoryBook.new(policy, T0)
    book.sync(holding(workload("r", "a", queue="research", gpus=4, admitted_to="research", reserved_at=T0),
                      workload("b", "a", queue="business", gpus=1, admitted_to="business", reserved_at=T0)),
              never, T0 + 600)
    # Shares 1:4 -> research's fair share is 20% but it used 80%: 4x over, weight /4 (bounded).
    # Business used 20% of a 80% share: 0.25x, weight x4 (bounded).
    assert history_weights(policy, book, T0 + 600) == {"business": "16", "research": "250m"}


def test_without_any_usage_the_policy_weights_are_pushed_unchanged() -> None:
    assert history_weights(_policy(), HistoryBook.new(_policy(), T0), T0 + 1) == \
        {"business": "4", "research": "1"}
