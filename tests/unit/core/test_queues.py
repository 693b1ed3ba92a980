from __future__ import annotations

import dataclasses

from fairshare.models import ClusterState
from fairshare.queues import QueueManager
from fairshare.scheduler import apply_cycle, schedule_cycle
from fairshare.snapshot import Snapshot
from fairshare.workload import WorkloadInfo
from tests.builders import ClusterQueueBuilder, StateBuilder, WorkloadBuilder


def state(strict: bool) -> ClusterState:
    cq = ClusterQueueBuilder("q").quota("default", "cpu", 2)
    if strict:
        cq.strict_fifo()
    return (
        StateBuilder()
        .flavors("default")
        .cq(cq, local_queue="main")
        .cq(ClusterQueueBuilder("other").quota("default", "cpu", 1), local_queue="main")
        .wl(WorkloadBuilder("q", "too-big").request("cpu", 3).priority(5).created(1))
        .wl(WorkloadBuilder("q", "small-old").request("cpu", 1).priority(0).created(2))
        .wl(WorkloadBuilder("q", "small-new").request("cpu", 1).priority(0).created(3))
        .wl(WorkloadBuilder("other", "w").request("cpu", 1).created(4))
        .build()
    )


def run_cycles(strict: bool, n: int) -> list[list[str]]:
    snap = Snapshot.from_state(state(strict))
    qm = QueueManager.from_snapshot(snap)
    admitted = []
    for i in range(n):
        heads = qm.heads(float(i))
        result = schedule_cycle(snap, now=float(i), heads=heads)
        apply_cycle(snap, result)
        qm.requeue_after_cycle(heads, result)
        admitted.append([a.key for a in result.admissions])
    return admitted


def test_heads_are_ordered_by_priority_then_queue_order_time() -> None:
    snap = Snapshot.from_state(state(False))
    qm = QueueManager.from_snapshot(snap)
    assert [h.key for h in qm.ordered("q")] == ["q/too-big", "q/small-old", "q/small-new"]
    assert [h.key for h in qm.heads(0)] == ["other/w", "q/too-big"]


def test_a_strict_fifo_head_that_never_fits_blocks_its_queue() -> None:
    assert run_cycles(strict=True, n=3) == [["other/w"], [], []]


def test_best_effort_fifo_parks_the_head_and_admits_the_next_ones() -> None:
    assert run_cycles(strict=False, n=3) == [["other/w"], ["q/small-old"], ["q/small-new"]]


def test_a_cohort_event_releases_parked_workloads() -> None:
    snap = Snapshot.from_state(state(False))
    qm = QueueManager.from_snapshot(snap)
    heads = qm.heads(0)
    qm.requeue_after_cycle(heads, schedule_cycle(snap, now=0, heads=heads))
    assert qm.pending_count("q") == (2, 1)
    qm.notify_cohort_event("q")
    assert qm.pending_count("q") == (3, 0)


def test_a_workload_in_backoff_is_not_a_head_before_its_requeue_time() -> None:
    wl = WorkloadBuilder("q", "late").request("cpu", 1).priority(9).build()
    info = WorkloadInfo.pending(dataclasses.replace(wl, requeue_at=50.0), "q")
    qm = QueueManager()
    qm.add_cluster_queue("q")
    qm.push(info)
    assert (qm.heads(10), [h.key for h in qm.heads(60)]) == ([], ["q/late"])


def test_a_held_local_queue_keeps_its_workloads_out_of_the_heads() -> None:
    snap = Snapshot.from_state(state(False))
    qm = QueueManager.from_snapshot(snap)
    qm.set_local_queue_held("q/main", True)
    held_heads = [h.key for h in qm.heads(0)]
    qm.set_local_queue_held("q/main", False)
    assert (held_heads, [h.key for h in qm.heads(1)]) == (["other/w"], ["q/too-big"])


def test_a_parked_workload_of_a_held_local_queue_stays_out_of_the_heads_after_a_cohort_event() -> None:
    snap = Snapshot.from_state(state(False))
    qm = QueueManager.from_snapshot(snap)
    heads = qm.heads(0)  # q/too-big does not fit: parked as inadmissible
    qm.requeue_after_cycle(heads, schedule_cycle(snap, now=0, heads=heads))
    qm.set_local_queue_held("q/main", True)
    qm.notify_cohort_event("q")
    held_heads = [h.key for h in qm.heads(1)]
    qm.set_local_queue_held("q/main", False)
    assert (held_heads, [h.key for h in qm.heads(2)]) == ([], ["q/too-big"])


def test_a_head_whose_local_queue_is_held_during_its_cycle_is_requeued_held() -> None:
    snap = Snapshot.from_state(state(False))
    qm = QueueManager.from_snapshot(snap)
    heads = qm.heads(0)
    qm.set_local_queue_held("q/main", True)
    qm.requeue_after_cycle(heads, schedule_cycle(snap, now=0, heads=heads))
    qm.notify_cohort_event("q")
    assert [h.key for h in qm.heads(1)] == []


def test_with_admission_fair_sharing_the_less_used_local_queue_goes_first() -> None:
    from fairshare.scheduler import AdmissionFairSharingConfig, SchedulerConfig

    cq = ClusterQueueBuilder("q").quota("default", "cpu", 2).afs()
    st = (
        StateBuilder()
        .flavors("default")
        .cq(cq)
        .lq("ns", "heavy", "q")
        .lq("ns", "light", "q")
        .wl(WorkloadBuilder("ns", "from-heavy").queue("heavy").request("cpu", 1).priority(5).created(1))
        .wl(WorkloadBuilder("ns", "from-light").queue("light").request("cpu", 1).priority(0).created(2))
        .build()
    )
    snap = Snapshot.from_state(st)
    config = SchedulerConfig(admission_fair_sharing=AdmissionFairSharingConfig(usage_half_life_seconds=600))
    qm = QueueManager.from_snapshot(snap, config)
    before = [h.key for h in qm.ordered("q")]
    qm.set_local_queue_usage("ns/heavy", 10.0)
    assert (before, [h.key for h in qm.ordered("q")]) == (
        ["ns/from-heavy", "ns/from-light"],
        ["ns/from-light", "ns/from-heavy"],
    )


def test_a_best_effort_preemptor_stays_the_head_until_it_is_admitted() -> None:
    cq = ClusterQueueBuilder("q").quota("default", "cpu", 2).preemption(within="LowerPriority")
    st = (
        StateBuilder()
        .flavors("default")
        .cq(cq, local_queue="main")
        .wl(WorkloadBuilder("q", "low").request("cpu", 2).priority(0).admitted("q", "default"))
        .wl(WorkloadBuilder("q", "mid").request("cpu", 2).priority(5).created(1))
        .build()
    )
    snap = Snapshot.from_state(st)
    qm = QueueManager.from_snapshot(snap)
    heads = qm.heads(1)
    first = schedule_cycle(snap, now=1, heads=heads)
    apply_cycle(snap, first)
    qm.requeue_after_cycle(heads, first)
    # a higher-priority workload arrives while "mid" waits for its victim
    qm.push(
        WorkloadInfo.pending(
            WorkloadBuilder("q", "high").request("cpu", 2).priority(9).created(2).build(), "q"
        )
    )
    heads = qm.heads(2)
    second = schedule_cycle(snap, now=2, heads=heads)
    assert (
        [p.victim for p in first.preemptions],
        [h.key for h in heads],
        [a.key for a in second.admissions],
    ) == (["q/low"], ["q/mid"], ["q/mid"])


def test_a_parked_head_takes_the_queued_workloads_of_the_same_shape_along() -> None:
    sb = (
        StateBuilder()
        .flavors("default")
        .cq(ClusterQueueBuilder("q").quota("default", "cpu", 2), local_queue="main")
    )
    for i in range(3):
        sb.wl(WorkloadBuilder("q", f"big-{i}").request("cpu", 4).priority(1).created(float(i)))
    sb.wl(WorkloadBuilder("q", "small").request("cpu", 1).created(10))
    snap = Snapshot.from_state(sb.build())
    qm = QueueManager.from_snapshot(snap)
    heads = qm.heads(0)
    qm.requeue_after_cycle(heads, schedule_cycle(snap, now=0, heads=heads))
    # SchedulingEquivalenceHashing: big-1 and big-2 are parked with big-0; "small" is next.
    assert (qm.pending_count("q"), [h.key for h in qm.heads(1)]) == ((1, 3), ["q/small"])
