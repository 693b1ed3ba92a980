"""Quota transitions: the policy's quotas vs what is applied -> plans from the core's
quota-shift planner, one per (team, flavor, resource), kept in QuotaPolicy status.

Pure: `plan_transitions` takes the stored status entries, the live nominal quotas, live
usage and `now`, and returns the quotas to render, the new status entries and the steps
taken. Restart safety comes from the planner's contract: (plan, last applied step) fully
determine the next action (docs/history-and-planners.md, "Restart"), and the operator
writes the new status BEFORE it applies the ClusterQueue (a crash in between re-applies the
same step from status, never skips it or applies it twice).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fairshare.errors import InputError
from fairshare.models import FlavorResource, QuotaKey, Workload
from fairshare.models import ResourceQuota as QuotaLimits
from fairshare.planners.deadline import Holder
from fairshare.planners.deadline import deadline_victims as core_deadline_victims
from fairshare.planners.quota_shift import (
    Curve,
    LastApplied,
    QuotaShiftPlan,
    TransitionSpec,
    last_applied_from_dict,
    last_applied_to_dict,
    make_plan,
    next_action,
    plan_from_dict,
    plan_to_dict,
)
from fairshare.policy import QuotaPolicy, format_milli, spec_quotas, transition_settings
from fairshare.quantity import parse_quantity

from .events import rfc3339

log = logging.getLogger("queue_manager.transitions")

RUNNING, DRAINING, COMPLETE, BLOCKED = "Running", "Draining", "Complete", "Blocked"
# Steps of an accelerator quota move by whole devices; cpu and memory by the finest unit.
WHOLE_UNIT = 1000


def _granularity(resource: str) -> int:
    return WHOLE_UNIT if "/" in resource else 1


def transition_spec(policy: QuotaPolicy, team: str, resource: str) -> TransitionSpec:
    ts = transition_settings(policy, team)
    floor = ts.floor_for(resource)
    return TransitionSpec(
        duration=ts.duration_s, step_interval=ts.step_interval_s, curve=Curve(ts.curve), drain=ts.drain,
        deadline=ts.deadline_s, max_victims_per_hour=ts.max_victims_per_hour, ramp_growth=ts.ramp_up,
        floor=((resource, floor),) if floor else (), granularity=((resource, _granularity(resource)),))


def live_nominal(cluster_queue: Mapping[str, Any] | None) -> dict[tuple[str, str], int]:
    """nominalQuota per (flavor, resource) of a live ClusterQueue, milli-units."""
    out: dict[tuple[str, str], int] = {}
    if not cluster_queue:
        return out
    for group in (cluster_queue.get("spec") or {}).get("resourceGroups") or []:
        for fl in group.get("flavors") or []:
            for r in fl.get("resources") or []:
                try:
                    out[(str(fl["name"]), str(r["name"]))] = parse_quantity(r.get("nominalQuota", 0))
                except (InputError, KeyError):
                    continue
    return out


def live_usage(workloads: Mapping[str, Workload]) -> dict[QuotaKey, int]:
    """Quota held now per (ClusterQueue, flavor, resource): admitted, unfinished workloads."""
    out: dict[QuotaKey, int] = {}
    for key in sorted(workloads):
        wl = workloads[key]
        if wl.admission is None or not wl.has_quota_reservation or wl.is_finished:
            continue
        for fr, milli in wl.admission.usage().items():
            k = QuotaKey(wl.admission.cluster_queue, fr)
            out[k] = out.get(k, 0) + milli
    return out


@dataclass(frozen=True, slots=True)
class StepTaken:
    key: QuotaKey
    before: int
    after: int
    step: int
    total: int
    reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Progress:
    """Per key: applied value, target, steps applied / planned, waiting for drain, last step time."""

    key: QuotaKey
    current: int
    target: int
    applied_steps: int
    total_steps: int
    waiting: bool
    last_step_at: float | None
    phase: str


@dataclass
class TransitionOutcome:
    quotas: dict[QuotaKey, QuotaLimits] = field(default_factory=dict)
    status: list[dict[str, Any]] = field(default_factory=list)
    steps: list[StepTaken] = field(default_factory=list)
    started: list[tuple[QuotaKey, int, int, int]] = field(default_factory=list)  # key, from, to, steps
    finished: list[QuotaKey] = field(default_factory=list)
    blocked: list[tuple[QuotaKey, str]] = field(default_factory=list)
    progress: list[Progress] = field(default_factory=list)
    waiting_reasons: dict[QuotaKey, str] = field(default_factory=dict)
    # Past the deadline: usage above the quota in force, and how many victims the budget allows.
    to_free: list[tuple[QuotaKey, int, int, tuple[str, ...]]] = field(default_factory=list)

    @property
    def active(self) -> int:
        return sum(1 for p in self.progress if p.phase != COMPLETE)


@dataclass(frozen=True, slots=True)
class _Stored:
    plan: QuotaShiftPlan
    last: LastApplied | None
    generation: int | None
    phase: str


def _stored_entries(entries: list[dict[str, Any]]) -> dict[QuotaKey, _Stored]:
    out: dict[QuotaKey, _Stored] = {}
    for e in entries:
        try:
            key = QuotaKey.of(str(e["team"]), str(e["flavor"]), str(e["resource"]))
            plan_doc = e.get("plan")
            if not isinstance(plan_doc, Mapping):
                continue
            plan = plan_from_dict(plan_doc)
            last_doc = e.get("lastApplied")
            last = last_applied_from_dict(last_doc) if isinstance(last_doc, Mapping) else None
            gen = e.get("policyGeneration")
        except (InputError, KeyError) as err:
            log.warning("ignoring unreadable transition status entry %s: %s", e, err)
            continue
        out[key] = _Stored(plan, last, gen if isinstance(gen, int) else None, str(e.get("phase", RUNNING)))
    return out


def _qk(key: QuotaKey) -> QuotaKey:
    return key


def _value(plan_map: tuple[tuple[QuotaKey, int], ...], qk: QuotaKey) -> int:
    return dict(plan_map)[qk]


def plan_transitions(policy: QuotaPolicy, generation: int | None, stored_status: list[dict[str, Any]],
                     live: Mapping[str, Mapping[tuple[str, str], int]], usage: Mapping[QuotaKey, int],
                     now: float, past_preemptions: Sequence[float] = ()) -> TransitionOutcome:
    """Decide the quotas in force now. `live`: nominal per (flavor, resource) of each live
    ClusterQueue (absent = not created yet: the target applies at once)."""
    targets = spec_quotas(policy)
    stored = _stored_entries(stored_status)
    out = TransitionOutcome()
    for key in sorted(targets):
        limits = targets[key]
        tgt = limits.nominal
        qk = _qk(key)
        entry = stored.get(key)
        plan: QuotaShiftPlan | None = None
        last: LastApplied | None = None
        gen = generation
        if entry is not None and _value(entry.plan.target, qk) == tgt:
            plan, last, gen = entry.plan, entry.last, entry.generation
        else:
            if entry is not None:  # the target changed mid-transition: re-plan from what is applied now
                current = _value(entry.last.quotas, qk) if entry.last else _value(entry.plan.current, qk)
            else:
                current = live.get(key.team, {}).get((key.flavor, key.resource), tgt) \
                    if key.team in live else tgt
            if current != tgt:
                try:
                    spec = transition_spec(policy, key.team, key.resource)
                    plan = make_plan({qk: current}, {qk: tgt}, spec, start=now)
                except InputError as err:
                    out.blocked.append((key, err.one_line()))
                    out.quotas[key] = QuotaLimits(current, limits.borrowing_limit, limits.lending_limit)
                    out.status.append({"team": key.team, "flavor": key.flavor, "resource": key.resource,
                                       "from": format_milli(current), "to": format_milli(tgt),
                                       "current": format_milli(current), "phase": BLOCKED,
                                       "policyGeneration": generation, "message": err.one_line()})
                    out.progress.append(Progress(key, current, tgt, 0, 0, False, None, BLOCKED))
                    continue
                out.started.append((key, current, tgt, len(plan.steps) - 1))
        if plan is None:
            out.quotas[key] = limits
            continue
        action = next_action(plan, last, now, {qk: usage.get(key, 0)}, past_preemptions)
        if action.to_free and action.preemptions_allowed > 0:
            excess = sum(q for _, q in action.to_free)
            out.to_free.append((key, excess, action.preemptions_allowed, action.reasons))
        value = _value(action.quotas, qk)
        before = _value(last.quotas, qk) if last else _value(plan.current, qk)
        if action.changed:
            out.steps.append(StepTaken(key, before, value, action.step, len(plan.steps) - 1, action.reasons))
            last = action.last_applied
        scheduled = _value(plan.steps[action.step].quotas, qk) if action.step >= 0 else before
        waiting = not action.done and value > scheduled and usage.get(key, 0) > scheduled
        if waiting:
            out.waiting_reasons[key] = "; ".join(r for r in action.reasons if "drains first" in r) or \
                f"{usage.get(key, 0)}m in use drains first"
        phase = COMPLETE if action.done else (DRAINING if waiting else RUNNING)
        if action.done and (entry is None or entry.phase != COMPLETE):
            out.finished.append(key)
        out.quotas[key] = QuotaLimits(value, limits.borrowing_limit, limits.lending_limit)
        next_at = next((s.at for s in plan.steps if s.at > now), None)
        if last is not None and not action.done:
            next_at = max(next_at or 0.0, last.at + plan.spec.step_interval)
        doc: dict[str, Any] = {
            "team": key.team, "flavor": key.flavor, "resource": key.resource,
            "from": format_milli(_value(plan.current, qk)), "to": format_milli(tgt),
            "current": format_milli(value), "phase": phase, "startedAt": rfc3339(plan.start),
            "lastAppliedStep": last.step if last else -1, "totalSteps": len(plan.steps) - 1,
            "plan": plan_to_dict(plan),
        }
        if gen is not None:
            doc["policyGeneration"] = gen
        if last is not None:
            doc["lastApplied"] = last_applied_to_dict(last)
        if next_at is not None and not action.done:
            doc["nextStepAt"] = rfc3339(next_at)
        if waiting:
            doc["message"] = out.waiting_reasons[key]
        out.status.append(doc)
        applied_steps = len(plan.steps) - 1 if action.done else (max(0, last.step) if last else 0)
        out.progress.append(Progress(key, value, tgt, applied_steps, len(plan.steps) - 1, waiting,
                                     last.at if last else None, phase))
    return out


def deadline_victims(workloads: Mapping[str, Workload], key: QuotaKey, excess: int, allowed: int,
                     now: float) -> list[tuple[str, str]]:
    """Victims for a transition past its deadline among the workloads of the team's ClusterQueue
    holding the flavor-resource; the rule is the core's (fairshare.planners.deadline), shared with
    the simulator. Returns (workload key, one-line reason)."""
    fr = FlavorResource(key.flavor, key.resource)
    holders = []
    for k in sorted(workloads):
        wl = workloads[k]
        adm = wl.admission
        if adm is None or adm.cluster_queue != key.team or not wl.has_quota_reservation or wl.is_finished:
            continue
        holders.append(Holder(k, wl.effective_priority, wl.quota_reserved_time, adm.usage().get(fr, 0)))
    what = f"transition of {key.team} {key.flavor}/{key.resource}"
    return [(v.key, v.reason) for v in core_deadline_victims(holders, excess=excess, allowed=allowed, now=now,
                                                             what=what)]
