"""A scheduling cycle's decisions as plain, comparable data (for the differential check and benches)."""

from __future__ import annotations

from typing import Any

from fairshare.scheduler.types import CycleResult


def cycle_repr(result: CycleResult) -> list[Any]:
    """A cycle's decisions as plain, comparable data (every field that carries a decision or its words)."""
    out: list[Any] = []
    for a in result.admissions:
        out.append(
            ("admit", a.key, a.cluster_queue, a.flavors, sorted(a.usage.items()), a.assignment.borrowing,
             sorted(a.info.usage.items()), a.info.quota_reserved_time)
        )
    for p in result.preemptions:
        out.append(("preempt", p.victim, p.victim_cluster_queue, str(p.reason), p.preemptor,
                    p.preemptor_cluster_queue))
    for o in result.outcomes:
        asg = o.assignment
        out.append(
            ("outcome", o.key, o.cluster_queue, str(o.status), o.reason, o.requeue_immediately,
             o.pending_preemption, o.requeue_reason, [(t.key, str(t.reason)) for t in o.targets],
             sorted(o.reserved.items()),
             None if asg is None
             else (int(asg.mode), asg.borrowing, asg.flavors(), sorted(asg.usage.items()), asg.message()))
        )
    return out
