"""The policy's part of a cluster read from the API, in the controller's terms (`Observed`): what the
operator hands the core. Pure: the shell supplies the objects; nothing here reads the API.

The Kueue objects come from a lookup (`LiveLookup`: the operator's last applied content, else its watch
cache, else a read); an object that exists nowhere is absent, so the controller knows a team's ClusterQueue
is not created yet. The Workloads are the shell's watch cache. The snapshot takes the exact fast paths the
simulator takes (`fairshare.snapshot.FAST`): the service runs the code a what-if ran.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fairshare.history import UsageHistoryGraph
from fairshare.manifests import KueueObject, NamespaceObject, StateBuilder, parse_manifests, parse_object
from fairshare.models import ClusterState, LocalQueue, StopPolicy, Workload
from fairshare.policy import ObjectKey, QuotaPolicy, render_index
from fairshare.policy.owners import team_of
from fairshare.policy.render import NAMESPACE_NAME_LABEL
from fairshare.scheduler import SchedulerConfig
from fairshare.snapshot import FAST, FastPaths, Snapshot
from fairshare.workload import WorkloadInfo

from .observed import Observed, PendingWorkload

LiveLookup = Callable[[ObjectKey], Mapping[str, Any] | None]


@dataclass(frozen=True)
class WorkloadScope:
    """Where every Workload an observation of one policy can take lives: in a namespace of one of its
    rendered LocalQueues (policy_state, and team_of: a team's Workloads are those of its LocalQueues), or
    admitted to one of its ClusterQueues (a Workload still holding quota there after its namespace left
    the policy, or through a LocalQueue made by hand). The operator's Workload cache is indexed by both, so
    a reconcile reads its policy's Workloads, not every Workload of the cluster: observing the Workloads
    of this scope is observing them all (tests/unit/operator/test_workload_scope.py)."""

    namespaces: frozenset[str]
    cluster_queues: frozenset[str]


def workload_scope(policy: QuotaPolicy) -> WorkloadScope:
    keys = render_index(policy)
    return WorkloadScope(
        namespaces=frozenset(k.namespace for k in keys if k.kind == "LocalQueue" and k.namespace),
        cluster_queues=frozenset(k.name for k in keys if k.kind == "ClusterQueue"))


def policy_objects(policy: QuotaPolicy, live: LiveLookup) -> list[dict[str, Any]]:
    """The policy's Kueue objects as they exist (absent ones left out), in apply order."""
    out: list[dict[str, Any]] = []
    for key, rendered in render_index(policy).items():
        obj = live(key)
        if obj is not None:
            out.append(_document(key, str(rendered["apiVersion"]), obj))
    return out


def _document(key: ObjectKey, api_version: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": key.name}
    if key.namespace:
        meta["namespace"] = key.namespace
    content = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")}
    return {"apiVersion": api_version, "kind": key.kind, "metadata": meta, **content}


@dataclass(eq=False)
class ObjectsMemo:
    """The policy's Kueue objects as last observed (objects_state): the keys and apiVersions it renders (per
    parsed policy), and per object the live content and its model, taken again while the lookup returns
    the same content (the operator's last applied copy or its watch cache: replaced, never changed in
    place). At 500 teams parsing the 1,500 objects was most of a step."""

    rendered: tuple[QuotaPolicy, list[tuple[ObjectKey, str]]] | None = None
    objects: dict[ObjectKey, tuple[Mapping[str, Any], KueueObject | NamespaceObject]] = field(
        default_factory=dict)


def member(wl: Workload, local_queues: Container[str], cluster_queues: Container[str]) -> bool:
    """policy_state's rule: a Workload of the policy, unfinished, of one of its LocalQueues or holding quota
    in one of its ClusterQueues."""
    if wl.is_finished:
        return False
    admitted = wl.admission.cluster_queue if wl.admission is not None else None
    return wl.local_queue_key in local_queues or (admitted is not None and admitted in cluster_queues)


def objects_state(policy: QuotaPolicy, live: LiveLookup, memo: ObjectsMemo | None = None) -> ClusterState:
    """parse_manifests(policy_objects(policy, live)), taking again the models `memo` holds for the same
    content (what it derives is then held by `memo`)."""
    if memo is None:
        return parse_manifests(policy_objects(policy, live), check_references=False)
    if memo.rendered is None or memo.rendered[0] is not policy:
        memo.rendered = (policy, [(k, str(r["apiVersion"])) for k, r in render_index(policy).items()])
    builder = StateBuilder()
    parsed: dict[ObjectKey, tuple[Mapping[str, Any], KueueObject | NamespaceObject]] = {}
    index = 0
    for key, api_version in memo.rendered[1]:
        obj = live(key)
        if obj is None:
            continue
        known = memo.objects.get(key)
        if known is not None and known[0] is obj:
            model = known[1]
        else:
            model = parse_object(_document(key, api_version, obj), index=index)
        parsed[key] = (obj, model)
        builder.add(model, index=index)
        index += 1
    memo.objects = parsed
    return builder.build(check_references=False)


def policy_state(objects: list[dict[str, Any]] | ClusterState,
                 workloads: Mapping[str, Workload]) -> ClusterState:
    """The objects (or their state, objects_state) plus the Workloads of their queues (namespaces carry
    the name label Kubernetes sets)."""
    state = objects if isinstance(objects, ClusterState) else parse_manifests(objects, check_references=False)
    cqs = set(state.cluster_queues)
    lqs = state.local_queues
    mine = {k: w for k, w in workloads.items() if member(w, lqs, cqs)}
    return with_workloads(state, mine, {w.namespace for w in mine.values()})


def with_workloads(state: ClusterState, mine: dict[str, Workload], namespaces: Iterable[str]) -> ClusterState:
    """`state` with the policy's Workloads `mine` (of the `namespaces`) and its namespaces' name labels."""
    names = set(namespaces) | {lq.split("/", 1)[0] for lq in state.local_queues}
    labels = {ns: {NAMESPACE_NAME_LABEL: ns} for ns in sorted(names)}
    return dataclasses.replace(state, workloads=mine, namespace_labels=labels)


def pending_since(wl: Workload) -> float:
    """When the workload last became pending: its creation, or its last eviction / requeue."""
    since = wl.creation_timestamp
    for kind in ("Evicted", "Requeued"):
        cond = wl.condition(kind)
        if cond is not None and cond.status:
            since = max(since, cond.last_transition_time)
    return since


def pending_entry(wl: Workload, lq: LocalQueue | None, holds: bool, queued: WorkloadInfo | None,
                  seen: PendingWorkload | None) -> PendingWorkload | None:
    """Observed.pending's entry of a Workload of the policy's state: none while it holds quota in the
    snapshot or has no LocalQueue of the policy. Deactivated ones too (the snapshot's queue leaves them out):
    a victim we hold still exists. `queued`: its info in the snapshot's queue; `seen`: its entry in the last
    observation, taken again when derived from this very object for the same ClusterQueue."""
    if holds or lq is None:
        return None
    if seen is not None and (seen.info is queued if queued is not None else
                             seen.info.workload is wl and seen.info.cluster_queue == lq.cluster_queue):
        return seen
    info = queued or WorkloadInfo.pending(wl, lq.cluster_queue)
    return PendingWorkload(info, pending_since(wl), queued=wl.active)


def observe(policy: QuotaPolicy, live: LiveLookup, workloads: Mapping[str, Workload],
            history: UsageHistoryGraph, config: SchedulerConfig | None = None, *,
            paths: FastPaths = FAST) -> Observed:
    """The observation, derived from every Workload: the reference the operator's observation kept by
    delta (fairshare.control.standing) is checked against (tests/unit/control/test_observation_memo.py)."""
    state = policy_state(objects_state(policy, live), workloads)
    snap = Snapshot.from_state(state, paths=paths)
    pending: dict[str, PendingWorkload] = {}
    for key in sorted(state.workloads):
        wl = state.workloads[key]
        entry = pending_entry(wl, state.local_queues.get(wl.local_queue_key), key in snap.workloads,
                              snap.pending.get(key), None)
        if entry is not None:
            pending[key] = entry
    return Observed(snap, pending, history, config or SchedulerConfig(), held_queues=held_queues(state))


def held_queues(state: ClusterState) -> frozenset[str]:
    return frozenset(k for k, lq in state.local_queues.items() if lq.stop_policy == StopPolicy.HOLD)


def policy_workloads(policy: QuotaPolicy, workloads: Iterable[Workload]) -> list[Workload]:
    """The Workloads the policy owns (fairshare.policy.owners.team_of, the one rule): whose evictions the
    storm rule counts."""
    return [w for w in workloads if team_of(policy, w) is not None]


def waits(wl: Workload) -> bool:
    """oldest_waiting's rule: without quota (no reservation), not finished, active."""
    return not (wl.has_quota_reservation or wl.is_finished or not wl.active)


def oldest_waiting(policy: QuotaPolicy, workloads: Mapping[str, Workload]) -> dict[tuple[str, str], float]:
    """Per (team, priority class, "" for none): the earliest creation time of the policy's Workloads that
    wait without quota (team_of: the one rule; qm_oldest_pending_age_seconds, every reconcile)."""
    out: dict[tuple[str, str], float] = {}
    for wl in workloads.values():
        if not waits(wl):
            continue
        team = team_of(policy, wl)
        if team is None:
            continue
        k = (team, wl.priority_class or "")
        created = out.get(k)
        if created is None or wl.creation_timestamp < created:
            out[k] = wl.creation_timestamp
    return out
