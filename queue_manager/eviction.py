"""How the operator asks Kueue to evict a Workload (pure builders).

Default: the way Kueue's own preemptor does it (pkg/scheduler/preemption/preemption.go
IssuePreemptions -> pkg/workload/evict/evict.go Evict): set the `Evicted` condition
(reason `Preempted`, our explanation as the message) through the Workload status
subresource. Kueue's job reconciler then suspends the job, clears the quota
reservation and requeues the workload, which stays active and is admitted again later.
Alternative (`deactivate`): `spec.active=false`; Kueue evicts with reason Deactivated
and does NOT requeue until someone reactivates it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .events import rfc3339
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
    generation: int  # the Workload's metadata.generation (condition.observedGeneration)


def evicted_condition_apply(req: EvictionRequest, *, now: float) -> dict[str, Any]:
    """Server-side-apply body for the Workload status subresource: only our condition
    (conditions is a list-map keyed by type, so Kueue's other conditions stay)."""
    message = req.message if len(req.message) <= MAX_MESSAGE else req.message[: MAX_MESSAGE - 3] + "..."
    return {
        "apiVersion": WORKLOAD.api_version,
        "kind": WORKLOAD.kind,
        "metadata": {"name": req.name, "namespace": req.namespace},
        "status": {"conditions": [{
            "type": EVICTED,
            "status": "True",
            "reason": PREEMPTED_REASON,
            "message": message,
            "lastTransitionTime": rfc3339(now),
            "observedGeneration": req.generation,
        }]},
    }


def deactivate_patch() -> dict[str, Any]:
    """JSON merge patch for the Workload spec."""
    return {"spec": {"active": False}}
