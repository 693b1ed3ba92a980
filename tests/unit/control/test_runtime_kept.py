"""An eviction does not strip a workload of the runtime it had (issue 31, item 4): minRuntime counts every
attempt, the time before an eviction included, as Kueue itself keeps it (status.accumulatedPastExecution-
TimeSeconds, pkg/workload/admissionchecks.go SyncAdmittedCondition). On a live cluster a deadline eviction
reset two victims below minRuntime once they were re-admitted, and a business Job that needed their GPUs
waited 8 min 42 s behind "preempting no eligible experiment would not let it fit"."""

from __future__ import annotations

import dataclasses

import pytest

from fairshare.control.experiments import gate
from fairshare.control.observed import Observed, PendingWorkload
from fairshare.control.rules import PreemptionRules
from fairshare.history import HalfLife, UsageHistoryGraph
from fairshare.planners.budget import VictimBudget
from fairshare.planners.experiments import ExperimentPolicy
from fairshare.scheduler.types import SchedulerConfig
from fairshare.snapshot import FAST, REFERENCE, FastPaths, Snapshot
from fairshare.workload import WorkloadInfo
from simulations.kueue import KueueModel
from simulations.record import EvictedBy
from tests.builders import ClusterQueueBuilder, StateBuilder, WorkloadBuilder

GPU = "nvidia.com/gpu"
NOW = 100_000.0


def rules() -> PreemptionRules:
    planner = ExperimentPolicy(experiment_below_priority=500, protected_priority=1000, min_runtime=600.0,
                               budget=VictimBudget(max_victims=5, window=3600.0))
    return PreemptionRules(planner=planner, starvation_grace_s=0.0, victim_hold_s=60.0,
                           hold_competitors=False, max_lost_milli_hours={})


def world(paths: FastPaths, *, reserved_ago: float,
          ran_before: int | None) -> tuple[Snapshot, dict[str, PendingWorkload]]:
    """Research (2 GPUs) runs a 4-GPU experiment, 2 of them borrowed from business (2 GPUs), re-admitted
    `reserved_ago` seconds ago after running `ran_before` seconds before its eviction; business waits for
    2 GPUs (Kueue does not reclaim: reclaimWithinCohort Never)."""
    exp = WorkloadBuilder("res", "exp").queue("main").priority(100).request(GPU, "4").admitted(
        "res", "a100", at=NOW - reserved_ago).build()
    exp = dataclasses.replace(exp, accumulated_past_execution_seconds=ran_before)
    state = (StateBuilder().flavors("a100")
             .cq(ClusterQueueBuilder("biz").cohort("pool").quota("a100", GPU, "2"), local_queue="main")
             .cq(ClusterQueueBuilder("res").cohort("pool").quota("a100", GPU, "2"), local_queue="main")
             .wl(exp))
    snap = Snapshot.from_state(state.build(), paths=paths)
    serve = WorkloadBuilder("biz", "serve").queue("main").priority(1000).request(GPU, "2").created(NOW - 60)
    info = WorkloadInfo.pending(serve.build(), "biz")
    return snap, {info.key: PendingWorkload(info, NOW - 60, True)}


@pytest.mark.parametrize("paths", [FAST, REFERENCE], ids=["fast paths", "reference"])
@pytest.mark.parametrize(
    ("reserved_ago", "ran_before", "victims", "wake"),
    [
        pytest.param(60.0, None, [], NOW + 540, id="re-admitted a minute ago and never evicted: too young"),
        pytest.param(60.0, 900, ["res/exp"], None,
                     id="re-admitted a minute ago after 15m before its eviction: 16m in all, a candidate"),
        pytest.param(60.0, 500, [], NOW + 40,
                     id="re-admitted a minute ago after 500s before: 560s in all, a candidate in 40s"),
        pytest.param(700.0, None, ["res/exp"], None, id="running 700s since its only admission: a candidate"),
    ],
)
def test_min_runtime_counts_the_time_a_workload_ran_before_an_eviction(
    paths: FastPaths, reserved_ago: float, ran_before: int | None, victims: list[str], wake: float | None
) -> None:
    snap, pending = world(paths, reserved_ago=reserved_ago, ran_before=ran_before)
    history = UsageHistoryGraph(HalfLife.of_seconds(86400), created_at=0.0)
    out = gate(rules(), Observed(snap, pending, history), [], [], frozenset({"biz", "res"}), NOW, NOW, "p")
    assert ([r.victim for r in out.requests], out.wake) == (victims, wake)
    if not victims:
        [blocked] = out.blocked
        assert "(1 running less than 10m excluded)" in blocked.reason


class _Quiet:
    def admitted(self, info: WorkloadInfo, t: float) -> None: ...

    def evicted(self, info: WorkloadInfo, t: float, *, by: str, preemptor: str, reason: str) -> None: ...


def test_the_simulated_kueue_adds_each_attempts_whole_seconds_to_the_accumulated_execution_time() -> None:
    snap, _ = world(FAST, reserved_ago=0.0, ran_before=None)
    kueue = KueueModel(StateBuilder().flavors("a100")
                       .cq(ClusterQueueBuilder("res").quota("a100", GPU, "8"), local_queue="main").build(),
                       SchedulerConfig(), _Quiet(), track_pending=True)
    kueue.snapshot.add_workload(snap.workloads["res/exp"])
    kueue.deactivate("res/exp", NOW + 901.7, by=EvictedBy.TRANSITION, preemptor="", reason="")
    first = kueue.held["res/exp"].workload.accumulated_past_execution_seconds
    kueue.reactivate("res/exp", NOW + 1000)
    kueue.settle(NOW + 1000)  # admitted again at NOW + 1000
    kueue.deactivate("res/exp", NOW + 1100.2, by=EvictedBy.TRANSITION, preemptor="", reason="")
    again = kueue.held["res/exp"].workload
    # Kueue: int32 of the seconds since Admitted turned True, added on each eviction (truncated).
    assert (first, again.accumulated_past_execution_seconds, again.eviction_count) == (901, 1001, 2)
