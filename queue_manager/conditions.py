"""QuotaPolicy status conditions (metav1.Condition semantics, pure, typed)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from fairshare.policy.status import Condition
from fairshare.timestamps import rfc3339

READY = "Ready"
TRANSITIONING = "Transitioning"
DEGRADED = "Degraded"
STRANDED = "CapacityStranded"  # quota the policy takes from a cohort and gives to no team
BUDGET = "BudgetThresholdReached"  # a budget of spec.budgets reached a threshold in its current period


def condition(type_: str, ok: bool, reason: str, message: str, *, generation: int | None,
              now: float, previous: Sequence[Condition] = ()) -> Condition:
    """A condition; lastTransitionTime moves only when the status flips (as apimachinery's
    meta.SetStatusCondition does)."""
    status: Literal["True", "False"] = "True" if ok else "False"
    since = rfc3339(now)
    for old in previous:
        if old.type == type_ and old.status == status and old.last_transition_time:
            since = old.last_transition_time
    return Condition(type=type_, status=status, reason=reason, message=message[:32768],
                     last_transition_time=since, observed_generation=generation)


def merge_conditions(previous: Sequence[Condition], updates: Sequence[Condition]) -> list[Condition]:
    """Previous conditions with `updates` replacing those of the same type, sorted by type."""
    by_type = {c.type: c for c in previous}
    for c in updates:
        by_type[c.type] = c
    return [by_type[t] for t in sorted(by_type)]
