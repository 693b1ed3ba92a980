"""The policy's part of a cluster read from the API, in the controller's terms (`Observed`): what the
operator hands the core. Pure: the shell supplies the objects; nothing here reads the API.

The Kueue objects come from a lookup (`LiveLookup`: the operator's last applied content, else its watch
cache, else a read); an object that exists nowhere is absent, so the controller knows a team's ClusterQueue
is not created yet. The Workloads are the shell's watch cache. The snapshot takes the exact fast paths the
simulator takes (`fairshare.snapshot.FAST`): the service runs the code a what-if ran.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from fairshare.history import UsageHistoryGraph
from fairshare.manifests import parse_manifests
from fairshare.models import ClusterState, StopPolicy, Workload
from fairshare.policy import ObjectKey, QuotaPolicy, render_index
from fairshare.policy.owners import team_of
from fairshare.policy.render import NAMESPACE_NAME_LABEL
from fairshare.scheduler import SchedulerConfig
from fairshare.snapshot import FAST, FastPaths, Snapshot
from fairshare.workload import WorkloadInfo

from .observed import Observed, PendingWorkload

LiveLookup = Callable[[ObjectKey], Mapping[str, Any] | None]


def policy_objects(policy: QuotaPolicy, live: LiveLookup) -> list[dict[str, Any]]:
    """The policy's Kueue objects as they exist (absent ones left out), in apply order."""
    out: list[dict[str, Any]] = []
    for key, rendered in render_index(policy).items():
        obj = live(key)
        if obj is None:
            continue
        meta: dict[str, Any] = {"name": key.name}
        if key.namespace:
            meta["namespace"] = key.namespace
        content = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")}
        out.append({"apiVersion": rendered["apiVersion"], "kind": key.kind, "metadata": meta, **content})
    return out


def policy_state(objects: list[dict[str, Any]], workloads: Mapping[str, Workload]) -> ClusterState:
    """The objects plus the Workloads of their queues (namespaces carry the name label Kubernetes sets)."""
    state = parse_manifests(objects, check_references=False)
    cqs = set(state.cluster_queues)
    mine = {k: w for k, w in workloads.items()
            if not w.is_finished and (w.local_queue_key in state.local_queues
                                      or (w.admission is not None and w.admission.cluster_queue in cqs))}
    namespaces = {w.namespace for w in mine.values()} | {lq.split("/", 1)[0] for lq in state.local_queues}
    labels = {ns: {NAMESPACE_NAME_LABEL: ns} for ns in sorted(namespaces)}
    return dataclasses.replace(state, workloads=mine, namespace_labels=labels)


def pending_since(wl: Workload) -> float:
    """When the workload last became pending: its creation, or its last eviction / requeue."""
    since = wl.creation_timestamp
    for kind in ("Evicted", "Requeued"):
        cond = wl.condition(kind)
        if cond is not None and cond.status:
            since = max(since, cond.last_transition_time)
    return since


def observe(policy: QuotaPolicy, live: LiveLookup, workloads: Mapping[str, Workload],
            history: UsageHistoryGraph, config: SchedulerConfig | None = None, *,
            paths: FastPaths = FAST) -> Observed:
    state = policy_state(policy_objects(policy, live), workloads)
    snap = Snapshot.from_state(state, paths=paths)
    pending: dict[str, PendingWorkload] = {}
    for key in sorted(state.workloads):
        wl = state.workloads[key]
        lq = state.local_queues.get(wl.local_queue_key)
        if key in snap.workloads or lq is None:
            continue
        # Deactivated ones too (the snapshot's queue leaves them out): a victim we hold still exists.
        info = snap.pending.get(key) or WorkloadInfo.pending(wl, lq.cluster_queue)
        pending[key] = PendingWorkload(info, pending_since(wl), queued=wl.active)
    held = frozenset(k for k, lq in state.local_queues.items() if lq.stop_policy == StopPolicy.HOLD)
    return Observed(snap, pending, history, config or SchedulerConfig(), held_queues=held)


def policy_workloads(policy: QuotaPolicy, workloads: Iterable[Workload]) -> list[Workload]:
    """The Workloads the policy owns (fairshare.policy.owners.team_of, the one rule): whose evictions the
    storm rule counts."""
    return [w for w in workloads if team_of(policy, w) is not None]
