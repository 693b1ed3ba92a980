from __future__ import annotations

from collections.abc import Mapping

from hypothesis import assume, given
from hypothesis import strategies as st

from fairshare.models import ClusterState, FlavorResource
from fairshare.queues import QueueManager, schedule_pending
from fairshare.scheduler import (
    CycleResult,
    EntryStatus,
    Mode,
    SchedulerConfig,
    apply_cycle,
    assign,
    assign_with_targets,
    preemption_targets,
    schedule_cycle,
)
from fairshare.snapshot import FAST, REFERENCE, ClusterQueueSnapshot, Snapshot
from tests.builders import ClusterQueueBuilder, StateBuilder, WorkloadBuilder
from tests.unit.core.strategies import cluster_states, preemption_states
from tests.unit.core.test_snapshot import dump

CPU = FlavorResource("default", "cpu")


def over_use(snap: Snapshot) -> list[str]:
    """Nodes whose usage exceeds what they may use (a negative raw ``available``)."""
    out = []
    nodes = [*snap.cohorts.values(), *(cq.node for cq in snap.cluster_queues.values())]
    for n in nodes:
        for fr in sorted(set(n.usage) | set(n.subtree_quota)):
            if n.available(fr) < 0:
                out.append(f"{n.name} {fr} available {n.available(fr)}")
    return out


def two_borrowers() -> ClusterState:
    return (
        StateBuilder()
        .flavors("default")
        .cq(ClusterQueueBuilder("a").cohort("all").quota("default", "cpu", 2), local_queue="main")
        .cq(ClusterQueueBuilder("b").cohort("all").quota("default", "cpu", 2), local_queue="main")
        .cq(ClusterQueueBuilder("lender").cohort("all").quota("default", "cpu", 4), local_queue="main")
        .wl(WorkloadBuilder("a", "big").request("cpu", 5).created(1))
        .wl(WorkloadBuilder("b", "big").request("cpu", 5).priority(1).created(2))
        .build()
    )


def test_a_cycle_never_admits_past_the_cohort_quota() -> None:
    snap = Snapshot.from_state(two_borrowers())
    result = schedule_pending(snap, now=10)
    # Both fit alone (8 cpu in the cohort); together they need 10. The higher priority
    # one goes first (same borrowing level); the other no longer fits.
    assert [(o.key, o.status, o.reason) for o in result.outcomes] == [
        ("b/big", EntryStatus.ADMITTED, "admitted (main: cpu=default), borrowing level 1"),
        ("a/big", EntryStatus.WAITING, "skipped: no longer fits after processing another workload"),
    ]


def test_the_cycle_leaves_the_snapshot_unchanged_and_apply_commits_it() -> None:
    snap = Snapshot.from_state(two_borrowers())
    before = dump(snap)
    result = schedule_pending(snap, now=10)
    assert dump(snap) == before
    apply_cycle(snap, result)
    assert (sorted(snap.workloads), snap.usage(snap.cluster_queue("b").node)) == (["b/big"], {CPU: 5000})


def test_non_borrowing_entries_go_before_borrowing_ones_whatever_their_priority() -> None:
    state = (
        StateBuilder()
        .flavors("default")
        .cq(ClusterQueueBuilder("a").cohort("all").quota("default", "cpu", 2), local_queue="main")
        .cq(ClusterQueueBuilder("b").cohort("all").quota("default", "cpu", 2), local_queue="main")
        .wl(WorkloadBuilder("a", "borrower").request("cpu", 3).priority(100).created(1))
        .wl(WorkloadBuilder("b", "modest").request("cpu", 2).created(2))
        .build()
    )
    result = schedule_pending(Snapshot.from_state(state), now=10)
    assert [(o.key, o.status) for o in result.outcomes] == [
        ("b/modest", EntryStatus.ADMITTED),
        ("a/borrower", EntryStatus.WAITING),
    ]


def test_an_inactive_cluster_queue_or_a_namespace_mismatch_is_explained() -> None:
    state = (
        StateBuilder()
        .flavors("default")
        .cq(ClusterQueueBuilder("held").quota("default", "cpu", 2).stop("Hold"), local_queue="main")
        .wl(WorkloadBuilder("held", "w").request("cpu", 1))
        .build()
    )
    snap = Snapshot.from_state(state)
    heads = list(snap.pending.values())  # a queue manager would not pop it; the cycle still explains
    result = schedule_cycle(snap, now=1, heads=heads)
    assert [(o.key, o.status, o.reason) for o in result.outcomes] == [
        ("held/w", EntryStatus.INADMISSIBLE, "ClusterQueue held is stopped (stopPolicy Hold)")
    ]


@given(cluster_states(), st.booleans())
def test_after_any_cycle_no_cluster_queue_or_cohort_uses_more_than_it_may(
    state: ClusterState, fair: bool
) -> None:
    snap = Snapshot.from_state(state)
    assume(not over_use(snap))
    config = SchedulerConfig(fair_sharing=fair)
    qm = QueueManager.from_snapshot(snap, config)
    for cycle in range(3):
        now = 1000.0 + cycle
        heads = qm.heads(now)
        if not heads:
            break
        before = dump(snap)
        result = schedule_cycle(snap, now=now, config=config, heads=heads)
        assert dump(snap) == before
        apply_cycle(snap, result)
        assert over_use(snap) == []
        qm.requeue_after_cycle(heads, result)
        for p in result.preemptions:
            qm.notify_cohort_event(p.victim_cluster_queue)


def fits(
    snap: Snapshot,
    cq: ClusterQueueSnapshot,
    usage: Mapping[FlavorResource, int],
    removed: list[str],
    allow_borrowing: bool,
) -> bool:
    """workloadFits with ``removed`` gone: within Available and, unless allowed, not borrowing."""
    with snap.simulate_removal(removed):
        return cq.fits(usage) and (
            allow_borrowing or not any(cq.node.borrowing_with(fr, v) for fr, v in usage.items())
        )


@given(preemption_states())
def test_classical_victims_make_the_preemptor_fit_and_no_strict_subset_does(state: ClusterState) -> None:
    snap = Snapshot.from_state(state)
    checked = 0
    for head in sorted(snap.pending.values(), key=lambda i: i.key):
        a = assign(snap, head, now=1000)
        if a.mode != Mode.PREEMPT:
            continue
        targets = preemption_targets(snap, head, a, now=1000)
        if not targets:
            continue
        cq = snap.cluster_queues[head.cluster_queue]
        keys = [t.key for t in targets]

        # Kueue tries with and without borrowing; the victims are minimal for one of the two.
        assert any(
            fits(snap, cq, a.usage, keys, b)
            and not any(fits(snap, cq, a.usage, [k for k in keys if k != v], b) for v in keys)
            for b in (True, False)
        ), keys
        checked += 1
    assume(checked)


@given(preemption_states(), st.booleans(), st.booleans())
def test_assign_with_targets_answers_what_assign_then_preemption_targets_answer(
    state: ClusterState, fair: bool, fast: bool
) -> None:
    # With FastPaths.single_search the targets are the preemption oracle's own search, read again; without
    # it, searched a second time, as preemption_targets does.
    config = SchedulerConfig(fair_sharing=fair)
    snap = Snapshot.from_state(state, paths=FAST if fast else REFERENCE)
    reference = Snapshot.from_state(state)
    preempting = 0
    for head in sorted(snap.pending.values(), key=lambda i: i.key):
        a, targets = assign_with_targets(snap, head, config, now=1000)
        expected = assign(reference, head, config, now=1000)
        assert (a.mode, a.usage, a.borrowing) == (expected.mode, expected.usage, expected.borrowing)
        if a.mode != Mode.PREEMPT:
            assert targets == []
            continue
        wanted = preemption_targets(reference, head, expected, config, now=1000)
        assert [(t.key, t.reason) for t in targets] == [(t.key, t.reason) for t in wanted]
        preempting += bool(wanted)
    assert dump(snap) == dump(reference)
    assume(preempting)


def summary(result: CycleResult) -> tuple[object, ...]:
    return (
        [(a.key, a.flavors, dict(a.usage)) for a in result.admissions],
        [(p.victim, p.reason, p.preemptor) for p in result.preemptions],
        [(o.key, o.status, o.reason, o.requeue_immediately) for o in result.outcomes],
    )


@given(preemption_states(), st.booleans())
def test_a_cycle_is_deterministic_and_independent_of_earlier_what_ifs(
    state: ClusterState, fair: bool
) -> None:
    config = SchedulerConfig(fair_sharing=fair)
    snap = Snapshot.from_state(state)
    first = summary(schedule_pending(snap, now=1000, config=config))
    # What-ifs in between (they fill the snapshot's caches) must not change the next answer.
    for head in sorted(snap.pending.values(), key=lambda i: i.key):
        preemption_targets(snap, head, assign(snap, head, config, now=1000), config, now=1000)
    again = summary(schedule_pending(snap, now=1000, config=config))
    fresh = summary(schedule_pending(Snapshot.from_state(state), now=1000, config=config))
    assert first == again == fresh
