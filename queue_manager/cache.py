"""What one operator process has observed (rebuilt from the API on start): the watched objects and, per
policy, the bookkeeping that avoids redundant writes.

Everything that must survive a restart lives in the API (QuotaPolicy status, the Kueue objects
themselves); this is a cache of watched objects.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from fairshare.control import HistoryBook, PolicyController, PolicyRules
from fairshare.control.observe import WorkloadScope, workload_scope
from fairshare.models import Workload
from fairshare.policy import ObjectKey, QuotaPolicy
from fairshare.policy.status import QuotaPolicyStatus

from .audit import Fact
from .refs import QUOTA_POLICY, ObjectRef


@dataclass
class PolicyRuntime:
    """Per-QuotaPolicy bookkeeping. `lock` serialises the event handler and the timer."""

    name: str
    body: dict[str, Any]
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Owned objects' watch events to check for drift, in order, by whoever holds or next takes the lock
    # (queue_manager/operator.py `owned_event`): a handler thread never waits for a reconcile.
    drift_events: deque[tuple[str | None, dict[str, Any]]] = field(default_factory=deque)
    policy: QuotaPolicy | None = None
    parsed_from: str | None = None  # the metadata + spec `policy` was parsed from
    rules: PolicyRules | None = None  # the policy's rules, resolved once per parsed policy
    # Where the policy's Workloads are (observe.workload_scope), derived once per parsed policy.
    scope: tuple[QuotaPolicy, WorkloadScope] | None = None
    rejected_generation: int | None = None  # one PolicyRejected Event per bad generation
    desired: dict[ObjectKey, dict[str, Any]] = field(default_factory=dict)
    applied: dict[ObjectKey, dict[str, Any]] = field(default_factory=dict)  # as stored after our write
    own_versions: dict[ObjectKey, set[str]] = field(default_factory=dict)  # resourceVersions we produced
    # (uid, metadata.generation) of what we wrote: a later version of such a generation (a controller's
    # status write) has the content we wrote (CRDs bump the generation on any change but metadata and
    # status); the uid, because a re-created object counts its generations from 1 again.
    own_generations: dict[ObjectKey, set[tuple[str, int]]] = field(default_factory=dict)
    pruned_generation: int | None = None
    # Per object, (the desired content, the live object) last found not to need an apply: needs_apply is
    # a function of the two, and the watch cache replaces an object that changed, so the same live object
    # and an equal desired content need no new comparison (1,500 of them a reconcile at 500 teams).
    in_place: dict[ObjectKey, tuple[dict[str, Any], dict[str, Any]]] = field(default_factory=dict)
    # The applies written whose Event could not be posted: reported by the next reconcile, which finds the
    # object in place and writes nothing (Reconciler.write_all).
    unreported: dict[ObjectKey, Fact] = field(default_factory=dict)
    # The status as we last wrote it (the watch may lag behind our own writes), and each top-level
    # field's JSON as sent, so that only changed fields are patched.
    status: QuotaPolicyStatus | None = None
    written: dict[str, str] = field(default_factory=dict)
    history: HistoryBook | None = None
    # The policy's controller with its memory (the memos, eviction counts, the storm window).
    controller: PolicyController = field(default_factory=PolicyController)
    # The Workloads put or dropped since its last reconcile read them (WorkloadCache.subscribe).
    changes: Changes | None = None
    history_persisted_at: float = 0.0
    pending_series: set[str] = field(default_factory=set)
    oldest_series: set[tuple[str, str]] = field(default_factory=set)
    budget_series: set[tuple[str, ...]] = field(default_factory=set)  # qm_budget_* series exported
    storm_series: set[tuple[str, str]] = field(default_factory=set)  # qm_eviction_storm series exported
    # The failure the policy is Degraded for, as (generation, message), or None while it is served: its
    # Event and log line go out once, not every tick (queue_manager/reconcile.py `fail`).
    failure: tuple[int | None, str] | None = None

    @property
    def generation(self) -> int | None:
        gen = (self.body.get("metadata") or {}).get("generation")
        return int(gen) if isinstance(gen, int) else None

    @property
    def uid(self) -> str | None:
        uid = (self.body.get("metadata") or {}).get("uid")
        return str(uid) if uid else None

    def workload_scope(self, policy: QuotaPolicy) -> WorkloadScope:
        if self.scope is None or self.scope[0] is not policy:
            self.scope = (policy, workload_scope(policy))
        return self.scope[1]

    def remember_write(self, key: ObjectKey, stored: dict[str, Any], content: dict[str, Any]) -> None:
        self.applied[key] = content
        self.remember_version(key, stored)

    def remember_version(self, key: ObjectKey, stored: dict[str, Any]) -> None:
        """A resourceVersion this operator wrote: its watch event is not a hand edit (also an intermediate
        write, e.g. the apply of a drift correction before the patch that removes what it could not)."""
        meta = stored.get("metadata") or {}
        generation, uid = meta.get("generation"), meta.get("uid")
        if isinstance(generation, int) and uid:
            generations = self.own_generations.setdefault(key, set())
            if len(generations) > 64:  # bounded as the versions
                generations.clear()
            generations.add((str(uid), generation))
        rv = meta.get("resourceVersion")
        if rv:
            versions = self.own_versions.setdefault(key, set())
            versions.add(str(rv))
            if len(versions) > 64:  # keep it bounded; old versions never come back
                versions.clear()
                versions.add(str(rv))


@dataclass(eq=False)
class Changes:
    """The keys of the Workloads put or dropped since a policy's reconcile last read its part of the cache
    (WorkloadCache.view): what its controller derives again (fairshare.control.standing). `scope`: the
    part last read; None, or keys beyond the bound: unknown (the next read derives every Workload)."""

    keys: set[str] = field(default_factory=set)
    scope: WorkloadScope | None = None
    overflow: bool = False


@dataclass
class WorkloadCache:
    """Workloads parsed into the core's model, by "namespace/name", and indexed by namespace and by the
    ClusterQueue of their admission: one cache, kept by the watch's deltas, that each policy's reconcile
    reads its own part of (`of`, a WorkloadScope) instead of every Workload of the cluster."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    items: dict[str, Workload] = field(default_factory=dict)
    unparsable: dict[str, str] = field(default_factory=dict)  # key -> why (logged once)
    # queuemanager.dev/keep-idle of the Workloads that carry it (spec.idle; fairshare.control.idle parses it)
    keep: dict[str, str] = field(default_factory=dict)
    by_namespace: dict[str, dict[str, Workload]] = field(default_factory=dict)
    by_cluster_queue: dict[str, dict[str, Workload]] = field(default_factory=dict)  # admitted ones
    readers: list[Changes] = field(default_factory=list)  # one per policy (`subscribe`)

    def subscribe(self) -> Changes:
        with self.lock:
            changes = Changes()
            self.readers.append(changes)
            return changes

    def unsubscribe(self, changes: Changes) -> None:
        with self.lock:
            self.readers = [c for c in self.readers if c is not changes]

    def _changed(self, key: str) -> None:
        bound = max(1024, len(self.items) // 2)  # beyond it, deriving every Workload costs no more
        for changes in self.readers:
            if changes.overflow:
                continue
            changes.keys.add(key)
            if len(changes.keys) > bound:
                changes.overflow = True
                changes.keys = set()

    def put(self, key: str, wl: Workload) -> None:
        """Add or replace (the caller holds the lock)."""
        self.drop(key)
        self._changed(key)
        self.items[key] = wl
        self.by_namespace.setdefault(wl.namespace, {})[key] = wl
        if wl.admission is not None:
            self.by_cluster_queue.setdefault(wl.admission.cluster_queue, {})[key] = wl

    def drop(self, key: str) -> None:
        """Remove, from every index (the caller holds the lock)."""
        old = self.items.pop(key, None)
        if old is None:
            return
        self._changed(key)
        for index, at in ((self.by_namespace, old.namespace),
                          (self.by_cluster_queue, old.admission.cluster_queue if old.admission else None)):
            if at is None:
                continue
            part = index.get(at)
            if part is not None:
                part.pop(key, None)
                if not part:
                    del index[at]

    def get(self, key: str) -> Workload | None:
        with self.lock:
            return self.items.get(key)

    def view(self, scope: WorkloadScope, changes: Changes) -> tuple[dict[str, Workload], set[str] | None]:
        """`of(scope)` and the keys put or dropped since `changes` was last read (None: unknown: the first
        read, another scope, or more than the bound), read together."""
        with self.lock:
            mine = self._of(scope)
            keys = None if changes.overflow or changes.scope != scope else changes.keys
            changes.keys, changes.scope, changes.overflow = set(), scope, False
            return mine, keys

    def of(self, scope: WorkloadScope) -> dict[str, Workload]:
        """The Workloads in the scope's namespaces or admitted to its ClusterQueues (namespace by namespace,
        then ClusterQueue by ClusterQueue, in name order: the core's observation takes any order)."""
        with self.lock:
            return self._of(scope)

    def _of(self, scope: WorkloadScope) -> dict[str, Workload]:
        out: dict[str, Workload] = {}
        for ns in sorted(scope.namespaces):
            part = self.by_namespace.get(ns)
            if part:
                out.update(part)
        for cq in sorted(scope.cluster_queues):
            part = self.by_cluster_queue.get(cq)
            if part:
                out.update(part)
        return out

    def in_namespaces(self, namespaces: Iterable[str]) -> dict[str, Workload]:
        return self.of(WorkloadScope(frozenset(namespaces), frozenset()))

    def keep_annotations(self) -> dict[str, str]:
        with self.lock:
            return dict(self.keep)


@dataclass
class State:
    lock: threading.Lock = field(default_factory=threading.Lock)
    policies: dict[str, PolicyRuntime] = field(default_factory=dict)
    workloads: WorkloadCache = field(default_factory=WorkloadCache)
    # Live owned objects seen on watch: key -> (owning policy, whole object).
    live: dict[ObjectKey, tuple[str, dict[str, Any]]] = field(default_factory=dict)

    def runtime(self, name: str, body: dict[str, Any]) -> PolicyRuntime:
        with self.lock:
            rt = self.policies.get(name)
            if rt is None:
                rt = self.policies[name] = PolicyRuntime(name=name, body=body)
            else:
                rt.body = body
            return rt


def policy_ref(rt: PolicyRuntime) -> ObjectRef:
    return ObjectRef(kind=QUOTA_POLICY.kind, name=rt.name, uid=rt.uid)
