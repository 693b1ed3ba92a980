"""What the controller does about an eviction storm (fairshare.control.storms), in both shells.

Rules, in order, per storm (keyed by its preemptor, or its first victim):

0. Foreseen: while the policy pushes weights other than the spec's, a fair-sharing round of Kueue's for a
   preemptor that still waits is a storm at once when the model's cycles from the state now, under the
   pushed weights, evict for it again without admitting it (a loop, or more rounds that leave it pending:
   weights.repeat_under), asked on every step for `FORESIGHT_SPAN` after the round.

1. A storm seen for the first time is reported once (`StormDetected`: an Event and a metric in the operator,
   the run's storms in the simulator), with its response.
2. Damp the weights: while the policy pushes history-adjusted weights that differ from the spec's, they are
   moved back to the spec's (`PushWeights`) if the model's what-if sees no loop under them
   (fairshare.control.weights.loop_under), and pushes are frozen for the cool-down
   (`spec.preemption.stormCoolDown`, 1 h by default). Pushed weights are
   what can turn a single fair-sharing preemption into a loop (weights.py); the spec's weights are what the
   platform team chose.
3. Hold the preemptor: otherwise (no pushed weights, the spec's weights loop too, or the storm goes on more
   than `DAMP_GRACE` after the weights were damped) a pending preemptor is deactivated (`HoldPending`,
   spec.active=false) for the cool-down and released then (`Reactivate`): its victims run, nothing is
   evicted for it meanwhile.
4. Report only: a storm without a pending preemptor to hold (the policy's own evictions, which
   `spec.preemption.maxEvictionsPerWorkload` caps; a preemptor already admitted).

A record stays in `status.storms` until its response ends (`untilAt`) and the storm is no longer seen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fairshare.policy import QuotaPolicy
from fairshare.policy.status import StormRecord, StormResponse, WeightPush
from fairshare.policy.units import duration_seconds
from fairshare.timestamps import rfc3339

from .actions import Action, HoldPending, PushWeights, Reactivate, StormDetected
from .observed import Observed
from .rules import spec_weights
from .storms import EvictionSource, Storm, detect_storms
from .weights import loop_under, repeat_under

STORM_COOLDOWN = 3600.0  # spec.preemption.stormCoolDown's default: a response holds this long
# Damped weights reach Kueue through the ClusterQueues' writes, its cache and its next cycles (a round a
# second, Kueue's requeue batch): the rounds of this long after the damping may still run under the pushed
# weights, and are not the storm going on after it (seen live on a loaded machine: a round just after the
# damping escalated it to a hold, and the trainer the damping had let in waited for the cool-down).
DAMP_GRACE = 10.0


@dataclass
class StormOutcome:
    records: list[StormRecord] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    weights: dict[str, str] | None = None  # weights to have in force instead (damped), if any
    push: WeightPush | None = None  # the push record with its freeze, when damped
    wake: float | None = None


def respond(
    policy: QuotaPolicy,
    observed: Observed,
    stored: Sequence[StormRecord],
    in_force: Mapping[str, str] | None,
    push: WeightPush | None,
    pushing: bool,
    now: float,
    spec: Mapping[str, str] | None = None,
) -> StormOutcome:
    """The storms seen now and the responses in force. `in_force`: the pushed weights (None: the spec's);
    `push`: the push record; `pushing`: the policy pushes weights; `spec`: the policy's own weights
    (PolicyRules.weights, resolved once per generation: formatting them on every decision was a sixth of a
    simulated run's time; None: from `policy`)."""
    out = StormOutcome()
    cool_down = float(duration_seconds(policy.spec.preemption.storm_cool_down))
    storms = {s.key: s for s in detect_storms(observed.evictions, now)}
    kept: dict[str, StormRecord] = {}
    for r in stored:
        key = r.preemptor or (r.victims[0] if r.victims else "")
        ends = r.until_at if r.until_at is not None else now
        if now >= ends:
            held = observed.pending.get(r.preemptor) if r.preemptor else None
            if r.response == StormResponse.HOLD_PREEMPTOR and held is not None and not held.queued:
                out.actions.append(Reactivate(held.info.key, "its hold for an eviction storm ended"))
            if key not in storms:
                continue  # over, and no longer seen
            # Seen again after its response ended: a new storm (below).
            continue
        kept[key] = r
        out.wake = ends if out.wake is None else min(out.wake, ends)
    spec = dict(spec) if spec is not None else spec_weights(policy)
    current = dict(in_force) if in_force is not None else spec
    if pushing and current != spec:
        foreseen = _foreseen(observed, current, now, set(storms) | set(kept))
        if foreseen is not None:
            storms[foreseen.key] = foreseen
    damped = False
    for key in sorted(storms):
        s = storms[key]
        response_actions: list[Action] = []
        rec = kept.get(key)
        if rec is not None and not (rec.response == StormResponse.DAMP_WEIGHTS and rec.at is not None
                                    and now > rec.at and s.last > rec.at + DAMP_GRACE
                                    and _waits(observed, s.preemptor)):
            continue  # in force (a damp whose storm goes on after it escalates to a hold, below)
        response, why = StormResponse.REPORT, "reported only: no pending preemptor to hold"
        if rec is None and pushing and not damped and current != spec and \
                loop_under(observed, spec, now) is None:
            response = StormResponse.DAMP_WEIGHTS
            why = (f"the pushed weights ({_show(current)}) are moved back to the policy's ({_show(spec)}), "
                   "under which the model sees no loop; pushes frozen for the cool-down")
            out.weights = spec
            out.push = WeightPush(time=push.time if push else None, at=push.at if push else None,
                                  frozen_until_at=now + cool_down,
                                  reason=f"eviction storm for {s.key}: weights damped")
            response_actions.append(
                PushWeights(spec, f"eviction storm for {s.key}: back to the policy's weights"))
            damped = True
        elif _waits(observed, s.preemptor):
            response = StormResponse.HOLD_PREEMPTOR
            why = (f"{s.preemptor} is held (spec.active=false) for the cool-down so that its victims run; "
                   "released then")
            response_actions.append(HoldPending(s.preemptor, s.victims[0], f"eviction storm: {s.message()}"))
        until = now + cool_down
        record = StormRecord(
            preemptor=s.preemptor or None, victims=list(s.victims), evictions=s.evictions,
            per_minute=round(s.per_minute, 2), sources=list(s.sources), time=rfc3339(now), at=now,
            response=response, until_at=until, message=f"{s.message()}; {why}",
        )
        kept[key] = record
        out.wake = until if out.wake is None else min(out.wake, until)
        out.actions.append(StormDetected(s.preemptor, s.victims, s.evictions, round(s.per_minute, 2),
                                         s.sources, response, f"{s.message()}; {why}"))
        out.actions.extend(response_actions)
    out.records = [kept[k] for k in sorted(kept)]
    return out


def _waits(observed: Observed, workload: str) -> bool:
    p = observed.pending.get(workload) if workload else None
    return p is not None and p.queued


FAIR_SHARING = "InCohortFairSharing"  # the Preempted reason of a fair-sharing preemption (S2-a, S2-b)
# How long after a fair-sharing round the model is asked again whether it repeats. The operator sees a
# round at any point of it: the victims still holding quota, or evicted with the preemptor not yet in (the
# model may settle that state either way: which of them Kueue tries first depends on when each is
# requeued), or back with the preemptor parked (from which the model sees the next round). Asking on every
# step while the round is this recent and its preemptor still waits sees the state the round settles to.
FORESIGHT_SPAN = DAMP_GRACE


def _foreseen(observed: Observed, weights: Mapping[str, str], now: float, known: set[str]) -> Storm | None:
    """A storm the model foresees at its first round: Kueue preempted for fair sharing within the last
    FORESIGHT_SPAN seconds (while weights are pushed) for a workload that still waits, and its cycles from
    the state now, under the weights in force, preempt again without admitting it: a loop, or rounds that
    stop with it still pending (weights.repeat_under). Named by that preemptor, with the evictions seen
    for it."""
    since = now - FORESIGHT_SPAN
    fresh = [e for e in observed.evictions
             if e.at > since and e.source == EvictionSource.KUEUE and e.reason == FAIR_SHARING
             and e.preemptor and e.preemptor not in known and _waits(observed, e.preemptor)]
    if not fresh:
        return None
    repeat = repeat_under(observed, weights, now, {e.preemptor for e in fresh})
    if repeat is None:
        return None
    preemptor = repeat.preemptor
    mine = [e for e in observed.evictions if e.preemptor == preemptor]
    if not mine:
        return None
    seen = detect_storms(mine, now)
    if seen:
        return seen[0]
    victims = tuple(sorted({e.workload for e in mine if e.at > since} | set(repeat.victims)))
    return Storm(preemptor, victims, len(mine), min(e.at for e in mine), max(e.at for e in mine),
                 (str(EvictionSource.KUEUE),), (FAIR_SHARING,), foreseen=True)


def _show(weights: Mapping[str, str]) -> str:
    return ", ".join(f"{t}={w}" for t, w in sorted(weights.items()))
