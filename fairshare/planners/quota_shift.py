"""Quota-shift planner: move ClusterQueue quotas from current to target on a schedule, draining first.

A plan is a value (``QuotaShiftPlan``, JSON via ``plan_to_dict``/``plan_from_dict``) computed once from the
current and target quotas and a ``TransitionSpec``. Progress is a second small value, ``LastApplied`` (the
last applied step index, the quotas then applied and when). ``next_action(plan, last, now, usage)`` is a pure
function of those, so a restarted operator that reloads both from the CR status resumes exactly.

Rules (DESIGN.md "Quota transitions"):
- Schedule: step 0 at the start, then ``N = floor(duration / stepInterval)`` steps spaced ``duration / N``
  (>= one interval) apart, the last exactly at ``start + duration``; ``immediate`` (or a duration shorter
  than one interval, N = 0) is step 0 alone, at the target. ``linear`` interpolates exactly and rounds
  toward the current value to the resource's granularity; ``geometric`` interpolates in ratio space
  (``current·(target/current)^(k/N)``, front-loaded cuts). The last step is exactly the target.
- Growth (target > current) applies at step 0 unless ``rampGrowth`` asks for the curve.
- Drain: before the deadline, a cut never goes below the live usage of that ClusterQueue flavor-resource
  (``max(step value, min(previous quota, usage))``), so running work is never stranded over quota.
- After the deadline, the scheduled value applies even below usage and the excess may be freed by
  preemption, at most ``maxVictimsPerHour`` victims in any hour (without a deadline, never).
- At most one change per step interval; each applied value lies between the previous one and the target.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import Any

from fairshare.durations import format_duration
from fairshare.errors import InputError, Location
from fairshare.models import FlavorResource, Milli, QuotaKey, ResourceName, Seconds
from fairshare.planners.budget import VictimBudget
from fairshare.quantity import describe_quantity

SCHEMA_VERSION = 1


class Curve(StrEnum):
    LINEAR = "linear"
    GEOMETRIC = "geometric"
    IMMEDIATE = "immediate"


QuotaMap = tuple[tuple[QuotaKey, Milli], ...]  # sorted by key


# Every step is computed (and explained) when a plan is made; the bound keeps a plan well under a
# second to build and a corrupt or careless spec ("99999h" in "1ms" steps) from hanging the operator.
# A week in one-minute steps is 10,080: that needs a shorter duration or longer steps.
MAX_STEPS = 10_000


@dataclass(frozen=True, slots=True)
class TransitionSpec:
    """How a quota change rolls out. Times in seconds; ``deadline`` counts from the plan's start."""

    duration: Seconds
    step_interval: Seconds
    curve: Curve = Curve.LINEAR
    drain: bool = True
    deadline: Seconds | None = None
    max_victims_per_hour: int = 0
    ramp_growth: bool = False
    floor: tuple[tuple[ResourceName, Milli], ...] = ()  # the quota never goes below this, per resource
    granularity: tuple[tuple[ResourceName, Milli], ...] = ()  # steps are multiples of this (default 1)

    def validate(self, location: Location | None = None) -> None:
        loc = location or Location()

        def bad(field: str, message: str, value: object) -> InputError:
            where = Location(loc.file, loc.document, f"{loc.field}.{field}" if loc.field else field)
            return InputError(message, location=where, value=value, has_value=True)

        if not 0 <= self.duration < math.inf:
            raise bad("duration", "must be >= 0 and finite", self.duration)
        if not self.step_interval > 0:
            raise bad("stepInterval", "must be > 0", self.step_interval)
        if self.curve is not Curve.IMMEDIATE and self.duration / self.step_interval > MAX_STEPS:
            raise bad("stepInterval", f"makes more than {MAX_STEPS} steps over the duration; use a longer "
                      "stepInterval", self.step_interval)
        if self.deadline is not None and not 0 <= self.deadline < math.inf:
            raise bad("deadline", "must be >= 0 (counted from the start of the transition)", self.deadline)
        if self.max_victims_per_hour < 0:
            raise bad("maxVictimsPerHour", "must be >= 0", self.max_victims_per_hour)
        for r, g in self.granularity:
            if g <= 0:
                raise bad(f"granularity[{r}]", "must be > 0", g)
        for r, f in self.floor:
            if f < 0:
                raise bad(f"floor[{r}]", "must be >= 0", f)

    def floor_of(self, resource: ResourceName) -> Milli:
        return dict(self.floor).get(resource, 0)

    def granularity_of(self, resource: ResourceName) -> Milli:
        return dict(self.granularity).get(resource, 1)


@dataclass(frozen=True, slots=True)
class PlanStep:
    index: int
    at: Seconds
    quotas: QuotaMap


@dataclass(frozen=True, slots=True)
class QuotaShiftPlan:
    start: Seconds
    spec: TransitionSpec
    current: QuotaMap
    target: QuotaMap
    steps: tuple[PlanStep, ...]

    @property
    def end(self) -> Seconds:
        return self.steps[-1].at

    @property
    def deadline_at(self) -> Seconds | None:
        return None if self.spec.deadline is None else self.start + self.spec.deadline

    def due_step(self, now: Seconds) -> int:
        """Index of the latest step due at ``now`` (-1 before the start)."""
        # Steps are in time order (make_plan), so the latest due one is found by bisection.
        return bisect.bisect_right([step.at for step in self.steps], now) - 1


@dataclass(frozen=True, slots=True)
class LastApplied:
    """Progress kept in the CR status: the last applied step, the quotas then applied, and when."""

    step: int
    quotas: QuotaMap
    at: Seconds


@dataclass(frozen=True, slots=True)
class QuotaAction:
    """What to do now: the quotas to apply, what changed and why, and the preemptions allowed."""

    at: Seconds
    step: int  # the due step (-1: not started)
    quotas: QuotaMap
    changed: tuple[QuotaKey, ...]
    to_free: QuotaMap  # usage above the applied quota that preemption may reclaim (after the deadline)
    preemptions_allowed: int
    done: bool
    reasons: tuple[str, ...]
    last_applied: LastApplied | None  # the progress to persist after applying (unchanged if nothing changed)


# --- planning -------------------------------------------------------------------------------------------


def make_plan(current: Mapping[QuotaKey, Milli], target: Mapping[QuotaKey, Milli], spec: TransitionSpec,
              start: Seconds) -> QuotaShiftPlan:
    """The schedule from ``current`` to ``target`` (keys missing on one side count as 0)."""
    spec.validate()
    keys = sorted(set(current) | set(target))
    for key in keys:
        floor = spec.floor_of(key.flavor_resource.resource)
        if target.get(key, 0) < floor:
            res = key.flavor_resource.resource
            raise InputError(f"target quota of {key} is below the transition floor "
                             f"{describe_quantity(floor, res)}",
                             location=Location(field=f"target[{key}]"), value=target.get(key, 0))
        if target.get(key, 0) < 0 or current.get(key, 0) < 0:
            raise InputError(f"negative quota for {key}", location=Location(field=f"quota[{key}]"),
                             value=(current.get(key, 0), target.get(key, 0)))
    cur = {k: current.get(k, 0) for k in keys}
    tgt = {k: target.get(k, 0) for k in keys}
    # A duration shorter than one interval leaves room for no step after step 0: the change is immediate.
    n = 0 if spec.curve is Curve.IMMEDIATE else math.floor(spec.duration / spec.step_interval)
    steps: list[PlanStep] = []
    for k in range(n + 1):
        at = start if k == 0 else start + spec.duration * k / n
        values: list[tuple[QuotaKey, Milli]] = []
        for key in keys:
            values.append((key, _scheduled(cur[key], tgt[key], k, n, spec, key.flavor_resource.resource)))
        steps.append(PlanStep(k, at, tuple(values)))
    # Monotone by construction of _scheduled; the clamp keeps it so under float rounding (geometric).
    steps = _clamp_monotone(steps, cur, tgt)
    return QuotaShiftPlan(start, spec, tuple(sorted(cur.items())), tuple(sorted(tgt.items())), tuple(steps))


def _scheduled(cur: Milli, tgt: Milli, k: int, n: int, spec: TransitionSpec, resource: ResourceName) -> Milli:
    if k == n or cur == tgt:
        return tgt
    growth = tgt > cur
    if growth and not spec.ramp_growth:
        return tgt
    if k == 0:
        return cur
    g = spec.granularity_of(resource)
    exact: Fraction
    if spec.curve is Curve.GEOMETRIC:
        lo_cur = max(cur, g)
        lo_tgt = max(tgt, g)
        exact = Fraction(lo_cur * (lo_tgt / lo_cur) ** (k / n))
        exact = min(max(exact, Fraction(min(cur, tgt))), Fraction(max(cur, tgt)))
    else:
        exact = cur + Fraction(tgt - cur) * k / n
    # Round toward the current value (cut slowly, grow slowly): shrink rounds up, growth rounds down.
    units = math.floor(exact / g) if growth else math.ceil(exact / g)
    value = units * g
    value = max(value, spec.floor_of(resource)) if not growth else value
    return min(max(value, min(cur, tgt)), max(cur, tgt))


def _clamp_monotone(steps: list[PlanStep], cur: Mapping[QuotaKey, Milli], tgt: Mapping[QuotaKey, Milli]
                    ) -> list[PlanStep]:
    prev = dict(cur)
    out: list[PlanStep] = []
    for step in steps:
        values = []
        for key, v in step.quotas:
            if tgt[key] < cur[key]:
                v = min(max(v, tgt[key]), prev[key]) if step.index else v
            elif tgt[key] > cur[key]:
                v = max(min(v, tgt[key]), prev[key]) if step.index else v
            prev[key] = v
            values.append((key, v))
        out.append(PlanStep(step.index, step.at, tuple(values)))
    return out


# --- acting ---------------------------------------------------------------------------------------------


def next_action(plan: QuotaShiftPlan, last: LastApplied | None, now: Seconds,
                usage: Mapping[QuotaKey, Milli], past_preemptions: Sequence[Seconds] = ()) -> QuotaAction:
    """The quotas to apply at ``now`` given live ``usage`` and the progress ``last`` (pure, idempotent)."""
    spec = plan.spec
    prev = dict(last.quotas) if last is not None else dict(plan.current)
    due = plan.due_step(now)
    reasons: list[str] = []
    tgt = dict(plan.target)
    cur = dict(plan.current)
    deadline = plan.deadline_at
    draining = spec.drain and (deadline is None or now < deadline)
    in_window = last is not None and now < last.at + spec.step_interval
    values: dict[QuotaKey, Milli] = {}
    if due < 0:
        values = dict(prev)
        reasons.append(f"transition starts at {plan.start:g}s")
    elif in_window:
        values = dict(prev)
        if last is not None:
            reasons.append(f"one change per step interval: last change at {last.at:g}s, next allowed at "
                           f"{last.at + spec.step_interval:g}s")
    else:
        scheduled = dict(plan.steps[due].quotas)
        for key in sorted(tgt):
            p = prev.get(key, cur[key])
            s = scheduled[key]
            u = usage.get(key, 0)
            if tgt[key] < cur[key]:
                v = s
                if draining and u > s:
                    v = max(s, min(p, u))
                    if v > s:
                        r = key.flavor_resource.resource
                        reasons.append(f"{key}: hold at {describe_quantity(v, r)}, not "
                                       f"{describe_quantity(s, r)}: {describe_quantity(u, r)} in use "
                                       "drains first")
                v = min(v, p)
            elif tgt[key] > cur[key]:
                v = max(min(s, tgt[key]), p)
            else:
                v = tgt[key]
            values[key] = v
    changed = tuple(k for k in sorted(values) if values[k] != prev.get(k, cur[k]))
    for key in changed:
        before = prev.get(key, cur[key])
        r = key.flavor_resource.resource
        reasons.append(f"{key}: {describe_quantity(before, r)} -> {describe_quantity(values[key], r)} "
                       f"(step {due}/{len(plan.steps) - 1})")

    to_free: list[tuple[QuotaKey, Milli]] = []
    allowed = 0
    if deadline is not None and now >= deadline:
        for key in sorted(values):
            excess = usage.get(key, 0) - values[key]
            if tgt[key] < cur[key] and excess > 0:
                to_free.append((key, excess))
        if to_free:
            budget = VictimBudget(spec.max_victims_per_hour, 3600.0)
            allowed = budget.remaining(past_preemptions, now)
            used = budget.used(past_preemptions, now)
            reasons.append(f"past the deadline ({format_duration(spec.deadline or 0)} after start): "
                           f"{allowed} preemption(s) allowed now ({used} in the last hour, budget "
                           f"{budget.describe()})")
    done = due == len(plan.steps) - 1 and all(values[k] == tgt[k] for k in tgt)
    new_last = LastApplied(due, tuple(sorted(values.items())), now) if changed else last
    return QuotaAction(at=now, step=due, quotas=tuple(sorted(values.items())), changed=changed,
                       to_free=tuple(to_free), preemptions_allowed=allowed, done=done, reasons=tuple(reasons),
                       last_applied=new_last)


# --- JSON -----------------------------------------------------------------------------------------------


def _key_json(key: QuotaKey) -> list[str]:
    return [key.cluster_queue, key.flavor_resource.flavor, key.flavor_resource.resource]


def _map_json(values: QuotaMap) -> list[list[Any]]:
    return [[*_key_json(k), v] for k, v in values]


def plan_to_dict(plan: QuotaShiftPlan) -> dict[str, Any]:
    """JSON-able form (schema-versioned) for a CR status; steps are recomputed on load, not stored."""
    s = plan.spec
    return {
        "schemaVersion": SCHEMA_VERSION,
        "start": plan.start,
        "spec": {"duration": s.duration, "stepInterval": s.step_interval, "curve": s.curve.value,
                 "drain": s.drain, "deadline": s.deadline, "maxVictimsPerHour": s.max_victims_per_hour,
                 "rampGrowth": s.ramp_growth, "floor": [list(x) for x in s.floor],
                 "granularity": [list(x) for x in s.granularity]},
        "current": _map_json(plan.current),
        "target": _map_json(plan.target),
    }


def last_applied_to_dict(last: LastApplied) -> dict[str, Any]:
    return {"step": last.step, "at": last.at, "quotas": _map_json(last.quotas)}


def _map_from(rows: object, field: str) -> dict[QuotaKey, Milli]:
    if not isinstance(rows, list):
        raise InputError("must be a list of [clusterQueue, flavor, resource, milli]",
                         location=Location(field=field), value=rows, has_value=True)
    out: dict[QuotaKey, Milli] = {}
    for i, row in enumerate(rows):
        if (not isinstance(row, list) or len(row) != 4 or not all(isinstance(x, str) for x in row[:3])
                or not isinstance(row[3], int) or isinstance(row[3], bool)):
            raise InputError("must be [clusterQueue, flavor, resource, milli]",
                             location=Location(field=f"{field}[{i}]"), value=row, has_value=True)
        out[QuotaKey(row[0], FlavorResource(row[1], row[2]))] = row[3]
    return out


def plan_from_dict(data: Mapping[str, Any]) -> QuotaShiftPlan:
    """Inverse of ``plan_to_dict`` (the schedule is recomputed, deterministically)."""
    if data.get("schemaVersion") != SCHEMA_VERSION:
        raise InputError(f"unsupported quota-shift plan schemaVersion (this build reads {SCHEMA_VERSION})",
                         location=Location(field="schemaVersion"), value=data.get("schemaVersion"),
                         has_value=True)
    try:
        s = data["spec"]
        spec = TransitionSpec(
            duration=float(s["duration"]), step_interval=float(s["stepInterval"]), curve=Curve(s["curve"]),
            drain=bool(s["drain"]), deadline=None if s.get("deadline") is None else float(s["deadline"]),
            max_victims_per_hour=int(s["maxVictimsPerHour"]), ramp_growth=bool(s["rampGrowth"]),
            floor=tuple((str(r), int(v)) for r, v in s.get("floor", [])),
            granularity=tuple((str(r), int(v)) for r, v in s.get("granularity", [])))
        start = float(data["start"])
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"malformed quota-shift plan: {err}", location=Location(field="spec")) from None
    current = _map_from(data.get("current"), "current")
    return make_plan(current, _map_from(data.get("target"), "target"), spec, start)


def last_applied_from_dict(data: Mapping[str, Any]) -> LastApplied:
    try:
        step = int(data["step"])
        at = float(data["at"])
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"malformed lastApplied: {err}", location=Location(field="lastApplied")) from None
    return LastApplied(step, tuple(sorted(_map_from(data.get("quotas"), "lastApplied.quotas").items())), at)


