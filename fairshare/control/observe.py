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
from dataclasses import dataclass, field
from typing import Any

from fairshare.history import UsageHistoryGraph
from fairshare.manifests import KueueObject, NamespaceObject, StateBuilder, parse_manifests, parse_object
from fairshare.models import ClusterState, StopPolicy, Workload
from fairshare.policy import ObjectKey, QuotaPolicy, render_index
from fairshare.policy.owners import Ownership, ownership, team_of
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


# (the object, finished, its LocalQueue's key, the ClusterQueue of its admission, holding a reservation)
Facts = tuple[Workload, bool, str, str | None, bool]


@dataclass(eq=False)
class ObservationMemo:
    """What the last observation derived from each Workload object, taken again while the watch cache holds
    the same object: the operator's cache replaces a Workload that changed (a watch event parses a new
    one), so a step derives only what changed. Held by the shell, one per policy (PolicyController); an
    observation made with it is the one made without (tests/unit/control/test_observation_memo.py).

    - `facts`: per Workload, (the object, finished, its LocalQueue's key, the ClusterQueue of its
      admission, holding a quota reservation);
    - `infos`: the snapshot's workloads as Snapshot.from_state built them (its `known`);
    - `pending`: the observed pending workloads (`Observed.pending`);
    - `teams`: per Workload, (the object, its team under policies of the `owners` ownership: team_of)."""

    facts: dict[str, Facts] = field(default_factory=dict)
    infos: dict[str, WorkloadInfo] = field(default_factory=dict)
    pending: dict[str, PendingWorkload] = field(default_factory=dict)
    owners: Ownership | None = None  # owners.ownership of the policy the teams were found under
    teams: dict[str, tuple[Workload, str | None]] = field(default_factory=dict)
    # The policy's Kueue objects: the keys and apiVersions it renders (per parsed policy), and per object
    # the live content and its model, taken again while the lookup returns the same content (the
    # operator's last applied copy or its watch cache: replaced, never changed in place). At 500 teams
    # parsing the 1,500 objects was most of a step.
    rendered: tuple[QuotaPolicy, list[tuple[ObjectKey, str]]] | None = None
    objects: dict[ObjectKey, tuple[Mapping[str, Any], KueueObject | NamespaceObject]] = field(
        default_factory=dict)


def _facts(key: str, w: Workload, memo: ObservationMemo | None) -> Facts:
    if memo is not None:
        known = memo.facts.get(key)
        if known is not None and known[0] is w:
            return known
    admitted = w.admission.cluster_queue if w.admission is not None else None
    fact = (w, w.is_finished, w.local_queue_key, admitted, w.has_quota_reservation)
    if memo is not None:
        memo.facts[key] = fact
    return fact


def _known_teams(policy: QuotaPolicy, memo: ObservationMemo | None,
                 owners: Ownership | None = None) -> Mapping[str, tuple[Workload, str | None]]:
    """The memo's teams if they were found under the ownership of `policy` (`owners`, when the caller has
    it), else none: compared once per pass, not per Workload (a policy of 1,000 teams)."""
    if memo is None or memo.owners != (ownership(policy) if owners is None else owners):
        return {}
    return memo.teams


def objects_state(policy: QuotaPolicy, live: LiveLookup, memo: ObservationMemo | None = None) -> ClusterState:
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


def policy_state(objects: list[dict[str, Any]] | ClusterState, workloads: Mapping[str, Workload],
                 memo: ObservationMemo | None = None) -> ClusterState:
    """The objects (or their state, objects_state) plus the Workloads of their queues (namespaces carry
    the name label Kubernetes sets)."""
    state = objects if isinstance(objects, ClusterState) else parse_manifests(objects, check_references=False)
    cqs = set(state.cluster_queues)
    lqs = state.local_queues
    mine: dict[str, Workload] = {}
    for k, w in workloads.items():
        _, finished, lq, admitted, _ = _facts(k, w, memo)
        if not finished and (lq in lqs or (admitted is not None and admitted in cqs)):
            mine[k] = w
    if memo is not None and len(memo.facts) > len(workloads):
        memo.facts = {k: f for k, f in memo.facts.items() if k in workloads}  # (the deleted ones)
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
            paths: FastPaths = FAST, memo: ObservationMemo | None = None) -> Observed:
    """`memo`: what the last observation derived, taken again for the Workload objects it was derived from
    (ObservationMemo), and replaced by what this one derives."""
    state = policy_state(objects_state(policy, live, memo), workloads, memo)
    snap = Snapshot.from_state(state, paths=paths, known=memo.infos if memo is not None else None)
    before: Mapping[str, PendingWorkload] = memo.pending if memo is not None else {}
    pending: dict[str, PendingWorkload] = {}
    for key in sorted(state.workloads):
        wl = state.workloads[key]
        lq = state.local_queues.get(wl.local_queue_key)
        if key in snap.workloads or lq is None:
            continue
        # Deactivated ones too (the snapshot's queue leaves them out): a victim we hold still exists.
        queued = snap.pending.get(key)
        seen = before.get(key)
        if seen is not None and (seen.info is queued if queued is not None else
                                 seen.info.workload is wl and seen.info.cluster_queue == lq.cluster_queue):
            pending[key] = seen  # derived from this very object, for the same ClusterQueue
            continue
        info = queued or WorkloadInfo.pending(wl, lq.cluster_queue)
        pending[key] = PendingWorkload(info, pending_since(wl), queued=wl.active)
    if memo is not None:
        memo.infos = {**snap.workloads, **snap.pending}
        memo.pending = pending
    held = frozenset(k for k, lq in state.local_queues.items() if lq.stop_policy == StopPolicy.HOLD)
    return Observed(snap, pending, history, config or SchedulerConfig(), held_queues=held)


def policy_workloads(policy: QuotaPolicy, workloads: Iterable[Workload],
                     memo: ObservationMemo | None = None) -> list[Workload]:
    """The Workloads the policy owns (fairshare.policy.owners.team_of, the one rule): whose evictions the
    storm rule counts. `memo`: the last answers per Workload object, under the same ownership."""
    if memo is None:
        return [w for w in workloads if team_of(policy, w) is not None]
    owners = ownership(policy)
    before = _known_teams(policy, memo, owners)
    teams: dict[str, tuple[Workload, str | None]] = {}
    out: list[Workload] = []
    for w in workloads:
        key = w.key
        known = before.get(key)
        if known is None or known[0] is not w:
            known = (w, team_of(policy, w))
        teams[key] = known
        if known[1] is not None:
            out.append(w)
    memo.owners, memo.teams = owners, teams
    return out


def oldest_waiting(policy: QuotaPolicy, workloads: Mapping[str, Workload],
                   memo: ObservationMemo | None = None) -> dict[tuple[str, str], float]:
    """Per (team, priority class, "" for none): the earliest creation time of the policy's Workloads that
    wait without quota (no reservation, not finished, active; team_of: the one rule). `memo`: the last
    step's facts and teams, for the objects it saw (qm_oldest_pending_age_seconds, every reconcile)."""
    out: dict[tuple[str, str], float] = {}
    teams = _known_teams(policy, memo)
    for key, wl in workloads.items():
        _, finished, _, _, reserved = _facts(key, wl, memo)
        if reserved or finished or not wl.active:
            continue
        known = teams.get(key)
        team = known[1] if known is not None and known[0] is wl else team_of(policy, wl)
        if team is None:
            continue
        k = (team, wl.priority_class or "")
        created = out.get(k)
        if created is None or wl.creation_timestamp < created:
            out[k] = wl.creation_timestamp
    return out
