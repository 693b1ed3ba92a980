"""`qm explain`'s account of a Workload's last eviction: the preemptor and Kueue's reason, read from the
`Preempted` condition whether it is True or was reset by the next admission (status False, reason
QuotaReserved, "Previously: " + the message: pkg/workload/workload.go resetActiveCondition)."""

from __future__ import annotations

import pytest

from fairshare.explain.workload import Eviction, last_eviction
from fairshare.models import ClusterState
from tests.builders import ClusterQueueBuilder, StateBuilder, WorkloadBuilder

MESSAGE = ("Preempted to accommodate a workload (UID: {uid}, JobUID: UNKNOWN) due to reclamation within the "
           "cohort; preemptor path: /pool/a; preemptee path: /pool/b")
BY = MESSAGE.format(uid="q/preemptor")
BEFORE = "Previously: " + BY  # the message once Kueue admitted the victim again
BY_UNKNOWN = MESSAGE.format(uid="UNKNOWN")


def _state(victim: WorkloadBuilder) -> ClusterState:
    return (
        StateBuilder()
        .flavors("f")
        .cq(ClusterQueueBuilder("q").quota("f", "cpu", 4), local_queue="main")
        .wl(WorkloadBuilder("q", "preemptor").request("cpu", 4).admitted("q", "f", at=5))
        .wl(victim)
        .build()
    )


def _victim() -> WorkloadBuilder:
    return WorkloadBuilder("q", "victim").request("cpu", 4).created(1)


@pytest.mark.parametrize(
    ("victim", "expected"),
    [
        pytest.param(
            _victim().condition("Evicted", True, "Preempted", BY, at=5)
            .condition("Preempted", True, "InCohortReclamation", BY, at=5),
            Eviction(5, True, "Preempted", BY, "InCohortReclamation", "q/preemptor", "q/preemptor"),
            id="a victim evicted now names its preemptor and Kueue's reason"),
        pytest.param(
            _victim().admitted("q", "f", at=9)
            .condition("Evicted", False, "QuotaReserved", BEFORE, at=9)
            .condition("Preempted", False, "QuotaReserved", BEFORE, at=9),
            Eviction(9, False, "QuotaReserved", BEFORE, "InCohortReclamation", "q/preemptor", "q/preemptor"),
            id="a victim admitted again keeps the reason from Kueue's words"),
        pytest.param(
            _victim().condition("Preempted", True, "InCohortReclamation", BY_UNKNOWN, at=5),
            Eviction(5, True, "InCohortReclamation", BY_UNKNOWN, "InCohortReclamation"),
            id="a preemptor Kueue calls UNKNOWN is not named"),
        pytest.param(
            _victim().condition("Evicted", True, "Deactivated", "The workload is deactivated", at=5),
            Eviction(5, True, "Deactivated", "The workload is deactivated"),
            id="an eviction that is not a preemption has no preemptor"),
    ],
)
def test_the_last_eviction(victim: WorkloadBuilder, expected: Eviction) -> None:
    assert last_eviction(victim.build(), _state(victim)) == expected
