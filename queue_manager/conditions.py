"""QuotaPolicy status conditions (metav1.Condition semantics, pure)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .events import rfc3339

READY = "Ready"
TRANSITIONING = "Transitioning"
DEGRADED = "Degraded"


def condition(type_: str, ok: bool, reason: str, message: str, *, generation: int | None,
              now: float, previous: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """A condition; lastTransitionTime moves only when the status flips (as
    apimachinery's meta.SetStatusCondition does)."""
    status = "True" if ok else "False"
    since = rfc3339(now)
    for old in previous:
        if old.get("type") == type_ and old.get("status") == status and old.get("lastTransitionTime"):
            since = str(old["lastTransitionTime"])
    out: dict[str, Any] = {"type": type_, "status": status, "reason": reason, "message": message[:32768],
                           "lastTransitionTime": since}
    if generation is not None:
        out["observedGeneration"] = generation
    return out


def merge_conditions(previous: Sequence[dict[str, Any]],
                     updates: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Previous conditions with `updates` replacing those of the same type, sorted by type."""
    by_type = {str(c.get("type")): c for c in previous}
    for c in updates:
        by_type[str(c["type"])] = c
    return [by_type[t] for t in sorted(by_type)]
