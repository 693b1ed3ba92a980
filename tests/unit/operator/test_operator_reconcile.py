"""The Operator's reconcile against a recording fake of the API (no cluster): what it writes, in
which order, and that a restart from status neither repeats nor skips a step."""

from __future__ import annotations

import copy
from typing import Any

from kubernetes import client as k8s

from queue_manager.config import OperatorConfig
from queue_manager.operator import Operator
from queue_manager.refs import ObjectRef

T0 = 1_800_000_000.0


class FakeApi:
    """Stores what the writer applies; answers the reader from it. Records every write."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.writes: list[tuple[str, str]] = []
        self.status: dict[str, Any] = {}
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

    def event(self, target: ObjectRef, *, reason: str, message: str, event_type: str = "Normal") -> None:
        self.writes.append(("event", f"{reason} {target.describe()}: {message}"))

    # Reader
    def list(self, kind: Any, *, label_selector: str | None = None) -> list[dict[str, Any]]:
        return [copy.deepcopy(o) for (k, _, _), o in sorted(self.objects.items()) if k == kind.kind]

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
        "TransitionStep ClusterQueue research: nominalQuota gpu/nvidia.com/gpu 4 -> 3 (step 1/3); why: "
        "research/gpu/nvidia.com/gpu: 4000m -> 3000m (step 1/3); policy p generation 2",
        "TransitionStep QuotaPolicy p: nominalQuota gpu/nvidia.com/gpu 4 -> 3 (step 1/3); why: "
        "research/gpu/nvidia.com/gpu: 4000m -> 3000m (step 1/3); policy p generation 2"]


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
    assert [k for k, _ in writes] == ["apply", "event", "event"]
    assert writes[1][1].startswith("DriftCorrected ClusterQueue research: reverted hand edit of "
                                   "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota")
    # The event for our own corrective write is not drift.
    ours = copy.deepcopy(api.objects[("ClusterQueue", "", "research")])
    op.owned_event("MODIFIED", ours)
    assert len(api.writes) == start + 3


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
