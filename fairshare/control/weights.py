"""Pushing history-adjusted fairSharing weights to Kueue without starting a preemption loop.

Why a push can start a loop (Kueue v0.19.2 fair sharing, keps/1714-fair-sharing; docs/control.md, "Eviction
storms"). A pending workload P of ClusterQueue A that must borrow preempts, in a ClusterQueue B that borrows,
while P's share once admitted stays at most B's share after the victim goes (rule S2-a,
pkg/scheduler/preemption/fairsharing/strategy.go LessThanOrEqualToFinalShare) or below B's share before it
(rule S2-b, LessThanInitialShare, tried on what S2-a left). The victims are requeued at once; the next
cycle's fair-sharing tournament (pkg/scheduler/fair_sharing_iterator.go) orders the heads by the DRS their
ClusterQueue would have with them, lowest first. With w the weights, b the borrowed quota and L what the
cohort can lend (DRS = b·1000/L/w, pkg/cache/scheduler/fair_sharing.go), the loop condition is

    (b_B - freed + r_v) / w_B  <  b_A(with P) / w_A

for the head v of B's queue (often a victim, request r_v), after the victims freed `freed`: B's head wins,
takes back the freed quota, P no longer fits, is parked, and the 1 s batched requeue brings it back to
preempt the same victims. S2-a alone can never make it true (after each removal B's share is at least P's);
a lumpy S2-b victim can, and a weight ratio w_B/w_A pushed up widens the set of states where it holds.

So the controller checks before every push, with the model's own what-if (`loop_under`: Kueue's cycles from
the observed state under the new weights, with its batched requeues, `fairshare.settle.KueueModel.run`, until
it settles or repeats a preempt/admit pattern), that no pending workload starts such a loop; and it paces the
pushes so that weights do not swing: each team's weight moves at most `MAX_STEP_LOG2` doublings per push, a
push is due only when some team's target is `HYSTERESIS_LOG2` doublings or more from the weight in force
(read at most every `CHECK_INTERVAL`), and pushes are at least `MIN_PUSH_INTERVAL` apart. A step that would
start a loop is tried at half its size, then not pushed (reported once; tried again after the interval).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from fairshare.livelock import Livelock
from fairshare.models import ClusterQueueName, PreemptionReason, WorkloadKey
from fairshare.policy import QuotaPolicy, format_milli
from fairshare.policy.status import WeightPush
from fairshare.quantity import parse_quantity
from fairshare.queues import QueueManager
from fairshare.settle import KueueModel
from fairshare.timestamps import rfc3339

from .actions import Action, AuditAction, PushWeights, RecordAudit, Target
from .observed import Observed
from .rules import spec_weights

MIN_PUSH_INTERVAL = 3600.0  # seconds between two pushes
MAX_STEP_LOG2 = 0.5  # a team's weight moves at most x2^(1/2) per push
HYSTERESIS_LOG2 = 0.25  # a push is due when a team's target is 2^(1/4) or more from its weight in force
CHECK_INTERVAL = 900.0  # the history-adjusted target is read at most this often between pushes
LOOP_CHECK_CYCLES = 600  # the what-if's cycles at most (a loop repeats within a few dozen)
WHY_PUSH = "policy weight / historical over-share (Fair Tree), bounded to [1/4, 4]x"


def _log2(milli: int) -> float:
    return math.log2(milli) if milli > 0 else -math.inf


def _toward(current: int, target: int, max_log2: float) -> int:
    """`current` moved toward `target` by at most `max_log2` doublings (0 stays 0: a weight of 0 is the
    policy's, never a history adjustment)."""
    if current <= 0 or target <= 0:
        return target
    step = _log2(target) - _log2(current)
    if abs(step) <= max_log2:
        return target
    return max(1, round(current * 2 ** math.copysign(max_log2, step)))


def loop_under(observed: Observed, weights: Mapping[str, str], now: float,
               max_cycles: int = LOOP_CHECK_CYCLES) -> Livelock | None:
    """The preemption loop Kueue would run from the observed state under `weights` (team -> quantity), or
    None: the model's cycles (fairshare.settle, the code the differential harness checks against the real
    Kueue) over the admitted workloads and every queued pending one, the batched requeues included. A weight
    change requeues every inadmissible workload of the tree (a ClusterQueue update is a cohort event), so
    every pending workload is a head again. A what-if: the snapshot is left as it was."""
    found = _what_if(observed, weights, now, max_cycles, ())
    return found[0] if found is not None else None


@dataclass(frozen=True, slots=True)
class Repeat:
    """Preemptions Kueue would make again for `preemptor` without admitting it (repeat_under)."""

    preemptor: WorkloadKey
    victims: tuple[WorkloadKey, ...]  # the model's, sorted
    loop: bool  # a loop (loop_under's); else rounds that end with the preemptor still pending


def repeat_under(observed: Observed, weights: Mapping[str, str], now: float, preemptors: Collection[str],
                 max_cycles: int = LOOP_CHECK_CYCLES) -> Repeat | None:
    """Whether Kueue's cycles from the observed state under `weights` preempt again for nothing: a loop
    (loop_under), or fair-sharing preemptions for one of `preemptors` that end with it still pending. Kueue's
    loop can also stop by itself after a round or more, the preemptor left pending, when the order of the
    re-admitted victims leaves no preemption set (docs/kueue-fair-sharing-loop.md): those rounds evicted for
    nothing too. None: neither. A what-if, as loop_under."""
    found = _what_if(observed, weights, now, max_cycles, preemptors)
    if found is None:
        return None
    livelock, futile = found
    if livelock is not None and livelock.preemptions:
        first = livelock.preemptions[0].preemptor
        return Repeat(first, tuple(sorted({p.victim for p in livelock.preemptions if p.preemptor == first})),
                      True)
    return futile


def _what_if(observed: Observed, weights: Mapping[str, str], now: float, max_cycles: int,
             preemptors: Collection[str]) -> tuple[Livelock | None, Repeat | None] | None:
    """The model's run from the observed state under `weights`: its livelock, and the first of `preemptors`
    it evicted for by fair sharing and left pending. None: no fair sharing (weights order nothing)."""
    if not observed.config.fair_sharing:
        return None  # weights order nothing without fair sharing
    snap = observed.snapshot
    with snap.transaction():
        for team in sorted(weights):
            cq = snap.cluster_queues.get(ClusterQueueName(team))
            milli = parse_quantity(weights[team])
            if cq is not None and cq.node.weight != milli:
                snap.set_fair_sharing_weight(cq.node, milli)
        queued = [p.info for _, p in sorted(observed.pending.items()) if p.queued]
        model = KueueModel(snap, QueueManager.from_snapshot(snap, observed.config, pending=queued),
                           observed.config)
        result = model.run(now, max_cycles=max_cycles)
        futile: Repeat | None = None
        if preemptors:
            victims: dict[WorkloadKey, set[WorkloadKey]] = {}
            for e in result.evictions:
                if e.preemptor in preemptors and e.reason == PreemptionReason.IN_COHORT_FAIR_SHARING:
                    victims.setdefault(e.preemptor, set()).add(e.victim)
            pending = sorted(p for p in victims if p not in snap.workloads)
            if pending:
                futile = Repeat(pending[0], tuple(sorted(victims[pending[0]])), False)
    return result.livelock, futile


@dataclass
class PushPlan:
    """What the weights step decides: the weights in force after it, the push record, actions, wake-up."""

    in_force: dict[str, str]
    record: WeightPush | None
    actions: list[Action] = field(default_factory=list)
    wake: float | None = None


def plan_push(
    policy: QuotaPolicy,
    observed: Observed,
    pushed: Mapping[str, str] | None,
    record: WeightPush | None,
    target: Callable[[], Mapping[str, str]],
    now: float,
) -> PushPlan:
    """The weights to have in force now: the pushed ones (`pushed`, or the spec's before any push) kept, or a
    paced step toward `target()` (the history-adjusted weights, read only when a push may be due: at most
    every `CHECK_INTERVAL`) that the model says starts no loop."""
    current = dict(pushed) if pushed is not None else spec_weights(policy)
    plan = PushPlan(current, record)
    if record is not None and record.frozen_until_at is not None and now < record.frozen_until_at:
        plan.wake = record.frozen_until_at
        return plan
    if record is not None and record.at is not None and now < record.at + MIN_PUSH_INTERVAL:
        plan.wake = record.at + MIN_PUSH_INTERVAL
        return plan
    if record is not None and record.checked_at is not None and now < record.checked_at + CHECK_INTERVAL:
        return plan
    checked = (record or WeightPush()).model_copy(update={"checked_at": now, "frozen_until_at": None,
                                                          "reason": None})
    plan.record = checked
    cur = {t: parse_quantity(w) for t, w in current.items()}
    goal = {t: parse_quantity(w) for t, w in target().items()}
    due = [t for t in sorted(goal) if abs(_log2(goal[t]) - _log2(cur.get(t, goal[t]))) >= HYSTERESIS_LOG2
           or (goal[t] == 0) != (cur.get(t, goal[t]) == 0)]
    if not due:
        return plan
    tried: list[str] = []
    for max_log2 in (MAX_STEP_LOG2, MAX_STEP_LOG2 / 2):
        step = {t: format_milli(_toward(cur.get(t, goal[t]), goal[t], max_log2)) for t in sorted(goal)}
        if step == current:
            continue
        loop = loop_under(observed, step, now)
        if loop is None:
            plan.in_force = step
            plan.record = WeightPush(time=rfc3339(now), at=now, checked_at=now)
            plan.actions.append(PushWeights(step, f"{WHY_PUSH}; paced: at most x{2 ** max_log2:.2f} a push, "
                                            f"{MIN_PUSH_INTERVAL / 3600:g} h apart"))
            return plan
        tried.append(f"{_show(step)}: {loop.message()}")
    until = now + MIN_PUSH_INTERVAL
    why = ("the model sees Kueue preempt and re-admit the same workloads in a loop under the new weights ("
           + "; ".join(tried) + "): the weights in force are kept")
    plan.record = checked.model_copy(update={"frozen_until_at": until, "reason": why})
    plan.actions.append(RecordAudit(AuditAction.WEIGHTS_HELD, Target.policy(policy.name),
                                    f"fairSharing weights not pushed ({_show(current)} kept)", why))
    plan.wake = until
    return plan


def _show(weights: Mapping[str, str]) -> str:
    return ", ".join(f"{t}={w}" for t, w in sorted(weights.items()))
