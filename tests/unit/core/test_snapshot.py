from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fairshare.errors import InputError
from fairshare.models import ClusterState, FlavorResource, ResourceQuota
from fairshare.snapshot import Snapshot
from tests.builders import ClusterQueueBuilder, CohortBuilder, StateBuilder, WorkloadBuilder
from tests.unit.core.strategies import cluster_states

CPU = FlavorResource("default", "cpu")


def dump(snap: Snapshot) -> dict[str, object]:
    """Everything observable of the accounting state."""
    nodes = {
        **{f"cohort/{k}": v for k, v in snap.cohorts.items()},
        **{f"cq/{k}": v.node for k, v in snap.cluster_queues.items()},
    }
    out: dict[str, object] = {}
    for name, n in sorted(nodes.items()):
        frs = sorted(set(n.subtree_quota) | set(n.usage) | set(n.quotas))
        out[name] = {
            "usage": {str(fr): n.usage.get(fr, 0) for fr in frs if n.usage.get(fr, 0)},
            "subtree": {str(fr): n.subtree_quota.get(fr, 0) for fr in frs if n.subtree_quota.get(fr, 0)},
            "local": {str(fr): n.local_quota.get(fr, 0) for fr in frs if n.local_quota.get(fr, 0)},
            "available": {str(fr): n.available(fr) for fr in frs},
            "potential": {str(fr): n.potential_available(fr) for fr in frs},
            "quotas": {str(fr): q for fr, q in sorted(n.quotas.items())},
            "weight": n.weight,
        }
    out["workloads"] = sorted(snap.workloads)
    out["cq_workloads"] = {k: sorted(v.workloads) for k, v in sorted(snap.cluster_queues.items())}
    return out


def hierarchy() -> ClusterState:
    """root (own 2) <- sub (lendingLimit 3) <- {a: 4, b: 2 lending 1}; c: 3 under root."""
    return (
        StateBuilder()
        .flavors("default")
        .cohort(CohortBuilder("root").quota("default", "cpu", 2))
        .cohort(CohortBuilder("sub").parent("root").quota("default", "cpu", 0, lending_limit=3))
        .cq(
            ClusterQueueBuilder("a").cohort("sub").quota("default", "cpu", 4, borrowing_limit=1),
            local_queue="main",
        )
        .cq(
            ClusterQueueBuilder("b").cohort("sub").quota("default", "cpu", 2, lending_limit=1),
            local_queue="main",
        )
        .cq(ClusterQueueBuilder("c").cohort("root").quota("default", "cpu", 3), local_queue="main")
        .wl(WorkloadBuilder("a", "w1").request("cpu", 5).admitted("a", "default"))
        .wl(WorkloadBuilder("b", "w2").request("cpu", "1.5").admitted("b", "default"))
        .build()
    )


def test_the_quota_tree_matches_kueue_formulas_on_a_hierarchy() -> None:
    snap = Snapshot.from_state(hierarchy())
    sub, root = snap.cohorts["sub"], snap.cohorts["root"]
    a, b, c = (snap.cluster_queues[n].node for n in "abc")
    # b keeps 2-1=1 cpu local; sub's subtree = 4 + (2-1) = 5, lends 3 -> keeps 2 local.
    # usage: a 5 (none local) -> sub +5; b 1.5 with 1 local -> sub +0.5; sub 5.5 - 2 local -> root +3.5.
    assert {
        "b.local": b.local_quota.get(CPU),
        "sub.subtree": sub.subtree_quota[CPU],
        "sub.local": sub.local_quota[CPU],
        "root.subtree": root.subtree_quota[CPU],
        "sub.usage": sub.usage[CPU],
        "root.usage": root.usage[CPU],
    } == {
        "b.local": 1000,
        "sub.subtree": 5000,
        "sub.local": 2000,
        "root.subtree": 2000 + 3000 + 3000,
        "sub.usage": 5500,
        "root.usage": 3500,
    }
    # a: borrowingLimit 1 over nominal 4 caps it at 5 -> available 0; c sees root's free 8-3.5=4.5.
    assert [a.available(CPU), b.available(CPU), c.available(CPU)] == [0, 4500, 4500]
    assert [a.potential_available(CPU), c.potential_available(CPU)] == [5000, 8000]


def test_a_cycle_of_cohort_parents_is_an_error_that_names_it() -> None:
    state = (
        StateBuilder()
        .cohort(CohortBuilder("x").parent("y"))
        .cohort(CohortBuilder("y").parent("z"))
        .cohort(CohortBuilder("z").parent("x"))
        .build()
    )
    with pytest.raises(InputError, match="cohort parents form a cycle: x -> y -> z -> x"):
        Snapshot.from_state(state)


@given(cluster_states(), st.data())
def test_a_what_if_removal_leaves_the_snapshot_unchanged(state: ClusterState, data: st.DataObject) -> None:
    snap = Snapshot.from_state(state)
    before = dump(snap)
    keys = data.draw(st.lists(st.sampled_from(sorted(snap.workloads)), unique=True)) if snap.workloads else []
    with snap.simulate_removal(keys):
        assert not set(keys) & set(snap.workloads)
    assert dump(snap) == before


@given(cluster_states(), st.data())
def test_a_what_if_removal_of_several_is_their_removals_one_after_another(
    state: ClusterState, data: st.DataObject
) -> None:
    # The what-ifs sum the removed usage per ClusterQueue before walking up the tree: the same usage, hence
    # the same available and potential, at every node as each workload's removal in turn, in any order.
    snap = Snapshot.from_state(state)
    keys = data.draw(st.lists(st.sampled_from(sorted(snap.workloads)), unique=True)) if snap.workloads else []
    one_by_one = Snapshot.from_state(state)
    for key in keys:
        one_by_one.remove_workload(key)
    with snap.simulate_removal(keys) as s:
        assert dump(s) == dump(one_by_one)
    usage_only = Snapshot.from_state(state)
    for key in keys:
        info = usage_only.workloads[key]
        usage_only.remove_usage(info.cluster_queue, info.usage)
    with snap.simulate_usage_removal([snap.workloads[k] for k in keys]) as s:
        assert dump(s) == dump(usage_only)


@given(cluster_states(), st.data())
def test_an_incremental_quota_change_equals_rebuilding_from_scratch(
    state: ClusterState, data: st.DataObject
) -> None:
    snap = Snapshot.from_state(state)
    before = dump(snap)
    names = [("cq", n) for n in sorted(state.cluster_queues)] + [("cohort", n) for n in sorted(state.cohorts)]
    kind, name = data.draw(st.sampled_from(names))
    flavor = data.draw(st.sampled_from(["f1", "f2"]))
    has_parent = kind == "cq" or state.cohorts[name].parent is not None
    nominal = data.draw(st.integers(0, 8)) * 1000
    bl = data.draw(st.none() | st.integers(0, 5)) if has_parent else None
    ll = data.draw(st.none() | st.integers(0, 5)) if has_parent else None
    quota = ResourceQuota(nominal, None if bl is None else bl * 1000, None if ll is None else ll * 1000)
    fr = FlavorResource(flavor, "cpu")
    with snap.transaction():
        node = snap.cohort(name) if kind == "cohort" else snap.cluster_queue(name).node
        snap.set_quota(node, fr, quota)
        incremental = dump(snap)
    assert dump(snap) == before  # rolled back exactly
    expected = Snapshot.from_state(with_quota(state, kind, name, fr, quota))
    want = dump(expected)
    assert {k: v for k, v in incremental.items() if v != want[k]} == {
        k: v for k, v in want.items() if v != incremental[k]
    }


def with_quota(
    state: ClusterState, kind: str, name: str, fr: FlavorResource, quota: ResourceQuota
) -> ClusterState:
    from fairshare.models import FlavorQuotas, ResourceGroup

    obj = state.cluster_queues[name] if kind == "cq" else state.cohorts[name]
    groups = list(obj.resource_groups)
    for gi, g in enumerate(groups):
        for fi, f in enumerate(g.flavors):
            if f.name == fr.flavor:
                res = dict(f.resources)
                res[fr.resource] = quota
                flavors = list(g.flavors)
                flavors[fi] = FlavorQuotas(f.name, tuple(sorted(res.items())))
                groups[gi] = dataclasses.replace(g, flavors=tuple(flavors))
                break
        else:
            continue
        break
    else:
        groups.append(ResourceGroup((fr.resource,), (FlavorQuotas(fr.flavor, ((fr.resource, quota),)),)))
    new = dataclasses.replace(obj, resource_groups=tuple(groups))
    if kind == "cq":
        return dataclasses.replace(state, cluster_queues={**state.cluster_queues, name: new})
    return dataclasses.replace(state, cohorts={**state.cohorts, name: new})


def test_nested_transactions_undo_only_their_own_changes() -> None:
    snap = Snapshot.from_state(hierarchy())
    base = dump(snap)
    with snap.transaction():
        snap.remove_workload("a/w1")
        after_outer = dump(snap)
        with snap.simulate_removal(["b/w2"]):
            assert snap.usage(snap.cohort("sub")) == {}
        assert dump(snap) == after_outer
    assert dump(snap) == base


def test_borrowing_and_drs_queries_report_the_amount_over_nominal() -> None:
    snap = Snapshot.from_state(hierarchy())
    assert snap.borrowing(snap.cluster_queue("a").node) == {CPU: 1000}
    assert snap.borrowing(snap.cohort("sub")) == {CPU: 500}
    drs = snap.cluster_queue("a").node.dominant_resource_share()
    # a borrows 1 cpu; lendable to it = potentialAvailable(sub) = local 2 + root 8 = 10 cpu.
    assert (drs.dominant_resource, round(drs.weighted_share, 6), drs.rounded_weighted_share) == (
        "cpu",
        100.0,
        100,
    )


def test_a_rolled_back_quota_change_leaves_no_stale_fair_share() -> None:
    snap = Snapshot.from_state(hierarchy())
    a = snap.cluster_queue("a").node
    before = a.dominant_resource_share()
    with snap.transaction():
        snap.set_quota(snap.cluster_queue("c").node, CPU, ResourceQuota(30_000))
        during = a.dominant_resource_share()
    assert (during.weighted_share < before.weighted_share, a.dominant_resource_share()) == (True, before)


def test_a_fair_sharing_weight_divides_the_share_and_is_undone_with_its_transaction() -> None:
    snap = Snapshot.from_state(hierarchy())
    a = snap.cluster_queue("a").node
    with snap.transaction():
        snap.set_fair_sharing_weight(a, 2000)
        halved = a.dominant_resource_share().weighted_share
    assert (halved, a.dominant_resource_share().weighted_share) == (50.0, 100.0)


def test_a_committed_transaction_keeps_its_changes_and_one_that_raises_undoes_them() -> None:
    snap = Snapshot.from_state(hierarchy())
    base = dump(snap)
    with pytest.raises(RuntimeError, match="body failed"), snap.transaction(commit=True):
        snap.remove_workload("a/w1")
        raise RuntimeError("body failed")
    assert dump(snap) == base
    with snap.transaction(commit=True) as same:
        same.remove_workload("a/w1")
    assert "a/w1" not in snap.workloads and snap._log is None  # kept, and no level left open


def test_a_what_if_that_fails_half_way_undoes_what_it_had_done() -> None:
    snap = Snapshot.from_state(hierarchy())
    base = dump(snap)
    with pytest.raises(InputError, match="not admitted"), snap.simulate_removal(["a/w1", "no/such"]):
        pytest.fail("the body runs only once every removal is done")
    assert (dump(snap), snap._log) == (base, None)


def test_usage_removal_and_addition_what_ifs_are_undone_on_exit() -> None:
    snap = Snapshot.from_state(hierarchy())
    base = dump(snap)
    info = snap.workloads["a/w1"]
    with snap.simulate_usage_removal([info]) as s:
        assert ("a/w1" in s.workloads, dump(s)["cq/a"] != base["cq/a"]) == (True, True)
    assert dump(snap) == base
    with snap.simulate_removal(["a/w1"]), snap.simulate_addition([info]) as s:
        assert "a/w1" in s.workloads
    assert dump(snap) == base
