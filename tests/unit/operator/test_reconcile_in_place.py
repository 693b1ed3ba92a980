"""The reconcile's memo of objects found in place (PolicyRuntime.in_place): the same live object from the
watch cache and an equal desired content are not compared again; a replaced live object is (issue 38: the
1,500 comparisons of a 500-team policy were most of a reconcile that changes nothing)."""

from __future__ import annotations

import copy

from queue_manager.ownership import CONTENT_ANNOTATION
from tests.unit.operator.test_operator_reconcile import T0, FakeApi, _operator, _policy

CQ = ("ClusterQueue", "", "research")


def test_a_cached_object_replaced_without_its_digest_is_applied_again_an_unchanged_one_not() -> None:
    api, clock = FakeApi(), [T0]
    op = _operator(api, clock)
    op.reconcile_policy("p", _policy(4, 1))
    for obj in api.objects.values():  # what the watches deliver
        op.owned_event("ADDED", copy.deepcopy(obj))
    op.policy_tick(_policy(4, 1, api.status))
    rt = op.state.policies["p"]
    assert len(rt.in_place) == len(rt.desired)  # every object found in place, remembered
    applies = [w for w in api.writes if w[0] == "apply"]
    op.policy_tick(_policy(4, 1, api.status))
    assert [w for w in api.writes if w[0] == "apply"] == applies  # nothing compared differs
    # Another field manager's write keeps our spec but drops our digest: a new object in the cache.
    replaced = copy.deepcopy(api.objects[CQ])
    del replaced["metadata"]["annotations"][CONTENT_ANNOTATION]
    replaced["metadata"]["resourceVersion"] = "9999"
    api.objects[CQ] = copy.deepcopy(replaced)
    op.owned_event("MODIFIED", replaced)
    op.policy_tick(_policy(4, 1, api.status))
    assert [w for w in api.writes if w[0] == "apply"] == [*applies, ("apply", "ClusterQueue/research")]
