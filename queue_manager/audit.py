"""Audit records: every change the operator makes, with what, why and which policy
generation asked for it. Each record becomes one log line and one Kubernetes Event."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .logs import FIELDS_ATTR
from .refs import ObjectRef


class Action(StrEnum):
    APPLY = "apply"  # owned Kueue object created or changed by a policy
    PRUNE = "prune"  # owned object no longer rendered, deleted
    DRIFT = "drift-corrected"  # hand edit of an owned object reverted
    TRANSITION_START = "transition-started"
    TRANSITION_STEP = "transition-step"
    TRANSITION_DONE = "transition-finished"
    TRANSITION_WAIT = "transition-waiting"
    PREEMPT = "preempt"  # eviction requested from Kueue
    PREEMPT_DRY_RUN = "preempt-dry-run"
    PREEMPT_VERIFIED = "preemption-verified"
    PREEMPT_BLOCKED = "preemption-blocked"
    POLICY_REJECTED = "policy-rejected"
    WEIGHTS_PUSHED = "fair-sharing-weights-pushed"


# Event reasons are CamelCase by Kubernetes convention (kubectl describe shows them).
_EVENT_REASON = {
    Action.APPLY: "Applied",
    Action.PRUNE: "Pruned",
    Action.DRIFT: "DriftCorrected",
    Action.TRANSITION_START: "TransitionStarted",
    Action.TRANSITION_STEP: "TransitionStep",
    Action.TRANSITION_DONE: "TransitionFinished",
    Action.TRANSITION_WAIT: "TransitionWaiting",
    Action.PREEMPT: "PreemptionRequested",
    Action.PREEMPT_DRY_RUN: "PreemptionDryRun",
    Action.PREEMPT_VERIFIED: "PreemptionVerified",
    Action.PREEMPT_BLOCKED: "PreemptionBlocked",
    Action.POLICY_REJECTED: "PolicyRejected",
    Action.WEIGHTS_PUSHED: "FairSharingWeightsPushed",
}
_WARNING_ACTIONS = frozenset({Action.DRIFT, Action.PREEMPT, Action.PREEMPT_BLOCKED, Action.POLICY_REJECTED})


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One change: `what` happened to `target`, `why`, on behalf of policy@generation."""

    action: Action
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
