"""Kueue v1beta2 Workload objects as the API server returns them, built step by step the way Kueue's
controllers change them (pkg/workload/workload.go), for the ledger's tests.

Each step returns a new document, so a test can keep every snapshot of a life and replay them.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from fairshare.manifests import parse_object
from fairshare.models import Workload
from ledger.records import WorkloadObservation

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
HOUR = 3600.0


def ts(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Doc:
    def __init__(self, name: str = "train", namespace: str = "research", *, uid: str | None = None,
                 created: float = T0, gpus_per_pod: int = 1, pods: int = 2, queue: str = "research",
                 labels: dict[str, str] | None = None) -> None:
        self.raw: dict[str, Any] = {
            "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-{namespace}-{name}",
                         "creationTimestamp": ts(created), "labels": dict(labels or {}),
                         "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                              "uid": "job-uid", "controller": True}]},
            "spec": {"queueName": queue, "podSets": [{"name": "main", "count": pods, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {
                    "nvidia.com/gpu": str(gpus_per_pod), "cpu": "2"}}}]}}}]},
            "status": {"conditions": []},
        }

    def _next(self) -> Doc:
        new = Doc.__new__(Doc)
        new.raw = copy.deepcopy(self.raw)
        return new

    def _cond(self, type_: str, status: bool, reason: str, at: float, message: str = "") -> None:
        conds = [c for c in self.raw["status"]["conditions"] if c["type"] != type_]
        conds.append({"type": type_, "status": "True" if status else "False", "reason": reason,
                      "message": message, "lastTransitionTime": ts(at)})
        self.raw["status"]["conditions"] = conds

    def _find(self, type_: str) -> dict[str, Any] | None:
        return next((c for c in self.raw["status"]["conditions"] if c["type"] == type_), None)

    def _accumulate(self, admitted: dict[str, Any], at: float) -> None:
        """SyncAdmittedCondition: the time Admitted was True goes into accumulatedPastExecutionTimeSeconds."""
        since = dt.datetime.fromisoformat(admitted["lastTransitionTime"].replace("Z", "+00:00")).timestamp()
        status = self.raw["status"]
        status["accumulatedPastExecutionTimeSeconds"] = int(
            status.get("accumulatedPastExecutionTimeSeconds", 0) + (at - since))

    # --- what Kueue does ----------------------------------------------------------------------------------

    def reserved(self, at: float, *, cluster_queue: str = "research", flavor: str = "a100",
                 gpus: int | None = None) -> Doc:
        """SetQuotaReservation: admission, QuotaReserved=True; Evicted/Preempted reset to False."""
        d = self._next()
        ps = d.raw["spec"]["podSets"][0]
        per_pod = int(ps["template"]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"])
        total = gpus if gpus is not None else per_pod * ps["count"]
        d.raw["status"]["admission"] = {"clusterQueue": cluster_queue, "podSetAssignments": [{
            "name": "main", "flavors": {"nvidia.com/gpu": flavor, "cpu": flavor},
            "resourceUsage": {"nvidia.com/gpu": str(total), "cpu": str(2 * ps["count"])},
            "count": ps["count"]}]}
        d._cond("QuotaReserved", True, "QuotaReserved", at, f"Quota reserved in ClusterQueue {cluster_queue}")
        d._cond("Admitted", True, "Admitted", at, "The workload is admitted")
        for kind in ("Evicted", "Preempted"):
            old = d._find(kind)
            if old is not None and old["status"] == "True":
                d._cond(kind, False, "QuotaReserved", at, "Previously: " + old["message"])
        return d

    def evicted(self, at: float, reason: str = "Preempted", preempted: str | None = "InClusterQueue") -> Doc:
        """SetEvictedCondition (and SetPreemptedCondition when preempted); schedulingStats counts it."""
        d = self._next()
        d._cond("Evicted", True, reason, at, f"evicted: {reason}")
        if preempted:
            d._cond("Preempted", True, preempted, at, "Preempted to accommodate a workload")
        stats = d.raw["status"].setdefault("schedulingStats", {"evictions": []})["evictions"]
        entry = next((e for e in stats if e["reason"] == reason), None)
        if entry is None:
            stats.append({"reason": reason, "underlyingCause": "", "count": 1})
        else:
            entry["count"] += 1
        return d

    def released(self, at: float) -> Doc:
        """UnsetQuotaReservationWithCondition: QuotaReserved=False, admission cleared, Admitted=False and
        the admitted time added to accumulatedPastExecutionTimeSeconds (SyncAdmittedCondition)."""
        d = self._next()
        admitted = d._find("Admitted")
        if admitted is not None and admitted["status"] == "True":
            d._accumulate(admitted, at)
        d.raw["status"].pop("admission", None)
        d._cond("QuotaReserved", False, "Pending", at, "evicted")
        d._cond("Admitted", False, "NoReservation", at, "The workload has no reservation")
        return d

    def finished(self, at: float, reason: str = "Succeeded") -> Doc:
        """SetFinishedCondition; then SyncAdmittedCondition: Admitted=False reason Finished, time added."""
        d = self._next()
        d._cond("Finished", True, reason, at, "Job finished")
        admitted = d._find("Admitted")
        if admitted is not None and admitted["status"] == "True":
            d._accumulate(admitted, at)
            d._cond("Admitted", False, "Finished", at, "Workload has finished")
        return d

    def reclaimable(self, pods: int) -> Doc:
        d = self._next()
        d.raw["status"]["reclaimablePods"] = [{"name": "main", "count": pods}]
        return d

    def labelled(self, **labels: str) -> Doc:
        d = self._next()
        d.raw["metadata"]["labels"].update({k.replace("_", "-"): v for k, v in labels.items()})
        return d

    def deleting(self, at: float) -> Doc:
        d = self._next()
        d.raw["metadata"]["deletionTimestamp"] = ts(at)
        return d

    # --- as the operator sees it -------------------------------------------------------------------------

    def workload(self) -> Workload:
        wl = parse_object(self.raw)
        assert isinstance(wl, Workload)
        return wl

    def seen(self, at: float, *, deleted: bool = False, user: str | None = None) -> WorkloadObservation:
        return WorkloadObservation(self.workload(), at, cluster_queue=None, user=user, deleted=deleted)
