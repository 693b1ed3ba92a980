"""Audit records: every change the operator makes, with what, why and which policy
generation asked for it. Each record becomes one log line and one Kubernetes Event. The kinds of change
are the controller's (`fairshare.control.AuditAction`), so the simulator, the operator and the ledger
name them alike."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fairshare.control import AuditAction

from .logs import FIELDS_ATTR
from .refs import ObjectRef

if TYPE_CHECKING:
    from ledger.records import QuotaChange

# Event reasons are CamelCase by Kubernetes convention (kubectl describe shows them).
_EVENT_REASON = {
    AuditAction.APPLY: "Applied",
    AuditAction.PRUNE: "Pruned",
    AuditAction.DRIFT: "DriftCorrected",
    AuditAction.TRANSITION_START: "TransitionStarted",
    AuditAction.TRANSITION_STEP: "TransitionStep",
    AuditAction.TRANSITION_DONE: "TransitionFinished",
    AuditAction.TRANSITION_WAIT: "TransitionWaiting",
    AuditAction.TRANSITION_CANCEL: "TransitionCancelled",
    AuditAction.TRANSITION_BLOCKED: "TransitionBlocked",
    AuditAction.TRANSITION_DEADLINE: "TransitionDeadlinePassed",
    AuditAction.CAPACITY_STRANDED: "CapacityStranded",
    AuditAction.PREEMPT: "PreemptionRequested",
    AuditAction.PREEMPT_DRY_RUN: "PreemptionDryRun",
    AuditAction.PREEMPT_VERIFIED: "PreemptionVerified",
    AuditAction.PREEMPT_OVERDUE: "PreemptionOverdue",
    AuditAction.REACTIVATED: "VictimReactivated",
    AuditAction.PREEMPT_BLOCKED: "PreemptionBlocked",
    AuditAction.POLICY_REJECTED: "PolicyRejected",
    AuditAction.WEIGHTS_PUSHED: "FairSharingWeightsPushed",
    AuditAction.BUDGET_CROSSED: "BudgetThresholdCrossed",
    AuditAction.BUDGET_LIFTED: "BudgetEnforcementLifted",
    AuditAction.QUEUES_HELD: "LocalQueuesHeld",
    AuditAction.QUEUES_RELEASED: "LocalQueuesReleased",
    AuditAction.WORKLOAD_HELD: "WorkloadHeld",
    AuditAction.STORM: "EvictionStorm",
    AuditAction.WEIGHTS_HELD: "WeightsHeld",
    AuditAction.IDLE_WARNED: "IdleGPUsWarning",
    AuditAction.IDLE_CLEARED: "IdleGPUsCleared",
    AuditAction.IDLE_BLOCKED: "IdleReclaimBlocked",
}
_WARNING_ACTIONS = frozenset({
    AuditAction.DRIFT, AuditAction.PREEMPT, AuditAction.PREEMPT_BLOCKED, AuditAction.PREEMPT_OVERDUE,
    AuditAction.POLICY_REJECTED, AuditAction.TRANSITION_BLOCKED, AuditAction.CAPACITY_STRANDED,
    AuditAction.TRANSITION_DEADLINE, AuditAction.STORM, AuditAction.WEIGHTS_HELD, AuditAction.IDLE_WARNED})


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One change: `what` happened to `target`, `why`, on behalf of policy@generation."""

    action: AuditAction
    target: ObjectRef
    what: str
    why: str
    policy: str
    generation: int | None

    @property
    def event_reason(self) -> str:
        return _EVENT_REASON[self.action]

    @property
    def event_type(self) -> str:
        return "Warning" if self.action in _WARNING_ACTIONS else "Normal"

    def message(self) -> str:
        """The Event message: what, then why, then the policy generation (<= 1 KiB)."""
        gen = "?" if self.generation is None else str(self.generation)
        text = f"{self.what}; why: {self.why}; policy {self.policy} generation {gen}"
        return text if len(text) <= 1024 else text[:1021] + "..."

    def fields(self) -> dict[str, Any]:
        return {
            "audit": True,
            "action": str(self.action),
            "target": self.target.describe(),
            "what": self.what,
            "why": self.why,
            "policy": self.policy,
            "policyGeneration": self.generation,
        }


def log_audit(logger: logging.Logger, record: AuditRecord) -> None:
    level = logging.WARNING if record.event_type == "Warning" else logging.INFO
    logger.log(level, "%s: %s (%s)", record.action, record.what, record.why,
               extra={FIELDS_ATTR: record.fields()})


@dataclass(frozen=True)
class Fact:
    """A fact to report (Actuator.audit_all): audit()'s arguments; `once` names it (reported once)."""

    action: AuditAction
    target: ObjectRef
    what: str
    why: str
    once: str
    quotas: Sequence[QuotaChange] = ()
