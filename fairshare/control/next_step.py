"""What the policy's transitions wait for, in one line: `status.nextStep`, the NEXT STEP column of
`kubectl get qp` beside PHASE (fairshare.policy.status.policy_phase).

The most pressing transition is described, in PHASE's order (Blocked, Preempting, Draining, Running,
Borrowing), with the time it waits for in RFC 3339 UTC:

- Running: its next step and when (`step 2/3 to 2 GPUs at T`), and its deadline if it has one; a paired
  receiver: what its givers have freed so far;
- Draining: how much running work must finish before the due step, held by which workloads, and the
  deadline after which it is cut (or that there is none);
- Preempting: what the team holds above what it may hold at all, evicted within maxVictimsPerHour since
  the deadline;
- Borrowing: what the team borrows above its new quota, kept until another team's pending work needs it;
- Blocked: why.

Pure: it reads the transition records, the observed snapshot (who holds the quota) and `now`.
"""

from __future__ import annotations

from collections.abc import Sequence

from fairshare.models import ClusterQueueName, FlavorResource, QuotaKey
from fairshare.policy.status import TransitionPhase, TransitionStatus
from fairshare.quantity import describe_quantity
from fairshare.snapshot import Snapshot
from fairshare.timestamps import rfc3339

from .transitions import _stored, _value

_ORDER = {
    TransitionPhase.BLOCKED: 0,
    TransitionPhase.PREEMPTING: 1,
    TransitionPhase.DRAINING: 2,
    TransitionPhase.RUNNING: 3,
    TransitionPhase.BORROWING: 4,
}
NAMES_SHOWN = 3  # holders named in a drain; the others counted


def next_step(transitions: Sequence[TransitionStatus], snapshot: Snapshot | None, now: float) -> str | None:
    """The NEXT STEP text (None: no transition in progress)."""
    active = [t for t in transitions if t.phase in _ORDER]
    if not active:
        return None
    # Most pressing first; among equals, one with a step of its own to come (a paired receiver only
    # follows its givers), the earliest.
    t = min(active, key=lambda x: (_ORDER[x.phase or TransitionPhase.RUNNING], x.next_step_at is None,
                                   x.next_step_at or "", x.team, x.flavor, x.resource))
    text = f"{t.team} {t.flavor}/{t.resource}: {_describe(t, snapshot, now)}"
    if len(active) > 1:
        text += f" (+{len(active) - 1} more in progress)"
    return text


def _describe(t: TransitionStatus, snapshot: Snapshot | None, now: float) -> str:
    r = t.resource
    key = QuotaKey.of(ClusterQueueName(t.team), t.flavor, r)
    deadline = t.deadline_at
    if t.phase == TransitionPhase.BLOCKED:
        return f"blocked: {t.message or 'the transition cannot be planned'}"
    if t.phase in (TransitionPhase.PREEMPTING, TransitionPhase.BORROWING):
        passed = f"; deadline passed at {deadline}" if deadline else ""
        return f"{t.message or 'past its deadline'}{passed}"
    stored = _stored([t]).get(key)
    plan = stored.plan if stored is not None else None
    if t.phase == TransitionPhase.DRAINING:
        due_text = f"deadline {deadline}: then it is cut" if deadline else "no deadline: it waits for them"
        if plan is None or snapshot is None:
            return f"{t.message or 'waits for running work to drain'}; {due_text}"
        due = plan.due_step(now)
        scheduled = _value(plan.steps[max(due, 0)].quotas, key)
        holders = _holders(snapshot, t.team, key.flavor_resource)
        held = sum(q for _, q in holders)
        names = [k for k, _ in holders]
        shown = ", ".join(names[:NAMES_SHOWN]) + (f" and {len(names) - NAMES_SHOWN} more"
                                                  if len(names) > NAMES_SHOWN else "")
        drain = describe_quantity(max(0, held - scheduled), r)
        return (f"the step to {describe_quantity(scheduled, r)} waits for {drain} of the "
                f"{describe_quantity(held, r)} held by {shown or 'its workloads'} to drain; {due_text}")
    # Running: a paired receiver follows its givers; a plan of its own steps on schedule.
    if t.pair_group and t.message:
        return t.message
    if plan is None:
        return f"next step at {t.next_step_at}" if t.next_step_at else (t.message or "in progress")
    coming = [s for s in plan.steps if s.at > now]
    total = len(plan.steps) - 1
    parts: list[str] = []
    if coming and t.next_step_at:
        step = coming[0]
        parts.append(f"step {step.index}/{total} to {describe_quantity(_value(step.quotas, key), r)} at "
                     f"{t.next_step_at}")
    elif t.message:
        parts.append(t.message)
    at = plan.deadline_at
    if at is not None and at > now:
        parts.append(f"deadline {rfc3339(at)}")
    return "; ".join(parts) or "in progress"


def _holders(snapshot: Snapshot, team: str, fr: FlavorResource) -> list[tuple[str, int]]:
    cq = snapshot.cluster_queues.get(ClusterQueueName(team))
    if cq is None:
        return []
    return sorted((k, w.usage.get(fr, 0)) for k, w in cq.workloads.items() if w.usage.get(fr, 0) > 0)
