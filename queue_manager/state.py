"""In-memory state of one operator process (rebuilt from the API on start).

Everything that must survive a restart lives in the API (QuotaPolicy status, the Kueue
objects themselves); this is a cache of watched objects plus bookkeeping that avoids
redundant writes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from fairshare.models import Workload
from fairshare.policy import ObjectKey, QuotaPolicy

from .usage import PolicyHistory


@dataclass
class PolicyRuntime:
    """Per-QuotaPolicy bookkeeping. `lock` serialises the event handler and the timer."""

    name: str
    body: dict[str, Any]
    lock: threading.Lock = field(default_factory=threading.Lock)
    policy: QuotaPolicy | None = None
    rejected_generation: int | None = None  # one PolicyRejected Event per bad generation
    desired: dict[ObjectKey, dict[str, Any]] = field(default_factory=dict)
    applied: dict[ObjectKey, dict[str, Any]] = field(default_factory=dict)  # as stored after our write
    own_versions: dict[ObjectKey, set[str]] = field(default_factory=dict)  # resourceVersions we produced
    pruned_generation: int | None = None
    last_status: dict[str, Any] | None = None
    history: PolicyHistory | None = None
    waiting: set[Any] = field(default_factory=set)  # transition keys waiting for drain
    pushed_weights: dict[str, str] | None = None
    blocked_reported: dict[str, str] = field(default_factory=dict)  # beneficiary -> last blocked reason
    pending_series: set[str] = field(default_factory=set)
    oldest_series: set[tuple[str, str]] = field(default_factory=set)
    history_persisted_at: float = 0.0
    history_half_life: float | None = None

    @property
    def generation(self) -> int | None:
        gen = (self.body.get("metadata") or {}).get("generation")
        return int(gen) if isinstance(gen, int) else None

    def remember_write(self, key: ObjectKey, stored: dict[str, Any], content: dict[str, Any]) -> None:
        self.applied[key] = content
        rv = (stored.get("metadata") or {}).get("resourceVersion")
        if rv:
            versions = self.own_versions.setdefault(key, set())
            versions.add(str(rv))
            if len(versions) > 64:  # keep it bounded; old versions never come back
                versions.clear()
                versions.add(str(rv))


@dataclass
class WorkloadCache:
    """Workloads parsed into the core's model, by "namespace/name"."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    items: dict[str, Workload] = field(default_factory=dict)
    unparsable: dict[str, str] = field(default_factory=dict)  # key -> why (logged once)

    def snapshot(self) -> dict[str, Workload]:
        with self.lock:
            return dict(self.items)


@dataclass
class State:
    lock: threading.Lock = field(default_factory=threading.Lock)
    policies: dict[str, PolicyRuntime] = field(default_factory=dict)
    workloads: WorkloadCache = field(default_factory=WorkloadCache)
    # Live owned objects seen on watch: key -> (owning policy, whole object).
    live: dict[ObjectKey, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    # ClusterQueue status from watch (live usage for draining).
    cq_status: dict[str, dict[str, Any]] = field(default_factory=dict)

    def runtime(self, name: str, body: dict[str, Any]) -> PolicyRuntime:
        with self.lock:
            rt = self.policies.get(name)
            if rt is None:
                rt = self.policies[name] = PolicyRuntime(name=name, body=body)
            else:
                rt.body = body
            return rt
