"""The experiment gate's memory of blocked plans (fairshare.control.experiments.PlanMemo): per quota tree,
an event in one tree re-plans that tree's starved work only, and what it keeps is what a plan from
scratch decides. Each case compares the gate with its memory against the gate without one."""

from __future__ import annotations

import pytest

from fairshare.control.experiments import GateOutcome, PlanMemo, gate
from fairshare.control.observed import Observed, PendingWorkload
from fairshare.control.rules import PreemptionRules
from fairshare.history import HalfLife, UsageHistoryGraph
from fairshare.models import FlavorResource
from fairshare.planners.budget import VictimBudget
from fairshare.planners.experiments import ExperimentPolicy
from fairshare.quota_tree import ResourceQuota
from fairshare.snapshot import FAST, REFERENCE, FastPaths, Snapshot
from fairshare.workload import WorkloadInfo
from tests.builders import ClusterQueueBuilder, StateBuilder, WorkloadBuilder

GPU = "nvidia.com/gpu"
NOW = 7200.0
TREES = ("north", "south")


def rules(max_victims: int = 10) -> PreemptionRules:
    planner = ExperimentPolicy(experiment_below_priority=500, protected_priority=1000, min_runtime=600.0,
                               budget=VictimBudget(max_victims=max_victims, window=3600.0))
    return PreemptionRules(planner=planner, starvation_grace_s=0.0, victim_hold_s=600.0,
                           hold_competitors=False, max_lost_milli_hours={})


def world(
    paths: FastPaths, *, wants: int = 12, started: float = 0.0, queues: tuple[str, str] = ("main", "main")
) -> tuple[Snapshot, dict[str, PendingWorkload]]:
    """Two quota trees, each a business and a research ClusterQueue of 4 GPUs; research runs two 2-GPU
    experiments (in its LocalQueues `queues`); business waits for `wants` GPUs (12: more than its tree
    has, blocked with no set)."""
    state = StateBuilder().flavors("a100")
    for tree in TREES:
        for team in ("biz", "res"):
            state = state.cq(ClusterQueueBuilder(f"{team}-{tree}").cohort(tree).quota("a100", GPU, "4"),
                             local_queue="main")
        if "side" in queues:
            state = state.lq(f"res-{tree}", "side", f"res-{tree}")
        for i in range(2):
            state = state.wl(WorkloadBuilder(f"res-{tree}", f"exp-{i}").queue(queues[i]).priority(100)
                             .request(GPU, "2").admitted(f"res-{tree}", "a100", at=started + 60 * i))
    snap = Snapshot.from_state(state.build(), paths=paths)
    pending = {}
    for tree in TREES:
        wl = (WorkloadBuilder(f"biz-{tree}", "serve").queue("main").priority(1000).request(GPU, str(wants))
              .created(NOW - 3600).build())
        info = WorkloadInfo.pending(wl, f"biz-{tree}")
        pending[info.key] = PendingWorkload(info, NOW - 3600, True)
    return snap, pending


def ask(snap: Snapshot, pending: dict[str, PendingWorkload], memo: PlanMemo | None, *, now: float = NOW,
        max_victims: int = 10) -> GateOutcome:
    history = UsageHistoryGraph(HalfLife.of_seconds(86400), created_at=0.0)
    observed = Observed(snap, pending, history)
    teams = frozenset(f"{team}-{tree}" for team in ("biz", "res") for tree in TREES)
    return gate(rules(max_victims), observed, [], [], teams, now, now, "pool", memo)


def decided(out: GateOutcome) -> list[tuple[str, str]]:
    return [(b.workload, b.reason) for b in out.blocked]


def test_an_event_in_one_tree_replans_only_that_trees_starved_work_and_decides_as_from_scratch() -> None:
    snap, pending = world(FAST)
    memo = PlanMemo()
    first = ask(snap, pending, memo)
    assert first.planned == 2 and len(first.blocked) == 2
    assert ask(snap, pending, memo).planned == 0  # nothing changed: the whole plan is remembered
    snap.remove_workload("res-north/exp-0")  # a finish in the north tree
    again = ask(snap, pending, memo)
    assert again.planned == 1
    assert decided(again) == decided(ask(snap, pending, None))
    assert decided(again) != decided(first)  # the north reason counts one experiment fewer


def test_a_quota_step_inside_the_decisions_transaction_replans_its_tree() -> None:
    """decide() sets the quotas in force inside a transaction before the gate runs: the tree's content id
    does not move there, its quotas do."""
    snap, pending = world(FAST)
    memo = PlanMemo()
    ask(snap, pending, memo)
    with snap.transaction():
        south = snap.cluster_queue("biz-south").node
        snap.set_quota(south, FlavorResource("a100", GPU), ResourceQuota(12000))
        inside = ask(snap, pending, memo)
        assert inside.planned == 1
        assert decided(inside) == decided(ask(snap, pending, None))
        assert [b.workload for b in inside.blocked] == ["biz-north/serve"]  # south fits now


def test_time_alone_replans_a_tree_whose_experiments_pass_min_runtime() -> None:
    snap, pending = world(FAST, started=NOW - 630)  # exp-0 is 630 s old, exp-1 570 s: young
    memo = PlanMemo()
    young = ask(snap, pending, memo)
    later = ask(snap, pending, memo, now=NOW + 60)  # exp-1 passes the 600 s minRuntime in both trees
    assert later.planned == 2
    assert decided(later) == decided(ask(snap, pending, None, now=NOW + 60))
    assert decided(later) != decided(young)


@pytest.mark.parametrize(("queues", "remembered"), [(("main", "side"), False), (("main", "main"), True)],
                         ids=["experiments in two queues", "experiments in one queue"])
def test_a_decision_that_depends_on_the_candidates_order_is_remembered_only_if_their_order_is_fixed(
    queues: tuple[str, str], remembered: bool
) -> None:
    """'needs 2 victim(s), the budget allows 1': the set follows the candidates' order, by their queues'
    decayed history first, which time alone changes; within one queue the order is fixed."""
    snap, pending = world(FAST, wants=8, queues=queues)  # the whole tree: both experiments must go
    memo = PlanMemo()
    first = ask(snap, pending, memo, max_victims=1)
    assert all("needs 2 victim(s), the budget allows 1" in b.reason for b in first.blocked)
    snap.add_workload(snap.remove_workload("res-north/exp-1"))  # an event in the north tree: a new token
    again = ask(snap, pending, memo, max_victims=1)
    assert again.planned == (1 if remembered else 2)
    assert decided(again) == decided(ask(snap, pending, None, max_victims=1))


@pytest.mark.parametrize("paths", [REFERENCE, FAST], ids=["the reference", "the fast paths"])
def test_without_tree_ids_any_change_replans_everything(paths: FastPaths) -> None:
    snap, pending = world(paths)
    memo = PlanMemo()
    ask(snap, pending, memo)
    snap.remove_workload("res-north/exp-0")
    assert ask(snap, pending, memo).planned == (1 if paths.tracks_trees else 2)
