"""fairshare.settle: Kueue's cycles until nothing changes, with Kueue's timing between them, and
fairshare.livelock: a preempt/admit loop recognised instead of spun."""

from __future__ import annotations

from fairshare.explain import explain_state, render
from fairshare.livelock import find_livelock
from fairshare.models import ClusterState
from fairshare.queues import QueueManager, schedule_pending
from fairshare.scheduler import SchedulerConfig
from fairshare.settle import KueueModel, KueueTiming
from fairshare.snapshot import Snapshot
from tests.builders import ClusterQueueBuilder, StateBuilder, WorkloadBuilder

CLASSICAL = SchedulerConfig()
FAIR = SchedulerConfig(fair_sharing=True)


def _behind_a_parked_head() -> ClusterState:
    return (
        StateBuilder()
        .flavors("f")
        .cq(ClusterQueueBuilder("q").quota("f", "cpu", 4), local_queue="main")
        .wl(WorkloadBuilder("q", "running").request("cpu", 3).admitted("q", "f", at=1))
        .wl(WorkloadBuilder("q", "big").request("cpu", 2).created(10))
        .wl(WorkloadBuilder("q", "small").request("cpu", 1).created(11))
        .build()
    )


def test_a_workload_behind_a_parked_best_effort_head_is_admitted_before_the_cycles_stop() -> None:
    model = KueueModel.from_state(_behind_a_parked_head(), CLASSICAL)
    run = model.run(20.0)
    assert (run.settled, [a.key for a in run.admissions], sorted(model.admitted())) == (
        True,
        ["q/small"],
        ["q/running", "q/small"],
    )


def _preemption_frees_more_than_needed() -> ClusterState:
    # "low" (4 cpu) holds all of q; "waiting" (1 cpu, same priority: cannot preempt) is parked;
    # "high" (3 cpu) preempts "low": 1 cpu is left over for "waiting".
    cq = ClusterQueueBuilder("q").quota("f", "cpu", 4).preemption(within="LowerPriority")
    return (
        StateBuilder()
        .flavors("f")
        .cq(cq, local_queue="main")
        .wl(WorkloadBuilder("q", "low").request("cpu", 4).admitted("q", "f", at=1))
        .wl(WorkloadBuilder("q", "waiting").request("cpu", 1).created(5))
        .wl(WorkloadBuilder("q", "high").request("cpu", 3).priority(10).created(20))
        .build()
    )


def test_a_parked_workload_waits_for_the_one_second_requeue_batch_after_a_preemption() -> None:
    model = KueueModel.from_state(_preemption_frees_more_than_needed(), CLASSICAL, parked=["q/waiting"])
    run = model.run(30.0)
    waiting = model.snapshot.workloads["q/waiting"]
    assert (
        [(p.victim, p.reason.value) for p in run.evictions],
        [a.key for a in run.admissions],
        waiting.quota_reserved_time,
        run.end,
    ) == ([("q/low", "InClusterQueue")], ["q/high", "q/waiting"], 31.0, 31.0)


def test_without_the_batch_a_parked_workload_is_requeued_at_the_release() -> None:
    model = KueueModel.from_state(
        _preemption_frees_more_than_needed(),
        CLASSICAL,
        parked=["q/waiting"],
        timing=KueueTiming(requeue_batch_seconds=0.0),
    )
    model.run(30.0)
    assert model.snapshot.workloads["q/waiting"].quota_reserved_time == 30.0


def test_a_parked_workload_is_not_a_head_until_a_cohort_event() -> None:
    state = _behind_a_parked_head()
    snap = Snapshot.from_state(state)
    qm = QueueManager.from_snapshot(snap, pending=[snap.pending["q/small"]])
    qm.park(snap.pending["q/big"])
    first = [h.key for h in qm.heads(0.0)]
    qm.delete("q/small")
    qm.notify_cohort_event("q")
    assert (first, [h.key for h in qm.heads(0.0)], qm.pending_count("q")) == (["q/small"], ["q/big"], (0, 0))


def _flip_flop() -> ClusterState:
    # Fair sharing, one cohort (found by the differential harness, fair-sharing seed 129):
    # "victim" (cq2) borrows 3 GPUs of cq0; "reclaimer" (cq0, within its GPU quota, borrowing cpu
    # from cq3) reclaims them (InCohortReclamation). The victim is requeued at once and, with cq2's
    # share lower than cq0's, wins the next cycle's tournament and fits again before the reclaimer,
    # which then preempts it again: for ever.
    cq0 = (
        ClusterQueueBuilder("cq0")
        .cohort("co")
        .quota("f", "cpu", 0)
        .quota("f", "gpu", 4)
        .preemption(reclaim="Any")
    )
    cq2 = (
        ClusterQueueBuilder("cq2")
        .cohort("co")
        .quota("f", "cpu", 2)
        .quota("f", "gpu", 1, borrowing_limit=4)
        .preemption(reclaim="Any")
    )
    cq3 = ClusterQueueBuilder("cq3").cohort("co").quota("f", "cpu", 3).quota("f", "gpu", 1, lending_limit=1)
    return (
        StateBuilder()
        .flavors("f")
        .cq(cq0, local_queue="main")
        .cq(cq2, local_queue="main")
        .cq(cq3, local_queue="main")
        .wl(
            WorkloadBuilder("cq2", "victim")
            .request("cpu", 1)
            .request("gpu", 2)
            .count(2)
            .admitted("cq2", "f", at=1)
        )
        .wl(WorkloadBuilder("cq0", "reclaimer").request("cpu", 3).request("gpu", 3).created(5))
        .build()
    )


def test_a_preempt_and_readmit_loop_is_reported_with_its_workloads_and_reasons() -> None:
    model = KueueModel.from_state(_flip_flop(), FAIR)
    run = model.run(10.0)
    livelock = run.livelock
    assert (
        run.settled,
        livelock is not None and livelock.workloads,
        livelock is not None and [(p.victim, p.reason, p.preemptor) for p in livelock.preemptions],
        livelock == find_livelock(run.cycles),
    ) == (
        False,
        ("cq0/reclaimer", "cq2/victim"),
        [("cq2/victim", "InCohortReclamation", "cq0/reclaimer")],
        True,
    )


def test_a_settling_sequence_is_not_a_livelock() -> None:
    model = KueueModel.from_state(_behind_a_parked_head(), CLASSICAL)
    run = model.run(20.0)
    assert (run.livelock, find_livelock(run.cycles)) == (None, None)


def test_qm_explain_warns_of_a_livelock_with_its_workloads_and_reasons() -> None:
    lines = render(explain_state(_flip_flop(), now=10.0, config=FAIR))
    assert (
        lines[0].startswith("WARNING: preemption livelock: cq0/reclaimer, cq2/victim"),
        "cq0/reclaimer preempts cq2/victim (InCohortReclamation)" in lines[0],
    ) == (True, True)


def test_qm_explain_has_no_warning_when_the_cycles_settle() -> None:
    lines = render(explain_state(_behind_a_parked_head(), now=20.0, config=CLASSICAL))
    assert lines[0] == "Next scheduling cycle (1 head(s)):"


def _two_pod_sets_two_flavors(strict: bool) -> ClusterState:
    # f0 has 4 cpu, f1 has 2. "w" asks 1 cpu (main) + 4 cpu (ps1). The first scan puts main on f0
    # (it fits: the scan stops there) and then ps1 fits nowhere. Kueue keeps where main's scan
    # stopped; the next cycle resumes main at f1, and ps1 (no progress) starts at f0 and fits.
    cq = ClusterQueueBuilder("q").quota("f0", "cpu", 4).quota("f1", "cpu", 2)
    if strict:
        cq.strict_fifo()
    return (
        StateBuilder()
        .flavors("f0", "f1")
        .cq(cq, local_queue="main")
        .wl(WorkloadBuilder("q", "w").pod_set("main", 1, cpu=1).pod_set("ps1", 1, cpu=4).created(1))
        .build()
    )


def test_a_second_cycle_resumes_the_flavor_scan_where_the_first_stopped() -> None:
    for strict in (True, False):
        state = _two_pod_sets_two_flavors(strict)
        one = schedule_pending(Snapshot.from_state(state), now=5.0, config=CLASSICAL)
        model = KueueModel.from_state(state, CLASSICAL)
        run = model.run(5.0)
        assert (
            [o.status.value for o in one.outcomes],
            len(run.cycles),
            model.admitted(),
        ) == (["NoFit"], 2, {"q/w": {"main": {"cpu": "f1"}, "ps1": {"cpu": "f0"}}}), f"strict={strict}"


def test_a_run_until_an_event_leaves_later_requeues_pending_for_the_next_run() -> None:
    model = KueueModel.from_state(_preemption_frees_more_than_needed(), CLASSICAL, parked=["q/waiting"])
    first = model.run(30.0, until=30.5)
    pending = model.next_timer()
    second = model.run(31.0)
    assert ([a.key for a in first.admissions], pending, [a.key for a in second.admissions]) == (
        ["q/high"],
        31.0,
        ["q/waiting"],
    )



def test_a_pending_workload_whose_cluster_queue_does_not_exist_is_in_no_queue() -> None:
    # A LocalQueue left pointing at a deleted ClusterQueue (another team's, on a shared cluster): Kueue
    # queues its workloads nowhere, and the model neither fails on them nor admits them.
    state = (
        StateBuilder()
        .flavors("f")
        .cq(ClusterQueueBuilder("q").quota("f", "cpu", 4), local_queue="main")
        .lq("old", "main", "deleted-cq")
        .wl(WorkloadBuilder("old", "orphan").request("cpu", 1).created(5))
        .wl(WorkloadBuilder("q", "fits").request("cpu", 1).created(6))
        .build()
    )
    model = KueueModel.from_state(state, CLASSICAL)
    run = model.run(20.0)
    assert (run.settled, [a.key for a in run.admissions]) == (True, ["q/fits"])
    # qm explain over the same state (it models the cycles after the next one the same way).
    assert render(explain_state(state, now=20.0, config=CLASSICAL))


def test_qm_explain_of_a_workload_beside_one_whose_cluster_queue_does_not_exist_explains_it() -> None:
    from fairshare.explain import explain_workload

    state = (
        StateBuilder()
        .flavors("f")
        .cq(ClusterQueueBuilder("q").quota("f", "cpu", 1), local_queue="main")
        .lq("old", "main", "deleted-cq")
        .wl(WorkloadBuilder("old", "orphan").request("cpu", 1).created(5))
        .wl(WorkloadBuilder("q", "running").request("cpu", 1).admitted("q", "f", at=1))
        .wl(WorkloadBuilder("q", "waits").request("cpu", 1).created(6))
        .build()
    )
    assert explain_workload(state, "q/waits", now=20.0, config=CLASSICAL) is not None
