"""Render a QuotaPolicy into the Kueue v1beta2 objects it implies, as plain dicts (pure, deterministic).

Output order: WorkloadPriorityClasses, ResourceFlavors, Cohorts (parents first), ClusterQueues, LocalQueues;
within a kind, by name (namespace, then name for LocalQueues). Every object carries the ownership labels, so
the operator can list what it owns and garbage-collect what the policy no longer implies.
The operator renders with the quotas in force during a transition (`quotas=`) and, if the policy pushes
history-adjusted weights, with those weights (`weights=`); otherwise the spec's values are used.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from fairshare.models import ClusterQueueName, QuotaKey, ResourceQuota
from fairshare.quantity import format_quantity

from .model import Flavor, QuotaPolicy, Team
from .owners import local_queue_name
from .units import to_milli

KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "queue-manager"
POLICY_LABEL = "queuemanager.dev/policy"
TEAM_LABEL = "queuemanager.dev/team"
EXPERIMENT_LABEL = "queuemanager.dev/experiment"
# Kubernetes sets this label on every namespace (NamespaceDefaultLabelName, GA in 1.22).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

KIND_ORDER = ("WorkloadPriorityClass", "ResourceFlavor", "Cohort", "ClusterQueue", "LocalQueue")

Manifest = dict[str, object]


@dataclass(frozen=True, slots=True, order=True)
class ObjectKey:
    """Identity of a rendered object (namespace is "" for cluster-scoped kinds)."""

    kind: str
    namespace: str
    name: str


def owner_labels(policy_name: str) -> dict[str, str]:
    """Labels that mark an object as owned by the operator for this policy."""
    return {MANAGED_BY_LABEL: MANAGED_BY_VALUE, POLICY_LABEL: policy_name}


def owner_selector(policy_name: str) -> str:
    """Label selector of every object rendered for a policy."""
    return f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE},{POLICY_LABEL}={policy_name}"


def format_milli(milli: int) -> str:
    """Canonical quantity text of a milli-unit integer: 4000 -> "4", 1500 -> "1500m"."""
    return format_quantity(milli)


def cohort_leaf(path: str) -> str:
    """The Cohort a team's ClusterQueue joins: the last segment of its cohort path."""
    return path.rsplit("/", 1)[-1]


def object_key(manifest: Mapping[str, object]) -> ObjectKey:
    """The ObjectKey of a rendered manifest."""
    meta = manifest["metadata"]
    if not isinstance(meta, Mapping):
        raise TypeError("manifest without metadata")
    return ObjectKey(str(manifest["kind"]), str(meta.get("namespace", "")), str(meta["name"]))


def spec_quotas(policy: QuotaPolicy) -> dict[QuotaKey, ResourceQuota]:
    """Every quota of the spec, in exact milli-units (the targets of transitions)."""
    out: dict[QuotaKey, ResourceQuota] = {}
    for team in policy.spec.teams:
        for fq in team.quotas:
            for r in fq.resources:
                out[QuotaKey.of(ClusterQueueName(team.name), fq.flavor, r.name)] = ResourceQuota(
                    nominal=to_milli(r.nominal),
                    borrowing_limit=None if r.borrowing_limit is None else to_milli(r.borrowing_limit),
                    lending_limit=None if r.lending_limit is None else to_milli(r.lending_limit))
    return out


def render(policy: QuotaPolicy, *, quotas: Mapping[QuotaKey, ResourceQuota] | None = None,
           weights: Mapping[str, str] | None = None,
           stop_policies: Mapping[str, str] | None = None) -> list[Manifest]:
    """All Kueue objects the policy implies.

    quotas: the quota to write per (team, flavor, resource) instead of the spec's (transitions in progress);
    keys not given keep the spec's value. weights: fairSharing.weight per team instead of fairShareWeight.
    stop_policies: spec.stopPolicy ("Hold" or "None") of the LocalQueues of these teams (a budget's hold,
    fairshare.control.budgets); other teams' LocalQueues carry none (Kueue's default is None).
    """
    name = policy.metadata.name
    out: list[Manifest] = []
    out += [_priority_class(name, p.name, p.value, p.experiment, p.description)
            for p in sorted(policy.spec.priority_classes, key=lambda p: p.name)]
    out += [_flavor(name, f) for f in sorted(policy.spec.flavors, key=lambda f: f.name)]
    out += _cohorts(policy)
    out += [_cluster_queue(name, t, quotas or {}, (weights or {}).get(t.name))
            for t in sorted(policy.spec.teams, key=lambda t: t.name)]
    stops = stop_policies or {}
    queues = [_local_queue(name, t, ns, stops.get(t.name)) for t in policy.spec.teams for ns in t.namespaces]
    out += sorted(queues, key=object_key)
    return out


def render_index(policy: QuotaPolicy, *, quotas: Mapping[QuotaKey, ResourceQuota] | None = None,
                 weights: Mapping[str, str] | None = None,
                 stop_policies: Mapping[str, str] | None = None) -> dict[ObjectKey, Manifest]:
    """render() keyed by ObjectKey (for diffing against what exists)."""
    return {object_key(m): m for m in render(policy, quotas=quotas, weights=weights,
                                             stop_policies=stop_policies)}


def _meta(policy_name: str, name: str, *, namespace: str | None = None,
          extra: Mapping[str, str] | None = None) -> dict[str, object]:
    labels = owner_labels(policy_name)
    labels.update(extra or {})
    meta: dict[str, object] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = labels
    return meta


def _priority_class(policy_name: str, name: str, value: int, experiment: bool,
                    description: str | None) -> Manifest:
    obj: Manifest = {"apiVersion": KUEUE_API_VERSION, "kind": "WorkloadPriorityClass",
                     "metadata": _meta(policy_name, name,
                                       extra={EXPERIMENT_LABEL: "true" if experiment else "false"}),
                     "value": value}
    if description:
        obj["description"] = description
    return obj


def _flavor(policy_name: str, flavor: Flavor) -> Manifest:
    spec: dict[str, object] = {}
    if flavor.node_labels:
        spec["nodeLabels"] = dict(sorted(flavor.node_labels.items()))
    if flavor.node_taints:
        spec["nodeTaints"] = [t.model_dump(by_alias=True, exclude_none=True) for t in flavor.node_taints]
    if flavor.tolerations:
        spec["tolerations"] = [t.model_dump(by_alias=True, exclude_none=True) for t in flavor.tolerations]
    return {"apiVersion": KUEUE_API_VERSION, "kind": "ResourceFlavor",
            "metadata": _meta(policy_name, flavor.name), "spec": spec}


def _cohorts(policy: QuotaPolicy) -> list[Manifest]:
    parent_of: dict[str, str | None] = {}
    for team in policy.spec.teams:
        if team.cohort is None:
            continue
        parts = team.cohort.split("/")
        for i, part in enumerate(parts):
            parent_of.setdefault(part, parts[i - 1] if i else None)

    def depth(name: str) -> int:
        parent = parent_of[name]
        return 0 if parent is None else 1 + depth(parent)

    out: list[Manifest] = []
    for cohort in sorted(parent_of, key=lambda c: (depth(c), c)):
        spec: dict[str, object] = {}
        parent = parent_of[cohort]
        if parent is not None:
            spec["parentName"] = parent
        out.append({"apiVersion": KUEUE_API_VERSION, "kind": "Cohort",
                    "metadata": _meta(policy.metadata.name, cohort), "spec": spec})
    return out


def resource_groups(team: Team) -> list[tuple[set[str], list[str]]]:
    """The team's flavors grouped as Kueue needs them: (covered resources, flavors in team order).

    Kueue: every flavor of a resource group lists every covered resource, and a resource is covered by one
    group only (ClusterQueue validation). Flavors that share a resource therefore form one group (connected
    components over shared resources), covering the union of their resources."""
    groups: list[tuple[set[str], list[str]]] = []
    for fq in team.quotas:
        resources = {r.name for r in fq.resources}
        joined = [g for g in groups if g[0] & resources]
        merged: tuple[set[str], list[str]] = (set(resources), [])
        for g in joined:
            merged[0].update(g[0])
            merged[1].extend(g[1])
            groups.remove(g)
        merged[1].append(fq.flavor)
        groups.append(merged)
    return groups


def _resource_groups(team: Team, quotas: Mapping[QuotaKey, ResourceQuota]) -> list[dict[str, object]]:
    # The groups of resource_groups; a missing entry gets quota 0.
    groups = resource_groups(team)
    order = {fq.flavor: i for i, fq in enumerate(team.quotas)}
    by_flavor = {fq.flavor: {r.name: r for r in fq.resources} for fq in team.quotas}
    out: list[dict[str, object]] = []
    for resources, flavors in sorted(groups, key=lambda g: min(order[f] for f in g[1])):
        covered = sorted(resources)
        flavor_entries = []
        for flavor in sorted(flavors, key=order.__getitem__):
            entries = []
            for res in covered:
                spec_entry = by_flavor[flavor].get(res)
                limits = quotas.get(QuotaKey.of(ClusterQueueName(team.name), flavor, res))
                entry: dict[str, object] = {"name": res}
                if limits is not None:
                    entry["nominalQuota"] = format_milli(limits.nominal)
                    if limits.borrowing_limit is not None:
                        entry["borrowingLimit"] = format_milli(limits.borrowing_limit)
                    if limits.lending_limit is not None:
                        entry["lendingLimit"] = format_milli(limits.lending_limit)
                elif spec_entry is not None:
                    entry["nominalQuota"] = spec_entry.nominal
                    if spec_entry.borrowing_limit is not None:
                        entry["borrowingLimit"] = spec_entry.borrowing_limit
                    if spec_entry.lending_limit is not None:
                        entry["lendingLimit"] = spec_entry.lending_limit
                else:
                    entry["nominalQuota"] = "0"
                entries.append(entry)
            flavor_entries.append({"name": flavor, "resources": entries})
        out.append({"coveredResources": covered, "flavors": flavor_entries})
    return out


def _cluster_queue(policy_name: str, team: Team, quotas: Mapping[QuotaKey, ResourceQuota],
                   weight: str | None) -> Manifest:
    spec: dict[str, object] = {
        "namespaceSelector": {"matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In",
                                                    "values": sorted(team.namespaces)}]},
        "queueingStrategy": team.queueing_strategy,
        "resourceGroups": _resource_groups(team, quotas),
        "preemption": {"withinClusterQueue": team.preemption.within_cluster_queue,
                       "reclaimWithinCohort": team.preemption.reclaim_within_cohort},
        "fairSharing": {"weight": weight if weight is not None else team.fair_share_weight},
    }
    if team.cohort is not None:
        spec["cohortName"] = cohort_leaf(team.cohort)
    return {"apiVersion": KUEUE_API_VERSION, "kind": "ClusterQueue",
            "metadata": _meta(policy_name, team.name, extra={TEAM_LABEL: team.name}), "spec": spec}


def _local_queue(policy_name: str, team: Team, namespace: str, stop_policy: str | None) -> Manifest:
    spec: dict[str, object] = {"clusterQueue": team.name}
    if stop_policy is not None:
        # Kueue LocalQueue spec.stopPolicy (kueue.x-k8s.io_localqueues.yaml, v0.19.2): "Hold" lets admitted
        # workloads run to completion and admits nothing new; "None" (the default) admits. Written out as
        # "None" too, so that lifting a hold is a change the operator applies (the API server defaults
        # the field, so an absent one would never differ from a held queue).
        spec["stopPolicy"] = stop_policy
    return {"apiVersion": KUEUE_API_VERSION, "kind": "LocalQueue",
            "metadata": _meta(policy_name, local_queue_name(team), namespace=namespace,
                              extra={TEAM_LABEL: team.name}),
            "spec": spec}
