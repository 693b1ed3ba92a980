"""How the operator asks Kueue to evict a Workload (pure builders).

Default, as settled in docs/controlplane.md ("Decision: the service preempts by
deactivation"): `spec.active=false`. Kueue evicts through its own path (evict.Evict:
Job suspended, quota released, `Evicted` reason Deactivated, its events and metrics) and
does not requeue the victim until we set `spec.active=true` again, which we do once the
beneficiary is admitted; Kueue then requeues it (`Requeued` reason Reactivated). Because
Kueue's Evicted message for a deactivation is fixed, our reason goes into a condition of
our own on the victim (`QueueManagerPreempted`, via the status subresource) and Events.
Alternative kept for completeness: the `Evicted` condition with reason `Preempted`
(what Kueue's own preemptor writes), which Kueue honours and requeues at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from fairshare.timestamps import rfc3339

from .refs import WORKLOAD

EVICTED = "Evicted"
PREEMPTED_REASON = "Preempted"  # kueue.WorkloadEvictedByPreemption
# Kueue truncates condition messages (api.TruncateConditionMessage); the API caps them at 32 KiB.
MAX_MESSAGE = 1024


class EvictionMechanism(StrEnum):
    EVICTED_CONDITION = "evicted-condition"
    DEACTIVATE = "deactivate"


@dataclass(frozen=True, slots=True)
class EvictionRequest:
    namespace: str
    name: str
    message: str  # the planner's one-line reason
    generation: int | None  # the Workload's metadata.generation (condition.observedGeneration)


def _condition_apply(req: EvictionRequest, *, now: float, condition_type: str, reason: str,
                     status: str) -> dict[str, Any]:
    """Server-side-apply body for the Workload status subresource carrying one condition:
    conditions are a list-map keyed by type, so every other condition stays as it is."""
    message = req.message if len(req.message) <= MAX_MESSAGE else req.message[: MAX_MESSAGE - 3] + "..."
    return {
        "apiVersion": WORKLOAD.api_version,
        "kind": WORKLOAD.kind,
        "metadata": {"name": req.name, "namespace": req.namespace},
        "status": {"conditions": [{
            "type": condition_type,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": rfc3339(now),
            **({"observedGeneration": req.generation} if req.generation is not None else {}),
        }]},
    }


def evicted_condition_apply(req: EvictionRequest, *, now: float) -> dict[str, Any]:
    """The Evicted condition as Kueue's own preemptor writes it (the alternative mechanism)."""
    return _condition_apply(req, now=now, condition_type=EVICTED, reason=PREEMPTED_REASON, status="True")


def deactivate_patch() -> dict[str, Any]:
    """JSON merge patch for the Workload spec."""
    return {"spec": {"active": False}}


def reactivate_patch() -> dict[str, Any]:
    return {"spec": {"active": True}}


OUR_CONDITION = "QueueManagerPreempted"


def preempted_condition_apply(req: EvictionRequest, *, now: float, reason: str = "ExperimentPreemption",
                              status: str = "True") -> dict[str, Any]:
    """Our explanation on the victim, as a condition of our own type (Kueue's entries are untouched)."""
    return _condition_apply(req, now=now, condition_type=OUR_CONDITION, reason=reason, status=status)


def annotation_patch(annotations: dict[str, str | None]) -> dict[str, Any]:
    """JSON merge patch of metadata.annotations (None removes one)."""
    return {"metadata": {"annotations": dict(annotations)}}
