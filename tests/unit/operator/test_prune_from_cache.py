"""Pruning (queue_manager/reconcile.py `prune`): the first prune of a policy in a process LISTs by the
policy's label; later ones, one per new generation, read the watch cache of the owned objects and what the
process wrote. At 500 teams
the LISTs took 0.6 s of each edit's reconcile (issue 38)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.unit.operator.test_operator_reconcile import T0, FakeApi, _operator, _policy


class CountingApi(FakeApi):
    def __init__(self) -> None:
        super().__init__()
        self.lists = 0

    def list(self, kind: Any, *, label_selector: str | None = None) -> list[dict[str, Any]]:
        self.lists += 1
        return super().list(kind, label_selector=label_selector)


def _two_teams(generation: int, *, second: bool = True) -> dict[str, Any]:
    body = _policy(4, generation)
    if second:
        team = copy.deepcopy(body["spec"]["teams"][0])
        team.update(name="business", namespaces=["b"])
        body["spec"]["teams"].append(team)
    return body


def _watch(op: Any, api: FakeApi) -> None:
    """What the owned objects' watches deliver: every stored object, as the API server has it."""
    for obj in api.objects.values():
        op.owned_event("ADDED", copy.deepcopy(obj))


@pytest.mark.parametrize("watched", [True, False], ids=["the watch has listed", "the watch is behind"])
def test_a_team_dropped_by_an_edit_is_pruned_from_what_the_process_knows_no_list(watched: bool) -> None:
    api, clock = CountingApi(), [T0]
    op = _operator(api, clock)
    op.reconcile_policy("p", _two_teams(1))
    assert ("ClusterQueue", "", "business") in api.objects
    first_lists = api.lists
    assert first_lists > 0  # the first prune of the process LISTs
    if watched:
        _watch(op, api)
    op.reconcile_policy("p", _two_teams(2, second=False))
    assert api.lists == first_lists  # no LIST for the edit
    # Known from the watch, or from this process's own write when the watch has not delivered it yet.
    assert ("ClusterQueue", "", "business") not in api.objects
    assert ("LocalQueue", "b", "business") not in api.objects
    assert ("ClusterQueue", "", "research") in api.objects
    assert ("LocalQueue", "r", "research") in api.objects
    # The next generation's prune, before the watch has told of the deletes, neither deletes nor reports
    # them again.
    op.reconcile_policy("p", _two_teams(3, second=False))
    assert sorted(w for k, w in api.writes if k == "delete" and "business" in w) == [
        "ClusterQueue business", "LocalQueue b/business"]
    pruned = [w for k, w in api.writes if k == "event" and w.startswith("Pruned ClusterQueue business")]
    assert len(pruned) == 1


def test_a_new_process_prunes_what_its_cache_does_not_hold_yet_by_listing() -> None:
    api, clock = CountingApi(), [T0]
    _operator(api, clock).reconcile_policy("p", _two_teams(1))
    restarted = _operator(api, clock)  # its watches have delivered nothing yet
    restarted.reconcile_policy("p", _two_teams(2, second=False))
    assert api.lists > 0
    assert ("ClusterQueue", "", "business") not in api.objects
    assert ("LocalQueue", "b", "business") not in api.objects
    assert ("ClusterQueue", "", "research") in api.objects
