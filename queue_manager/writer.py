"""THE module that writes to the Kubernetes API (DESIGN.md: exactly one).

Server-side apply with field manager `queue-manager` for owned Kueue objects, merge
patches to revert drift and for QuotaPolicy status, Events, and eviction requests on
Workloads. Everything it sends is built by pure functions elsewhere; this class only
transports it and maps API errors.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import secrets
import threading
from collections.abc import Callable, Iterable
from typing import Any, cast

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from .events import event_body
from .eviction import (
    EvictionMechanism,
    EvictionRequest,
    annotation_patch,
    deactivate_patch,
    evicted_condition_apply,
    preempted_condition_apply,
    reactivate_patch,
)
from .ownership import FIELD_MANAGER
from .refs import QUOTA_POLICY, WORKLOAD, ObjectRef, kind_of

_APPLY = "application/apply-patch+yaml"  # JSON is YAML: the client sends the dict as JSON
_MERGE = "application/merge-patch+json"

log = logging.getLogger("queue_manager.writer")


def _as_dict(out: object) -> dict[str, Any]:
    """The stored object from a raw response. The generated client deserializes only the
    status codes in its response map (200, not 201 of an apply that creates), so every call
    here asks for the raw response (`_preload_content=False`) and parses it."""
    data = getattr(out, "data", None)
    if isinstance(data, bytes | str) and data:
        doc = json.loads(data)
        return cast(dict[str, Any], doc) if isinstance(doc, dict) else {}
    return cast(dict[str, Any], out) if isinstance(out, dict) else {}


class Writer:
    """Writes; counts what it sent (for tests and the benchmark)."""

    def __init__(self, api: k8s.ApiClient, *, clock: Callable[[], float],
                 instance: str | None = None) -> None:
        self._custom = k8s.CustomObjectsApi(api)
        self._core = k8s.CoreV1Api(api)
        self._coordination = k8s.CoordinationV1Api(api)
        self._clock = clock
        self._instance = instance or os.environ.get("HOSTNAME", "queue-manager")
        self._seq = itertools.count(1)
        self._run = secrets.token_hex(3)  # event names stay unique across restarts
        self._posted: set[str] = set()  # names of Events known to exist (posted by this or an earlier run)
        self.requests = 0
        self._requests_lock = threading.Lock()  # the reconcile applies a kind's objects in parallel

    def _count(self) -> None:
        with self._requests_lock:
            self.requests += 1

    # -- owned Kueue objects -------------------------------------------------------
    def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply, forcing ownership of every field we set (hand edits of
        those fields are drift, see ownership.py). Returns the object as stored."""
        kind = kind_of(str(obj["kind"]))
        meta = obj["metadata"]
        self._count()
        if kind.namespaced:
            out = self._custom.patch_namespaced_custom_object(
                kind.group, kind.version, meta["namespace"], kind.plural, meta["name"], obj,
                field_manager=FIELD_MANAGER, force=True, _content_type=_APPLY, _preload_content=False)
        else:
            out = self._custom.patch_cluster_custom_object(
                kind.group, kind.version, kind.plural, meta["name"], obj,
                field_manager=FIELD_MANAGER, force=True, _content_type=_APPLY, _preload_content=False)
        return _as_dict(out)

    def merge_patch(self, ref: ObjectRef, patch: dict[str, Any]) -> dict[str, Any]:
        kind = kind_of(ref.kind)
        self._count()
        if kind.namespaced:
            out = self._custom.patch_namespaced_custom_object(
                kind.group, kind.version, ref.namespace or "", kind.plural, ref.name, patch,
                field_manager=FIELD_MANAGER, _content_type=_MERGE, _preload_content=False)
        else:
            out = self._custom.patch_cluster_custom_object(
                kind.group, kind.version, kind.plural, ref.name, patch,
                field_manager=FIELD_MANAGER, _content_type=_MERGE, _preload_content=False)
        return _as_dict(out)

    def delete(self, ref: ObjectRef) -> bool:
        """Delete an owned object; False if it was already gone."""
        kind = kind_of(ref.kind)
        self._count()
        try:
            if kind.namespaced:
                self._custom.delete_namespaced_custom_object(
                    kind.group, kind.version, ref.namespace or "", kind.plural, ref.name)
            else:
                self._custom.delete_cluster_custom_object(kind.group, kind.version, kind.plural, ref.name)
        except ApiException as err:
            if err.status == 404:
                return False
            raise
        return True

    # -- our own CR ----------------------------------------------------------------
    def patch_policy_status(self, name: str, status: dict[str, Any]) -> dict[str, Any]:
        """Merge-patch QuotaPolicy.status (the status subresource)."""
        self._count()
        out = self._custom.patch_cluster_custom_object_status(
            QUOTA_POLICY.group, QUOTA_POLICY.version, QUOTA_POLICY.plural, name, {"status": status},
            field_manager=FIELD_MANAGER, _content_type=_MERGE, _preload_content=False)
        return _as_dict(out)

    # -- Events --------------------------------------------------------------------
    def event(self, target: ObjectRef, *, reason: str, message: str, event_type: str = "Normal",
              name: str | None = None, ledger_records: str | None = None) -> bool:
        """Post an Event; True if this call created it.

        Without `name`, a failure to post is logged, never fatal. With `name` (derived from what the Event
        reports, so a restarted operator that reports the same fact again derives the same name) the post
        is idempotent: an Event of that name that exists already is success, and any other failure raises,
        so that the reconcile stops before it records the fact as reported and the next one posts it again
        (queue_manager/reconcile.py: Events go out before the status that records what they report)."""
        if name is not None and name in self._posted:
            return False
        suffix = f"{self._run}{next(self._seq):06x}"
        body = event_body(target, reason=reason, message=message, event_type=event_type, now=self._clock(),
                          name_suffix=suffix, reporting_instance=self._instance,
                          ledger_records=ledger_records)
        if name is not None:
            body["metadata"]["name"] = name
        self._count()
        try:
            self._core.create_namespaced_event(body["metadata"]["namespace"], cast(Any, body))
        except ApiException as err:
            if name is None:
                log.warning("could not post event %s on %s: %s", reason, target.describe(), err.reason)
                return False
            if err.status != 409:  # AlreadyExists: reported before (this process or an earlier one)
                raise
            self._posted.add(name)
            return False
        if name is not None:
            self._posted.add(name)
        return True

    def posted(self, name: str) -> bool:
        """Whether the Event of this name is known to exist (see `event`)."""
        return name in self._posted

    def known_posted(self, names: Iterable[str]) -> None:
        """Events found in the API (a new leader's recovery): not posted again."""
        self._posted.update(names)

    # -- leader election (queue_manager/leader.py builds the bodies) ---------------
    def create_lease(self, namespace: str, body: dict[str, Any], *,
                     timeout: float | None = None) -> dict[str, Any]:
        """Create the Lease; 409 (AlreadyExists) when another replica created it first. `timeout` bounds
        the request: a leader must know in time that it could not renew."""
        self._count()
        return _as_dict(self._coordination.create_namespaced_lease(
            namespace, cast(Any, body), field_manager=FIELD_MANAGER, _preload_content=False,
            _request_timeout=timeout))

    def replace_lease(self, namespace: str, body: dict[str, Any], *,
                      timeout: float | None = None) -> dict[str, Any]:
        """Replace the Lease; the body carries the resourceVersion it was decided on, so a concurrent
        writer makes this fail with 409 Conflict instead of both replicas believing they lead."""
        self._count()
        return _as_dict(self._coordination.replace_namespaced_lease(
            body["metadata"]["name"], namespace, cast(Any, body), field_manager=FIELD_MANAGER,
            _preload_content=False, _request_timeout=timeout))

    # -- Kueue Workloads -----------------------------------------------------------
    def request_eviction(self, req: EvictionRequest,
                         mechanism: EvictionMechanism = EvictionMechanism.DEACTIVATE) -> None:
        """Ask Kueue to evict a Workload (see eviction.py for the mechanism)."""
        self._count()
        if mechanism is EvictionMechanism.EVICTED_CONDITION:
            self._apply_workload_status(evicted_condition_apply(req, now=self._clock()))
        else:
            self._patch_workload(req.namespace, req.name, deactivate_patch())

    def reactivate(self, namespace: str, name: str) -> None:
        """spec.active=true: Kueue requeues a workload we deactivated."""
        self._count()
        self._patch_workload(namespace, name, reactivate_patch())

    def annotate_workload(self, namespace: str, name: str, annotations: dict[str, str | None]) -> None:
        """Set (or, with None, remove) annotations of a Workload (spec.idle's warning)."""
        self._count()
        self._patch_workload(namespace, name, annotation_patch(annotations))

    def explain_preemption(self, req: EvictionRequest) -> None:
        """Our reason on the victim, as a condition of our own type."""
        self._count()
        self._apply_workload_status(preempted_condition_apply(req, now=self._clock()))

    def _patch_workload(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        self._custom.patch_namespaced_custom_object(
            WORKLOAD.group, WORKLOAD.version, namespace, WORKLOAD.plural, name, patch,
            field_manager=FIELD_MANAGER, _content_type=_MERGE, _preload_content=False)

    def _apply_workload_status(self, body: dict[str, Any]) -> None:
        meta = body["metadata"]
        self._custom.patch_namespaced_custom_object_status(
            WORKLOAD.group, WORKLOAD.version, meta["namespace"], WORKLOAD.plural, meta["name"], body,
            field_manager=FIELD_MANAGER, force=True, _content_type=_APPLY, _preload_content=False)
