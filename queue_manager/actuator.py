"""Carry out the controller's actions against the cluster (through the one writer) and report each as an
audit record (log line + Event) and metrics. Nothing is decided here: the actions are
`fairshare.control`'s, the bodies are built by the pure builders of this package."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from kubernetes.client.exceptions import ApiException

from fairshare.control import (
    Action,
    AdvanceTransition,
    AuditAction,
    BlockTransition,
    BudgetCrossed,
    BudgetLifted,
    CancelTransition,
    FinishTransition,
    PushWeights,
    Reactivate,
    RecordAudit,
    RequestEviction,
    StartTransition,
    Target,
    WaitForDrain,
)
from fairshare.control.experiments import block_kind
from fairshare.quantity import describe_quantity

from .audit import AuditRecord, log_audit
from .eviction import EvictionMechanism, EvictionRequest
from .metrics import Metrics
from .refs import ObjectRef
from .writer import Writer

if TYPE_CHECKING:
    from .ledger_feed import LedgerFeed

log = logging.getLogger("queue_manager")


class Actuator:
    """Audits and writes for one policy reconcile (`policy`, `generation`, the policy's own ref)."""

    def __init__(self, writer: Writer, metrics: Metrics, policy: str, generation: int | None,
                 policy_ref: ObjectRef, *, ledger: LedgerFeed | None = None,
                 editor: str | None = None) -> None:
        self.writer = writer
        self.metrics = metrics
        self.policy = policy
        self.generation = generation
        self.policy_ref = policy_ref
        self.ledger = ledger  # every audit record is also a ledger row (docs/ledger.md)
        self.editor = editor  # who last edited the policy (its managedFields), for the ledger

    def ref(self, target: Target) -> ObjectRef:
        if target.kind == "QuotaPolicy" and target.name == self.policy:
            return self.policy_ref
        return ObjectRef(kind=target.kind, name=target.name, namespace=target.namespace)

    def audit(self, action: AuditAction, target: ObjectRef, what: str, why: str,
              also_on: ObjectRef | None = None, *, team: str | None = None) -> None:
        """One log line, one ledger row (`team`: the team it concerns, for `qm audit --team`), one Event on
        the target (and optionally on a second object)."""
        record = AuditRecord(action, target, what, why, self.policy, self.generation)
        log_audit(log, record)
        self.metrics.audit_records.labels(str(record.action)).inc()
        if self.ledger is not None:  # before the Events: an API error there must not lose the row
            self.ledger.audit(record, editor=self.editor, team=team)
        self.writer.event(record.target, reason=record.event_reason, message=record.message(),
                          event_type=record.event_type)
        if also_on is not None and also_on != record.target:
            self.writer.event(also_on, reason=record.event_reason, message=record.message(),
                              event_type=record.event_type)

    # --- transitions (reported with the status that records them, before the ClusterQueue changes) ---

    def report_transitions(self, actions: Sequence[Action]) -> None:
        for a in actions:
            if isinstance(a, StartTransition):
                r = a.key.resource
                self.audit(AuditAction.TRANSITION_START, self.policy_ref,
                           f"transition of {a.key.team} {a.key.flavor_resource} from "
                           f"{describe_quantity(a.before, r)} to {describe_quantity(a.target, r)} in "
                           f"{a.steps} step(s)", a.why, team=a.key.team)
            elif isinstance(a, CancelTransition):
                r = a.key.resource
                self.audit(AuditAction.TRANSITION_CANCEL, self.policy_ref,
                           f"transition of {a.key.team} {a.key.flavor_resource} to "
                           f"{describe_quantity(a.old_target, r)} cancelled at "
                           f"{describe_quantity(a.at_value, r)}",
                           f"the policy now asks for {describe_quantity(a.new_target, r)}", team=a.key.team)
            elif isinstance(a, AdvanceTransition):
                r = a.key.resource
                self.metrics.transition_steps.labels(self.policy, a.key.team).inc()
                self.audit(AuditAction.TRANSITION_STEP, ObjectRef("ClusterQueue", a.key.team),
                           f"nominalQuota {a.key.flavor_resource} {describe_quantity(a.before, r)} -> "
                           f"{describe_quantity(a.after, r)} (step {a.step}/{a.total})", a.why,
                           also_on=self.policy_ref, team=a.key.team)
            elif isinstance(a, WaitForDrain):
                self.audit(AuditAction.TRANSITION_WAIT, ObjectRef("ClusterQueue", a.key.team),
                           f"next step of {a.key.flavor_resource} waits", a.why, also_on=self.policy_ref,
                           team=a.key.team)
            elif isinstance(a, FinishTransition):
                self.audit(AuditAction.TRANSITION_DONE, self.policy_ref,
                           f"transition of {a.key.team} {a.key.flavor_resource} finished",
                           "target quota reached", team=a.key.team)
            elif isinstance(a, BlockTransition):
                self.audit(AuditAction.TRANSITION_BLOCKED, self.policy_ref,
                           f"transition of {a.key.team} {a.key.flavor_resource} blocked", a.why,
                           team=a.key.team)

    # --- weights, evictions, records ---------------------------------------------------------------

    def apply_rest(self, actions: Sequence[Action]) -> list[str]:
        """Evictions, reactivations, pushed weights and audit records. An API error on one eviction (e.g.
        a missing RBAC verb) is logged, counted and returned (for the Degraded condition); it does not
        stop the others nor the quota transitions. There is no retry here: the next reconcile (the
        policy's timer) decides again from what it then observes."""
        errors: list[str] = []
        for a in actions:
            if isinstance(a, RequestEviction):
                errors += _isolated(self.metrics, "preemption", functools.partial(self._evict, a))
            elif isinstance(a, Reactivate):
                errors += _isolated(self.metrics, "preemption", functools.partial(self._reactivate, a))
            elif isinstance(a, PushWeights):
                shown = ", ".join(f"{t}={w}" for t, w in sorted(a.weights.items()))
                self.audit(AuditAction.WEIGHTS_PUSHED, self.policy_ref, f"fairSharing weights {shown}", a.why)
            elif isinstance(a, BudgetCrossed):
                target = ObjectRef("ClusterQueue", a.team) if a.team else self.policy_ref
                self.audit(AuditAction.BUDGET_CROSSED, target,
                           f"budget {a.budget} reached {a.percent}% ({a.used} of {a.limit} {a.unit}): "
                           f"{a.action}" + (" (dry-run)" if a.dry_run and a.action != "alert" else ""), a.why,
                           also_on=self.policy_ref, team=a.team)
            elif isinstance(a, BudgetLifted):
                target = ObjectRef("ClusterQueue", a.team) if a.team else self.policy_ref
                self.audit(AuditAction.BUDGET_LIFTED, target, f"budget {a.budget}: {a.action} lifted", a.why,
                           also_on=self.policy_ref, team=a.team)
            elif isinstance(a, RecordAudit):
                self._record(a)
        return errors

    def _evict(self, a: RequestEviction) -> None:
        victim = self.ref(Target.workload(a.victim))
        beneficiary = self.ref(Target.workload(a.beneficiary)) if a.beneficiary else self.policy_ref
        kind = str(a.kind)
        if a.dry_run:
            self.metrics.preemptions.labels(self.policy, kind, "dry-run").inc()
            self.audit(AuditAction.PREEMPT_DRY_RUN, victim, f"would preempt {a.victim}", a.reason,
                       also_on=beneficiary)
            return
        req = EvictionRequest(victim.namespace or "", victim.name, a.reason, None)
        self.writer.request_eviction(req, EvictionMechanism.DEACTIVATE)
        if a.repeat:
            log.info("eviction of %s repeated: recorded but not carried out yet", a.victim)
            return
        try:
            self.writer.explain_preemption(req)
        except ApiException as err:  # the eviction stands; the Event still carries the reason
            log.warning("could not set the preemption condition on %s: %s", a.victim, err.reason)
        self.metrics.preemptions.labels(self.policy, kind, "enforced").inc()
        self.audit(AuditAction.PREEMPT, victim,
                   f"asked Kueue to evict {a.victim} for {a.beneficiary or 'a quota transition'}", a.reason,
                   also_on=beneficiary)

    def _reactivate(self, a: Reactivate) -> None:
        victim = self.ref(Target.workload(a.victim))
        self.writer.reactivate(victim.namespace or "", victim.name)
        self.audit(AuditAction.REACTIVATED, victim, f"reactivated {a.victim}: Kueue requeues it", a.why)

    def _record(self, a: RecordAudit) -> None:
        if a.action == AuditAction.PREEMPT_VERIFIED:
            self.metrics.preemptions_verified.labels(self.policy).inc()
        elif a.action == AuditAction.PREEMPT_BLOCKED:
            self.metrics.preemption_blocked.labels(self.policy, block_kind(a.why)).inc()
        self.audit(a.action, self.ref(a.target), a.what, a.why,
                   also_on=self.ref(a.also_on) if a.also_on is not None else None)


def _isolated(metrics: Metrics, what: str, fn: Callable[[], None]) -> list[str]:
    try:
        fn()
    except ApiException as err:
        metrics.reconcile_errors.labels(what).inc()
        body = err.body.decode(errors="replace") if isinstance(err.body, bytes) else str(err.body or "")
        message = f"{what}: API error {err.status} {err.reason}: {body[:300]}"
        log.error("%s", message)
        return [message]
    return []
