"""The policy's rules in the planners' terms: one place turns a QuotaPolicy (+ the process overrides) into
the quota-shift and experiment-preemption planners' inputs, for both shells."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from fairshare.models import FlavorResource, QuotaKey, ResourceName, ResourceQuota
from fairshare.planners.budget import VictimBudget
from fairshare.planners.experiments import ExperimentPolicy
from fairshare.planners.quota_shift import Curve, TransitionSpec
from fairshare.policy import (
    QuotaPolicy,
    format_milli,
    preemption_settings,
    priority_values,
    spec_quotas,
    transition_settings,
)
from fairshare.policy.owners import local_queue_keys
from fairshare.policy.units import to_milli

from .budgets import budget_rules, hold_teams
from .idle import IdleRules
from .observed import NO_OVERRIDES, Overrides

# Steps of an accelerator quota (an extended resource such as nvidia.com/gpu) move by whole devices; cpu
# and memory by the finest unit their quantities have (one milli-unit).
WHOLE_UNIT = 1000


def granularity(resource: ResourceName) -> int:
    return WHOLE_UNIT if "/" in resource else 1


def transition_spec(policy: QuotaPolicy, key: QuotaKey) -> TransitionSpec:
    """How a change of this quota rolls out: the team's transition settings (defaults + override)."""
    ts = transition_settings(policy, key.team)
    resource = key.resource
    floor = ts.floor_for(resource)
    return TransitionSpec(
        duration=ts.duration_s,
        step_interval=ts.step_interval_s,
        curve=Curve(ts.curve),
        drain=ts.drain,
        deadline=ts.deadline_s,
        max_victims_per_hour=ts.max_victims_per_hour,
        ramp_growth=ts.ramp_up,
        floor=((resource, floor),) if floor else (),
        granularity=((resource, granularity(resource)),),
    )


@dataclass(frozen=True, slots=True)
class PreemptionRules:
    """Experiment preemption as the controller applies it: the planner's policy and the gate's timing."""

    planner: ExperimentPolicy
    starvation_grace_s: float  # protected work waits this long before we act (Kueue's first chance)
    victim_hold_s: float  # a victim stays deactivated at most this long waiting for its beneficiary
    hold_competitors: bool  # hold the pending experiments that would take the freed quota first
    max_lost_milli_hours: Mapping[str, int]  # per resource: work lost per budget window, milli-units x hours


def preemption_rules(policy: QuotaPolicy, overrides: Overrides = NO_OVERRIDES) -> PreemptionRules | None:
    """The rules of `spec.preemption` (None: no protected class, no experiment preemption)."""
    ps = preemption_settings(policy)
    values = priority_values(policy)
    protected = [values[c] for c in sorted(ps.protected_classes) if c in values]
    if not protected:
        return None
    if ps.experiment_priority_threshold is not None:
        below = ps.experiment_priority_threshold
    else:
        experiments = [values[c] for c in sorted(ps.experiment_classes) if c in values]
        below = max(experiments) + 1 if experiments else min(protected)
    protected_priority = min(protected)
    dry_run = ps.dry_run if overrides.dry_run is None else overrides.dry_run
    planner = ExperimentPolicy(
        experiment_below_priority=min(below, protected_priority),
        protected_priority=protected_priority,
        protected_priority_classes=frozenset(ps.protected_classes),
        min_runtime=ps.min_runtime_s,
        budget=VictimBudget(ps.max_victims, ps.window_s),
        dry_run=dry_run,
        max_evictions=ps.max_evictions_per_workload,
    )
    grace = ps.starvation_grace_s if overrides.starvation_grace_s is None else overrides.starvation_grace_s
    hold = ps.victim_hold_s if overrides.victim_hold_s is None else overrides.victim_hold_s
    return PreemptionRules(planner, grace, hold, ps.hold_competing_experiments, dict(ps.max_lost_milli_hours))


def dry_run_of(policy: QuotaPolicy, overrides: Overrides = NO_OVERRIDES) -> bool:
    """Whether evictions of any kind are only reported (the policy's preemption.dryRun, or the override)."""
    return policy.spec.preemption.dry_run if overrides.dry_run is None else overrides.dry_run


def _quota_keys(targets: Mapping[QuotaKey, ResourceQuota]) -> dict[str, dict[FlavorResource, QuotaKey]]:
    out: dict[str, dict[FlavorResource, QuotaKey]] = {}
    for k in targets:
        out.setdefault(k.team, {})[k.flavor_resource] = k
    return out


def spec_weights(policy: QuotaPolicy) -> dict[str, str]:
    """Each team's fairShareWeight as the ClusterQueue carries it without a push."""
    return {t.name: format_milli(to_milli(t.fair_share_weight)) for t in policy.spec.teams}


@dataclass(frozen=True)
class PolicyRules:
    """A QuotaPolicy's rules, resolved once per policy generation (units parsed, defaults merged, the
    process overrides applied): what `decide` reads on every call."""

    policy: QuotaPolicy
    targets: Mapping[QuotaKey, ResourceQuota]  # every quota of the spec, milli-units
    teams: frozenset[str]
    cohort_roots: Mapping[str, str]  # team -> the root of its cohort tree (teams with a cohort)
    local_queues: Mapping[str, tuple[str, ...]]  # team -> its LocalQueues ("namespace/name"), sorted
    preemption: PreemptionRules | None  # None: no experiment preemption
    victim_hold_s: float
    dry_run: bool
    push_weights: bool
    # The teams in spec order, and the spec's quota keys by team and flavor-resource: the controller reads
    # them on every decision (decide.quota_usage, live_quotas) instead of the pydantic spec, and looks a
    # key up instead of building one (a NamedTuple's constructor is interpreted Python).
    team_names: tuple[str, ...] | None = None
    quota_keys: Mapping[str, Mapping[FlavorResource, QuotaKey]] = field(default_factory=dict)
    # spec.preemption.starvationGrace (or the override): how long another team's pending work waits before
    # a transition past its deadline evicts borrowed work for it, as the experiment gate waits (Kueue's
    # first chance, and the churn of running work, to admit it).
    starvation_grace_s: float = 0.0
    # spec.idle (fairshare.control.idle), None when not enabled.
    idle: IdleRules | None = None
    # Each team's fairShareWeight as its ClusterQueue carries it without a push (quantity text).
    weights: Mapping[str, str] = field(default_factory=dict)
    # The teams a budget's hold can act on (fairshare.control.budgets.hold_teams).
    hold_teams: frozenset[str] = frozenset()
    # spec.preemption.maxEvictionsPerWorkload: a workload evicted this many times already is not a victim
    # of borrowed quota past a deadline either (the experiment planner's own cap is in `preemption`).
    max_evictions_per_workload: int = 3

    @staticmethod
    def of(policy: QuotaPolicy, overrides: Overrides = NO_OVERRIDES) -> PolicyRules:
        ps = preemption_settings(policy)
        targets = spec_quotas(policy)
        preemption = preemption_rules(policy, overrides)
        return PolicyRules(
            policy=policy,
            targets=targets,
            teams=frozenset(t.name for t in policy.spec.teams),
            cohort_roots={t.name: t.cohort.split("/")[0] for t in policy.spec.teams if t.cohort},
            local_queues={t.name: local_queue_keys(t) for t in policy.spec.teams},
            preemption=preemption,
            victim_hold_s=ps.victim_hold_s if overrides.victim_hold_s is None else overrides.victim_hold_s,
            dry_run=dry_run_of(policy, overrides),
            push_weights=policy.spec.fair_share.push_weights_to_kueue,
            team_names=tuple(t.name for t in policy.spec.teams),
            quota_keys=_quota_keys(targets),
            starvation_grace_s=(ps.starvation_grace_s if overrides.starvation_grace_s is None
                                else overrides.starvation_grace_s),
            idle=IdleRules.of(policy, overrides,
                              preemption.planner.experiment_below_priority if preemption else None),
            weights=spec_weights(policy),
            hold_teams=hold_teams(budget_rules(policy)),
            max_evictions_per_workload=ps.max_evictions_per_workload,
        )

    @property
    def name(self) -> str:
        return self.policy.name

    def transition_spec(self, key: QuotaKey) -> TransitionSpec:
        return transition_spec(self.policy, key)
