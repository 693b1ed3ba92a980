"""Victims of a quota transition past its deadline (DESIGN.md, "Quota transitions").

Before the deadline a shrinking quota waits for running work to drain; after it, the
quota-shift planner allows a bounded number of preemptions (`QuotaAction.preemptions_allowed`)
to free what is still held above the quota in force (`QuotaAction.to_free`). This module
chooses WHICH workloads, so the operator and the simulator make the same choice:

  lowest priority first, then least work lost (most recently admitted), then key,

taken until the excess is freed or the allowance is used. The same preference order as the
experiment-preemption planner after fair share (priority, then least work lost).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fairshare.durations import format_duration
from fairshare.quantity import describe_quantity


@dataclass(frozen=True, slots=True)
class Holder:
    """A workload holding the contested flavor-resource of the shrinking ClusterQueue."""

    key: str  # namespace/name
    priority: int
    admitted_at: float  # QuotaReserved time, seconds since the epoch
    held: int  # milli-units of the contested flavor-resource


@dataclass(frozen=True, slots=True)
class DeadlineVictim:
    key: str
    held: int
    reason: str


def deadline_victims(holders: Iterable[Holder], *, excess: int, allowed: int, now: float,
                     what: str, resource: str) -> list[DeadlineVictim]:
    """The victims, in eviction order; `what` names the transition in the reasons
    (e.g. "transition of ai-frontier-research gpu/nvidia.com/gpu"), amounts of `resource` in its units."""
    ordered = sorted(holders, key=lambda h: (h.priority, -h.admitted_at, h.key))
    out: list[DeadlineVictim] = []
    freed = 0
    for h in ordered:
        if freed >= excess or len(out) >= allowed:
            break
        if h.held <= 0:
            continue
        freed += h.held
        out.append(DeadlineVictim(
            h.key, h.held,
            f"preempt {h.key}: {what} is past its deadline with {describe_quantity(excess, resource)} in use "
            f"above the quota in force; priority {h.priority}, running "
            f"{format_duration(now - h.admitted_at)}; frees {describe_quantity(h.held, resource)}"))
    return out
