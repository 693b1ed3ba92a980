"""Experiment preemption glue: live state -> the core's planner -> eviction requests, and
the bookkeeping that proves Kueue acted (pure helpers; the operator does the writes).

Records of every request live in QuotaPolicy status.lastPreemptions, so the victim budget
and the verify/requeue follow-up survive a restart. States of a record:
Requested (we deactivated the victim) -> Evicted (Kueue released its quota) ->
Reactivated (the beneficiary got in; we set spec.active=true) -> Requeued (Kueue requeued
it). Dry-run records are only reported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from fairshare.manifests import parse_manifests
from fairshare.models import ClusterState, Workload
from fairshare.planners.budget import VictimBudget
from fairshare.planners.experiments import ExperimentPolicy
from fairshare.policy import QuotaPolicy, preemption_settings, priority_values

REQUESTED, EVICTED, REACTIVATED, REQUEUED, GONE, REPORTED = (
    "Requested", "Evicted", "Reactivated", "Requeued", "Gone", "Reported")
MAX_RECORDS = 50
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def experiment_policy(policy: QuotaPolicy, dry_run_override: bool | None) -> ExperimentPolicy | None:
    """The planner's view of `spec.preemption` (None: no protected class, nothing to do)."""
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
    dry_run = ps.dry_run if dry_run_override is None else dry_run_override
    return ExperimentPolicy(
        experiment_below_priority=min(below, protected_priority), protected_priority=protected_priority,
        protected_priority_classes=frozenset(ps.protected_classes), min_runtime=ps.min_runtime_s,
        budget=VictimBudget(ps.max_victims, ps.window_s), dry_run=dry_run)


def policy_state(rendered: Sequence[Mapping[str, Any]], workloads: Mapping[str, Workload]) -> ClusterState:
    """The Kueue objects the policy renders plus the Workloads in its queues: what the
    planner's snapshot is built from (namespaces carry the name label Kubernetes sets)."""
    state = parse_manifests([dict(m) for m in rendered], check_references=False)
    cqs = set(state.cluster_queues)
    mine = {k: w for k, w in workloads.items()
            if w.local_queue_key in state.local_queues
            or (w.admission is not None and w.admission.cluster_queue in cqs)}
    namespaces = {w.namespace for w in mine.values()} | {lq.split("/", 1)[0] for lq in state.local_queues}
    labels = {ns: {NAMESPACE_NAME_LABEL: ns} for ns in sorted(namespaces)}
    return dataclasses.replace(state, workloads=mine, namespace_labels=labels)


EXPERIMENT_KIND = "starved-protected-work"
TRANSITION_KIND = "transition-deadline"


def past_preemption_times(records: Sequence[Mapping[str, Any]], *, kind: str) -> list[float]:
    """Times of real (not dry-run) preemptions of one kind: the two budgets are separate
    (spec.preemption.budget vs a transition's maxVictimsPerHour)."""
    return sorted(float(r["at"]) for r in records
                  if not r.get("dryRun") and r.get("kind", EXPERIMENT_KIND) == kind
                  and isinstance(r.get("at"), int | float))


def in_flight(records: Sequence[Mapping[str, Any]]) -> bool:
    """An eviction we asked for that Kueue has not carried out yet: plan nothing more until
    it has (the snapshot would still count the victim)."""
    return any(r.get("state") == REQUESTED and not r.get("dryRun") for r in records)


def already_reported(records: Sequence[Mapping[str, Any]], victim: str, beneficiary: str) -> bool:
    return any(r.get("dryRun") and r.get("victim") == victim and r.get("beneficiary") == beneficiary
               for r in records)


def holds_quota(wl: Workload | None) -> bool:
    return wl is not None and wl.has_quota_reservation and not wl.is_finished


def condition_true(wl: Workload | None, type_: str) -> bool:
    cond = wl.condition(type_) if wl is not None else None
    return cond is not None and cond.status


def trim(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return records[-MAX_RECORDS:]
