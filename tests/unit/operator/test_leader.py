"""The pure decisions of leader election (queue_manager/leader.py), as client-go's tryAcquireOrRenew makes
them; the loop itself runs against the real API server in tests/integration/test_operator_leader.py."""

from __future__ import annotations

import pytest

from queue_manager.leader import (
    Decision,
    LeaseRecord,
    Observation,
    Timing,
    decide,
    expires_in,
    lease_body,
    micro_time,
    observe,
)

OTHER = LeaseRecord("pod-a_1", 15, "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:10.000000Z", 3, "41")
RELEASED = LeaseRecord("", 1, None, "2026-01-01T00:00:10.000000Z", 3, "42")
MINE = LeaseRecord("pod-b_2", 15, "2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:10.000000Z", 4, "43")

DECISIONS = {
    "no Lease yet: create it": (None, 100.0, 100.0, Decision.CREATE),
    "our own Lease: renew it": (MINE, 100.0, 100.0, Decision.RENEW),
    "a released Lease: take it at once": (RELEASED, 100.0, 100.0, Decision.TAKE),
    "another holder seen 14.9 s ago: wait": (OTHER, 100.0, 114.9, Decision.WAIT),
    "another holder unchanged for a whole lease: take it": (OTHER, 100.0, 115.0, Decision.TAKE),
}


@pytest.mark.parametrize(("record", "seen", "now", "decision"), DECISIONS.values(), ids=DECISIONS.keys())
def test_the_decision_of_one_round(record: LeaseRecord | None, seen: float, now: float,
                                   decision: Decision) -> None:
    assert decide("pod-b_2", Observation(record, seen), now) is decision


def test_the_wait_restarts_only_when_the_record_changes_dated_at_the_read_before() -> None:
    first = observe(None, OTHER, 100.0, None)  # the first read: nothing known before it
    same = observe(first, OTHER, 110.0, 108.0)
    renewed = LeaseRecord(OTHER.holder, 15, OTHER.acquire_time, "2026-01-01T00:00:12.000000Z", 3, "44")
    changed = observe(same, renewed, 112.0, 110.0)  # renewed some time after the read at 110
    assert (first.observed_at, same.observed_at, changed.observed_at) == (100.0, 100.0, 110.0)
    left = (expires_in(same, 110.0), expires_in(changed, 112.0), expires_in(changed, 200.0))
    assert left == (5.0, 13.0, 0.0)


def test_a_follower_may_take_over_only_after_the_leader_has_given_up() -> None:
    # The leader gives up at the latest renew_deadline after its last renewal r; the follower's clock for
    # that renewal starts at its previous read, at most one retry period before r.
    for lease in (3.0, 6.0, 15.0, 60.0):
        t = Timing.of(lease)
        assert -t.retry_period + t.lease_duration > t.renew_deadline


def test_a_new_holder_counts_a_transition_and_sets_acquire_time() -> None:
    body = lease_body(namespace="qm", name="lease", identity="pod-b_2", duration_seconds=15, record=OTHER,
                      now=1767225620.5)
    assert body == {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "lease", "namespace": "qm", "resourceVersion": "41",
                     "labels": {"app.kubernetes.io/name": "queue-manager"}},
        "spec": {"holderIdentity": "pod-b_2", "leaseDurationSeconds": 15,
                 "acquireTime": "2026-01-01T00:00:20.500000Z", "renewTime": "2026-01-01T00:00:20.500000Z",
                 "leaseTransitions": 4},
    }


def test_a_renewal_keeps_acquire_time_and_transitions() -> None:
    spec = lease_body(namespace="qm", name="lease", identity="pod-b_2", duration_seconds=15, record=MINE,
                      now=1767225630.0)["spec"]
    assert (spec["acquireTime"], spec["renewTime"], spec["leaseTransitions"]) == (
        MINE.acquire_time, "2026-01-01T00:00:30.000000Z", 4)


def test_a_release_empties_the_holder_so_a_follower_takes_over_at_once() -> None:
    spec = lease_body(namespace="qm", name="lease", identity="pod-b_2", duration_seconds=15, record=MINE,
                      now=1767225630.0, release=True)["spec"]
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == (None, 1)
    assert decide("pod-a_1", Observation(LeaseRecord.of({"spec": spec}), 0.0), 0.0) is Decision.TAKE


def test_the_first_lease_counts_no_transition() -> None:
    spec = lease_body(namespace="qm", name="lease", identity="pod-b_2", duration_seconds=15, record=None,
                      now=0.0)["spec"]
    assert (spec["leaseTransitions"], spec["acquireTime"]) == (0, micro_time(0.0))


def test_timing_keeps_client_go_proportions() -> None:
    assert Timing.of(15.0) == Timing(15.0, 10.0, 2.0)


def test_a_lease_as_the_api_returns_it_reads_into_a_record() -> None:
    stored = {"metadata": {"name": "lease", "resourceVersion": "7"},
              "spec": {"holderIdentity": "pod-a_1", "leaseDurationSeconds": 15, "leaseTransitions": 2,
                       "acquireTime": "2026-01-01T00:00:00.000000Z",
                       "renewTime": "2026-01-01T00:00:09.000000Z"}}
    assert LeaseRecord.of(stored) == LeaseRecord("pod-a_1", 15, "2026-01-01T00:00:00.000000Z",
                                                 "2026-01-01T00:00:09.000000Z", 2, "7")
