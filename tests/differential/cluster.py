"""The real side of the differential harness: a generated state on the real Kueue.

Submissions: a workload with one pod set is a suspended batch/v1 Job (the launcher runs Kueue's
``batch/job`` integration, so Kueue's jobframework creates its Workload, and stops the Job and
clears the quota reservation when it is preempted: pkg/controller/jobframework/reconciler.go,
"6. handle eviction"). A batch/v1 Job has exactly one pod set, so a workload with two pod sets
is an owner-less Workload object; nothing in Kueue finishes the eviction of an owner-less
Workload (Kueue's own integration tests call test/util FinishEvictionForWorkloads), so
:class:`EvictionFinisher` does what the Job integration does for it: QuotaReserved=False,
admission cleared, Requeued=True reason Preempted.

Settling (:meth:`RealCluster.settle`) is read from the Workloads alone: no eviction in progress
(Evicted=True while QuotaReserved=True), nothing changed for ``quiet`` seconds, and, if quota was
released during the step, at least Kueue's requeue batch period (1 s,
pkg/cache/queue/inadmissible_workloads.go requeueBatchPeriod) plus ``quiet`` since the last
release, so the batched requeue of inadmissible workloads has fired and been scheduled.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tests.differential.generator import GeneratedState, WorkloadSpec

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
REQUEUE_BATCH_SECONDS = 1.0  # requeueBatchPeriod, pkg/cache/queue/inadmissible_workloads.go
# On a loaded machine the batch fires, and its cycles run, a little after the period.
RELEASE_MARGIN = 0.3
# pkg/scheduler/preemption/preemption.go HumanReadablePreemptionReasons: the words in the Preempted
# condition's message ("... due to <words>; preemptor path: ..."), kept as "Previously: ..." when
# the workload is admitted again (pkg/workload resetActiveCondition), when the reason is not.
HUMAN_REASONS = {
    "prioritization in the ClusterQueue": "InClusterQueue",
    "reclamation within the cohort while borrowing": "InCohortReclaimWhileBorrowing",
    "reclamation within the cohort": "InCohortReclamation",
    "Fair Sharing within the cohort": "InCohortFairSharing",
}
PLURALS = {
    "ResourceFlavor": "resourceflavors",
    "Cohort": "cohorts",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
    "WorkloadPriorityClass": "workloadpriorityclasses",
}
Obj = dict[str, Any]


class HarnessError(Exception):
    """The real control plane refused an object or never settled in time."""


def condition(obj: Obj, kind: str) -> Obj | None:
    for c in obj.get("status", {}).get("conditions", []) or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def is_true(obj: Obj, kind: str) -> bool:
    c = condition(obj, kind)
    return c is not None and c.get("status") == "True"


# The messages of Kueue's entries that it requeues at once, not as inadmissible
# (pkg/scheduler/scheduler.go processEntry: markSkipped -> FailedAfterNomination, and
# PendingPreemption; pkg/cache/queue/cluster_queue.go RequeueIfNotPresent: immediate for those).
ACTIVE_MESSAGES = (
    "Workload no longer fits after processing another workload",
    "Workload has overlapping preemption targets with another workload",
    "Pending the preemption of",
)


def holds_quota(obj: Obj) -> bool:
    return is_true(obj, "QuotaReserved") and bool(obj.get("status", {}).get("admission"))


def eviction_in_progress(obj: Obj) -> bool:
    return is_true(obj, "Evicted") and holds_quota(obj)


def preemptions(obj: Obj) -> int:
    """How many times Kueue preempted it (status.schedulingStats.evictions, reason Preempted)."""
    stats = obj.get("status", {}).get("schedulingStats", {}) or {}
    return sum(
        int(e.get("count", 0)) for e in stats.get("evictions", []) or [] if e.get("reason") == "Preempted"
    )


def preemption_reason(obj: Obj) -> str:
    """The reason of the workload's last preemption, read from its Preempted condition."""
    cond = condition(obj, "Preempted") or {}
    if cond.get("status") == "True" and cond.get("reason") in HUMAN_REASONS.values():
        return str(cond["reason"])
    message = str(cond.get("message", ""))
    words = message.split(" due to ", 1)[1].split(";", 1)[0] if " due to " in message else ""
    return HUMAN_REASONS.get(words, f"unknown ({words or cond.get('reason', '')})")


def submission_name(obj: Obj) -> str:
    """The harness's name of a Workload: its Job's name, or its own for an owner-less one."""
    for ref in obj.get("metadata", {}).get("ownerReferences", []) or []:
        if ref.get("kind") == "Job":
            return str(ref["name"])
    return str(obj["metadata"]["name"])


def _container(requests: Iterable[tuple[str, str]]) -> Obj:
    req = dict(requests)
    # Extended resources must have limits equal to requests (core/v1 validation).
    limits = {r: q for r, q in req.items() if r != "cpu"}
    res: Obj = {"requests": req}
    if limits:
        res["limits"] = limits
    return {"name": "c", "image": "registry.invalid/differential:0", "resources": res}


def job_body(spec: WorkloadSpec) -> Obj:
    (ps,) = spec.pod_sets
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": spec.name,
            "labels": {QUEUE_LABEL: spec.local_queue, PRIORITY_LABEL: spec.priority_class},
        },
        "spec": {
            "suspend": True,
            "parallelism": ps.count,
            "completions": ps.count,
            "template": {"spec": {"restartPolicy": "Never", "containers": [_container(ps.requests)]}},
        },
    }


def workload_body(spec: WorkloadSpec) -> Obj:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Workload",
        "metadata": {"name": spec.name},
        "spec": {
            "queueName": spec.local_queue,
            "priority": spec.priority,
            "priorityClassRef": {
                "group": GROUP,
                "kind": "WorkloadPriorityClass",
                "name": spec.priority_class,
            },
            "podSets": [
                {
                    "name": ps.name,
                    "count": ps.count,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [_container(ps.requests)]}},
                }
                for ps in spec.pod_sets
            ],
        },
    }


@dataclass
class StepObservation:
    """What the real Kueue did with one submission, once settled."""

    workloads: list[Obj]  # every Workload of the state after the step
    preempted: dict[str, tuple[int, str]]  # submission name -> (times preempted in the step, last reason)
    settled: bool
    livelock: bool  # Kueue kept preempting (a workload evicted again and again) and never settled
    seconds: float
    releases: int  # quota releases seen during the step


class EvictionFinisher:
    """Finishes the eviction of owner-less Workloads as the Job integration does for Jobs."""

    def __init__(self, cluster: RealCluster, interval: float = 0.05) -> None:
        self.cluster = cluster
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="eviction-finisher", daemon=True)
        self.finished = 0
        self.errors: list[str] = []

    def __enter__(self) -> EvictionFinisher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                for wl in self.cluster.list_workloads():
                    if not wl.get("metadata", {}).get("ownerReferences") and eviction_in_progress(wl):
                        self._finish(wl)
            except ApiException as err:
                self.errors.append(f"{err.status}: {err.reason}")

    def _finish(self, wl: Obj) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        ev = condition(wl, "Evicted") or {}
        conds = [
            c
            for c in wl["status"].get("conditions", [])
            if c["type"] not in ("QuotaReserved", "Admitted", "Requeued")
        ]
        gen = wl["metadata"].get("generation", 1)
        msg = str(ev.get("message", ""))[:32768]
        conds.append(
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": msg,
                "lastTransitionTime": now,
                "observedGeneration": gen,
            }
        )
        conds.append(
            {
                "type": "Requeued",
                "status": "True",
                "reason": str(ev.get("reason", "Preempted")),
                "message": msg,
                "lastTransitionTime": now,
                "observedGeneration": gen,
            }
        )
        if condition(wl, "Admitted") is not None:
            conds.append(
                {
                    "type": "Admitted",
                    "status": "False",
                    "reason": "NoReservation",
                    "message": "The workload has no reservation",
                    "lastTransitionTime": now,
                    "observedGeneration": gen,
                }
            )
        body = dict(wl)
        body["status"] = {**wl["status"], "conditions": conds}
        body["status"].pop("admission", None)
        try:
            self.cluster.custom.replace_namespaced_custom_object_status(
                GROUP, VERSION, self.cluster.namespace, "workloads", wl["metadata"]["name"], body
            )
            self.finished += 1
        except ApiException as err:
            if err.status != 409:  # a conflict: Kueue wrote meanwhile; the next poll retries
                raise


@dataclass
class RealCluster:
    """One generated state on a real control plane (one namespace, prefixed cluster-scoped names)."""

    api: k8s.ApiClient
    state: GeneratedState
    custom: k8s.CustomObjectsApi = field(init=False)
    batch: k8s.BatchV1Api = field(init=False)
    core: k8s.CoreV1Api = field(init=False)

    def __post_init__(self) -> None:
        self.custom = k8s.CustomObjectsApi(self.api)
        self.batch = k8s.BatchV1Api(self.api)
        self.core = k8s.CoreV1Api(self.api)

    @property
    def namespace(self) -> str:
        return self.state.namespace

    # -- setup and teardown --------------------------------------------------------------------

    def setup(self) -> None:
        try:
            self.core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=self.namespace)))
        except ApiException as err:
            if err.status != 409:
                raise
        for obj in self.state.objects:
            plural = PLURALS[str(obj["kind"])]
            try:
                if obj["kind"] == "LocalQueue":
                    self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, plural, obj)
                else:
                    self.custom.create_cluster_custom_object(GROUP, VERSION, plural, obj)
            except ApiException as err:
                raise HarnessError(
                    f"seed {self.state.seed} ({self.state.mode}): Kueue refused {obj['kind']} "
                    f"{obj['metadata']}: {err.status} {str(err.body)[:400]}"  # type: ignore[index]
                ) from None
        self._wait_queues_active()

    def _wait_queues_active(self, timeout: float = 20.0) -> None:
        """Every ClusterQueue and LocalQueue Active (Kueue has them in its cache) before submitting."""
        deadline = time.monotonic() + timeout
        cqs = {str(o["metadata"]["name"]) for o in self.state.kinds("ClusterQueue")}  # type: ignore[index]
        while True:
            items = self.custom.list_cluster_custom_object(GROUP, VERSION, "clusterqueues")["items"]
            active = {i["metadata"]["name"] for i in items if is_true(i, "Active")}
            lqs = self.custom.list_namespaced_custom_object(GROUP, VERSION, self.namespace, "localqueues")[
                "items"
            ]
            lq_active = sum(1 for i in lqs if is_true(i, "Active"))
            if cqs <= active and lq_active == len(cqs):
                return
            if time.monotonic() > deadline:
                raise HarnessError(
                    f"seed {self.state.seed}: queues not Active after {timeout}s: {sorted(cqs - active)}"
                )
            time.sleep(0.1)

    def teardown(self) -> None:
        """Delete everything the state created (no garbage collector runs: Workloads are deleted
        explicitly, their finalizers removed so that nothing waits for a controller)."""
        ns = self.namespace
        for job in self.batch.list_namespaced_job(ns).items:
            _ignore_404(
                lambda j=job: self.batch.delete_namespaced_job(
                    j.metadata.name, ns, propagation_policy="Orphan"
                )
            )
        for wl in self.list_workloads():
            name = wl["metadata"]["name"]
            _ignore_404(
                lambda n=name: self.custom.patch_namespaced_custom_object(
                    GROUP, VERSION, ns, "workloads", n, {"metadata": {"finalizers": None}}
                )
            )
            _ignore_404(
                lambda n=name: self.custom.delete_namespaced_custom_object(GROUP, VERSION, ns, "workloads", n)
            )
        for obj in reversed(self.state.objects):
            plural = PLURALS[str(obj["kind"])]
            name = str(obj["metadata"]["name"])  # type: ignore[index]
            if obj["kind"] == "LocalQueue":
                _ignore_404(
                    lambda p=plural, n=name: self.custom.delete_namespaced_custom_object(
                        GROUP, VERSION, ns, p, n
                    )
                )
            else:
                _ignore_404(
                    lambda p=plural, n=name: self.custom.delete_cluster_custom_object(GROUP, VERSION, p, n)
                )
        _ignore_404(lambda: self.core.delete_namespace(ns))

    # -- reading -------------------------------------------------------------------------------

    def list_workloads(self) -> list[Obj]:
        items: list[Obj] = self.custom.list_namespaced_custom_object(
            GROUP, VERSION, self.namespace, "workloads"
        )["items"]
        return sorted(items, key=lambda w: str(w["metadata"]["name"]))

    # -- a step ---------------------------------------------------------------------------------

    def submit(self, spec: WorkloadSpec) -> None:
        if spec.as_job:
            self.batch.create_namespaced_job(self.namespace, job_body(spec))
        else:
            self.custom.create_namespaced_custom_object(
                GROUP, VERSION, self.namespace, "workloads", workload_body(spec)
            )

    def settle(
        self,
        name: str,
        before: list[Obj],
        *,
        quiet: float = 0.4,
        timeout: float = 25.0,
        livelock_evictions: int = 4,
        poll: float = 0.05,
        clock: Callable[[], float] = time.monotonic,
    ) -> StepObservation:
        """Wait until the submission ``name`` settled; what Kueue did since ``before``."""
        began = clock()
        base = {submission_name(w): preemptions(w) for w in before}
        last_sig: tuple[tuple[object, ...], ...] = ()
        last_change = began
        last_release = -1e9
        holding = {submission_name(w) for w in before if holds_quota(w)}
        releases = 0
        items: list[Obj] = before
        while True:
            items = self.list_workloads()
            now = clock()
            sig = tuple(_decision_state(w) for w in items)
            if sig != last_sig:
                last_sig, last_change = sig, now
            holding_now = {submission_name(w) for w in items if holds_quota(w)}
            if holding - holding_now:
                releases += len(holding - holding_now)
                last_release = now
            holding = holding_now
            names = {submission_name(w) for w in items}
            counts = {submission_name(w): preemptions(w) - base.get(submission_name(w), 0) for w in items}
            if max(counts.values(), default=0) >= livelock_evictions:
                return self._observe(
                    items, base, settled=False, livelock=True, seconds=now - began, releases=releases
                )
            busy = any(eviction_in_progress(w) for w in items)
            if (
                name in names
                and self.evaluated(name, items)
                and not busy
                and now - last_change >= quiet
                and now - last_release >= REQUEUE_BATCH_SECONDS + quiet + RELEASE_MARGIN
            ):
                return self._observe(
                    items, base, settled=True, livelock=False, seconds=now - began, releases=releases
                )
            if now - began > timeout:
                return self._observe(
                    items, base, settled=False, livelock=False, seconds=now - began, releases=releases
                )
            time.sleep(poll)

    def evaluated(self, name: str, items: list[Obj]) -> bool:
        """Kueue has tried the submission ``name``: it holds quota or carries the QuotaReserved
        condition of an evaluation, or it can never be a head yet: a pending workload ahead of it
        (higher priority, or equal and older) stays in the heap, in a StrictFIFO queue always, in a
        BestEffortFIFO queue when Kueue requeued it at once (ACTIVE_MESSAGES: it is popped again every
        cycle, e.g. skipped each cycle because another ClusterQueue's head reserves the quota first).
        On a loaded machine Kueue may take longer than the quiet period to get to a new workload."""
        by_name = {submission_name(w): w for w in items}
        new = by_name.get(name)
        if new is None:
            return False
        if holds_quota(new) or condition(new, "QuotaReserved") is not None:
            return True
        queue = new["spec"]["queueName"]
        pending = [
            w for w in items if w is not new and w["spec"]["queueName"] == queue and not holds_quota(w)
        ]
        if any(_shape(w) == _shape(new) and condition(w, "QuotaReserved") is not None for w in pending):
            # SchedulingEquivalenceHashing: a workload of the same shape was parked, so Kueue
            # parks this one on arrival without evaluating it (cluster_queue.go PushOrUpdate,
            # hashToBulkMoveReason; in a StrictFIFO queue the same-shape head is ahead of it).
            return True
        cq = next(
            (o for o in self.state.kinds("LocalQueue") if o["metadata"]["name"] == queue),  # type: ignore[index]
            None,
        )
        cq_name = cq["spec"]["clusterQueue"] if cq is not None else None  # type: ignore[index]
        spec = next(
            (o["spec"] for o in self.state.kinds("ClusterQueue") if o["metadata"]["name"] == cq_name), {}
        )  # type: ignore[index]
        strict = spec.get("queueingStrategy") == "StrictFIFO"  # type: ignore[union-attr]
        prio = int(new["spec"].get("priority", 0))
        created = str(new["metadata"]["creationTimestamp"])
        return any(
            (int(w["spec"].get("priority", 0)), created) > (prio, str(w["metadata"]["creationTimestamp"]))
            and (strict or _requeued_at_once(w))
            for w in pending
        )

    @staticmethod
    def _observe(
        items: list[Obj],
        base: dict[str, int],
        *,
        settled: bool,
        livelock: bool,
        seconds: float,
        releases: int,
    ) -> StepObservation:
        preempted: dict[str, tuple[int, str]] = {}
        for w in items:
            n = preemptions(w) - base.get(submission_name(w), 0)
            if n > 0:
                preempted[submission_name(w)] = (n, preemption_reason(w))
        return StepObservation(items, preempted, settled, livelock, seconds, releases)


def _shape(wl: Obj) -> tuple[object, ...]:
    """The scheduling shape Kueue hashes (pkg/workload computeSchedulingHash): priority and, per
    pod set, name, count and requests (the generated workloads have no selectors or tolerations)."""
    sets = tuple(
        (
            ps["name"],
            ps["count"],
            tuple(
                sorted((c.get("resources", {}) or {}).get("requests", {}).items())
                for c in ps["template"]["spec"]["containers"]
            ),
        )
        for ps in wl["spec"]["podSets"]
    )
    return (int(wl["spec"].get("priority", 0)), sets)


def _decision_state(wl: Obj) -> tuple[object, ...]:
    """What a step decides about a workload. Not its resourceVersion: Kueue keeps rewriting the
    QuotaReserved=False message of a head it retries every cycle (a StrictFIFO head, or a
    workload whose flavor scan resumes after the flavor it tried last, so that the message
    alternates between flavors), and that is not a decision."""
    admission = (wl.get("status", {}) or {}).get("admission") or {}
    flavors = tuple(
        (psa.get("name"), tuple(sorted((psa.get("flavors") or {}).items())))
        for psa in admission.get("podSetAssignments", []) or []
    )
    return (wl["metadata"]["name"], holds_quota(wl), flavors, is_true(wl, "Evicted"), preemptions(wl))


def _ignore_404(call: Callable[[], object]) -> None:
    try:
        call()
    except ApiException as err:
        if err.status not in (404, 409):
            raise


def _requeued_at_once(wl: Obj) -> bool:
    """Kueue's last evaluation of the pending workload put it straight back in its heap."""
    cond = condition(wl, "QuotaReserved")
    return cond is not None and str(cond.get("message", "")).startswith(ACTIVE_MESSAGES)
