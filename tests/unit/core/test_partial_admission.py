"""Partial admission (PodSetReducer), ported from Kueue pkg/scheduler/scheduler_test.go."""

from __future__ import annotations

import pytest

from fairshare.queues import schedule_pending
from fairshare.scheduler import EntryStatus, SchedulerConfig
from fairshare.snapshot import Snapshot
from tests.builders import ClusterQueueBuilder, StateBuilder, WorkloadBuilder

CASES = [
    (
        "partial admission single variable pod set",
        WorkloadBuilder("sales", "new").pod_set("one", 50, min_count=20, cpu=2),
        {"one": 25},
    ),
    (
        "partial admission multiple variable pod sets",
        WorkloadBuilder("sales", "new")
        .pod_set("one", 20, cpu=1)
        .pod_set("two", 30, min_count=10, cpu=1)
        .pod_set("three", 15, min_count=5, cpu=1),
        {"one": 20, "two": 20, "three": 10},
    ),
]


@pytest.mark.parametrize(("wl", "counts"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_workload_with_min_counts_is_admitted_with_the_largest_counts_that_fit(
    wl: WorkloadBuilder, counts: dict[str, int]
) -> None:
    state = (
        StateBuilder()
        .flavors("default")
        .cq(ClusterQueueBuilder("sales").quota("default", "cpu", 50), local_queue="main")
        .wl(wl)
        .build()
    )
    result = schedule_pending(Snapshot.from_state(state), now=0)
    assert [(a.key, {ps.name: ps.count for ps in a.assignment.pod_sets}) for a in result.admissions] == [
        ("sales/new", counts)
    ]


def test_without_partial_admission_the_same_workload_does_not_fit() -> None:
    state = (
        StateBuilder()
        .flavors("default")
        .cq(ClusterQueueBuilder("sales").quota("default", "cpu", 50), local_queue="main")
        .wl(WorkloadBuilder("sales", "new").pod_set("one", 50, min_count=20, cpu=2))
        .build()
    )
    result = schedule_pending(
        Snapshot.from_state(state), now=0, config=SchedulerConfig(partial_admission=False)
    )
    assert [(o.key, o.status) for o in result.outcomes] == [("sales/new", EntryStatus.NO_FIT)]
