"""Under ``preference: PreemptionOverBorrowing`` a flavor where one resource fits by borrowing and
another needs preemption inside the ClusterQueue's share is represented by the borrowing fit
(isPreferred ranks the borrowing level first), findFlavorForPodSets returns a nil status for it,
and PodSetAssignment.RepresentativeMode is Fit for a pod set whose Status.IsFit(): Kueue nominates
the workload as a fit, computes no preemption targets, and skips it ("Workload no longer fits
after processing another workload") (pkg/scheduler/flavorassigner/flavorassigner.go, Kueue
v0.19.2). Real Kueue did this in the differential harness, fair sharing seed 135 step 11
(tests/conformance/differential/, the case named after this rule)."""

from __future__ import annotations

import pytest

from fairshare.models import ClusterState
from fairshare.queues import schedule_pending
from fairshare.scheduler import EntryStatus, Mode, SchedulerConfig
from fairshare.snapshot import Snapshot
from tests.builders import ClusterQueueBuilder, StateBuilder, WorkloadBuilder

SKIPPED = "skipped: no longer fits after processing another workload"
RECLAIMING = "preempting 1 workload(s): b/lent (InCohortReclamation)"


def cohort_with_a_gpu_borrower(preference: str | None, *, cpu: int) -> ClusterState:
    """CQ ``a`` is at its cpu nominal and has 1 of its 3 GPUs free, but ``b`` borrows the cohort's
    last GPUs; the newcomer in ``a`` asks ``cpu`` cpu (borrowing when > 0) and 1 GPU (reclaiming)."""
    a = (
        ClusterQueueBuilder("a")
        .cohort("all")
        .quota("default", "cpu", 2)
        .quota("default", "nvidia.com/gpu", 3)
        .preemption(within="LowerPriority", reclaim="Any")
        .fungibility(when_can_borrow="TryNextFlavor", when_can_preempt="TryNextFlavor", preference=preference)
    )
    b = (
        ClusterQueueBuilder("b")
        .cohort("all")
        .quota("default", "cpu", 6)
        .quota("default", "nvidia.com/gpu", 2)
    )
    newcomer = WorkloadBuilder("a", "new").priority(300).created(10).request("nvidia.com/gpu", 1)
    if cpu:
        newcomer.request("cpu", cpu)
    return (
        StateBuilder()
        .flavors("default")
        .cq(a, local_queue="main")
        .cq(b, local_queue="main")
        .wl(
            WorkloadBuilder("a", "own")
            .priority(300)
            .request("cpu", 2)
            .request("nvidia.com/gpu", 2)
            .admitted("a", "default")
        )
        .wl(WorkloadBuilder("b", "lent").priority(100).request("nvidia.com/gpu", 4).admitted("b", "default"))
        .wl(newcomer)
        .build()
    )


CASES = [
    (
        "preemption over borrowing: borrowing cpu makes the flavor a fit and the GPU is not reclaimed",
        "PreemptionOverBorrowing",
        1,
        True,
        (EntryStatus.WAITING, SKIPPED, Mode.FIT, []),
    ),
    (
        "preemption over borrowing without fair sharing: the same fit, skipped",
        "PreemptionOverBorrowing",
        1,
        False,
        (EntryStatus.WAITING, SKIPPED, Mode.FIT, []),
    ),
    (
        "borrowing over preemption: the flavor is represented by the reclaim, which is made",
        "BorrowingOverPreemption",
        1,
        True,
        (EntryStatus.PREEMPTING, RECLAIMING, Mode.PREEMPT, ["b/lent"]),
    ),
    (
        "no preference (borrowing over preemption): the reclaim is made",
        None,
        1,
        True,
        (EntryStatus.PREEMPTING, RECLAIMING, Mode.PREEMPT, ["b/lent"]),
    ),
    (
        "preemption over borrowing with nothing borrowed: the reclaim is made",
        "PreemptionOverBorrowing",
        0,
        True,
        (EntryStatus.PREEMPTING, RECLAIMING, Mode.PREEMPT, ["b/lent"]),
    ),
]


@pytest.mark.parametrize(
    ("preference", "cpu", "fair_sharing", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_flavor_that_fits_by_borrowing_hides_the_preemption_another_resource_needs(
    preference: str | None,
    cpu: int,
    fair_sharing: bool,
    expected: tuple[EntryStatus, str, Mode, list[str]],
) -> None:
    snap = Snapshot.from_state(cohort_with_a_gpu_borrower(preference, cpu=cpu))
    result = schedule_pending(snap, now=20, config=SchedulerConfig(fair_sharing=fair_sharing))
    outcome = result.outcome("a/new")
    assert outcome is not None and outcome.assignment is not None
    got = (outcome.status, outcome.reason, outcome.assignment.mode, sorted(result.preempted_keys()))
    assert got == expected
    # The resources keep their own modes (flavorResourcesNeedPreemption reads them): the GPU's
    # is Preempt in every row.
    assert outcome.assignment.pod_sets[0].flavors["nvidia.com/gpu"].mode == Mode.PREEMPT
