"""The Operator's reconcile against a recording fake of the API (no cluster): what it writes, in
which order, and that a restart from status neither repeats nor skips a step."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import pytest
from kubernetes import client as k8s

from queue_manager.config import OperatorConfig
from queue_manager.operator import Operator
from queue_manager.refs import ObjectRef, key_of

T0 = 1_800_000_000.0


class FakeApi:
    """Stores what the writer applies; answers the reader from it. Records every write."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.writes: list[tuple[str, str]] = []
        self.status: dict[str, Any] = {}
        self.event_names: set[str] = set()
        self.rv = 0

    # Writer
    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        key = (obj["kind"], meta.get("namespace", ""), meta["name"])
        self.rv += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self.rv)
        self.objects[key] = stored
        self.writes.append(("apply", f"{obj['kind']}/{meta['name']}"))
        return copy.deepcopy(stored)

    def merge_patch(self, ref: ObjectRef, patch: dict[str, Any]) -> dict[str, Any]:
        self.writes.append(("merge", ref.describe()))
        return self.objects[(ref.kind, ref.namespace or "", ref.name)]

    def delete(self, ref: ObjectRef) -> bool:
        self.writes.append(("delete", ref.describe()))
        return self.objects.pop((ref.kind, ref.namespace or "", ref.name), None) is not None

    def patch_policy_status(self, name: str, status: dict[str, Any]) -> dict[str, Any]:
        self.status.update(copy.deepcopy(status))
        self.writes.append(("status", ",".join(sorted(status))))
        return {}

    def event(self, target: ObjectRef, *, reason: str, message: str, event_type: str = "Normal",
              name: str | None = None, ledger_records: str | None = None) -> bool:
        # As the API server: a second Event of one name is AlreadyExists (Writer.event's idempotence).
        if name is not None and name in self.event_names:
            return False
        if name is not None:
            self.event_names.add(name)
        self.writes.append(("event", f"{reason} {target.describe()}: {message}"))
        return True

    def posted(self, name: str) -> bool:
        return name in self.event_names

    # Reader
    def list(self, kind: Any, *, label_selector: str | None = None) -> list[dict[str, Any]]:
        wanted = dict(p.split("=", 1) for p in label_selector.split(",")) if label_selector else {}
        return [copy.deepcopy(o) for (k, _, _), o in sorted(self.objects.items()) if k == kind.kind
                and all((o["metadata"].get("labels") or {}).get(lk) == v for lk, v in wanted.items())]

    def get(self, ref: ObjectRef) -> dict[str, Any] | None:
        obj = self.objects.get((ref.kind, ref.namespace or "", ref.name))
        return copy.deepcopy(obj) if obj is not None else None


def _policy(gpus: int, generation: int, status: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy",
        "metadata": {"name": "p", "generation": generation, "uid": "u"},
        "spec": {
            "flavors": [{"name": "gpu"}],
            "teams": [{"name": "research", "namespaces": ["r"], "cohort": "org",
                       "quotas": [{"flavor": "gpu",
                                   "resources": [{"name": "nvidia.com/gpu", "nominal": gpus}]}]}],
            "transitions": {"defaults": {"duration": "30s", "stepInterval": "10s", "curve": "linear"}},
        },
    }
    if status is not None:
        body["status"] = copy.deepcopy(status)
    return body


def _operator(api: FakeApi, clock: list[float]) -> Operator:
    op = Operator(OperatorConfig(history_persist_seconds=3600), k8s.ApiClient(), clock=lambda: clock[0])
    op.writer = api  # type: ignore[assignment]
    op.reader = api  # type: ignore[assignment]
    return op


def _gpu_quota(api: FakeApi) -> str:
    cq = api.objects[("ClusterQueue", "", "research")]
    return str(cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"])


def test_a_new_policy_creates_its_objects_then_reports_ready() -> None:
    api, clock = FakeApi(), [T0]
    _operator(api, clock).reconcile_policy("p", _policy(4, 1))
    applied = [w for k, w in api.writes if k == "apply"]
    assert applied == ["ResourceFlavor/gpu", "Cohort/org", "ClusterQueue/research", "LocalQueue/research"]
    assert [c["type"] for c in api.status["conditions"] if c["status"] == "True"] == ["Ready"]


def test_a_second_reconcile_of_the_same_policy_writes_nothing() -> None:
    api, clock = FakeApi(), [T0]
    op = _operator(api, clock)
    op.reconcile_policy("p", _policy(4, 1))
    before = len(api.writes)
    clock[0] += 1
    op.reconcile_policy("p", _policy(4, 1, api.status))
    assert api.writes[before:] == []


def test_a_step_is_recorded_in_status_before_the_cluster_queue_changes() -> None:
    api, clock = FakeApi(), [T0]
    op = _operator(api, clock)
    op.reconcile_policy("p", _policy(4, 1))
    op.reconcile_policy("p", _policy(1, 2, api.status))  # transition planned at T0
    clock[0] = T0 + 10
    start = len(api.writes)
    op.reconcile_policy("p", _policy(1, 2, api.status))
    writes = api.writes[start:]
    status_at = next(i for i, (k, w) in enumerate(writes) if k == "status" and "transitions" in w)
    apply_at = next(i for i, (k, w) in enumerate(writes) if (k, w) == ("apply", "ClusterQueue/research"))
    assert (status_at < apply_at, _gpu_quota(api), api.status["transitions"][0]["lastAppliedStep"]) == \
        (True, "3", 1)
    assert [w for k, w in writes if k == "event" and "TransitionStep" in w] == [
        "TransitionStep ClusterQueue research: nominalQuota gpu/nvidia.com/gpu 4 GPUs -> 3 GPUs (step 1/3); "
        "why: research/gpu/nvidia.com/gpu: 4 GPUs -> 3 GPUs (step 1/3); policy p generation 2",
        "TransitionStep QuotaPolicy p: nominalQuota gpu/nvidia.com/gpu 4 GPUs -> 3 GPUs (step 1/3); "
        "why: research/gpu/nvidia.com/gpu: 4 GPUs -> 3 GPUs (step 1/3); policy p generation 2"]


def test_a_restarted_operator_continues_from_status_without_repeating_a_step() -> None:
    api, clock = FakeApi(), [T0]
    op = _operator(api, clock)
    op.reconcile_policy("p", _policy(4, 1))
    op.reconcile_policy("p", _policy(1, 2, api.status))
    clock[0] = T0 + 10
    op.reconcile_policy("p", _policy(1, 2, api.status))
    # A new process: empty memory, the same API.
    restarted = _operator(api, clock)
    steps = []
    for t in (12, 20, 25, 30, 40):
        clock[0] = T0 + t
        start = len(api.writes)
        restarted.reconcile_policy("p", _policy(1, 2, api.status))
        steps += [w.split("(step ")[1].split(")")[0] for k, w in api.writes[start:]
                  if k == "event" and w.startswith("TransitionStep ClusterQueue")]
    assert (steps, _gpu_quota(api), api.status["transitions"][0]["phase"]) == \
        (["2/3", "3/3"], "1", "Complete")


def test_a_hand_edit_is_reverted_and_reported_once() -> None:
    api, clock = FakeApi(), [T0]
    op = _operator(api, clock)
    op.reconcile_policy("p", _policy(4, 1))
    edited = copy.deepcopy(api.objects[("ClusterQueue", "", "research")])
    edited["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "40"
    edited["metadata"]["resourceVersion"] = "hand-1"
    start = len(api.writes)
    op.owned_event("MODIFIED", edited)
    writes = api.writes[start:]
    # Reverted, then reported (queue_manager/drift.py: an Event never tells of a revert that did not happen).
    assert [k for k, _ in writes] == ["apply", "event", "event"]
    assert writes[1][1].startswith("DriftCorrected ClusterQueue research: reverted hand edit of ClusterQueue "
                                   "research: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota")
    # The policy's copy names the object that was edited.
    assert writes[2][1].startswith("DriftCorrected QuotaPolicy p: reverted hand edit of ClusterQueue "
                                   "research: ")
    # The event for our own corrective write is not drift.
    ours = copy.deepcopy(api.objects[("ClusterQueue", "", "research")])
    op.owned_event("MODIFIED", ours)
    assert len(api.writes) == start + 3


class FakeSsaApi(FakeApi):
    """Server-side apply as the API server does it: a field another manager set and this apply does not
    name stays (spec.stopPolicy by kubectl edit); a merge patch removes it, in a write of its own; every
    change of the spec bumps metadata.generation (a CRD)."""

    def _stamp(self, key: tuple[str, str, str], stored: dict[str, Any], before: dict[str, Any]) -> None:
        meta, old = stored["metadata"], before.get("metadata") or {}
        meta["uid"] = f"uid-{key[2]}"
        generation = int(old.get("generation", 0))
        meta["generation"] = generation + 1 if stored.get("spec") != before.get("spec") else generation
        self.objects[key] = copy.deepcopy(stored)

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj["metadata"]
        key = (obj["kind"], meta.get("namespace", ""), meta["name"])
        before = copy.deepcopy(self.objects.get(key, {}))
        kept = {k: v for k, v in (before.get("spec") or {}).items() if k not in obj.get("spec", {})}
        stored = super().apply(obj)
        stored["spec"].update(kept)
        self._stamp(key, stored, before)
        return copy.deepcopy(self.objects[key])

    def merge_patch(self, ref: ObjectRef, patch: dict[str, Any]) -> dict[str, Any]:
        key = (ref.kind, ref.namespace or "", ref.name)
        before = copy.deepcopy(self.objects[key])
        obj = copy.deepcopy(before)
        for k, v in patch.get("spec", {}).items():
            if v is None:
                obj["spec"].pop(k, None)
            else:
                obj["spec"][k] = v
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self._stamp(key, obj, before)
        self.writes.append(("merge", ref.describe()))
        return copy.deepcopy(self.objects[key])


def _hold_and_raise_quota_by_hand(api: FakeSsaApi, key: tuple[str, str, str]) -> dict[str, Any]:
    """A hand edit of the stored ClusterQueue: held, GPU quota 40 (a new resourceVersion and generation)."""
    edited = copy.deepcopy(api.objects[key])
    edited["spec"]["stopPolicy"] = "Hold"
    edited["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "40"
    edited["metadata"].update(resourceVersion="hand-1", generation=edited["metadata"]["generation"] + 1)
    api.objects[key] = copy.deepcopy(edited)
    return edited


def test_a_drift_corrections_writes_and_a_status_write_between_them_are_not_a_second_hand_edit() -> None:
    api, clock = FakeSsaApi(), [T0]
    op = _operator(api, clock)
    op.reconcile_policy("p", _policy(4, 1))
    key = ("ClusterQueue", "", "research")
    edited = _hold_and_raise_quota_by_hand(api, key)
    start = len(api.writes)
    op.owned_event("MODIFIED", edited)
    assert [k for k, _ in api.writes[start:]] == ["apply", "merge", "event", "event"]
    final = copy.deepcopy(api.objects[key])
    # What the watch may deliver one by one (outside kopf's batch window): the apply's version (stopPolicy
    # still there: the apply does not own it), Kueue's status write on it (the held queue goes inactive),
    # then the patch's version. All of it our correction, not another edit.
    applied = copy.deepcopy(edited)
    applied["spec"]["resourceGroups"] = final["spec"]["resourceGroups"]
    applied["metadata"].update(resourceVersion=str(int(final["metadata"]["resourceVersion"]) - 1),
                               generation=final["metadata"]["generation"] - 1)
    by_kueue = copy.deepcopy(applied)
    by_kueue["metadata"]["resourceVersion"] = "kueue-status-1"
    by_kueue["status"] = {"conditions": [{"type": "Active", "status": "False", "reason": "Stopped"}]}
    for body in (applied, by_kueue, final):
        op.owned_event("MODIFIED", body)
    assert len(api.writes) == start + 4
    # The same edit made again is another edit (a new generation): reported and reverted again.
    again = copy.deepcopy(final)
    again["spec"]["stopPolicy"] = "Hold"
    again["metadata"].update(resourceVersion="hand-2", generation=final["metadata"]["generation"] + 1)
    api.objects[key] = copy.deepcopy(again)
    op.owned_event("MODIFIED", again)
    assert [k for k, _ in api.writes[start + 4:]] == ["apply", "merge", "event", "event"]


def test_a_hand_edit_the_reconcile_sees_before_its_event_is_reverted_whole_and_reported_once() -> None:
    """The watch cache holds the edited object before the edit's event is handled (the handler waits for
    the policy's lock, held by a reconcile): the reconcile corrects it as the event would, stopPolicy
    included, and the event, handled next, is older than the correction (the CI failure: the quota was
    re-applied as an ordinary update and the ClusterQueue stayed held)."""
    api, clock = FakeSsaApi(), [T0]
    op = _operator(api, clock)
    op.reconcile_policy("p", _policy(4, 1))
    key = ("ClusterQueue", "", "research")
    edited = _hold_and_raise_quota_by_hand(api, key)
    op.state.live[key_of(edited)] = ("p", copy.deepcopy(edited))
    start = len(api.writes)
    clock[0] += 1
    op.reconcile_policy("p", _policy(4, 1, api.status))
    writes = api.writes[start:]
    events = [w for k, w in writes if k == "event"]
    assert [k for k, _ in writes if k != "status"] == ["apply", "merge", "event", "event"]
    assert events[0].startswith("DriftCorrected ClusterQueue research: reverted hand edit of ClusterQueue "
                                   "research: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota, "
                                   "spec.stopPolicy")
    final = api.objects[key]
    assert ("stopPolicy" not in final["spec"], _gpu_quota(api)) == (True, "4")
    # The edit's own event, late: nothing more.
    after = len(api.writes)
    op.owned_event("MODIFIED", edited)
    assert api.writes[after:] == []


def test_an_invalid_policy_is_reported_once_per_generation_and_nothing_is_applied() -> None:
    api, clock = FakeApi(), [T0]
    op = _operator(api, clock)
    bad = _policy(4, 7)
    bad["spec"]["teams"][0]["quotas"][0]["flavor"] = "missing"
    op.reconcile_policy("p", bad)
    op.reconcile_policy("p", bad)
    kinds = [k for k, _ in api.writes]
    assert (kinds.count("apply"), kinds.count("event"), api.status["conditions"][1]["reason"]) == \
        (0, 1, "InvalidPolicy")


class FakeKueueApi(FakeApi):
    def request_eviction(self, req: Any, mechanism: Any = None) -> None:
        self.writes.append(("deactivate", f"{req.namespace}/{req.name}"))

    def explain_preemption(self, req: Any) -> None:
        self.writes.append(("condition", f"{req.namespace}/{req.name}: {req.message}"))

    def reactivate(self, namespace: str, name: str) -> None:
        self.writes.append(("reactivate", f"{namespace}/{name}"))


def _two_teams() -> dict[str, Any]:
    quota = [{"flavor": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominal": 2}]}]
    never = {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"}
    return {
        "apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy",
        "metadata": {"name": "p", "generation": 1, "uid": "u"},
        "spec": {
            "flavors": [{"name": "gpu"}],
            "priorityClasses": [{"name": "business", "value": 1000}, {"name": "exp", "value": 10,
                                                                       "experiment": True}],
            "teams": [{"name": "research", "namespaces": ["r"], "cohort": "org", "quotas": quota,
                       "preemption": never},
                      {"name": "business", "namespaces": ["b"], "cohort": "org", "quotas": quota,
                       "preemption": never}],
            "preemption": {"protectedClasses": ["business"], "minRuntime": "0s",
                           "budget": {"maxVictims": 5, "window": "1h"}},
        },
    }


def _evicted(ns: str, name: str, **kwargs: Any) -> dict[str, Any]:
    from .kube_objects import workload_dict

    doc = workload_dict(ns, name, **kwargs)
    doc["spec"]["active"] = False
    doc["status"]["conditions"] = [
        {"type": "QuotaReserved", "status": "False", "reason": "Pending",
         "lastTransitionTime": "2027-01-15T08:00:00Z"},
        {"type": "Evicted", "status": "True", "reason": "Deactivated",
         "lastTransitionTime": "2027-01-15T08:00:00Z"}]
    return doc


def test_a_starved_protected_workload_gets_one_victim_recorded_evicted_verified_and_requeued() -> None:
    from .kube_objects import workload_dict

    api, clock = FakeKueueApi(), [T0 + 100]
    op = _operator(api, clock)
    op.reconcile_policy("p", _two_teams())  # the Kueue objects exist before anything is observed in them
    # Research holds all 4 GPUs of the cohort (2 of them borrowed); business waits for 1.
    exps = {f"e{i}": dict(queue="research", gpus=1, priority=10, priority_class="exp", admitted_to="research",
                          flavor="gpu", reserved_at=T0 + i) for i in range(4)}
    for name, kw in exps.items():
        op.workload_event("ADDED", workload_dict("r", name, **kw))
    op.workload_event("ADDED", workload_dict("b", "serve", queue="business", gpus=1, priority=1000,
                                             priority_class="business", created=T0))
    op.reconcile_policy("p", _two_teams())
    victim = next(w for k, w in api.writes if k == "deactivate")
    recorded_at = next(i for i, (k, w) in enumerate(api.writes) if k == "status" and "lastPreemptions" in w)
    # Least work lost first: the most recently admitted experiment; recorded before it is requested.
    assert (victim, recorded_at < api.writes.index(("deactivate", "r/e3"))) == ("r/e3", True)
    condition = next(w for k, w in api.writes if k == "condition")
    assert condition.startswith("r/e3: preempt r/e3: priority 10 < 1000")
    assert [r["state"] for r in api.status["lastPreemptions"]] == ["Requested"]
    # Nothing more while Kueue has not acted.
    clock[0] += 1
    op.reconcile_policy("p", _two_teams())
    assert [w for k, w in api.writes if k == "deactivate"] == ["r/e3", "r/e3"]  # re-issued, not a new victim
    # Kueue evicts it: verified.
    op.workload_event("MODIFIED", _evicted("r", "e3", **exps["e3"]))
    clock[0] += 1
    op.reconcile_policy("p", _two_teams())
    assert api.status["lastPreemptions"][0]["state"] == "Evicted"
    assert any(k == "event" and w.startswith("PreemptionVerified Workload r/e3") for k, w in api.writes)
    # The beneficiary gets in: the victim is reactivated, then Kueue requeues it.
    op.workload_event("MODIFIED", workload_dict("b", "serve", queue="business", gpus=1, priority=1000,
                                                priority_class="business", admitted_to="business",
                                                flavor="gpu", reserved_at=T0 + 102, created=T0))
    clock[0] += 1
    op.reconcile_policy("p", _two_teams())
    assert ([w for k, w in api.writes if k == "reactivate"], api.status["lastPreemptions"][0]["state"]) == \
        (["r/e3"], "Reactivated")
    requeued = workload_dict("r", "e3", queue="research", gpus=1, priority=10, priority_class="exp",
                             created=T0)
    requeued["status"]["conditions"].append({"type": "Requeued", "status": "True", "reason": "Reactivated",
                                             "lastTransitionTime": "2027-01-15T08:00:00Z"})
    op.workload_event("MODIFIED", requeued)
    clock[0] += 1
    op.reconcile_policy("p", _two_teams())
    assert api.status["lastPreemptions"][0]["state"] == "Requeued"


def test_a_restarted_operator_that_has_not_seen_the_local_queues_yet_keeps_its_evicted_victim() -> None:
    from .kube_objects import workload_dict

    api, clock = FakeKueueApi(), [T0 + 100]
    op = _operator(api, clock)
    op.reconcile_policy("p", _two_teams())
    exps = {f"e{i}": dict(queue="research", gpus=1, priority=10, priority_class="exp", admitted_to="research",
                          flavor="gpu", reserved_at=T0 + i) for i in range(4)}
    serve = workload_dict("b", "serve", queue="business", gpus=1, priority=1000, priority_class="business",
                          created=T0)
    for name, kw in exps.items():
        op.workload_event("ADDED", workload_dict("r", name, **kw))
    op.workload_event("ADDED", serve)
    op.reconcile_policy("p", _two_teams())
    op.workload_event("MODIFIED", _evicted("r", "e3", **exps["e3"]))
    clock[0] += 1
    op.reconcile_policy("p", _two_teams())
    assert api.status["lastPreemptions"][0]["state"] == "Evicted"
    # A new process: its Workload watch has delivered every Workload, its LocalQueue watch nothing yet. The
    # victim (deactivated, admitted nowhere) is the policy's through its LocalQueue, which is read.
    restarted = _operator(api, clock)
    for name, kw in exps.items():
        restarted.workload_event("ADDED", _evicted("r", name, **kw) if name == "e3" else
                                 workload_dict("r", name, **kw))
    restarted.workload_event("ADDED", serve)
    clock[0] += 1
    restarted.reconcile_policy("p", {**_two_teams(), "status": copy.deepcopy(api.status)})
    assert api.status["lastPreemptions"][0]["state"] == "Evicted"  # not Gone: it is reactivated later
    assert [w for k, w in api.writes if k == "reactivate"] == []


def test_a_forbidden_eviction_is_reported_as_degraded_and_does_not_stop_the_reconcile() -> None:
    from kubernetes.client.exceptions import ApiException

    from .kube_objects import workload_dict

    class Forbidden(FakeKueueApi):
        def request_eviction(self, req: Any, mechanism: Any = None) -> None:
            raise ApiException(status=403, reason="Forbidden")

    api, clock = Forbidden(), [T0 + 100]
    op = _operator(api, clock)
    op.reconcile_policy("p", _two_teams())
    for i in range(4):
        op.workload_event("ADDED", workload_dict("r", f"e{i}", queue="research", gpus=1, priority=10,
                                                 priority_class="exp", admitted_to="research", flavor="gpu",
                                                 reserved_at=T0 + i))
    op.workload_event("ADDED", workload_dict("b", "serve", queue="business", gpus=1, priority=1000,
                                             priority_class="business", created=T0))
    op.reconcile_policy("p", _two_teams())
    degraded = next(c for c in api.status["conditions"] if c["type"] == "Degraded")
    ready = next(c for c in api.status["conditions"] if c["type"] == "Ready")
    assert (degraded["status"], degraded["reason"], ready["status"], api.status["observedGeneration"]) == \
        ("True", "PreemptionFailed", "True", 1)
    assert op.metrics.reconcile_errors.labels("preemption")._value.get() == 1


def _preempted(ns: str, name: str, times: int, **kwargs: Any) -> dict[str, Any]:
    """A workload Kueue has preempted `times` times (schedulingStats, the Preempted condition) and
    re-admitted."""
    from .kube_objects import workload_dict

    doc = workload_dict(ns, name, **kwargs)
    doc["status"]["schedulingStats"] = {"evictions": [{"reason": "Preempted",
                                                       "underlyingCause": "InCohortFairSharing",
                                                       "count": times}]}
    doc["status"]["conditions"].append({"type": "Preempted", "status": "False",
                                        "reason": "InCohortFairSharing",
                                        "lastTransitionTime": "2027-01-15T08:00:00Z"})
    return doc


def test_a_workload_kueue_preempts_five_times_in_two_minutes_is_reported_once_as_an_eviction_storm() -> None:
    api, clock = FakeKueueApi(), [T0 + 100]
    op = _operator(api, clock)
    op.reconcile_policy("p", _two_teams())
    kw = dict(queue="research", gpus=1, priority=10, priority_class="exp", admitted_to="research",
              flavor="gpu", reserved_at=T0)
    for times in range(0, 7):  # seen first with no preemption, then one more every 5 s
        op.workload_event("MODIFIED", _preempted("r", "e0", times, **kw))
        op.reconcile_policy("p", _two_teams())
        clock[0] += 5
    reported = [w for k, w in api.writes if k == "event" and w.startswith("EvictionStorm QuotaPolicy")]
    # Said once, by the controller (fairshare.control.storms), when the fifth eviction within 2 minutes is
    # seen, not again at the sixth; the preemptor is unknown (no Preempted message): reported only.
    assert len(reported) == 1 and "r/e0 evicted 5 times" in reported[0] and "Report" in reported[0]
    assert op.metrics.eviction_storms.labels("p", "Report")._value.get() == 1
    gauge = op.metrics.eviction_storm
    assert gauge.labels("p", "r/e0", "Report")._value.get() == 1
    # Kueue stops preempting it: once the response's hour is over, the record and the series go.
    clock[0] += 3601
    op.reconcile_policy("p", _two_teams())
    series = {tuple(s.labels.values()) for m in gauge.collect() for s in m.samples}
    assert ("p", "r/e0", "Report") not in series


def test_a_borrowing_limit_the_policy_no_longer_sets_is_applied_away() -> None:
    # The live ClusterQueue still has borrowingLimit 2 and lacks nothing the new desired one sets: only
    # the digest of the content last applied says it changed (as a lifted budget's borrowingLimit 0 does).
    api, clock = FakeApi(), [T0]
    op = _operator(api, clock)
    limited = _policy(4, 1)
    limited["spec"]["teams"][0]["quotas"][0]["resources"][0]["borrowingLimit"] = 2
    op.reconcile_policy("p", limited)
    resources = api.objects[("ClusterQueue", "", "research")]["spec"]["resourceGroups"][0]["flavors"][0]
    assert resources["resources"][0]["borrowingLimit"] == "2"
    start = len(api.writes)
    clock[0] += 1
    op.reconcile_policy("p", _policy(4, 2, api.status))
    assert ("apply", "ClusterQueue/research") in api.writes[start:]
    resources = api.objects[("ClusterQueue", "", "research")]["spec"]["resourceGroups"][0]["flavors"][0]
    assert "borrowingLimit" not in resources["resources"][0]
    # And then nothing more to write.
    start = len(api.writes)
    clock[0] += 1
    op.reconcile_policy("p", _policy(4, 2, api.status))
    assert [w for k, w in api.writes[start:] if k == "apply"] == []


def test_a_policy_deleted_while_no_operator_ran_is_pruned_by_its_own_label_and_never_applied() -> None:
    """Deleted with kopf's finalizer still on it (no operator ran): the next operator sees it with a
    deletionTimestamp. It deletes what carries that policy's label, reported under that policy, applies
    nothing of it, and leaves another policy's objects alone."""
    api, clock = FakeApi(), [T0]
    other = _policy(2, 1)
    other["metadata"].update(name="q", uid="u2")
    team = other["spec"]["teams"][0]
    team.update(name="business", namespaces=["b"], cohort="org2")
    team["quotas"][0]["flavor"] = "gpu2"
    other["spec"]["flavors"] = [{"name": "gpu2"}]
    first = _operator(api, clock)
    first.reconcile_policy("p", _policy(4, 1))
    first.reconcile_policy("q", other)
    before = sorted(api.objects)
    api.writes.clear()
    dying = _policy(4, 1)
    dying["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z"
    second = _operator(api, clock)
    second.policy_event(None, dying)
    second.policy_tick(dying)
    second.policy_event("DELETED", dying)
    assert [k for k, _ in api.writes if k not in ("delete", "event")] == []
    assert sorted(w for k, w in api.writes if k == "delete") == [
        "ClusterQueue research", "Cohort org", "LocalQueue r/research", "ResourceFlavor gpu"]
    assert sorted(api.objects) == [k for k in before if k[2] in ("business", "org2", "gpu2")]
    assert all(w.startswith("Pruned ") and "policy p generation" in w for k, w in api.writes if k == "event")


class StatusPerPolicy(FakeApi):
    """FakeApi with each policy's status kept apart (two policies in one test)."""

    def __init__(self) -> None:
        super().__init__()
        self.statuses: dict[str, dict[str, Any]] = {}

    def patch_policy_status(self, name: str, status: dict[str, Any]) -> dict[str, Any]:
        self.statuses.setdefault(name, {}).update(copy.deepcopy(status))
        return super().patch_policy_status(name, status)


def test_an_object_another_policy_renders_is_refused_by_its_owner_name_and_never_written() -> None:
    """Two policies that declare one flavor render one ResourceFlavor. Applying it took it from the other
    policy, which took it back on its next reconcile: on the real control plane the flavor was written
    every tick (37 versions in 20 s) while both policies said Ready. The second one is refused instead,
    Degraded with the owner's name (one Event), writes nothing of that object, and the owner keeps it."""
    api, clock = StatusPerPolicy(), [T0]
    op = _operator(api, clock)
    op.reconcile_policy("p", _policy(4, 1))
    other = _policy(2, 1)
    other["metadata"].update(name="q", uid="u2")
    other["spec"]["teams"][0].update(name="business", namespaces=["b"], cohort="org2")
    start = len(api.writes)
    for t in (1, 2, 3):  # three ticks of the second policy
        clock[0] = T0 + t
        op.reconcile_policy("q", other)
    applied = [w for k, w in api.writes[start:] if k == "apply"]
    assert applied == ["Cohort/org2", "ClusterQueue/business", "LocalQueue/business"]
    assert api.objects[("ResourceFlavor", "", "gpu")]["metadata"]["labels"]["queuemanager.dev/policy"] == "p"
    message = ("ResourceFlavor gpu not applied: it belongs to QuotaPolicy p (label "
               "queuemanager.dev/policy=p); each Kueue object is rendered by one policy: name it differently "
               "in one of the two")
    q = {c["type"]: (c["status"], c["reason"], c["message"]) for c in api.statuses["q"]["conditions"]}
    assert (q["Ready"], q["Degraded"][:2]) == (("False", "ApplyRefused", message), ("True", "ApplyRefused"))
    assert _events(api, start, "ApplyRefused") == [f"ApplyRefused QuotaPolicy q: {message}"]
    # The owner is still served and has nothing to write back.
    start = len(api.writes)
    clock[0] = T0 + 4
    op.reconcile_policy("p", _policy(4, 1, api.statuses["p"]))
    assert [w for k, w in api.writes[start:] if k == "apply"] == []
    assert {c["type"]: c["status"] for c in api.statuses["p"]["conditions"]}["Ready"] == "True"


# ------------------------------------------------------------------ a policy that cannot be served (issue 33)

class RefusingApi(FakeApi):
    """Refuses every apply of the ClusterQueue while `refuse` is set, as Kueue's webhook refuses an object
    (422, its message naming the field and value)."""

    refuse = False

    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        if self.refuse and obj["kind"] == "ClusterQueue":
            err = ApiException(status=422, reason="Unprocessable Entity")
            err.body = ('{"message": "admission webhook \\"vclusterqueue.kb.io\\" denied the request: '
                        'spec.resourceGroups[0].flavors[0].name: Unsupported value: \\"h100\\""}')
            raise err
        return super().apply(obj)


def _conditions(api: FakeApi) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in api.status["conditions"]}


def _events(api: FakeApi, start: int, reason: str) -> list[str]:
    return [w for k, w in api.writes[start:] if k == "event" and w.startswith(reason)]


def test_a_refused_step_makes_the_policy_degraded_and_is_reported_only_once_it_is_applied() -> None:
    api, clock = RefusingApi(), [T0]
    op = _operator(api, clock)
    op.reconcile_policy("p", _policy(4, 1))
    op.reconcile_policy("p", _policy(1, 2, api.status))  # the cut 4 -> 1 starts at T0: steps at +10, +20, +30
    api.refuse = True
    start = len(api.writes)
    for t in (10, 15):  # two ticks while Kueue's webhook refuses the ClusterQueue
        clock[0] = T0 + t
        op.reconcile_policy("p", _policy(1, 2, api.status))
    message = ("ClusterQueue research not applied: 422 admission webhook \"vclusterqueue.kb.io\" denied the "
               "request: spec.resourceGroups[0].flavors[0].name: Unsupported value: \"h100\"")
    ready = next(c for c in api.status["conditions"] if c["type"] == "Ready")
    assert (_conditions(api)["Degraded"], ready["status"], ready["message"], api.status["phase"]) == \
        (("True", "ApplyRefused"), "False", message, "Degraded")
    # No step is told of, none is recorded; one Warning Event for the failure, not one per tick.
    assert (_events(api, start, "TransitionStep"), _gpu_quota(api)) == ([], "4")
    assert api.status["transitions"][0]["lastAppliedStep"] == -1
    assert _events(api, start, "ApplyRefused") == [f"ApplyRefused QuotaPolicy p: {message}"]
    assert op.metrics.policy_degraded.labels("p", "ApplyRefused")._value.get() == 1
    # The webhook accepts again after the second step fell due: one step, 4 -> 2, applied then reported.
    api.refuse = False
    clock[0] = T0 + 22
    start = len(api.writes)
    op.reconcile_policy("p", _policy(1, 2, api.status))
    steps = _events(api, start, "TransitionStep ClusterQueue")
    assert [s.split(";")[0] for s in steps] == \
        ["TransitionStep ClusterQueue research: nominalQuota gpu/nvidia.com/gpu 4 GPUs -> 2 GPUs (step 2/3)"]
    apply_at = api.writes.index(("apply", "ClusterQueue/research"), start)
    assert apply_at < next(i for i, (k, w) in enumerate(api.writes) if i > start and w == steps[0])
    assert (_conditions(api)["Ready"], _conditions(api)["Degraded"], _gpu_quota(api)) == \
        (("True", "Applied"), ("False", "Healthy"), "2")
    assert api.status.get("pendingReports", []) == []
    assert op.metrics.policy_degraded.labels("p", "ApplyRefused")._value.get() == 0


def test_a_step_written_before_a_crash_is_reported_by_the_next_process_once() -> None:
    class Crashing(FakeApi):
        crash = False

        def event(self, target: ObjectRef, **kwargs: Any) -> bool:
            if self.crash and kwargs["reason"] == "TransitionStep":
                raise SystemExit("killed between the write and its Event")
            return super().event(target, **kwargs)

    api, clock = Crashing(), [T0]
    op = _operator(api, clock)
    op.reconcile_policy("p", _policy(4, 1))
    op.reconcile_policy("p", _policy(1, 2, api.status))
    clock[0] = T0 + 10
    api.crash = True
    with contextlib.suppress(SystemExit):
        op.reconcile_policy("p", _policy(1, 2, api.status))
    # The ClusterQueue changed, its fact waits in status; no Event yet.
    pending = [f["action"] for f in api.status["pendingReports"]]
    assert (_gpu_quota(api), pending) == ("3", ["transition-step"])
    api.crash = False
    restarted = _operator(api, clock)
    start = len(api.writes)
    clock[0] = T0 + 11
    restarted.reconcile_policy("p", _policy(1, 2, api.status))
    restarted.reconcile_policy("p", _policy(1, 2, api.status))
    assert [s.split(";")[0] for s in _events(api, start, "TransitionStep ClusterQueue")] == \
        ["TransitionStep ClusterQueue research: nominalQuota gpu/nvidia.com/gpu 4 GPUs -> 3 GPUs (step 1/3)"]
    assert api.status["pendingReports"] == []


def test_a_cluster_queue_the_core_cannot_count_makes_the_policy_degraded_naming_field_and_value() -> None:
    # A ClusterQueue of the team's name made by hand before the policy, with a quota Kueue's webhook takes
    # but no int64 holds: observing it fails; the policy says so instead of staying silently stale.
    api, clock = FakeApi(), [T0]
    group = {"coveredResources": ["nvidia.com/gpu"],
             "flavors": [{"name": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "1e19"}]}]}
    api.objects[("ClusterQueue", "", "research")] = {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "research"},
        "spec": {"cohortName": "org", "namespaceSelector": {}, "resourceGroups": [group]}}
    op = _operator(api, clock)
    op.reconcile_policy("p", _policy(4, 1))
    op.reconcile_policy("p", _policy(4, 1))
    ready = next(c for c in api.status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "ReconcileFailed")
    assert ready["message"] == (
        "observing the cluster: document 1 (ClusterQueue research): field spec.resourceGroups[0].flavors[0]"
        ".resources[0].nominalQuota: quantity too large (Kueue counts at most 2^63-1 units) (got '1e19')")
    assert [k for k, _ in api.writes if k != "status"] == ["event"]  # one Event; nothing applied
    assert "observedGeneration" not in api.status
    # Fixed by hand: served at the next tick.
    api.objects.pop(("ClusterQueue", "", "research"))
    clock[0] += 1
    op.reconcile_policy("p", _policy(4, 1, api.status))
    assert (_conditions(api)["Ready"], api.status["observedGeneration"]) == (("True", "Applied"), 1)


def test_a_status_the_controller_cannot_decide_from_makes_the_policy_degraded() -> None:
    api, clock = FakeApi(), [T0]
    op = _operator(api, clock)
    op.reconcile_policy("p", _policy(4, 1))
    op.reconcile_policy("p", _policy(1, 2, api.status))
    damaged = copy.deepcopy(api.status)
    damaged["transitions"][0]["plan"]["start"] = 253402300800.0  # 10000-01-01: no RFC 3339 date
    restarted = _operator(api, clock)
    clock[0] = T0 + 10
    restarted.reconcile_policy("p", _policy(1, 2, damaged))
    ready = next(c for c in api.status["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"], ready["message"], api.status["phase"]) == \
        ("False", "ReconcileFailed", "deciding: ValueError: year 10000 is out of range", "Degraded")
    assert restarted.metrics.policy_degraded.labels("p", "ReconcileFailed")._value.get() == 1


def test_each_reconcile_times_its_four_phases() -> None:
    api, clock = FakeApi(), [T0]
    op = _operator(api, clock)
    for _ in range(2):
        op.reconcile_policy("p", _policy(4, 1, api.status or None))
        clock[0] += 1
    registry = op.metrics.registry
    counts = {phase: registry.get_sample_value("qm_reconcile_seconds_count", {"phase": phase})
              for phase in ("view", "observe", "decide", "apply")}
    assert counts == {"view": 2.0, "observe": 2.0, "decide": 2.0, "apply": 2.0}


class FairSharingKueueApi(FakeApi):
    """An API server whose Kueue runs with fair sharing, as its ConfigMap says."""

    def config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        text = ("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfairSharing:\n"
                "  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]\n")
        return {"metadata": {"namespace": namespace, "name": name},
                "data": {"controller_manager_config.yaml": text}}


@pytest.mark.parametrize(
    ("api", "exported"),
    [
        pytest.param(FairSharingKueueApi(), (1.0, 1.0), id="read from Kueue's ConfigMap: on and known"),
        pytest.param(FakeApi(), (0.0, 0.0), id="not readable: modelled off, and said to be unknown"),
    ],
)
def test_the_fair_sharing_the_controller_models_is_exported(
    api: FakeApi, exported: tuple[float, float]
) -> None:
    op = _operator(api, [T0])
    op.reconcile_policy("p", _policy(4, 1))
    registry = op.metrics.registry
    assert (registry.get_sample_value("qm_kueue_fair_sharing"),
            registry.get_sample_value("qm_kueue_configuration_known")) == exported
