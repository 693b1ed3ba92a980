from __future__ import annotations

import pytest

from fairshare.models import ClusterState
from fairshare.scheduler import Mode, assign
from fairshare.snapshot import Snapshot
from tests.builders import ClusterQueueBuilder, StateBuilder, WorkloadBuilder


def two_flavor_state(wl: WorkloadBuilder, *, spot_taint: bool = False) -> ClusterState:
    sb = StateBuilder().flavor("on-demand", labels={"instance": "on-demand"})
    sb.flavor(
        "spot", labels={"instance": "spot"}, taints=[("spot", "true", "NoSchedule")] if spot_taint else None
    )
    cq = ClusterQueueBuilder("q").quota("on-demand", "cpu", 2).quota("spot", "cpu", 10)
    return sb.cq(cq, local_queue="main").wl(wl).build()


CASES = [
    (
        "a workload that fits goes to the first flavor",
        WorkloadBuilder("q", "w").request("cpu", 1),
        False,
        (Mode.FIT, {"main": {"cpu": "on-demand"}}),
    ),
    (
        "a workload too big for the first flavor goes to the next",
        WorkloadBuilder("q", "w").request("cpu", 4),
        False,
        (Mode.FIT, {"main": {"cpu": "spot"}}),
    ),
    (
        "a nodeSelector on a flavor label picks that flavor",
        WorkloadBuilder("q", "w").request("cpu", 1).node_selector("instance", "spot"),
        False,
        (Mode.FIT, {"main": {"cpu": "spot"}}),
    ),
    (
        "a nodeSelector key that no flavor has is ignored",
        WorkloadBuilder("q", "w").request("cpu", 1).node_selector("zone", "a"),
        False,
        (Mode.FIT, {"main": {"cpu": "on-demand"}}),
    ),
    (
        "an untolerated NoSchedule taint rules the flavor out",
        WorkloadBuilder("q", "w").request("cpu", 4),
        True,
        (Mode.NO_FIT, {"main": {}}),
    ),
    (
        "a toleration lets the workload use the tainted flavor",
        WorkloadBuilder("q", "w").request("cpu", 4).toleration("spot", "true", "NoSchedule"),
        True,
        (Mode.FIT, {"main": {"cpu": "spot"}}),
    ),
    (
        "a resource the ClusterQueue does not cover cannot be assigned",
        WorkloadBuilder("q", "w").request("cpu", 1).request("nvidia.com/gpu", 1),
        False,
        (Mode.NO_FIT, {"main": {}}),
    ),
]


@pytest.mark.parametrize(("wl", "taint", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_flavor_assignment_follows_order_labels_and_taints(
    wl: WorkloadBuilder, taint: bool, expected: tuple[Mode, dict[str, dict[str, str]]]
) -> None:
    snap = Snapshot.from_state(two_flavor_state(wl, spot_taint=taint))
    a = assign(snap, snap.pending["q/w"], now=0)
    assert (a.mode, a.flavors()) == expected


def test_the_no_fit_reason_says_what_is_missing() -> None:
    snap = Snapshot.from_state(two_flavor_state(WorkloadBuilder("q", "w").request("cpu", 20)))
    assert assign(snap, snap.pending["q/w"], now=0).message() == (
        "insufficient quota for cpu in flavor on-demand, request 20 > maximum capacity 2; "
        "insufficient quota for cpu in flavor spot, request 20 > maximum capacity 10"
    )


def test_pod_sets_are_charged_one_after_the_other_on_the_same_flavor() -> None:
    wl = WorkloadBuilder("q", "w").pod_set("driver", 1, cpu=1).pod_set("workers", 2, cpu=1)
    snap = Snapshot.from_state(two_flavor_state(wl))
    a = assign(snap, snap.pending["q/w"], now=0)
    # the driver takes 1 of on-demand's 2 cpu; the workers (2) then only fit on spot
    assert (a.mode, a.flavors()) == (Mode.FIT, {"driver": {"cpu": "on-demand"}, "workers": {"cpu": "spot"}})
