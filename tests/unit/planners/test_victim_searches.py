"""The planner's victim searches kept across plans (VictimSearches, FastPaths.memo_victim_search): a search
is reused only when every input of it is the same, and a plan that reuses one decides what a fresh plan,
and the reference, decide."""

from __future__ import annotations

from dataclasses import replace

from fairshare.history import HalfLife, NodeKind, NodePath, UsageHistoryGraph
from fairshare.models import FlavorResource, ResourceQuota
from fairshare.planners.budget import VictimBudget
from fairshare.planners.experiments import (
    ExperimentPolicy,
    ExperimentPreemptionPlan,
    VictimSearches,
    plan_experiment_preemptions,
)
from fairshare.snapshot import FAST, REFERENCE, FastPaths, Snapshot
from tests.builders import ClusterQueueBuilder, StateBuilder, WorkloadBuilder

GPU = FlavorResource("a100", "nvidia.com/gpu")
NOW = 3600.0
SERVING, FRONTIER = "biz-model-serving", "ai-frontier-research"
TRAIN, URGENT = f"{SERVING}/train-7", f"{SERVING}/urgent"
POLICY = ExperimentPolicy(experiment_below_priority=500, protected_priority=1000, min_runtime=600.0,
                          budget=VictimBudget(max_victims=1, window=3600.0))


def _cq(name: str, gpus: int) -> ClusterQueueBuilder:
    return ClusterQueueBuilder(name).cohort("gpus").quota("a100", "nvidia.com/gpu", str(gpus))


def _experiment(name: str, gpus: int, priority: int, started: float = 0.0) -> WorkloadBuilder:
    return (WorkloadBuilder(FRONTIER, name).queue("main").priority(priority)
            .request("nvidia.com/gpu", str(gpus)).admitted(FRONTIER, "a100", at=started))


def cluster(*, paths: FastPaths = FAST, train_gpus: int = 4, young_at: float | None = None) -> Snapshot:
    """8 GPUs in one cohort: serving (4) runs 1 GPU of business work, frontier (4) runs three 2-GPU
    experiments (borrowing 2 of serving's); 1 GPU is free. train-7 (serving) waits for `train_gpus`,
    urgent (serving, 1 GPU, higher priority) fits now. `young_at`: a fourth, 1-GPU experiment admitted
    then."""
    state = (StateBuilder().flavors("a100")
             .cq(_cq(SERVING, 4), local_queue="main").cq(_cq(FRONTIER, 4), local_queue="main"))
    state = state.wl(WorkloadBuilder(SERVING, "serve-1").queue("main").priority(1000)
                     .request("nvidia.com/gpu", "1").admitted(SERVING, "a100", at=0.0).build())
    for name, priority in (("exp-a", 100), ("exp-b", 200), ("exp-c", 300)):
        state = state.wl(_experiment(name, 2, priority).build())
    if young_at is not None:
        state = state.wl(_experiment("exp-young", 1, 100, started=young_at).build())
    state = state.wl(WorkloadBuilder(SERVING, "train-7").queue("main").priority(1000)
                     .request("nvidia.com/gpu", str(train_gpus)).created(NOW - 60).build())
    state = state.wl(WorkloadBuilder(SERVING, "urgent").queue("main").priority(2000)
                     .request("nvidia.com/gpu", "1").created(NOW - 30).build())
    return Snapshot.from_state(state.build(), paths=paths)


def history() -> UsageHistoryGraph:
    g = UsageHistoryGraph(HalfLife.of_seconds(86400), created_at=-86400)
    for queue, hours in ((SERVING, 1.0), (FRONTIER, 20.0)):
        lq = NodePath.of((NodeKind.COHORT, "gpus"), (NodeKind.CLUSTER_QUEUE, queue),
                         (NodeKind.LOCAL_QUEUE, f"{queue}/main"))
        g.add_node(lq)
        g.record_interval(lq, GPU, 1000, -hours * 3600, 0.0)
    return g


Outcome = list[tuple[str, str, list[str], str]]


def plan(snap: Snapshot, now: float, searches: VictimSearches | None, *pending: str,
         policy: ExperimentPolicy = POLICY) -> ExperimentPreemptionPlan:
    return plan_experiment_preemptions(snap, history(), policy, now=now, searches=searches,
                                       pending=[snap.pending[k] for k in pending or (TRAIN,)])


def outcome(p: ExperimentPreemptionPlan) -> Outcome:
    return [(d.workload, d.action, [v.victim for v in d.victims], d.reason) for d in p.decisions]


def fresh(now: float, *pending: str, policy: ExperimentPolicy = POLICY, train_gpus: int = 4,
          young_at: float | None = None) -> Outcome:
    """What the reference decides (no memory, every shortcut off), and a fast plan with no memory."""
    reference = outcome(plan(cluster(paths=REFERENCE, train_gpus=train_gpus, young_at=young_at), now, None,
                             *pending, policy=policy))
    fast = cluster(train_gpus=train_gpus, young_at=young_at)
    assert outcome(plan(fast, now, VictimSearches(), *pending, policy=policy)) == reference
    return reference


def test_a_search_with_the_same_inputs_later_is_reused_and_decides_as_a_fresh_plan() -> None:
    # train-7 needs 4 GPUs, 1 is free: two experiments must go, the budget allows one (blocked), then
    # with a budget of three (preempted). Each asked again a minute later.
    three = replace(POLICY, budget=VictimBudget(max_victims=3))
    for policy, action in ((POLICY, "blocked"), (three, "preempt")):
        snap, searches = cluster(), VictimSearches()
        first = outcome(plan(snap, NOW, searches, policy=policy))
        assert searches.hits == 0 and first[0][1] == action
        again = outcome(plan(snap, NOW + 60, searches, policy=policy))
        assert searches.hits == 1
        assert again == fresh(NOW + 60, policy=policy)
        assert len(again[0][2]) == (2 if action == "preempt" else 0)
        assert "needs 2 victim(s), the budget allows 1" in first[0][3] or action == "preempt"


def test_a_change_to_the_tree_outside_the_candidates_makes_the_search_run_again() -> None:
    # serve-1 (business, not a candidate) finishes: the same candidates in the same order, but the tree's
    # content differs and one victim is now enough.
    snap, searches = cluster(), VictimSearches()
    assert outcome(plan(snap, NOW, searches))[0][1] == "blocked"
    snap.remove_workload(f"{SERVING}/serve-1")
    got = outcome(plan(snap, NOW + 60, searches))
    assert searches.hits == 0
    assert got[0][1] == "preempt" and len(got[0][2]) == 1
    ref = cluster(paths=REFERENCE)
    ref.remove_workload(f"{SERVING}/serve-1")
    assert got == outcome(plan(ref, NOW + 60, None))


def test_a_quota_set_inside_an_open_what_if_is_part_of_what_the_search_read() -> None:
    # The controller sets the quotas in force inside its what-if, which does not renew the tree's token:
    # serving's quota raised to 6 leaves 3 GPUs free, and one victim is enough.
    snap, searches = cluster(), VictimSearches()
    assert outcome(plan(snap, NOW, searches))[0][1] == "blocked"
    with snap.transaction():
        snap.set_quota(snap.cluster_queue(SERVING).node, GPU, ResourceQuota(6000))
        got = outcome(plan(snap, NOW + 60, searches))
    assert searches.hits == 0
    assert got[0][1] == "preempt" and len(got[0][2]) == 1
    ref = cluster(paths=REFERENCE)
    with ref.transaction():
        ref.set_quota(ref.cluster_queue(SERVING).node, GPU, ResourceQuota(6000))
        assert got == outcome(plan(ref, NOW + 60, None))


def test_a_tree_an_earlier_beneficiary_of_the_same_plan_changed_is_searched_afresh() -> None:
    # Alone, train-7 (3 GPUs) needs one victim. Planned after urgent, which fits now and takes the free
    # GPU (inside the plan's what-if: the tree's token is unchanged), it needs two.
    snap, searches = cluster(train_gpus=3), VictimSearches()
    alone = outcome(plan(snap, NOW, searches))
    assert alone[0][1] == "preempt" and len(alone[0][2]) == 1
    both = outcome(plan(snap, NOW + 60, searches, URGENT, TRAIN))
    assert searches.hits == 0
    assert [d[1] for d in both] == ["none", "blocked"]
    assert "needs 2 victim(s)" in both[1][3]
    assert both == fresh(NOW + 60, URGENT, TRAIN, train_gpus=3)


def test_a_search_made_when_a_workload_of_the_tree_was_admitted_at_that_time_is_not_kept() -> None:
    # Kueue's candidate order ranks the most recently admitted first: the beneficiary, admitted in the
    # search's what-if at `now`, ties with a workload admitted at `now` and is newer than it later on.
    snap, searches = cluster(young_at=NOW), VictimSearches()
    plan(snap, NOW, searches)
    plan(snap, NOW, searches)
    assert searches.hits == 0
    later, searches = cluster(young_at=NOW), VictimSearches()
    plan(later, NOW + 1, searches)
    assert outcome(plan(later, NOW + 2, searches)) == fresh(NOW + 2, young_at=NOW)
    assert searches.hits == 1


def test_without_the_switch_nothing_is_kept() -> None:
    snap, searches = cluster(paths=replace(FAST, memo_victim_search=False)), VictimSearches()
    plan(snap, NOW, searches)
    assert outcome(plan(snap, NOW + 60, searches)) == fresh(NOW + 60)
    assert searches.hits == 0


def test_a_reused_search_keeps_the_experiments_kueue_would_let_reclaim_the_quota_back() -> None:
    # Frontier may reclaim its nominal quota from anyone (reclaimWithinCohort: Any): its requeued
    # experiments would preempt train-7 straight back, so none is a victim and the reason names them.
    def reclaiming(paths: FastPaths) -> Snapshot:
        state = (StateBuilder().flavors("a100").cq(_cq(SERVING, 4), local_queue="main")
                 .cq(_cq(FRONTIER, 4).preemption(reclaim="Any"), local_queue="main"))
        state = state.wl(WorkloadBuilder(SERVING, "serve-1").queue("main").priority(1000)
                         .request("nvidia.com/gpu", "4").admitted(SERVING, "a100", at=0.0).build())
        for name in ("exp-1", "exp-2"):
            state = state.wl(_experiment(name, 2, 100).build())
        state = state.wl(WorkloadBuilder(SERVING, "train-7").queue("main").priority(1000)
                         .request("nvidia.com/gpu", "2").created(NOW - 60).build())
        return Snapshot.from_state(state.build(), paths=paths)

    snap, searches = reclaiming(FAST), VictimSearches()
    plan(snap, NOW, searches)
    got = outcome(plan(snap, NOW + 60, searches))
    assert searches.hits == 1
    assert got == outcome(plan(reclaiming(REFERENCE), NOW + 60, None))
    assert "2 that Kueue would let reclaim it back" in got[0][3]
