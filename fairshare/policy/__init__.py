"""The QuotaPolicy API: model (boundary type), loader, cross-field rules, renderer to Kueue objects, CRD.

Public API (see docs/policy.md):
- `load_policy_file`, `load_policy_yaml`, `load_policies_yaml`, `parse_policy` -> `QuotaPolicy`
- `render(policy, quotas=, weights=)` -> list of Kueue v1beta2 manifests (dicts); `render_index`, `object_key`
- `spec_quotas(policy)` -> {QuotaKey: ResourceQuota} (fairshare.models) in milli-units; `format_milli`
- `transition_settings(policy, team)`, `preemption_settings(policy)`, `half_life_seconds(policy)`
"""

from __future__ import annotations

from .loader import load_policies_yaml, load_policy_file, load_policy_yaml, parse_policy
from .model import API_GROUP, API_VERSION, KIND, PLURAL, QuotaPolicy, QuotaPolicySpec, Team
from .render import (
    EXPERIMENT_LABEL,
    KIND_ORDER,
    KUEUE_API_VERSION,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    POLICY_LABEL,
    TEAM_LABEL,
    Manifest,
    ObjectKey,
    cohort_leaf,
    format_milli,
    object_key,
    owner_labels,
    owner_selector,
    render,
    render_index,
    spec_quotas,
)
from .settings import (
    PreemptionSettings,
    TransitionSettings,
    half_life_seconds,
    preemption_settings,
    priority_values,
    transition_settings,
)
from .status import QuotaPolicyStatus

__all__ = [
    "API_GROUP", "API_VERSION", "EXPERIMENT_LABEL", "KIND", "KIND_ORDER", "KUEUE_API_VERSION",
    "MANAGED_BY_LABEL", "MANAGED_BY_VALUE", "PLURAL", "POLICY_LABEL", "TEAM_LABEL", "Manifest", "ObjectKey",
    "PreemptionSettings", "QuotaPolicy", "QuotaPolicySpec", "QuotaPolicyStatus",
    "Team", "TransitionSettings", "cohort_leaf", "format_milli", "half_life_seconds", "load_policies_yaml",
    "load_policy_file", "load_policy_yaml", "object_key", "owner_labels", "owner_selector", "parse_policy",
    "preemption_settings", "priority_values", "render", "render_index", "spec_quotas", "transition_settings",
]
