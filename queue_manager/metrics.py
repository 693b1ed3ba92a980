"""Prometheus metrics of the operator: the names here are a public contract.

docs/operator.md lists them; manifests/monitoring (dashboard, PrometheusRule) is written
against them, so renaming one is a breaking change. One `Metrics` object per process,
with its own registry (no module globals), created by `Operator`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ledger.metrics import LedgerMetrics

# Decisions are fast (pure core) but span several orders of magnitude with cluster size.
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass
class Metrics:
    """Every series the operator exports. Quantities are exported in whole units
    (GPUs, cores, bytes); accounting inside stays in exact milli-units."""

    registry: CollectorRegistry = field(default_factory=lambda: CollectorRegistry(auto_describe=True))

    def __post_init__(self) -> None:
        r = self.registry
        self.fair_share = Gauge(
            "qm_fair_share_factor", "History-based fair-share factor of a node of the usage graph (0..1].",
            ["policy", "node"], registry=r)
        self.level_fair_share = Gauge(
            "qm_level_fair_share", "Fair Tree level fair share S/U of a node among its siblings "
            "(+Inf exported as a large number when the node has no usage).", ["policy", "node"], registry=r)
        self.decayed_usage = Gauge(
            "qm_decayed_usage_resource_seconds", "Decayed usage of a node per flavor and resource.",
            ["policy", "node", "flavor", "resource"], registry=r)
        self.quota_current = Gauge(
            "qm_quota_current", "nominalQuota applied to the ClusterQueue now.",
            ["policy", "cluster_queue", "flavor", "resource"], registry=r)
        self.quota_target = Gauge(
            "qm_quota_target", "nominalQuota the policy asks for (end of the transition).",
            ["policy", "cluster_queue", "flavor", "resource"], registry=r)
        self.transition_progress = Gauge(
            "qm_transition_progress_ratio", "Steps applied / steps planned (1 = done).",
            ["policy", "cluster_queue", "flavor", "resource"], registry=r)
        self.transition_waiting_drain = Gauge(
            "qm_transition_waiting_for_drain", "1 while the next step waits for running work to finish.",
            ["policy", "cluster_queue", "flavor", "resource"], registry=r)
        self.transition_last_step_time = Gauge(
            "qm_transition_last_step_timestamp_seconds", "Unix time of the last applied step.",
            ["policy", "cluster_queue", "flavor", "resource"], registry=r)
        # "Transition stuck" is relative to the transition's own schedule (manifests/monitoring): a step due
        # more than a step interval ago that is not applied, whatever the interval (10s or 24h).
        self.transition_step_interval = Gauge(
            "qm_transition_step_interval_seconds", "Step interval of the transition's plan.",
            ["policy", "cluster_queue", "flavor", "resource"], registry=r)
        self.transition_next_step_time = Gauge(
            "qm_transition_next_step_timestamp_seconds", "Unix time the next step is due (0: none to come).",
            ["policy", "cluster_queue", "flavor", "resource"], registry=r)
        self.stranded_quota = Gauge(
            "qm_stranded_quota", "Quota a policy change takes from a cohort and gives to no team (units).",
            ["policy", "cohort", "flavor", "resource"], registry=r)
        self.transitions_active = Gauge(
            "qm_transitions_active", "Transitions not finished yet.", ["policy"], registry=r)
        self.transition_steps = Counter(
            "qm_transition_steps_applied_total", "Transition steps applied.", ["policy", "cluster_queue"],
            registry=r)
        self.preemptions = Counter(
            "qm_preemptions_total", "Eviction requests (mode=enforced) or would-be evictions (mode=dry-run).",
            ["policy", "reason", "mode"], registry=r)
        self.preemptions_verified = Counter(
            "qm_preemptions_verified_total", "Eviction requests Kueue carried out (evicted and requeued).",
            ["policy"], registry=r)
        self.preemption_blocked = Counter(
            "qm_preemption_blocked_total", "Protected workloads starved but no valid victim set "
            "(reason=budget|protected|too-young|no-set).", ["policy", "reason"], registry=r)
        self.preemption_budget_remaining = Gauge(
            "qm_preemption_budget_remaining", "Victims still allowed in the current budget window.",
            ["policy"], registry=r)
        self.pending_protected = Gauge(
            "qm_pending_protected_workloads", "Protected workloads without quota reservation.",
            ["policy", "cluster_queue"], registry=r)
        # Alert rules join this to qm_oldest_pending_workload_age_seconds instead of naming a class.
        self.protected_class = Gauge(
            "qm_protected_priority_class", "1 for each priority class the policy protects "
            "(spec.preemption.protectedClasses).", ["policy", "priority_class"], registry=r)
        self.oldest_pending_age = Gauge(
            "qm_oldest_pending_workload_age_seconds", "Age of the oldest workload without quota reservation.",
            ["policy", "cluster_queue", "priority_class"], registry=r)
        self.decision_latency = Histogram(
            "qm_decision_latency_seconds", "Time to take one decision (render, transition, preemption).",
            ["decision"], buckets=_LATENCY_BUCKETS, registry=r)
        self.reconcile_seconds = Histogram(
            "qm_reconcile_seconds", "Time one reconcile spends in each phase: view (reading the watch "
            "cache, the ledger and Prometheus), observe and decide (the core), apply (writes, Events, "
            "status).",
            ["phase"], buckets=_LATENCY_BUCKETS, registry=r)
        self.ticks_skipped = Counter(
            "qm_ticks_skipped_total", "Ticks not reconciled: a reconcile of the policy was running (own), "
            "or another policy's tick held the process's turn (turn); the next tick covers it.",
            ["policy", "reason"], registry=r)
        self.reconcile_errors = Counter(
            "qm_reconcile_errors_total", "Handler runs that failed (retried).", ["handler"], registry=r)
        self.drift_corrections = Counter(
            "qm_drift_corrections_total", "Hand edits of owned Kueue objects reverted.", ["kind"], registry=r)
        self.audit_records = Counter(
            "qm_audit_records_total", "Audit records emitted (one per change).", ["action"], registry=r)
        self.policy_generation = Gauge(
            "qm_policy_observed_generation", "Last QuotaPolicy generation reconciled.", ["policy"],
            registry=r)
        # A policy the operator cannot serve (an exception while observing or deciding, an object the API
        # server or a webhook refuses): 1 under the reason of its Degraded condition while it lasts.
        self.policy_degraded = Gauge(
            "qm_policy_degraded", "1 while a policy cannot be served (reason=ReconcileFailed|ApplyRefused), "
            "as its Degraded condition says.", ["policy", "reason"], registry=r)
        self.policy_valid = Gauge(
            "qm_policy_valid", "1 when the policy parsed and rendered, 0 when it was rejected.",
            ["policy"], registry=r)
        self.workloads_tracked = Gauge(
            "qm_workloads_tracked", "Kueue Workloads in the operator's cache.", registry=r)
        self.history_persist_time = Gauge(
            "qm_history_persisted_timestamp_seconds", "Unix time history was last written to status.",
            ["policy"], registry=r)
        self.leader = Gauge(
            "qm_leader", "1 when this replica holds the leader-election Lease and reconciles, 0 while it "
            "stands by (queue_manager/leader.py).", registry=r)
        # What the controller's model of Kueue follows (queue_manager/kueue_config.py).
        self.kueue_fair_sharing = Gauge(
            "qm_kueue_fair_sharing", "1 when the controller models Kueue with fair sharing, 0 without.",
            registry=r)
        self.kueue_configuration_known = Gauge(
            "qm_kueue_configuration_known", "1 when the fair-sharing setting modelled is Kueue's as read "
            "(or given by --kueue-fair-sharing), 0 when its Configuration could not be read.", registry=r)
        # The ledger (ledger/metrics.py: resource-hours and cost of ended attempts, the spool) and budgets
        # (fairshare/control/budgets.py: the figures enforcement uses, from status.budgets).
        self.ledger = LedgerMetrics(r)
        self.budget_used_ratio = Gauge(
            "qm_budget_used_ratio", "Consumption of a budget in its current period / its limit (1 = all).",
            ["policy", "budget", "team"], registry=r)
        self.budget_used = Gauge(
            "qm_budget_used", "Consumption of a budget in its current period, in its unit.",
            ["policy", "budget", "unit"], registry=r)
        self.budget_limit = Gauge(
            "qm_budget_limit", "The limit of a budget per period, in its unit.", ["policy", "budget", "unit"],
            registry=r)
        self.budget_enforcing = Gauge(
            "qm_budget_enforcing", "1 while a budget's action (shrink, deprioritize, hold) is in force.",
            ["policy", "budget", "team", "action"], registry=r)
        # Eviction storms (fairshare.control.storms): repeated preempt -> re-admit cycles, seen by the
        # controller from the Workloads' evictions, and what it does about them (storm_response.py).
        self.eviction_storms = Counter(
            "qm_eviction_storms_total", "Eviction storms seen (a workload evicted 5 times in 2 minutes, or "
            "the same preemptor evicting the same victims 3 times), by the controller's response.",
            ["policy", "response"], registry=r)
        self.eviction_storm = Gauge(
            "qm_eviction_storm", "1 while the controller's response to an eviction storm is in force (status."
            "storms), per preemptor (or first victim) and response.", ["policy", "workload", "response"],
            registry=r)
        # Forecasts of transitions (queue_manager/forecast.py): how far the simulator was from what happened.
        self.forecast_error = Gauge(
            "qm_forecast_error_ratio", "Of the latest scored forecast: |observed - predicted| / "
            "max(|predicted|, ci95) per metric (0 = exact).", ["policy", "metric"], registry=r)
        # Idle GPUs (spec.idle; queue_manager/telemetry.py reads, fairshare/control/idle.py decides).
        self.telemetry_up = Gauge(
            "qm_telemetry_up", "1 when the last reading of the GPUs' activity from Prometheus succeeded, 0 "
            "when "
            "it failed (every workload's activity is then unknown).", ["policy"], registry=r)
        self.telemetry_read_time = Gauge(
            "qm_telemetry_last_read_timestamp_seconds", "Unix time of the last successful reading of the "
            "GPUs' "
            "activity.", ["policy"], registry=r)
        self.telemetry_series = Gauge(
            "qm_telemetry_series", "GPU series (one per GPU of a pod) of the policy's workloads in the last "
            "reading.", ["policy"], registry=r)
        self.telemetry_query = Histogram(
            "qm_telemetry_query_seconds", "Wall time of one Prometheus query of the GPUs' activity.",
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30), registry=r)
        self.gpu_activity = Gauge(
            "qm_gpu_activity_workloads", "Experiments holding GPUs by the rule's verdict on their activity "
            "(state=idle|busy|unknown).", ["policy", "state"], registry=r)
        self.idle_warned = Gauge(
            "qm_idle_workloads_warned", "Experiments warned for idle GPUs and not reclaimed yet.", ["policy"],
            registry=r)
        self.idle_warnings = Counter(
            "qm_idle_warnings_total", "Idle-GPU warnings (mode=enforced|dry-run).", ["policy", "mode"],
            registry=r)
        # For dashboards: DCGM's series carry a namespace, not a team; join on this.
        self.namespace_team = Gauge(
            "qm_namespace_team", "1 for each namespace of a team of the policy (join DCGM series on "
            "namespace "
            "to get the team).", ["policy", "namespace", "team"], registry=r)
        self.forecast_duration = Histogram(
            "qm_forecast_duration_seconds", "Wall time of a forecast (simulation) or of its scoring.",
            ["kind"], buckets=(0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800), registry=r)


# The names above, for docs and tests (a test checks this list against the registry).
METRIC_NAMES = (
    "qm_fair_share_factor", "qm_level_fair_share", "qm_decayed_usage_resource_seconds", "qm_quota_current",
    "qm_quota_target", "qm_transition_progress_ratio", "qm_transition_waiting_for_drain",
    "qm_transition_last_step_timestamp_seconds", "qm_transition_step_interval_seconds",
    "qm_transition_next_step_timestamp_seconds", "qm_stranded_quota", "qm_transitions_active",
    "qm_transition_steps_applied_total",
    "qm_preemptions_total", "qm_preemptions_verified_total", "qm_preemption_blocked_total",
    "qm_preemption_budget_remaining", "qm_pending_protected_workloads",
    "qm_protected_priority_class", "qm_oldest_pending_workload_age_seconds",
    "qm_decision_latency_seconds", "qm_reconcile_seconds", "qm_reconcile_errors_total",
    "qm_ticks_skipped_total", "qm_drift_corrections_total",
    "qm_audit_records_total", "qm_policy_observed_generation", "qm_policy_degraded", "qm_policy_valid",
    "qm_workloads_tracked",
    "qm_history_persisted_timestamp_seconds", "qm_leader", "qm_kueue_fair_sharing",
    "qm_kueue_configuration_known",
    "qm_resource_hours_total", "qm_cost_total", "qm_ledger_spooled_records", "qm_ledger_database_up",
    "qm_budget_used_ratio", "qm_budget_used", "qm_budget_limit", "qm_budget_enforcing",
    "qm_forecast_error_ratio", "qm_forecast_duration_seconds", "qm_eviction_storms_total",
    "qm_eviction_storm",
    "qm_telemetry_up", "qm_telemetry_last_read_timestamp_seconds", "qm_telemetry_series",
    "qm_telemetry_query_seconds", "qm_gpu_activity_workloads", "qm_idle_workloads_warned",
    "qm_idle_warnings_total", "qm_namespace_team",
)
