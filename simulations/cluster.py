"""The simulated cluster: its Kueue objects (files, inline objects, or a rendered QuotaPolicy) and, for a
QuotaPolicy scenario, the policy over time (its edits as the scenario's events say)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fairshare.errors import InputError, Location
from fairshare.manifests import load_yaml_documents, parse_manifests
from fairshare.models import ClusterState
from fairshare.policy import QuotaPolicy, parse_policy, render
from fairshare.policy.patch import patch_policy
from fairshare.yamlfile import load_yaml_one

from .scenario import Scenario

PRIMARY_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class PolicyTimeline:
    """The QuotaPolicy at t=0 and each later version with the time it is applied (in event order)."""

    initial: QuotaPolicy
    edits: tuple[tuple[float, QuotaPolicy], ...]


def policy_document(source: str | Mapping[str, Any], base_dir: Path, *, where: str) -> dict[str, Any]:
    """A QuotaPolicy as a dict: from a file (relative to the scenario) or inline."""
    if isinstance(source, str):
        path = Path(source) if Path(source).is_absolute() else base_dir / source
        try:
            return load_yaml_one(str(path), what="a QuotaPolicy")
        except InputError as err:
            raise err.at(field_prefix=where) from None
    return copy.deepcopy(dict(source))


def _parse(doc: Mapping[str, Any], where: str) -> QuotaPolicy:
    try:
        return parse_policy(dict(doc), file=None)
    except InputError as err:
        raise err.at(field_prefix=where) from None


def policy_timeline(scenario: Scenario, base_dir: Path) -> PolicyTimeline | None:
    if scenario.cluster.quota_policy is None:
        return None
    doc = policy_document(scenario.cluster.quota_policy, base_dir, where="cluster.quotaPolicy")
    initial = _parse(doc, "cluster.quotaPolicy")
    edits: list[tuple[float, QuotaPolicy]] = []
    for i, event in sorted(enumerate(scenario.events), key=lambda e: (e[1].at, e[0])):
        where = f"events[{i}]"
        if event.policy_patch is not None:
            doc = patch_policy(doc, event.policy_patch, where=f"{where}.policyPatch")
            policy = _parse(doc, f"{where}.policyPatch")
        else:
            source = event.policy if event.policy is not None else {}
            doc = policy_document(source, base_dir, where=f"{where}.policy")
            policy = _parse(doc, f"{where}.policy")
        changed = structural_change(initial, policy)
        if changed:
            raise InputError(
                "this edit changes more than quotas, weights and the policy's rules (" + changed + "); the "
                "simulator applies such edits only at t=0: put them in cluster.quotaPolicy",
                location=Location(field=where),
            )
        edits.append((event.at, policy))
    return PolicyTimeline(initial, tuple(edits))


_QUOTA_FIELDS = ("nominalQuota", "borrowingLimit", "lendingLimit")


def _structure(objects: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str, str], Any]:
    """Rendered objects without what a running simulation can change in place (quotas, weights)."""
    out: dict[tuple[str, str, str], Any] = {}
    for obj in objects:
        o = copy.deepcopy(dict(obj))
        meta = o.get("metadata") or {}
        spec = o.get("spec")
        if o.get("kind") == "ClusterQueue" and isinstance(spec, dict):
            spec.pop("fairSharing", None)
            for group in spec.get("resourceGroups") or []:
                for flavor in group.get("flavors") or []:
                    for r in flavor.get("resources") or []:
                        for f in _QUOTA_FIELDS:
                            r.pop(f, None)
        out[(str(o.get("kind")), str(meta.get("namespace", "")), str(meta.get("name")))] = o
    return out


def structural_change(before: QuotaPolicy, after: QuotaPolicy) -> str:
    """What an edit changes beyond quotas and weights (teams, flavors, queues, priorities, Kueue
    preemption settings...), as a short description; "" if nothing."""
    a, b = _structure(render(before)), _structure(render(after))
    added = sorted(set(b) - set(a))
    removed = sorted(set(a) - set(b))
    if added:
        return f"adds {added[0][0]} {added[0][2]}"
    if removed:
        return f"removes {removed[0][0]} {removed[0][2]}"
    for key in sorted(a):
        if a[key] != b[key]:
            return f"changes {key[0]} {key[2]}"
    return ""


def cluster_state(scenario: Scenario, base_dir: Path, policy: QuotaPolicy | None) -> ClusterState:
    """The cluster's Kueue objects: manifest files, inline objects, and the rendered QuotaPolicy."""
    docs: list[dict[str, object]] = []
    for i, name in enumerate(scenario.cluster.manifests):
        path = Path(name) if Path(name).is_absolute() else base_dir / name
        try:
            docs.extend(load_yaml_documents(path))
        except InputError as err:
            raise err.at(field_prefix=f"cluster.manifests[{i}]") from None
    docs.extend(scenario.cluster.objects)
    initial = scenario.initial
    if initial is not None and initial.objects:
        # The objects as they exist at t=0 (simulations/initial.py): quotas in force mid-transition are the
        # live ones; the policy's controller takes it from there.
        docs.extend(initial.objects)
    elif policy is not None:
        docs.extend(dict(obj) for obj in render(policy))
    return parse_manifests(docs, file=None)


def primary_resource(state: ClusterState) -> str:
    covered = sorted(
        {r for cq in state.cluster_queues.values() for g in cq.resource_groups for r in g.covered_resources}
    )
    if PRIMARY_RESOURCE in covered or not covered:
        return PRIMARY_RESOURCE
    return covered[0]
