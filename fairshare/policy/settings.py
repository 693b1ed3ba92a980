"""Frozen, unit-resolved views of a QuotaPolicy for the planners, the operator and the simulator.

Durations are float seconds, quantities exact milli-units; nothing here parses text again on a hot path.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import QuotaPolicy
from .semantics import merge_transition
from .units import duration_seconds, to_milli


@dataclass(frozen=True, slots=True)
class TransitionSettings:
    """Effective transition rule of one team (defaults merged with its override)."""

    duration_s: float
    step_interval_s: float
    curve: str  # "linear" | "geometric" | "immediate"
    floor_milli: tuple[tuple[str, int], ...]  # (resource, milli-units), sorted by resource
    drain: bool
    deadline_s: float | None
    max_victims_per_hour: int
    ramp_up: bool

    def floor_for(self, resource: str) -> int:
        """The floor of a resource in milli-units (0 if none)."""
        return dict(self.floor_milli).get(resource, 0)


@dataclass(frozen=True, slots=True)
class PreemptionSettings:
    """Experiment preemption rules."""

    experiment_priority_threshold: int | None
    experiment_classes: frozenset[str]
    protected_classes: frozenset[str]
    min_runtime_s: float
    starvation_grace_s: float
    victim_hold_s: float
    max_victims: int
    window_s: float
    dry_run: bool
    max_lost_milli_hours: tuple[tuple[str, int], ...] = ()  # (resource, milli-units x hours), sorted
    max_evictions_per_workload: int = 3
    hold_competing_experiments: bool = True

    def is_experiment(self, priority: int, priority_class: str | None) -> bool:
        """A workload is an experiment if its class is marked so or its priority is below the threshold."""
        if priority_class is not None and priority_class in self.experiment_classes:
            return True
        threshold = self.experiment_priority_threshold
        return threshold is not None and priority < threshold


@dataclass(frozen=True, slots=True)
class IdleSettings:
    """Idle-GPU reclamation (spec.idle), units resolved."""

    enabled: bool
    dry_run: bool
    metric: str
    resource: str
    threshold_percent: float
    window_s: float
    grace_s: float
    scrape_interval_s: float
    stale_s: float  # staleAfterScrapes x scrapeInterval
    keep_max_s: float
    max_victims: int
    budget_window_s: float
    prometheus_url: str | None
    timeout_s: float


def idle_settings(policy: QuotaPolicy) -> IdleSettings:
    """The policy's idle-GPU reclamation rules."""
    i = policy.spec.idle
    scrape = float(duration_seconds(i.scrape_interval))
    return IdleSettings(
        enabled=i.enabled,
        dry_run=i.dry_run,
        metric=i.metric,
        resource=i.resource,
        threshold_percent=float(i.threshold_percent),
        window_s=float(duration_seconds(i.window)),
        grace_s=float(duration_seconds(i.grace)),
        scrape_interval_s=scrape,
        stale_s=scrape * i.stale_after_scrapes,
        keep_max_s=float(duration_seconds(i.keep.max_duration)),
        max_victims=i.budget.max_victims,
        budget_window_s=float(duration_seconds(i.budget.window)),
        prometheus_url=i.prometheus.url,
        timeout_s=float(duration_seconds(i.prometheus.timeout)),
    )


def transition_settings(policy: QuotaPolicy, team: str) -> TransitionSettings:
    """Effective transition settings of a team (KeyError if the policy has no such team)."""
    by_name = {t.name: t for t in policy.spec.teams}
    merged = merge_transition(policy.spec.transitions.defaults, by_name[team].transition)
    return TransitionSettings(
        duration_s=float(duration_seconds(merged.duration)),
        step_interval_s=float(duration_seconds(merged.step_interval)),
        curve=merged.curve,
        floor_milli=tuple(sorted((r, to_milli(q)) for r, q in merged.floor.items())),
        drain=merged.drain,
        deadline_s=None if merged.deadline is None else float(duration_seconds(merged.deadline)),
        max_victims_per_hour=merged.max_victims_per_hour,
        ramp_up=merged.ramp_up,
    )


def preemption_settings(policy: QuotaPolicy) -> PreemptionSettings:
    """The policy's experiment preemption rules."""
    p = policy.spec.preemption
    return PreemptionSettings(
        experiment_priority_threshold=p.experiment_priority_threshold,
        experiment_classes=frozenset(c.name for c in policy.spec.priority_classes if c.experiment),
        protected_classes=frozenset(p.protected_classes),
        min_runtime_s=float(duration_seconds(p.min_runtime)),
        starvation_grace_s=float(duration_seconds(p.starvation_grace)),
        victim_hold_s=float(duration_seconds(p.victim_hold)),
        max_victims=p.budget.max_victims,
        window_s=float(duration_seconds(p.budget.window)),
        dry_run=p.dry_run,
        max_lost_milli_hours=tuple(sorted((r, to_milli(q)) for r, q in p.budget.max_lost_hours.items())),
        max_evictions_per_workload=p.max_evictions_per_workload,
        hold_competing_experiments=p.hold_competing_experiments,
    )


def half_life_seconds(policy: QuotaPolicy) -> float:
    """Half-life of the usage history, in seconds."""
    return float(duration_seconds(policy.spec.fair_share.half_life))


def priority_values(policy: QuotaPolicy) -> dict[str, int]:
    """Value of every priority class of the policy, by name."""
    return {c.name: c.value for c in policy.spec.priority_classes}
