"""A QuotaPolicy's reconciles (queue_manager/operator.py `policy_event`, `reconcile_policy`): an event that
changed nothing a reconcile reads (the operator's own status write) is never reconciled, the tick is; a tick
while a reconcile runs is dropped; an edit waits for the running one and is reconciled. At 50,000 Workloads a
reconcile takes about 0.5 s and every status write queued another behind it, so an edit waited seconds for
its step; at 500 teams kopf's queue of the policy's events made an edit's event wait 3-5 s."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest

from tests.unit.operator.test_operator_reconcile import T0, FakeApi, _gpu_quota, _operator, _policy


@pytest.mark.parametrize(
    ("what", "body", "reconciled"),
    [
        ("a status-only event is dropped", lambda s: _policy(4, 1, s), False),
        ("an edit waits and is reconciled", lambda s: _policy(2, 2, s), True),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_while_a_reconcile_runs(what: str, body: object, reconciled: bool) -> None:
    api, clock = FakeApi(), [T0]
    op = _operator(api, clock)
    op.reconcile_policy("p", _policy(4, 1))
    assert _gpu_quota(api) == "4"
    rt = op.state.policies["p"]
    writes = len(api.writes)
    rt.lock.acquire()  # a reconcile is running
    done = threading.Event()
    event = body(api.status)  # type: ignore[operator]
    worker = threading.Thread(target=lambda: (op.policy_event("MODIFIED", event), done.set()))
    worker.start()
    returned_at_once = done.wait(1.0)
    rt.lock.release()
    worker.join(10)
    assert not worker.is_alive()
    assert returned_at_once is not reconciled  # dropped at once, or waited for the lock
    assert (len(api.writes) > writes) is reconciled
    assert api.status.get("observedGeneration") == (2 if reconciled else 1)


def test_with_no_reconcile_running_a_status_only_event_is_not_reconciled_the_tick_is() -> None:
    api, clock = FakeApi(), [T0]
    op = _operator(api, clock)
    op.reconcile_policy("p", _policy(4, 1))
    clock[0] = T0 + 60
    latency = op.metrics.decision_latency.labels("controller")
    reconciles = latency._sum.get()  # type: ignore[attr-defined]
    op.policy_event("MODIFIED", _policy(4, 1, api.status))
    assert latency._sum.get() == reconciles  # type: ignore[attr-defined]
    assert op.state.policies["p"].body["status"] == api.status  # the newest body is kept
    op.policy_tick(_policy(4, 1, api.status))
    assert latency._sum.get() > reconciles  # type: ignore[attr-defined]


def _hand_edit(api: FakeApi) -> dict[str, Any]:
    """The ClusterQueue with its GPU quota raised by hand (a resourceVersion we did not write)."""
    edited = copy.deepcopy(api.objects[("ClusterQueue", "", "research")])
    edited["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "40"
    edited["metadata"]["resourceVersion"] = "hand-1"
    return edited


@pytest.mark.parametrize("holder", ["a reconcile", "a tick that is dropped"])
def test_an_owned_objects_event_never_waits_for_the_lock_its_holder_checks_it_after(holder: str) -> None:
    """A hand edit's event while the policy's lock is held returns at once; the holder reverts it once it
    lets go (queue_manager/operator.py `check_drift_events`)."""
    api, clock = FakeApi(), [T0]
    op = _operator(api, clock)
    op.reconcile_policy("p", _policy(4, 1))
    rt = op.state.policies["p"]
    edited = _hand_edit(api)
    start = len(api.writes)
    rt.lock.acquire()  # a reconcile is running
    done = threading.Event()
    worker = threading.Thread(target=lambda: (op.owned_event("MODIFIED", edited), done.set()))
    worker.start()
    assert done.wait(5.0)  # returned without the lock
    worker.join(5)
    assert api.writes[start:] == [] and len(rt.drift_events) == 1
    if holder == "a tick that is dropped":
        op.policy_tick(_policy(4, 1, api.status))  # the lock is busy: dropped, checks nothing
        assert api.writes[start:] == []
        assert op.metrics.ticks_skipped.labels("p", "own")._value.get() == 1  # type: ignore[attr-defined]
    rt.lock.release()
    op.check_drift_events(rt)  # what the holder calls after its release
    writes = api.writes[start:]
    assert [k for k, _ in writes] == ["apply", "event", "event"]
    assert writes[1][1].startswith("DriftCorrected ClusterQueue research")
    assert not rt.drift_events


def test_a_reconcile_checks_the_events_queued_while_it_ran() -> None:
    api, clock = FakeApi(), [T0]
    op = _operator(api, clock)
    op.reconcile_policy("p", _policy(4, 1))
    rt = op.state.policies["p"]
    edited = _hand_edit(api)
    start = len(api.writes)
    rt.drift_events.append(("MODIFIED", edited))  # queued while the lock was held
    clock[0] = T0 + 1
    op.policy_tick(_policy(4, 1, api.status))
    assert any(w.startswith("DriftCorrected ClusterQueue research") for k, w in api.writes[start:]
               if k == "event")
    assert not rt.drift_events


@pytest.mark.parametrize(
    ("what", "body", "reconciled"),
    [
        ("its tick is dropped", lambda s: _policy(4, 1, s), False),
        ("its edit is reconciled at once", lambda s: _policy(2, 2, s), True),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_while_another_policys_tick_reconciles(what: str, body: object, reconciled: bool) -> None:
    """One tick reconciles at a time in the process; an edit never waits for another policy's tick."""
    api, clock = FakeApi(), [T0]
    op = _operator(api, clock)
    op.reconcile_policy("p", _policy(4, 1))
    clock[0] = T0 + 60
    latency = op.metrics.decision_latency.labels("controller")
    reconciles = latency._sum.get()  # type: ignore[attr-defined]
    op._ticking.acquire()  # another policy's tick is reconciling
    done = threading.Event()
    event = body(api.status)  # type: ignore[operator]
    worker = threading.Thread(target=lambda: (op.policy_tick(event), done.set()))
    worker.start()
    returned = done.wait(5.0)
    op._ticking.release()
    worker.join(10)
    assert returned  # neither waits for the other tick
    assert (latency._sum.get() > reconciles) is reconciled  # type: ignore[attr-defined]
    assert api.status.get("observedGeneration") == (2 if reconciled else 1)
    skipped = op.metrics.ticks_skipped.labels("p", "turn")._value.get()  # type: ignore[attr-defined]
    assert skipped == (0 if reconciled else 1)  # a dropped tick is counted
    before = latency._sum.get()  # type: ignore[attr-defined]
    op.policy_tick(body(api.status))  # type: ignore[operator]  # the turn is free again: the tick runs
    assert latency._sum.get() > before  # type: ignore[attr-defined]
