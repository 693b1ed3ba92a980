from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairshare.history import HalfLife, NodeKind, NodePath, UsageHistoryGraph
from fairshare.models import FlavorResource
from fairshare.planners.budget import VictimBudget
from fairshare.planners.experiments import (
    Competition,
    ExperimentPolicy,
    _in_rule_2_order,
    competing_experiments,
    plan_experiment_preemptions,
)
from fairshare.scheduler import Mode, SchedulerConfig, assign
from fairshare.snapshot import Snapshot
from fairshare.workload import WorkloadInfo
from tests.builders import ClusterQueueBuilder, StateBuilder, WorkloadBuilder

GPU = FlavorResource("a100", "nvidia.com/gpu")
NOW = 3600.0
SERVING, FRONTIER, VISION = "biz-model-serving", "ai-frontier-research", "ai-vision"
POLICY = ExperimentPolicy(experiment_below_priority=500, protected_priority=1000, min_runtime=600.0,
                          budget=VictimBudget(max_victims=3, window=3600.0))


def cq(name: str, gpus: int) -> ClusterQueueBuilder:
    return ClusterQueueBuilder(name).cohort("gpus").quota("a100", "nvidia.com/gpu", str(gpus))


def experiment(queue: str, name: str, gpus: int, *, priority: int = 100, started: float = 0.0,
               priority_class: str | None = None) -> WorkloadBuilder:
    wl = (WorkloadBuilder(queue, name).queue("main").priority(priority).request("nvidia.com/gpu", str(gpus))
          .admitted(queue, "a100", at=started))
    if priority_class is not None:
        original = wl.build
        wl.build = lambda: replace(original(), priority_class=priority_class)  # type: ignore[method-assign]
    return wl


def snapshot(*running: WorkloadBuilder, pending_gpus: int = 2, vision_gpus: int = 0) -> Snapshot:
    state = (StateBuilder().flavors("a100")
             .cq(cq(SERVING, 4), local_queue="main").cq(cq(FRONTIER, 4 - vision_gpus), local_queue="main"))
    if vision_gpus:
        state = state.cq(cq(VISION, vision_gpus), local_queue="main")
    for wl in running:
        state = state.wl(wl.build())
    state = state.wl(WorkloadBuilder(SERVING, "train-7").queue("main").priority(1000)
                     .request("nvidia.com/gpu", str(pending_gpus)).created(NOW - 60).build())
    return Snapshot.from_state(state.build())


def history(usage_gpu_hours: dict[str, float]) -> UsageHistoryGraph:
    g = UsageHistoryGraph(HalfLife.of_seconds(86400), created_at=-86400)
    for queue in (SERVING, FRONTIER, VISION):
        lq = NodePath.of((NodeKind.COHORT, "gpus"), (NodeKind.CLUSTER_QUEUE, queue),
                         (NodeKind.LOCAL_QUEUE, f"{queue}/main"))
        g.add_node(lq)
        hours = usage_gpu_hours.get(queue, 0.0)
        if hours:
            g.record_interval(lq, GPU, 1000, -hours * 3600, 0.0)  # one GPU for `hours`
    return g


def test_the_lowest_priority_experiment_of_the_queue_most_over_its_share_is_preempted_with_a_reason() -> None:
    snap = snapshot(experiment(FRONTIER, "exp-41", 4, priority=200, started=0.0),
                    experiment(FRONTIER, "exp-42", 2, priority=100, started=NOW - 720),
                    experiment(FRONTIER, "exp-43", 2, priority=300, started=0.0))
    plan = plan_experiment_preemptions(snap, history({FRONTIER: 20.0, SERVING: 1.0}), POLICY, now=NOW)
    assert [v.victim for v in plan.victims] == ["ai-frontier-research/exp-42"]
    assert plan.lines() == [
        "preempt ai-frontier-research/exp-42: priority 100 < 1000; queue at 2.8x its fair share; "
        "running 12m; frees 2 nvidia.com/gpu for biz-model-serving/train-7"]
    assert plan.decisions[0].reason == ("admit biz-model-serving/train-7 (priority 1000) by preempting "
                                        "ai-frontier-research/exp-42")


def test_history_fair_share_outranks_priority_across_queues() -> None:
    # vision has the lowest-priority experiment, but frontier is far over its historical share.
    snap = snapshot(experiment(FRONTIER, "exp-1", 4, priority=300),
                    experiment(VISION, "exp-2", 2, priority=100), vision_gpus=2, pending_gpus=4)
    over_frontier = plan_experiment_preemptions(snap, history({FRONTIER: 30.0, VISION: 1.0}), POLICY, now=NOW)
    over_vision = plan_experiment_preemptions(snap, history({FRONTIER: 1.0, VISION: 30.0}), POLICY, now=NOW)
    assert [v.victim for v in over_frontier.victims] == ["ai-frontier-research/exp-1"]
    assert [v.victim for v in over_vision.victims] == ["ai-vision/exp-2"]


def test_the_smallest_set_is_chosen_by_filling_back_unneeded_victims() -> None:
    # Preference order takes the two 1-GPU jobs first, then the 4-GPU one; only the 4-GPU one is needed.
    snap = snapshot(experiment(FRONTIER, "small-a", 1, priority=10),
                    experiment(FRONTIER, "small-b", 1, priority=20),
                    experiment(FRONTIER, "big", 4, priority=30),
                    experiment(FRONTIER, "mid", 2, priority=400), pending_gpus=4)
    plan = plan_experiment_preemptions(snap, history({FRONTIER: 10.0}), POLICY, now=NOW)
    assert [v.victim for v in plan.victims] == ["ai-frontier-research/big"]


@pytest.mark.parametrize(
    ("running", "policy", "reason"),
    [
        ([experiment(FRONTIER, "young", 8, started=NOW - 60)], POLICY,
         "cannot help biz-model-serving/train-7 (priority 1000): preempting no eligible experiment would not "
         "let it fit (1 running less than 10m excluded); the model says: insufficient unused quota for "
         "nvidia.com/gpu in flavor a100, 2 more needed"),
        ([experiment(FRONTIER, "vip", 8, priority_class="frontier-critical")],
         replace(POLICY, protected_priority_classes=frozenset({"frontier-critical"})),
         "cannot help biz-model-serving/train-7 (priority 1000): preempting no eligible experiment would not "
         "let it fit (1 in protected priority classes excluded); the model says: insufficient unused quota "
         "for nvidia.com/gpu in flavor a100, 2 more needed"),
        ([experiment(FRONTIER, "prod", 8, priority=700)], POLICY,
         "cannot help biz-model-serving/train-7 (priority 1000): preempting no eligible experiment would not "
         "let it fit; the model says: insufficient unused quota for nvidia.com/gpu in flavor a100, "
         "2 more needed"),
        ([experiment(FRONTIER, f"e{i}", 2) for i in range(4)],
         replace(POLICY, budget=VictimBudget(max_victims=1)),
         "cannot help biz-model-serving/train-7 (priority 1000): needs at least 1 victim, the budget "
         "allows 0 more now (1 used, budget 1 per 1h)"),
        ([experiment(FRONTIER, "young", 8, started=NOW - 60)],
         replace(POLICY, budget=VictimBudget(max_victims=1)),
         "cannot help biz-model-serving/train-7 (priority 1000): preempting no eligible experiment would not "
         "let it fit (1 running less than 10m excluded); the model says: insufficient unused quota for "
         "nvidia.com/gpu in flavor a100, 2 more needed"),
    ],
    ids=["too-young", "protected-class", "not-an-experiment", "over-budget",
         "over-budget-and-no-set-says-no-set"],
)
def test_no_victim_is_chosen_when_no_valid_set_exists_and_the_reason_says_why(
        running: list[WorkloadBuilder], policy: ExperimentPolicy, reason: str) -> None:
    snap = snapshot(*running, pending_gpus=2 if "e0" not in running[0].build().name else 4)
    plan = plan_experiment_preemptions(snap, history({FRONTIER: 5.0}), policy, now=NOW,
                                       past_preemptions=[NOW - 10])
    assert plan.victims == ()
    assert [d.reason for d in plan.decisions] == [reason]


def test_a_workload_that_fits_now_needs_no_preemption() -> None:
    snap = snapshot(experiment(FRONTIER, "exp", 2))
    plan = plan_experiment_preemptions(snap, history({}), POLICY, now=NOW)
    assert plan.victims == ()
    assert plan.decisions[0].reason == "no preemption for biz-model-serving/train-7: it fits now"


def test_planning_leaves_the_snapshot_unchanged_and_dry_run_marks_every_line() -> None:
    snap = snapshot(experiment(FRONTIER, "exp-1", 4), experiment(FRONTIER, "exp-2", 4))
    before = (dict(snap.workloads), {n: snap.usage(c.node) for n, c in snap.cluster_queues.items()})
    plan = plan_experiment_preemptions(snap, history({FRONTIER: 5.0}), replace(POLICY, dry_run=True), now=NOW)
    assert (dict(snap.workloads), {n: snap.usage(c.node) for n, c in snap.cluster_queues.items()}) == before
    assert plan.dry_run and all(line.startswith("[dry-run] preempt ") for line in plan.lines())


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(0, 600), st.integers(0, 3000)), min_size=1,
                max_size=6),
       st.integers(1, 6), st.integers(0, 4))
def test_the_chosen_victims_are_a_minimal_valid_set_within_policy(
        jobs: list[tuple[int, int, int]], pending: int, budget: int) -> None:
    running = []
    total = 0
    for i, (gpus, prio, started) in enumerate(jobs):
        if total + gpus > 8:
            break
        total += gpus
        running.append(experiment(FRONTIER if i % 2 else SERVING, f"e{i}", gpus, priority=prio,
                                  started=NOW - started))
    snap = snapshot(*running, pending_gpus=pending)
    policy = replace(POLICY, budget=VictimBudget(max_victims=budget))
    plan = plan_experiment_preemptions(snap, history({FRONTIER: 3.0, SERVING: 1.0}), policy, now=NOW)
    victims = [v.victim for v in plan.victims]
    assert len(victims) <= budget
    train = snap.pending["biz-model-serving/train-7"]

    def fits(removed: list[str]) -> bool:
        with snap.simulate_removal(removed):
            return assign(snap, train, now=NOW).mode == Mode.FIT

    if victims:
        assert fits(victims)
        for v in victims:
            assert not fits([w for w in victims if w != v])
            info = snap.workloads[v]
            assert info.priority < policy.experiment_below_priority
            assert NOW - (info.quota_reserved_time or NOW) >= policy.min_runtime
    assert plan_experiment_preemptions(snap, history({FRONTIER: 3.0, SERVING: 1.0}), policy, now=NOW) == plan


def test_several_starved_workloads_are_planned_in_order_and_share_one_budget() -> None:
    state = (StateBuilder().flavors("a100")
             .cq(cq(SERVING, 4), local_queue="main").cq(cq(FRONTIER, 4), local_queue="main"))
    for i in range(4):
        state = state.wl(experiment(FRONTIER, f"exp-{i}", 2, priority=100 + i).build())
    for name, priority in (("train-7", 1000), ("serve-1", 2000)):
        state = state.wl(WorkloadBuilder(SERVING, name).queue("main").priority(priority)
                         .request("nvidia.com/gpu", "2").created(NOW - 60).build())
    snap = Snapshot.from_state(state.build())
    plan = plan_experiment_preemptions(snap, history({FRONTIER: 5.0}),
                                       replace(POLICY, budget=VictimBudget(max_victims=1)), now=NOW)
    assert [(d.workload, d.action, [v.victim for v in d.victims]) for d in plan.decisions] == [
        ("biz-model-serving/serve-1", "preempt", ["ai-frontier-research/exp-0"]),
        ("biz-model-serving/train-7", "blocked", []),
    ]
    assert plan.decisions[1].reason == (
        "cannot help biz-model-serving/train-7 (priority 1000): needs at least 1 victim, the budget allows 0 "
        "more now (1 used, budget 1 per 1h)")


def reclaiming_snapshot(*running: WorkloadBuilder, frontier_gpus: int = 4) -> Snapshot:
    """Serving (4 GPUs) is full and its business workload must borrow; frontier may reclaim its nominal
    quota from anyone (reclaimWithinCohort: Any), as in the bundled frontier-shrink scenario."""
    state = (StateBuilder().flavors("a100")
             .cq(cq(SERVING, 4), local_queue="main")
             .cq(cq(FRONTIER, frontier_gpus).preemption(reclaim="Any"), local_queue="main"))
    for wl in running:
        state = state.wl(wl.build())
    state = state.wl(WorkloadBuilder(SERVING, "train-7").queue("main").priority(1000)
                     .request("nvidia.com/gpu", "2").created(NOW - 60).build())
    return Snapshot.from_state(state.build())


def test_an_experiment_that_kueue_would_let_reclaim_the_quota_back_is_never_a_victim() -> None:
    # Serving holds its 4 GPUs with business work; train-7 must borrow 2 of frontier's 4. Preempting
    # frontier's experiments would free them, but once requeued they are under frontier's nominal quota
    # and reclaimWithinCohort: Any lets them preempt train-7 straight back: nothing is gained.
    business = (WorkloadBuilder(SERVING, "serve-1").queue("main").priority(1000)
                .request("nvidia.com/gpu", "4").admitted(SERVING, "a100", at=0.0))
    snap = reclaiming_snapshot(business, experiment(FRONTIER, "exp-1", 2), experiment(FRONTIER, "exp-2", 2))
    plan = plan_experiment_preemptions(snap, history({FRONTIER: 20.0}), POLICY, now=NOW)
    assert plan.victims == ()
    assert plan.decisions[0].action == "blocked"
    assert "2 that Kueue would let reclaim it back: ai-frontier-research/exp-1, ai-frontier-research/exp-2" \
        in plan.decisions[0].reason


def test_an_experiment_borrowing_beyond_its_queue_quota_is_still_a_durable_victim() -> None:
    # Frontier's nominal quota is 0: exp-1 borrows 2 of serving's 4 GPUs, and serving (reclaim Never)
    # cannot take them back itself. Once requeued, exp-1 has no quota of its own to reclaim, so
    # preempting it for train-7 is durable.
    business = (WorkloadBuilder(SERVING, "serve-1").queue("main").priority(1000)
                .request("nvidia.com/gpu", "2").admitted(SERVING, "a100", at=0.0))
    snap = reclaiming_snapshot(business, experiment(FRONTIER, "exp-1", 2), frontier_gpus=0)
    plan = plan_experiment_preemptions(snap, history({FRONTIER: 20.0}), POLICY, now=NOW)
    assert [v.victim for v in plan.victims] == ["ai-frontier-research/exp-1"]


def test_an_experiment_already_evicted_max_evictions_times_is_left_alone_and_the_next_one_is_chosen() -> None:
    def worn(name: str) -> WorkloadBuilder:
        wl = experiment(FRONTIER, name, 4, priority=100, started=0.0)
        original = wl.build
        wl.build = lambda: replace(  # type: ignore[method-assign]
            original(), eviction_stats=(("Deactivated", "", 2), ("Preempted", "InCohortReclamation", 1)))
        return wl

    policy = replace(POLICY, max_evictions=3)
    snap = snapshot(worn("exp-worn"), experiment(FRONTIER, "exp-fresh", 4, priority=300, started=0.0))
    plan = plan_experiment_preemptions(snap, history({FRONTIER: 5.0}), policy, now=NOW)
    assert [v.victim for v in plan.victims] == ["ai-frontier-research/exp-fresh"]
    only_worn = plan_experiment_preemptions(snapshot(worn("exp-a"), worn("exp-b")), history({FRONTIER: 5.0}),
                                            policy, now=NOW)
    assert only_worn.victims == ()
    assert "(2 evicted 3 times already excluded)" in only_worn.decisions[0].reason


# --- rule 2's order by rank of over-share (planners.experiments._in_rule_2_order) ---------------------

def _reference_order(candidates: list[WorkloadInfo], shares: dict[str, Fraction | None],
                     now: float) -> list[str]:
    """Rule 2 as first written: the sort key with the over-share itself (a Fraction) in it."""
    def key(w: WorkloadInfo) -> tuple[int, Fraction, int, float, str]:
        share = shares[w.key]
        started = w.quota_reserved_time if w.quota_reserved_time is not None else now
        return (1 if share is None else 0, -(share or Fraction(0)), w.priority, -started, w.key)

    return [w.key for w in sorted(candidates, key=key)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([None, (0, 1), (1, 2), (2, 4), (3, 2), (7, 3), (14, 6), (5, 1)]),
                          st.sampled_from([10, 100, 499]), st.sampled_from([None, 0.0, 60.0, 3599.5, NOW])),
                max_size=24),
       st.booleans())
def test_rule_2_orders_by_the_rank_of_each_over_share_as_by_the_fraction_itself(
    rows: list[tuple[tuple[int, int] | None, int, float | None]], shared: bool
) -> None:
    # Equal over-shares as one object (one queue's candidates) or as equal objects (each candidate in a
    # queue of its own, at the same over-share as others), 0 among them; priorities and starts tied, and no
    # start (ordered at `now`).
    objects: dict[tuple[int, int], Fraction] = {}
    candidates: list[WorkloadInfo] = []
    shares: dict[str, Fraction | None] = {}
    for i, (share, priority, started) in enumerate(rows):
        queue = f"q-{share[0]}-{share[1]}" if shared and share is not None else f"q-{i:02d}"
        wl = (WorkloadBuilder(FRONTIER, f"exp-{i:02d}").queue(queue).priority(priority)
              .request("nvidia.com/gpu", "1").admitted(FRONTIER, "a100", at=started or 0.0).build())
        info = WorkloadInfo.admitted(wl)
        if started is None:
            info = replace(info, quota_reserved_time=None)
        if share is None:
            value = None
        elif shared:
            value = objects.setdefault(share, Fraction(*share))
        else:
            value = Fraction(*share)
        candidates.append(info)
        shares[info.key] = value
    asked: list[str] = []

    def over_share(w: WorkloadInfo) -> Fraction | None:
        asked.append(w.local_queue)
        return shares[w.key]

    got = _in_rule_2_order(list(candidates), over_share, NOW)
    assert [w.key for w in got] == _reference_order(candidates, shares, NOW)
    assert sorted(asked) == sorted({w.local_queue for w in candidates})  # once per queue


def test_only_the_beneficiarys_tree_competes_for_the_freed_quota() -> None:
    # train-7 borrows the 2 GPUs freed by evicting exp-1. exp-3, pending in frontier, would take them first
    # (it fits within frontier's nominal quota, so Kueue orders it ahead): held. exp-9 fits within the
    # nominal quota of a queue in another tree: Kueue admits it whatever happens here, and it cannot take
    # quota lent within the beneficiary's tree, so it is no competitor and is not held.
    state = (StateBuilder().flavors("a100")
             .cq(cq(SERVING, 4), local_queue="main").cq(cq(FRONTIER, 4), local_queue="main")
             .cq(ClusterQueueBuilder(VISION).cohort("elsewhere").quota("a100", "nvidia.com/gpu", "4"),
                 local_queue="main"))
    state = state.wl(WorkloadBuilder(SERVING, "serve-1").queue("main").priority(1000)
                     .request("nvidia.com/gpu", "4").admitted(SERVING, "a100", at=0.0).build())
    for name in ("exp-1", "exp-2"):
        state = state.wl(experiment(FRONTIER, name, 2).build())
    snap = Snapshot.from_state(state.build())
    pending = [
        WorkloadInfo.pending(WorkloadBuilder(SERVING, "train-7").queue("main").priority(1000)
                             .request("nvidia.com/gpu", "2").created(NOW - 60).build(), SERVING),
        WorkloadInfo.pending(WorkloadBuilder(FRONTIER, "exp-3").queue("main").priority(100)
                             .request("nvidia.com/gpu", "2").created(NOW - 30).build(), FRONTIER),
        WorkloadInfo.pending(WorkloadBuilder(VISION, "exp-9").queue("main").priority(100)
                             .request("nvidia.com/gpu", "1").created(NOW - 30).build(), VISION),
    ]
    before = snap.state_id
    competition = competing_experiments(snap, [f"{SERVING}/train-7"], [f"{FRONTIER}/exp-1"], pending, POLICY,
                                        SchedulerConfig(), NOW)
    assert competition == Competition((f"{FRONTIER}/exp-3",), True)
    assert snap.state_id == before
