"""How the controller compares the fairSharing weights in force with the ClusterQueues' (fairshare.control.
decide._stale_weights) through PlanMemo.weights: the weights are parsed once while the same ones are asked,
and the answer is always the one without the memo: after a ClusterQueue's weight changes, after other
weights are asked, after the asked mapping is changed in place, and for a team with no ClusterQueue."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fairshare.control import HistoryBook, Observed
from fairshare.control.decide import _stale_weights
from fairshare.control.experiments import PlanMemo
from fairshare.manifests import parse_manifests
from fairshare.policy import render
from fairshare.scheduler.types import SchedulerConfig
from fairshare.snapshot import FAST, Snapshot

from .test_twin_adapters import T0, _policy


def _observed() -> Observed:
    policy = _policy()
    snap = Snapshot.from_state(parse_manifests([dict(o) for o in render(policy)]), paths=FAST)
    return Observed(snap, {}, HistoryBook.new(policy, T0).graph, SchedulerConfig())


def _weight(observed: Observed, team: str) -> int:
    return observed.snapshot.cluster_queue(team).node.weight


Step = Callable[[Observed, dict[str, str]], dict[str, str]]


def _same(observed: Observed, weights: dict[str, str]) -> dict[str, str]:
    return weights


def _cluster_queue_reweighted(observed: Observed, weights: dict[str, str]) -> dict[str, str]:
    snap = observed.snapshot
    snap.set_fair_sharing_weight(snap.cluster_queue("research").node, 2500)
    return weights


def _other_weights(observed: Observed, weights: dict[str, str]) -> dict[str, str]:
    return {**weights, "research": "2.5"}


def _changed_in_place(observed: Observed, weights: dict[str, str]) -> dict[str, str]:
    weights["business"] = "7"
    return weights


def _a_team_without_cluster_queue(observed: Observed, weights: dict[str, str]) -> dict[str, str]:
    return {**weights, "nobody": "3"}


@pytest.mark.parametrize(("steps", "stale"), [
    pytest.param([_same, _same], False, id="the same weights asked again are not stale"),
    pytest.param([_same, _cluster_queue_reweighted], True,
                 id="a ClusterQueue reweighted makes the same weights stale"),
    pytest.param([_same, _other_weights], True, id="other weights asked are parsed again"),
    pytest.param([_same, _changed_in_place], True, id="weights changed in place are parsed again"),
    pytest.param([_same, _a_team_without_cluster_queue, _same], False,
                 id="a team without a ClusterQueue is never stale"),
    pytest.param([_same, _cluster_queue_reweighted, _other_weights], False,
                 id="weights that match the reweighted ClusterQueue are not stale"),
])
def test_the_memo_answers_as_the_weights_parsed_afresh(steps: list[Step], stale: bool) -> None:
    observed = _observed()
    weights = {team: f"{_weight(observed, team) / 1000:g}" for team in ("research", "business")}
    memo = PlanMemo()
    answers = []
    for step in steps:
        weights = step(observed, weights)
        with_memo = _stale_weights(observed, weights, memo)
        assert with_memo == _stale_weights(observed, weights), step.__name__
        answers.append(with_memo)
    assert memo.weights is not None and memo.weights[0] == weights
    assert answers[0] is False  # the ClusterQueues carry the policy's weights at first
    assert answers[-1] is stale


def test_the_parsed_weights_are_kept_while_the_same_are_asked() -> None:
    observed = _observed()
    weights = {"research": "1", "business": "1"}
    memo = PlanMemo()
    _stale_weights(observed, weights, memo)
    assert memo.weights is not None
    kept = memo.weights[1]
    _stale_weights(observed, dict(weights), memo)  # an equal mapping, another object
    assert memo.weights[1] is kept
    weights["research"] = "2"
    assert _stale_weights(observed, weights, memo) is True
    assert memo.weights[1] is not kept
