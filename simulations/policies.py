"""Timed quota changes and automated experiment preemption, decided by fairshare's planners.

`QuotaShifter`: each scenario `events[]` quota change becomes a plan of
`fairshare.planners.quota_shift` (`make_plan`) at its time; at every step time, and
whenever usage of the ClusterQueue drops while a step is held back for draining, the
simulator asks `next_action` (with the live usage) and applies the quota it returns.
After a plan's deadline the planner says how much usage above the quota may be
reclaimed and how many preemptions its budget allows now; the simulator then evicts
the ClusterQueue's most recently admitted holders first (least work lost, as Kueue's
CandidatesOrdering rule 4) up to that count.

`ExperimentPreemptor`: every `checkInterval`, if protected work has waited at least
`waitThreshold`, `fairshare.planners.experiments.plan_experiment_preemptions` picks
the experiment victims (history-aware fair share, priority, least work lost, budget);
the simulator evicts them and Kueue's next cycle admits the beneficiaries.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from fairshare.errors import InputError, Location
from fairshare.models import FlavorResource, QuotaKey
from fairshare.planners.budget import VictimBudget
from fairshare.planners.deadline import Holder, deadline_victims
from fairshare.planners.experiments import ExperimentPolicy, plan_experiment_preemptions
from fairshare.planners.quota_shift import (
    Curve,
    LastApplied,
    QuotaShiftPlan,
    TransitionSpec,
    make_plan,
    next_action,
)
from fairshare.quantity import parse_quantity
from fairshare.workload import WorkloadInfo

from .engine import EventQueue, Kind
from .scenario import ExperimentPreemption, QuotaChange

if TYPE_CHECKING:
    from .model import Simulation

_CURVES = {"immediate": Curve.IMMEDIATE, "linear": Curve.LINEAR, "geometric": Curve.GEOMETRIC}


def transition_spec(change: QuotaChange) -> TransitionSpec:
    t = change.transition
    floor = () if t.floor is None else ((change.resource, parse_quantity(t.floor)),)
    return TransitionSpec(
        duration=t.duration,
        step_interval=t.step_interval,
        curve=_CURVES[t.curve],
        drain=t.drain,
        deadline=t.deadline,
        max_victims_per_hour=t.max_victims_per_hour,
        ramp_growth=t.ramp_up,
        floor=floor,
        granularity=((change.resource, 1000),),  # whole units (GPUs) per step
    )


class _Transition:
    __slots__ = ("cq", "fr", "key", "last", "plan", "spec", "target", "waiting")

    def __init__(self, change: QuotaChange) -> None:
        self.cq = change.cluster_queue
        self.fr = FlavorResource(change.flavor, change.resource)
        self.key = QuotaKey(self.cq, self.fr)
        self.target = parse_quantity(change.nominal_quota)
        self.spec = transition_spec(change)
        self.plan: QuotaShiftPlan | None = None
        self.last: LastApplied | None = None
        self.waiting = False  # a step is held back until running work drains


class QuotaShifter:
    """Runs each quota change through the quota-shift planner."""

    def __init__(self, sim: Simulation, changes: list[QuotaChange]) -> None:
        self.sim = sim
        self.changes = changes
        self.transitions: list[_Transition] = []
        self.preemption_times: list[float] = []
        for i, change in enumerate(changes):
            where = f"events[{i}]"
            if change.cluster_queue not in sim.snapshot.cluster_queues:
                raise InputError(
                    "no such ClusterQueue in the cluster",
                    location=Location(field=f"{where}.clusterQueue"),
                    value=change.cluster_queue,
                )
            tr = _Transition(change)
            tr.spec.validate(Location(field=f"{where}.transition"))
            # Check the plan up front (with the initial quota) so a bad change fails before the run.
            initial = sim.snapshot.cluster_queue(tr.cq).quota(tr.fr).nominal
            try:
                make_plan({tr.key: initial}, {tr.key: tr.target}, tr.spec, start=change.at)
            except InputError as err:
                raise InputError(
                    err.message,
                    location=Location(field=where),
                    value=err.value,
                    has_value=err.has_value,
                ) from None
            self.transitions.append(tr)

    def schedule(self, events: EventQueue) -> None:
        for i, change in enumerate(self.changes):
            events.push(change.at, Kind.POLICY, i)

    def _usage(self, tr: _Transition) -> int:
        return self.sim.snapshot.cluster_queue(tr.cq).usage(tr.fr)

    def on_event(self, payload: int, t: float, changed: set[str]) -> None:
        tr = self.transitions[payload]
        if tr.plan is None:
            current = self.sim.snapshot.cluster_queue(tr.cq).quota(tr.fr).nominal
            try:
                tr.plan = make_plan({tr.key: current}, {tr.key: tr.target}, tr.spec, start=t)
            except InputError as err:
                raise err.at(field_prefix=f"events[{payload}]") from None
            for step in tr.plan.steps[1:]:
                self.sim.events.push(step.at, Kind.POLICY, payload)
        self._act(payload, tr, t, changed)

    def _act(self, payload: int, tr: _Transition, t: float, changed: set[str]) -> None:
        plan = tr.plan
        if plan is None:
            return
        action = next_action(
            plan, tr.last, t, usage={tr.key: self._usage(tr)}, past_preemptions=self.preemption_times
        )
        quotas = dict(action.quotas)
        if tr.key in action.changed:
            step = f"step {action.step}/{len(plan.steps) - 1}"
            self.sim.set_nominal(tr.cq, tr.fr, quotas[tr.key], t, f"{plan.spec.curve.value} {step}")
            changed.add(tr.cq)
        tr.last = action.last_applied
        tr.waiting = (
            not action.done and quotas.get(tr.key, 0) > dict(plan.steps[max(action.step, 0)].quotas)[tr.key]
        )
        if tr.waiting and tr.last is not None and t < tr.last.at + plan.spec.step_interval:
            # One change per interval: look again when the interval has passed.
            self.sim.events.push(tr.last.at + plan.spec.step_interval, Kind.POLICY, payload)
        if action.preemptions_allowed and action.to_free:
            self._reclaim(tr, t, dict(action.to_free).get(tr.key, 0), action.preemptions_allowed, changed)

    def _reclaim(self, tr: _Transition, t: float, to_free: int, allowed: int, changed: set[str]) -> None:
        """After the deadline: evict the victims the core's deadline rule picks (the operator's rule too)
        among the CQ's workloads holding the contested resource, until `to_free` is freed."""
        cq = self.sim.snapshot.cluster_queue(tr.cq)
        holders = [
            Holder(w.key, w.priority, w.quota_reserved_time or 0.0, w.usage.get(tr.fr, 0))
            for w in cq.workloads.values()
        ]
        what = f"transition of {tr.cq} {tr.fr.flavor}/{tr.fr.resource}"
        for victim in deadline_victims(holders, excess=to_free, allowed=allowed, now=t, what=what):
            self.preemption_times.append(t)
            self.sim.evict(victim.key, t, changed, by="transition", preemptor=f"quota shift of {tr.cq}",
                           reason=victim.reason)

    def after_instant(self, t: float, released: set[str]) -> set[str]:
        """Retry held-back (draining) steps whose ClusterQueue's usage dropped; returns changed CQs."""
        changed: set[str] = set()
        for i, tr in enumerate(self.transitions):
            if tr.waiting and tr.cq in released:
                self._act(i, tr, t, changed)
        return changed


PLAN = 0  # PLANNER event payloads: a periodic look at starving business work
REACTIVATE = 1  # reactivate victims whose beneficiary was not admitted in time


class ExperimentPreemptor:
    """Periodic calls to the experiment-preemption planner while protected work waits."""

    def __init__(self, sim: Simulation, spec: ExperimentPreemption) -> None:
        self.sim = sim
        self.spec = spec
        classes = frozenset(spec.protected_classes)
        unknown = sorted(c for c in classes if c not in sim.state.priority_classes)
        if unknown:
            raise InputError(
                "no such WorkloadPriorityClass in the cluster",
                location=Location(field="experimentPreemption.protectedClasses"),
                value=unknown[0],
            )
        try:
            self.policy = ExperimentPolicy(
                experiment_below_priority=spec.experiment_priority_threshold,
                protected_priority=spec.protected_priority,
                protected_priority_classes=classes,
                min_runtime=spec.min_runtime,
                budget=VictimBudget(spec.max_victims, spec.window),
            )
        except ValueError as err:
            raise InputError(str(err), location=Location(field="experimentPreemption")) from None
        self.protected: dict[str, WorkloadInfo] = {}  # pending protected workloads, by key
        self.since: dict[str, float] = {}  # creation time (waiting since)
        self.past: list[float] = []
        # Victims deactivated for a beneficiary, as the service does (queue_manager/operator.py):
        # reactivated once the beneficiary holds quota, or `reactivateAfter` after the eviction.
        self.held: dict[str, list[str]] = {}  # beneficiary -> victims
        self.held_at: dict[str, float] = {}  # victim -> eviction time

    def schedule(self, events: EventQueue) -> None:
        step = self.spec.check_interval
        for k in range(1, math.floor(self.sim.horizon / step) + 1):
            events.push(k * step, Kind.PLANNER, 0)

    def pending(self, info: WorkloadInfo, t: float) -> None:
        if info.priority >= self.policy.protected_priority:
            self.protected[info.key] = info
            self.since.setdefault(info.key, t)

    def admitted(self, key: str, t: float) -> None:
        if self.protected.pop(key, None) is not None:
            self.since.pop(key, None)
        for victim in self.held.pop(key, []):
            self._reactivate(victim, t)

    def _reactivate(self, victim: str, t: float) -> None:
        if self.held_at.pop(victim, None) is not None:
            self.sim.reactivate(victim, t)

    def on_event(self, t: float, changed: set[str], payload: int = PLAN) -> None:
        if payload == REACTIVATE:
            for beneficiary in sorted(self.held):
                due = [v for v in self.held[beneficiary] if self.held_at[v] + self.spec.reactivate_after <= t]
                for key in due:
                    self._reactivate(key, t)
                self.held[beneficiary] = [v for v in self.held[beneficiary] if v in self.held_at]
                if not self.held[beneficiary]:
                    del self.held[beneficiary]
            return
        threshold = self.spec.wait_threshold
        waiting = [self.protected[k] for k in sorted(self.protected) if t - self.since[k] >= threshold]
        if not waiting:
            return
        plan = plan_experiment_preemptions(
            self.sim.snapshot,
            self.sim.history,
            self.policy,
            now=t,
            past_preemptions=self.past,
            config=self.sim.config,
            pending=waiting,
        )
        for victim in plan.victims:
            self.past.append(t)
            self.sim.evict(
                victim.victim, t, changed, by="planner", preemptor=victim.beneficiary, reason=victim.reason,
                requeue=False,
            )
            self.held.setdefault(victim.beneficiary, []).append(victim.victim)
            self.held_at[victim.victim] = t
        if plan.victims:
            self.sim.events.push(t + self.spec.reactivate_after, Kind.PLANNER, REACTIVATE)
