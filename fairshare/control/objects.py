"""What a decision puts in force in the Kueue objects: the one place that derives it, from the objects as
observed and the decision's actions, as the simulator's model applies the same actions to what it holds.

- quotas: each quota of the spec as its ClusterQueue carries it (the spec's while it has none), then each
  `ApplyQuota`;
- fairSharing weights: each ClusterQueue's as it carries it (the spec's while it has none), then each
  `PushWeights`;
- LocalQueue stopPolicy: for the teams a budget's hold acts on, Hold or None as the cluster has it, then
  each `HoldQueues`.

`kueue_objects` renders the policy with them (and its tenancy objects): what the operator applies. The
decision emits each of those actions whenever the cluster differs from what it decided, so the objects
rendered are the decision's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fairshare.models import ClusterQueueName, QuotaKey, ResourceQuota
from fairshare.policy import ObjectKey, render_index
from fairshare.policy.render import Manifest, object_key
from fairshare.policy.tenancy import render_tenancy

from .actions import Action, ApplyQuota, HoldQueues, PushWeights
from .decide import held_teams
from .observed import Observed
from .rules import PolicyRules

LiveLookup = Callable[[ObjectKey], Mapping[str, Any] | None]


@dataclass(frozen=True, slots=True)
class InForce:
    """The settings of the policy's Kueue objects after a decision's actions."""

    quotas: dict[QuotaKey, ResourceQuota]  # every quota of the spec
    weights: dict[str, str]  # team -> fairSharing.weight, where it is not the spec's text
    stop_policies: dict[str, str]  # team -> its LocalQueues' stopPolicy (the teams a hold acts on)

    def held_quotas(self, rules: PolicyRules) -> dict[QuotaKey, ResourceQuota]:
        """The quotas that differ from the spec (the renderer keeps the spec's text for the rest)."""
        spec = rules.targets
        return {k: v for k, v in self.quotas.items() if spec.get(k) != v}


def in_force(rules: PolicyRules, observed: Observed, actions: Sequence[Action],
             live: LiveLookup | None = None) -> InForce:
    """The settings after `actions`, from the objects as `observed` (`live`: the ClusterQueues as read, for
    the weight's text; without it, the spec's)."""
    cqs = observed.snapshot.cluster_queues
    quotas: dict[QuotaKey, ResourceQuota] = {}
    for key, spec in rules.targets.items():
        cq = cqs.get(key.team)
        carried = cq.node.quotas.get(key.flavor_resource) if cq is not None else None
        quotas[key] = carried if carried is not None else spec
    weights: dict[str, str] = {}
    if live is not None:
        for team in rules.team_names or ():
            text = _weight_text(live(ObjectKey("ClusterQueue", "", team)))
            if text is not None and cqs.get(ClusterQueueName(team)) is not None:
                weights[team] = text
    held = held_teams(rules, observed)
    stops = {team: "Hold" if team in held else "None" for team in rules.hold_teams}
    for a in actions:
        match a:
            case ApplyQuota():
                quotas[a.key] = a.quota
            case PushWeights():
                weights.update(a.weights)
            case HoldQueues():
                stops[a.team] = "Hold" if a.hold else "None"
            case _:
                pass  # (the others change no Kueue object's setting)
    return InForce(quotas, weights, stops)


def kueue_objects(rules: PolicyRules, settings: InForce,
                  other_namespaces: Sequence[str] = ()) -> dict[ObjectKey, Manifest]:
    """The objects the policy implies with `settings` in force: its Kueue objects, then those of
    spec.tenancy (`other_namespaces`: the teams' namespaces of the operator's other policies,
    fairshare.policy.tenancy.render_tenancy)."""
    policy = rules.policy
    out = render_index(policy, quotas=settings.held_quotas(rules), weights=settings.weights,
                       stop_policies=settings.stop_policies)
    for manifest in render_tenancy(policy, other_namespaces=other_namespaces):
        out[object_key(manifest)] = manifest
    return out


def _weight_text(obj: Mapping[str, Any] | None) -> str | None:
    spec = obj.get("spec") if obj is not None else None
    fair = spec.get("fairSharing") if isinstance(spec, Mapping) else None
    weight = fair.get("weight") if isinstance(fair, Mapping) else None
    return str(weight) if isinstance(weight, str | int) and not isinstance(weight, bool) else None
