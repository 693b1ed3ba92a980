"""A kind's applies and their Events go several at a time (queue_manager/fanout.py: a new 500-team policy's
1,500 applies and 1,500 Events took 43 s one after the other, issue 38), and are recorded and reported in key
order as one at a time would be; a busy API server's error goes up once the others are recorded, a refusal
names its object, and an Event that could not be posted is posted by the next reconcile, once."""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

from kubernetes.client.exceptions import ApiException

from queue_manager.fanout import WORKERS
from queue_manager.refs import ObjectRef
from tests.unit.operator.test_operator_reconcile import T0, FakeApi, _conditions, _operator

TEAMS = 12


def _teams(n: int = TEAMS) -> dict[str, Any]:
    return {
        "apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy",
        "metadata": {"name": "p", "generation": 1, "uid": "u"},
        "spec": {
            "flavors": [{"name": "gpu"}],
            "teams": [{"name": f"team-{i:02d}", "namespaces": [f"ns-{i:02d}"], "cohort": "org",
                       "quotas": [{"flavor": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominal": 1}]}]}
                      for i in range(n)],
        },
    }


class SlowApi(FakeApi):
    """Each apply and Event waits a little, as a round trip to the API server does; counts how many overlap.
    `fail` maps an object's name to the status its apply answers with; `fail_event`, to the error its
    Event's post raises."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()
        self.inflight = 0
        self.overlap = 0
        self.event_overlap = 0
        self.events_inflight = 0
        self.fail: dict[str, int] = {}
        self.fail_event: dict[str, Exception] = {}

    def event(self, target: ObjectRef, **kwargs: Any) -> bool:
        with self.lock:
            self.events_inflight += 1
            self.event_overlap = max(self.event_overlap, self.events_inflight)
        try:
            time.sleep(0.01)
            err = self.fail_event.get(target.name)
            if err is not None and kwargs.get("name") is not None:
                raise err
            with self.lock:
                return super().event(target, **kwargs)
        finally:
            with self.lock:
                self.events_inflight -= 1

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        status = self.fail.get(obj["metadata"]["name"])
        with self.lock:
            self.inflight += 1
            self.overlap = max(self.overlap, self.inflight)
        try:
            time.sleep(0.01)
            if status is not None:
                err = ApiException(status=status, reason="Refused" if status < 500 else "Service Unavailable")
                err.body = f'{{"message": "{obj["metadata"]["name"]} answered {status}"}}'
                raise err
            with self.lock:
                return super().apply(obj)
        finally:
            with self.lock:
                self.inflight -= 1


def _applied(api: FakeApi, kind: str) -> list[str]:
    return [w.split("/", 1)[1] for k, w in api.writes if k == "apply" and w.startswith(f"{kind}/")]


def _reported(api: FakeApi, kind: str) -> list[str]:
    return [w.split(":", 1)[0].rsplit(" ", 1)[1] for k, w in api.writes
            if k == "event" and w.startswith(f"Applied {kind} ")]


def test_a_new_policys_queues_are_applied_several_at_a_time_and_reported_in_order() -> None:
    api, clock = SlowApi(), [T0]
    _operator(api, clock).reconcile_policy("p", _teams())
    names = [f"team-{i:02d}" for i in range(TEAMS)]
    assert sorted(_applied(api, "ClusterQueue")) == names
    assert sorted(_applied(api, "LocalQueue")) == names
    assert 1 < api.overlap <= WORKERS
    assert 1 < api.event_overlap <= WORKERS
    # Every ClusterQueue reported, then every LocalQueue, each once.
    assert sorted(_reported(api, "ClusterQueue")) == names
    assert sorted(_reported(api, "LocalQueue")) == [f"ns-{i:02d}/team-{i:02d}" for i in range(TEAMS)]
    last_cq = max(i for i, (k, w) in enumerate(api.writes) if w.startswith("Applied ClusterQueue"))
    first_lq = min(i for i, (k, w) in enumerate(api.writes) if w.startswith("Applied LocalQueue"))
    assert last_cq < first_lq
    assert _conditions(api)["Ready"] == ("True", "Applied")


def test_a_busy_api_server_fails_the_reconcile_after_the_others_are_recorded_and_not_rewritten() -> None:
    api, clock = SlowApi(), [T0]
    op = _operator(api, clock)
    api.fail["team-03"] = 503
    op.reconcile_policy("p", _teams())
    rt = op.state.policies["p"]
    done = {k.name for k in rt.applied if k.kind == "ClusterQueue"}
    assert done == {f"team-{i:02d}" for i in range(TEAMS)} - {"team-03"}
    assert "team-03" not in _reported(api, "ClusterQueue")
    assert _applied(api, "LocalQueue") == []  # the kinds after a failed one wait for the next reconcile
    assert _conditions(api)["Ready"][0] == "False"
    del api.fail["team-03"]
    start = len(api.writes)
    clock[0] += 1
    op.reconcile_policy("p", _teams() | {"status": copy.deepcopy(api.status)})
    retried = [w for k, w in api.writes[start:] if k == "apply" and w.startswith("ClusterQueue/")]
    assert retried == ["ClusterQueue/team-03"]
    assert _conditions(api)["Ready"] == ("True", "Applied")


def test_a_refused_apply_names_its_object_and_the_rest_of_the_kind_is_applied() -> None:
    api, clock = SlowApi(), [T0]
    op = _operator(api, clock)
    api.fail["team-05"] = 403
    op.reconcile_policy("p", _teams())
    assert sorted(_applied(api, "ClusterQueue")) == [f"team-{i:02d}" for i in range(TEAMS) if i != 5]
    ready = next(c for c in api.status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ApplyRefused")
    assert "ClusterQueue team-05 not applied: 403" in ready["message"]
    assert "team-05 answered 403" in ready["message"]


def test_an_apply_event_that_could_not_be_posted_is_posted_by_the_next_reconcile_once() -> None:
    api, clock = SlowApi(), [T0]
    op = _operator(api, clock)
    api.fail_event["team-07"] = ConnectionError("connection reset")  # the ClusterQueue's and the LocalQueue's
    op.reconcile_policy("p", _teams())
    assert "team-07" not in _reported(api, "ClusterQueue")
    assert len(_reported(api, "ClusterQueue")) == TEAMS - 1  # the others' Events are posted
    assert sorted(_applied(api, "ClusterQueue")) == [f"team-{i:02d}" for i in range(TEAMS)]
    assert _conditions(api)["Ready"][0] == "False"
    del api.fail_event["team-07"]
    for t in (1, 2):
        clock[0] = T0 + t
        op.reconcile_policy("p", _teams() | {"status": copy.deepcopy(api.status)})
    assert _reported(api, "ClusterQueue").count("team-07") == 1
    assert _reported(api, "LocalQueue").count("ns-07/team-07") == 1
    assert sorted(set(_reported(api, "ClusterQueue"))) == [f"team-{i:02d}" for i in range(TEAMS)]
    assert _conditions(api)["Ready"] == ("True", "Applied")
