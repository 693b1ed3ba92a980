"""Quota transitions: the policy's quotas vs the quotas in force -> plans of the quota-shift planner, one per
(team, flavor, resource), kept in `status.transitions` (DESIGN.md "Quota transitions").

Pure. Restart safety comes from the planner's contract: (plan, last applied step) fully determine the next
action (docs/history-and-planners.md, "Restart"), and the operator writes the new status BEFORE it changes
the ClusterQueue (a crash in between re-applies the same step from status; a step is never skipped nor
applied twice). The simulator keeps the same records in memory.

Rules (each once, here):
- A quota of the spec that differs from the quota in force starts a plan from the value in force, with the
  team's transition settings (`rules.transition_spec`); a team whose ClusterQueue does not exist yet gets
  its quota at once.
- The target changing mid-transition cancels the plan where it stands (`CancelTransition`) and plans
  again from the value then in force.
- A plan that cannot be made (e.g. a target below the floor) is `Blocked`: the quota in force stays, the
  reason is reported once and shown in status.
- Each reconcile asks the planner's `next_action` with the live usage of that flavor-resource in the
  ClusterQueue; a due step held back by drain is `Draining` (reported once when the wait starts).
- Past the deadline, usage above the quota in force is one of two things (docs/policy.md, "What a cut
  means"). Above what the team may hold at all (its nominal plus its Kueue borrowingLimit; a team
  without a cohort cannot borrow) it must fall: the transition is `Preempting` (reported once when it
  starts; bounded by maxVictimsPerHour, victims chosen by `fairshare.planners.deadline`), and Kueue
  cannot re-admit a victim by borrowing. Within that, it is borrowing, which Kueue allows: the
  transition is `Borrowing` (reported once), and the decision evicts only for another team's pending
  work that the what-if shows would take the freed quota (`TransitionsOutcome.borrowed`, decide step 3b).
- A transition once Complete stays Complete while its target holds: what the team borrows later is
  Kueue's ordinary borrowing, not the cut's unfinished business.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from fairshare.errors import InputError
from fairshare.models import ClusterQueueName, FlavorResource, QuotaKey, ResourceQuota
from fairshare.planners.quota_shift import (
    LastApplied,
    QuotaShiftPlan,
    last_applied_from_dict,
    last_applied_to_dict,
    make_plan,
    next_action,
    plan_from_dict,
    plan_to_dict,
)
from fairshare.policy import format_milli
from fairshare.policy.status import LastAppliedDoc, PlanDoc, TransitionPhase, TransitionStatus
from fairshare.quantity import describe_quantity, parse_quantity
from fairshare.timestamps import rfc3339

from .actions import (
    Action,
    AdvanceTransition,
    AuditAction,
    BlockTransition,
    CancelTransition,
    FinishTransition,
    RecordAudit,
    StartTransition,
    Target,
    WaitForDrain,
)
from .rules import PolicyRules
from .same import same_objects

log = logging.getLogger("fairshare.control.transitions")


def in_force(nominal: int, limits: ResourceQuota) -> ResourceQuota:
    """The quota in force at `nominal` during a transition to `limits` (the target's nominal and limits).
    Kueue's webhook refuses a lendingLimit above the nominalQuota (pkg/webhooks/clusterqueue_webhook.go
    validateLendingLimit): a step of a ramp-up below the target's lendingLimit lends at most what it has."""
    lending = limits.lending_limit
    return ResourceQuota(nominal, limits.borrowing_limit, None if lending is None else min(lending, nominal))


# Enum members read in per-decision loops, once: in the compiled core a member read through its class
# (`TransitionPhase.COMPLETE`) is a generic attribute lookup through the enum metaclass's __getattr__ hook,
# several hundred instructions each; a module-level Final is a static.
_COMPLETE: Final = TransitionPhase.COMPLETE

@dataclass(frozen=True, slots=True, init=False)
class Progress:
    """Per key, for metrics: value in force, target, steps applied / planned, waiting, last step time, when
    the next step is due (None: no step to come) and the plan's step interval."""

    key: QuotaKey
    current: int
    target: int
    applied_steps: int
    total_steps: int
    waiting: bool
    last_step_at: float | None
    phase: TransitionPhase
    next_step_at: float | None = None
    step_interval: float | None = None

    def __init__(self, key: QuotaKey, current: int, target: int, applied_steps: int, total_steps: int,
                 waiting: bool, last_step_at: float | None, phase: TransitionPhase,
                 next_step_at: float | None = None, step_interval: float | None = None) -> None:
        # (init=False: a dataclass-generated __init__ runs interpreted even compiled; scheduler/types.py)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "current", current)
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "applied_steps", applied_steps)
        object.__setattr__(self, "total_steps", total_steps)
        object.__setattr__(self, "waiting", waiting)
        object.__setattr__(self, "last_step_at", last_step_at)
        object.__setattr__(self, "phase", phase)
        object.__setattr__(self, "next_step_at", next_step_at)
        object.__setattr__(self, "step_interval", step_interval)


@dataclass(frozen=True, slots=True)
class ToFree:
    """Past a deadline: usage held above the quota in force, and how many victims the budget allows now.
    In `TransitionsOutcome.to_free`: above what the team may hold at all (nominal + borrowingLimit),
    evicted within the hourly budget; in `.borrowed`: held by borrowing within it, evicted only for
    another team's pending work (the decision reads the budget then: `allowed` is 0 there)."""

    key: QuotaKey
    excess: int
    allowed: int


@dataclass(frozen=True, slots=True)
class Stranded:
    """Quota of a cohort tree's flavor-resource that the policy's change hands to no team."""

    root: str
    flavor_resource: FlavorResource
    amount: int  # milli-units


@dataclass(init=False)
class TransitionsOutcome:
    in_force: dict[QuotaKey, ResourceQuota] = field(default_factory=dict)
    records: list[TransitionStatus] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    progress: list[Progress] = field(default_factory=list)
    to_free: list[ToFree] = field(default_factory=list)
    # Past a deadline, borrowing within the team's limit: evicted only for another team's work (decide 3b).
    borrowed: list[ToFree] = field(default_factory=list)
    blocked: list[tuple[QuotaKey, str]] = field(default_factory=list)
    stranded: list[Stranded] = field(default_factory=list)
    wake: float | None = None

    def __init__(
        self,
        in_force: dict[QuotaKey, ResourceQuota] | None = None,
        records: list[TransitionStatus] | None = None,
        progress: list[Progress] | None = None,
        stranded: list[Stranded] | None = None,
        wake: float | None = None,
        borrowed: list[ToFree] | None = None,
    ) -> None:
        # (init=False: a dataclass-generated __init__ runs interpreted even compiled; scheduler/types.py)
        self.in_force = in_force if in_force is not None else {}
        self.records = records if records is not None else []
        self.actions = []
        self.progress = progress if progress is not None else []
        self.to_free = []
        self.borrowed = borrowed if borrowed is not None else []
        self.blocked = []
        self.stranded = stranded if stranded is not None else []
        self.wake = wake

    @property
    def active(self) -> int:
        return sum(1 for p in self.progress if p.phase != _COMPLETE)

    def _wake(self, at: float | None) -> None:
        if at is not None and (self.wake is None or at < self.wake):
            self.wake = at


@dataclass
class _Probe:
    """What one computation read that can change without its inputs' identity changing: the usage of the
    keys whose result depends on it, and the first time at which a plan's result can change (a step falls
    due, the one-change-per-interval window closes, the deadline passes)."""

    reads: list[tuple[QuotaKey, int]] = field(default_factory=list)
    until: float = math.inf


class QuotaHeld(Protocol):
    """The quota held per key, as the step reads it: `usage.get(key, 0)` (a dict, or
    fairshare.control.decide.HeldQuota)."""

    def get(self, key: QuotaKey, default: int, /) -> int: ...


# What a transitions step is computed from besides usage, time and past evictions: the rules, the policy
# generation, the stored records and the live quotas.
_Live = Mapping[str, Mapping[FlavorResource, ResourceQuota]]
_Inputs = tuple[PolicyRules, "int | None", Sequence[TransitionStatus], _Live]


class _KeyStep:
    """One quota's part of a transitions step (`_advance` into its own outcome) that changed nothing: no
    action, nothing to free, the stored record kept. What it read: the plan, its progress and the stored
    entry (objects: a stored record and its parsed plan are the same objects while the record is), the
    limits, generation, pair group and policy name, the usage when `_note` says the result reads it, and
    `now` within [since, until) (no step, step-interval window or deadline in between: `_note`). The same
    inputs, the same part: its quota in force, progress, record and wake-up."""

    __slots__ = ("borrowed", "cap", "entry", "gen", "group", "in_force", "last", "limits", "plan", "policy",
                 "progress", "read", "record", "since", "until", "used", "wake")

    def __init__(self, plan: QuotaShiftPlan, last: LastApplied | None, limits: ResourceQuota, entry: _Stored,
                 gen: int | None, group: str | None, policy: str, read: bool, used: int, since: float,
                 until: float, part: TransitionsOutcome, key: QuotaKey, cap: int | None) -> None:
        self.plan, self.last, self.limits, self.entry = plan, last, limits, entry
        self.gen, self.group, self.policy, self.cap = gen, group, policy, cap
        self.read, self.used, self.since, self.until = read, used, since, until
        self.in_force = part.in_force[key]
        self.progress = part.progress[0]
        self.record = part.records[0]
        self.wake = part.wake
        self.borrowed = list(part.borrowed)


@dataclass
class TransitionMemo:
    """The last `step_transitions` outcome that changed nothing (no action, every stored record kept as it
    was, nothing to free, nothing blocked), with what it was computed from. The next call returns it again
    when its inputs are the same: the same rules and generation, the same stored record objects in the same
    order, equal live quotas, equal usage of the keys whose result reads it, and `now` in [since, until)
    (no step, step-interval window or deadline in between). Every input of the outcome is then the same,
    so the outcome is (tests/unit/control/test_transition_memo.py; `python -m benchmarks.differential
    --controller`). Held by the shell with the gate's memo; `FastPaths.memo_transitions` switches it."""

    rules: PolicyRules | None = None
    generation: int | None = None
    stored: tuple[TransitionStatus, ...] = ()
    live: dict[str, dict[FlavorResource, ResourceQuota]] = field(default_factory=dict)
    # The live map object the kept outcome was computed from: given again, it holds what it held (a caller
    # never changes a live map it passed: fairshare.control.decide keeps one while the quotas are the same,
    # Snapshot.quota_id), and is not compared again.
    live_given: _Live | None = None
    reads: tuple[tuple[QuotaKey, int], ...] = ()
    since: float = math.inf
    until: float = -math.inf
    outcome: TransitionsOutcome | None = None
    hits: int = 0  # outcomes returned again (for tests and benchmarks)
    # When the whole outcome cannot be returned again (the usage a cut reads moved, a step fell due
    # elsewhere), each quota's own quiet part of the last steps (_KeyStep), by key.
    steps: dict[QuotaKey, _KeyStep] = field(default_factory=dict)
    step_hits: int = 0  # quotas' parts returned again (for tests and benchmarks)
    # The last stranded quota (`_stranded`) with what it was computed from: the rules object and each running
    # plan's starting value, in order (every other input is the rules').
    stranded: tuple[PolicyRules, tuple[tuple[QuotaKey, int], ...], list[Stranded]] | None = None

    def reuse(self, inputs: _Inputs, usage: QuotaHeld, now: float) -> TransitionsOutcome | None:
        kept = self.outcome
        if kept is None or not self.holds(inputs, usage, now):
            return None
        return _quiet_copy(kept)

    def holds(self, inputs: _Inputs, usage: QuotaHeld, now: float) -> bool:
        """Whether a step with these inputs returns the kept outcome again (`reuse` without the copy;
        counted as a hit)."""
        rules, generation, stored, live = inputs
        if self.outcome is None or rules is not self.rules or generation != self.generation:
            return False
        if not self.since <= now < self.until or not same_objects(stored, self.stored):
            return False
        if any(usage.get(key, 0) != used for key, used in self.reads):
            return False
        if live is not self.live_given and live != self.live:
            return False
        self.hits += 1
        return True

    def keep(self, inputs: _Inputs, now: float, probe: _Probe, out: TransitionsOutcome) -> None:
        rules, generation, stored, live = inputs
        quiet = not out.actions and not out.to_free and not out.blocked and len(out.records) == len(stored)
        if quiet:
            ids = {id(r) for r in stored}
            quiet = len(ids) == len(stored) and all(id(r) in ids for r in out.records)
        if not quiet:
            self.outcome = None  # the next call's stored records differ from these: nothing to keep
            return
        self.rules, self.generation, self.stored = rules, generation, tuple(stored)
        self.live = {team: dict(quotas) for team, quotas in live.items()}
        self.live_given = live
        self.reads, self.since, self.until = tuple(probe.reads), now, probe.until
        self.outcome = _quiet_copy(out)


def _quiet_copy(out: TransitionsOutcome) -> TransitionsOutcome:
    """A copy of a quiet outcome (no action, nothing to free past what the team may hold, nothing blocked)
    that its reader may change. Borrowing past a deadline (`borrowed`) is part of it: what the decision
    does with it (the what-if of step 3b) is read from the snapshot every time."""
    return TransitionsOutcome(
        in_force=dict(out.in_force),
        records=list(out.records),
        progress=list(out.progress),
        stranded=list(out.stranded),
        wake=out.wake,
        borrowed=list(out.borrowed),
    )


@dataclass(frozen=True, slots=True)
class _Stored:
    record: TransitionStatus
    plan: QuotaShiftPlan | None  # None: unreadable (another schema version): re-plan
    last: LastApplied | None
    key: QuotaKey  # the record's team, flavor and resource (made from it)


def _parsed_of(record: TransitionStatus) -> object:
    """``record._parsed``, read from the model's private values: the attribute goes through pydantic's
    BaseModel.__getattr__, which probes the PrivateAttr's descriptor with hasattr and an exception raised
    inside (about 6 us a read; 423,000 reads in `make bench BENCH=plan`'s two short runs)."""
    private = record.__pydantic_private__
    return private.get("_parsed") if private else None


def _key_of(r: TransitionStatus) -> QuotaKey:
    return QuotaKey.of(ClusterQueueName(r.team), r.flavor, r.resource)


def _stored(records: Sequence[TransitionStatus]) -> dict[QuotaKey, _Stored]:
    out: dict[QuotaKey, _Stored] = {}
    for r in records:
        parsed = _parsed_of(r)
        if isinstance(parsed, _Stored):
            # (its key: the record's own, as it was made with it; read, not made again per decision)
            out[parsed.key if parsed.record is r else _key_of(r)] = parsed
            continue
        key = _key_of(r)
        plan: QuotaShiftPlan | None = None
        last: LastApplied | None = None
        try:
            if r.plan is not None:
                plan = plan_from_dict(r.plan.model_dump(by_alias=True, exclude_none=True))
            if r.last_applied is not None:
                last = last_applied_from_dict(r.last_applied.model_dump(by_alias=True, exclude_none=True))
        except InputError as err:
            log.warning("re-planning %s: its stored plan is unreadable: %s", key, err.one_line())
            plan, last = None, None
        out[key] = _Stored(r, plan, last, key)
    return out


def _with_from(record: TransitionStatus, milli: int) -> TransitionStatus:
    # `from` is a Python keyword: the field is `from_` with the alias "from".
    return record.model_copy(update={"from_": format_milli(milli)})


def _value(values: tuple[tuple[QuotaKey, int], ...], key: QuotaKey) -> int:
    """``dict(values)[key]`` without making the dict (a plan's maps hold one key each here: a million reads in
    the plan benchmark's 14-day run); the keys are unique (QuotaMap)."""
    for k, v in values:
        if k is key or k == key:
            return v
    raise KeyError(key)


# A quota's plan as this decision runs it: the plan, its progress, the generation that started it, and the
# stored record (None for a plan starting now).
_Running = tuple[QuotaShiftPlan, "LastApplied | None", "int | None", "_Stored | None"]


def step_transitions(
    rules: PolicyRules,
    generation: int | None,
    stored: Sequence[TransitionStatus],
    live: Mapping[str, Mapping[FlavorResource, ResourceQuota]],
    usage: QuotaHeld,
    now: float,
    past_evictions: Sequence[float] = (),
    memo: TransitionMemo | None = None,
) -> TransitionsOutcome:
    """The quotas in force at `now` and the transition records. `live`: the quotas of each team's live
    ClusterQueue (a team absent has none yet: its spec applies at once; never changed once passed: the
    memo knows a map it was given again by identity); `usage`: quota held per key;
    `past_evictions`: times of past transition-deadline evictions (their budget; read only when usage is
    to be freed, which no kept outcome has); `memo`: the last quiet outcome (TransitionMemo)."""
    if memo is not None:
        kept = memo.reuse((rules, generation, stored, live), usage, now)
        if kept is not None:
            return kept
    probe = _Probe() if memo is not None else None
    targets = rules.targets
    entries = _stored(stored)
    out = TransitionsOutcome()
    # 1. Each quota's plan: the stored one if its target still holds, else a new one from the value in force.
    running: dict[QuotaKey, _Running] = {}
    starting: list[QuotaKey] = []
    for key in sorted(targets):
        limits = targets[key]
        tgt = limits.nominal
        entry = entries.get(key)
        if entry is not None and entry.plan is not None and _value(entry.plan.target, key) == tgt:
            running[key] = (entry.plan, entry.last, entry.record.policy_generation, entry)
            continue
        current = _current(entry, key, live, tgt)
        unfinished = entry is not None and entry.record.phase != _COMPLETE
        if entry is not None and entry.plan is not None and unfinished:
            out.actions.append(CancelTransition(key, current, _value(entry.plan.target, key), tgt))
        if current == tgt:
            out.in_force[key] = limits
            continue
        try:
            plan = make_plan({key: current}, {key: tgt}, rules.transition_spec(key), start=now)
        except InputError as err:
            _blocked(out, key, entry, current, limits, tgt, generation, err.one_line())
            continue
        out.actions.append(
            StartTransition(
                key,
                current,
                tgt,
                len(plan.steps) - 1,
                f"the policy's quota changed (generation {generation})",
            )
        )
        running[key] = (plan, None, generation, None)
        starting.append(key)
    # 2. Paired moves: in one edit, cuts and grants of the same resource in the same cohort tree are one
    #    transition (DESIGN.md "Quota transitions"): a receiver gets each unit as its givers free it.
    groups = _pair_groups(rules, starting, running, generation)
    for key, (_, _, _, entry) in running.items():
        if key not in groups and entry is not None and entry.record.pair_group:
            groups[key] = entry.record.pair_group
    # 3. Every plan but the receivers' steps on its own schedule; 4. receivers follow their givers.
    receivers = [k for k in sorted(running) if k in groups and _growth(running[k][0], k) > 0]
    receiving = set(receivers)
    for key in sorted(running):
        if key in receiving:
            continue
        plan, last, gen, entry = running[key]
        cap = borrow_cap(rules, key, targets[key])
        if memo is not None and probe is not None:
            _advance_kept(memo, out, key, running[key], targets[key], usage.get(key, 0), now, past_evictions,
                          groups.get(key), rules.name, probe, cap)
            continue
        _advance(
            out,
            key,
            plan,
            last,
            targets[key],
            entry,
            gen,
            usage.get(key, 0),
            now,
            past_evictions,
            groups.get(key),
            policy=rules.name,
            probe=probe,
            cap=cap,
        )
    _advance_receivers(out, receivers, running, groups, targets)
    out.stranded = _stranded(rules, running) if memo is None else _stranded_kept(memo, rules, running)
    if memo is not None and probe is not None:
        memo.keep((rules, generation, stored, live), now, probe, out)
    return out


def borrow_cap(rules: PolicyRules, key: QuotaKey, limits: ResourceQuota) -> int | None:
    """How much of a flavor-resource the team may hold above its nominal quota by borrowing: its Kueue
    borrowingLimit (None: unlimited), 0 for a team without a cohort (Kueue: borrowingLimit needs a cohort,
    and a ClusterQueue without one admits within its nominal quota only)."""
    if key.team not in rules.cohort_roots:
        return 0
    return limits.borrowing_limit


def _growth(plan: QuotaShiftPlan, key: QuotaKey) -> int:
    return _value(plan.target, key) - _value(plan.current, key)


def _pair_groups(
    rules: PolicyRules,
    starting: Sequence[QuotaKey],
    running: Mapping[QuotaKey, _Running],
    generation: int | None,
) -> dict[QuotaKey, str]:
    """Among the plans starting now, the cuts and grants of one flavor-resource in one cohort tree."""
    by_tree: dict[tuple[str, FlavorResource], list[QuotaKey]] = {}
    for key in starting:
        root = rules.cohort_roots.get(key.team)
        if root is not None:
            by_tree.setdefault((root, key.flavor_resource), []).append(key)
    out: dict[QuotaKey, str] = {}
    for (root, fr), keys in sorted(by_tree.items()):
        growths = [_growth(running[k][0], k) for k in keys]
        if any(g > 0 for g in growths) and any(g < 0 for g in growths):
            group = f"{root}/{fr}@{generation if generation is not None else 0}"
            out.update(dict.fromkeys(keys, group))
    return out


def _advance_receivers(
    out: TransitionsOutcome,
    receivers: Sequence[QuotaKey],
    running: Mapping[QuotaKey, _Running],
    groups: Mapping[QuotaKey, str],
    targets: Mapping[QuotaKey, ResourceQuota],
) -> None:
    """A paired receiver's quota: what it had plus its share of what the group's givers have freed so far
    (the cohort's total quota never drops, never exceeds what it was); the part of the grants the cuts do
    not cover applies at once. Shared in the order of the policy's teams; never lowered."""
    members: dict[str, list[QuotaKey]] = {}
    for key, group in groups.items():
        if key in running:
            members.setdefault(group, []).append(key)
    # Each group's receivers in their order, bucketed once (not scanned per group: a policy of hundreds of
    # teams has as many receivers and tens of groups, and this runs at every decision).
    by_group: dict[str, list[QuotaKey]] = {}
    for k in receivers:
        by_group.setdefault(groups[k], []).append(k)
    for group in sorted(by_group):
        givers = [k for k in members[group] if _growth(running[k][0], k) < 0]
        takers = by_group[group]
        cut = sum(-_growth(running[k][0], k) for k in givers)
        grow = sum(_growth(running[k][0], k) for k in takers)
        freed = sum(_value(running[k][0].current, k) - out.in_force[k].nominal for k in givers)
        budget = max(0, grow - cut) + freed if givers else grow  # no giver left: nothing to wait for
        names = ", ".join(sorted({k.team for k in givers})) or "no giver"
        for key in takers:
            plan, _, gen, entry = running[key]
            start, growth = _value(plan.current, key), _growth(plan, key)
            share = min(growth, max(0, budget))
            budget -= share
            before = start
            if entry is not None and entry.record.current:
                before = parse_quantity(entry.record.current)
            value = max(before, start + share)
            _record_receiver(out, key, plan, targets[key], entry, gen, group, before, value, names)


def _record_receiver(
    out: TransitionsOutcome,
    key: QuotaKey,
    plan: QuotaShiftPlan,
    limits: ResourceQuota,
    entry: _Stored | None,
    gen: int | None,
    group: str,
    before: int,
    value: int,
    givers: str,
) -> None:
    tgt = limits.nominal
    r = key.resource
    done = value >= tgt
    phase = TransitionPhase.COMPLETE if done else TransitionPhase.RUNNING
    message = (
        None
        if done
        else (
            f"paired with {givers}: receives what it frees "
            f"({describe_quantity(value, r)} of {describe_quantity(tgt, r)})"
        )
    )
    if value != before:
        out.actions.append(
            AdvanceTransition(
                key,
                before,
                value,
                0,
                0,
                f"{key}: {describe_quantity(before, r)} -> {describe_quantity(value, r)}: freed by {givers} "
                "(paired move)",
            )
        )
    previous = entry.record.phase if entry is not None else None
    if done and previous != TransitionPhase.COMPLETE:
        out.actions.append(FinishTransition(key))
    out.in_force[key] = in_force(value, limits)
    out.progress.append(Progress(key, value, tgt, 1 if done else 0, 1, False, None, phase))
    old = entry.record if entry is not None else None
    if old is not None and (old.current, old.phase, old.message) == (format_milli(value), phase, message):
        out.records.append(old)
        return
    record = TransitionStatus(
        team=key.team,
        flavor=key.flavor,
        resource=key.resource,
        to=format_milli(tgt),
        current=format_milli(value),
        phase=phase,
        started_at=rfc3339(plan.start),
        policy_generation=gen,
        last_applied_step=-1,
        total_steps=0,
        message=message,
        pair_group=group,
        plan=PlanDoc.model_validate(plan_to_dict(plan)),
    )
    record = _with_from(record, _value(plan.current, key))
    record._parsed = _Stored(record, plan, None, key)
    out.records.append(record)


def _stranded(rules: PolicyRules, running: Mapping[QuotaKey, _Running]) -> list[Stranded]:
    """Quota a policy change takes from a cohort tree without giving it to any team there: the tree's total
    target below the total it had when the transitions started (capacity handed to nobody)."""
    had = {
        key: _value(running[key][0].current, key) if key in running else limits.nominal
        for key, limits in rules.targets.items()
    }
    return _shrunk_trees(rules.cohort_roots, had, {k: q.nominal for k, q in rules.targets.items()})


def stranded_by_change(old: PolicyRules, new: PolicyRules) -> list[Stranded]:
    """What `new` hands to nobody compared with `old` (its spec quotas), per cohort tree and flavor-resource
    of `new`: the same rule as the controller's status.strandedQuota (`qm policy check --previous`)."""
    had = {key: limits.nominal for key, limits in old.targets.items()}
    roots = {**old.cohort_roots, **new.cohort_roots}  # a team the change removes stays in its old tree
    return _shrunk_trees(roots, had, {key: limits.nominal for key, limits in new.targets.items()})


def _stranded_kept(memo: TransitionMemo, rules: PolicyRules, running: Mapping[QuotaKey, _Running]
                   ) -> list[Stranded]:
    """`_stranded`, computed again only when the rules object or a running plan's starting value changed
    (TransitionMemo.stranded): it reads nothing else, and at every decision of a policy of hundreds of
    teams it summed and sorted every quota again."""
    started = tuple((key, _value(run[0].current, key)) for key, run in running.items())
    kept = memo.stranded
    if kept is not None and kept[0] is rules and kept[1] == started:
        return list(kept[2])
    out = _stranded(rules, running)
    memo.stranded = (rules, started, list(out))
    return out


def _shrunk_trees(
    roots: Mapping[str, str], had: Mapping[QuotaKey, int], now: Mapping[QuotaKey, int]
) -> list[Stranded]:
    before: dict[tuple[str, FlavorResource], int] = {}
    after: dict[tuple[str, FlavorResource], int] = {}
    for key in sorted(set(had) | set(now)):
        root = roots.get(key.team) or f"cq:{key.team}"
        tree = (root, key.flavor_resource)
        before[tree] = before.get(tree, 0) + had.get(key, 0)
        after[tree] = after.get(tree, 0) + now.get(key, 0)
    return [
        Stranded(root, fr, before[(root, fr)] - after[(root, fr)])
        for root, fr in sorted(before)
        if before[(root, fr)] > after[(root, fr)]
    ]


def _current(
    entry: _Stored | None, key: QuotaKey, live: Mapping[str, Mapping[FlavorResource, ResourceQuota]], tgt: int
) -> int:
    """The value in force now, from which a new plan starts."""
    if entry is not None and entry.plan is not None:
        return _value(entry.last.quotas, key) if entry.last else _value(entry.plan.current, key)
    team = live.get(key.team)
    if team is None:
        return tgt  # the ClusterQueue does not exist yet: its quota applies at once
    quota = team.get(key.flavor_resource)
    return quota.nominal if quota is not None else tgt


def _blocked(
    out: TransitionsOutcome,
    key: QuotaKey,
    entry: _Stored | None,
    current: int,
    limits: ResourceQuota,
    tgt: int,
    generation: int | None,
    why: str,
) -> None:
    out.blocked.append((key, why))
    out.in_force[key] = in_force(current, limits)
    if entry is None or entry.record.phase != TransitionPhase.BLOCKED or entry.record.message != why:
        out.actions.append(BlockTransition(key, why))
    out.records.append(
        _with_from(
            TransitionStatus(
                team=key.team,
                flavor=key.flavor,
                resource=key.resource,
                to=format_milli(tgt),
                current=format_milli(current),
                phase=TransitionPhase.BLOCKED,
                policy_generation=generation,
                message=why,
            ),
            current,
        )
    )
    out.progress.append(Progress(key, current, tgt, 0, 0, False, None, TransitionPhase.BLOCKED))


def _advance(
    out: TransitionsOutcome,
    key: QuotaKey,
    plan: QuotaShiftPlan,
    last: LastApplied | None,
    limits: ResourceQuota,
    entry: _Stored | None,
    gen: int | None,
    used: int,
    now: float,
    past_evictions: Sequence[float],
    group: str | None = None,
    *,
    policy: str = "",
    probe: _Probe | None = None,
    cap: int | None = None,
) -> None:
    """`cap`: what the team may borrow above its nominal quota (borrow_cap)."""
    tgt = limits.nominal
    total = len(plan.steps) - 1
    action = next_action(plan, last, now, {key: used}, past_evictions)
    value = _value(action.quotas, key)
    before = _value(last.quotas, key) if last else _value(plan.current, key)
    if probe is not None:
        _note(probe, plan, last, key, now, before, value, used, action.step)
    if action.changed:
        why = "; ".join(action.reasons) or "scheduled step"
        out.actions.append(AdvanceTransition(key, before, value, action.step, total, why))
        last = action.last_applied
    scheduled = _value(plan.steps[action.step].quotas, key) if action.step >= 0 else before
    waiting = not action.done and value > scheduled and used > scheduled
    message = None
    if waiting:
        message = (
            "; ".join(r for r in action.reasons if "drains first" in r)
            or f"{describe_quantity(used, key.resource)} in use drains first"
        )
    previous = entry.record.phase if entry is not None and entry.plan is not None else None
    # Past the deadline, usage above the quota in force (action.to_free) splits in two: above what the team
    # may hold at all (nominal + borrowingLimit: `forced`) it must fall, and Kueue cannot re-admit a victim
    # by borrowing; within it, the team borrows idle cohort quota, as Kueue lets it, and an eviction frees
    # quota only if someone else's pending work takes it (the decision's what-if, step 3b). A transition
    # that completed stays complete: what its team borrows later is Kueue's ordinary borrowing.
    excess = 0 if action.done and previous == _COMPLETE else sum(q for _, q in action.to_free)
    forced = 0 if cap is None else max(0, excess - cap)
    borrowed = excess - forced
    done = action.done and excess == 0
    if forced and action.preemptions_allowed > 0:
        out.to_free.append(ToFree(key, forced, action.preemptions_allowed))
    elif forced:  # the hourly budget is used up: look again when its oldest eviction leaves it
        in_window = [t for t in past_evictions if now - 3600.0 < t <= now]
        if in_window:
            out._wake(min(in_window) + 3600.0)
    elif borrowed:
        out.borrowed.append(ToFree(key, borrowed, 0))
    if done:
        phase = TransitionPhase.COMPLETE
    elif forced:
        phase = TransitionPhase.PREEMPTING
    elif borrowed:
        phase = TransitionPhase.BORROWING
    elif waiting:
        phase = TransitionPhase.DRAINING
    else:
        phase = TransitionPhase.RUNNING
    if phase == TransitionPhase.DRAINING and previous != TransitionPhase.DRAINING and message is not None:
        out.actions.append(WaitForDrain(key, message))
    r = key.resource
    if phase == TransitionPhase.PREEMPTING:
        message = (f"{describe_quantity(forced, r)} in use above what {key.team} may hold "
                   f"({describe_quantity(value, r)} quota" + ("" if not cap else
                   f" + {describe_quantity(cap, r)} borrowing limit") + "): evicted within maxVictimsPerHour")
    elif phase == TransitionPhase.BORROWING:
        message = (f"{describe_quantity(borrowed, r)} borrowed above the quota in force "
                   f"({describe_quantity(value, r)}): evicted only when another team's pending work needs it")
    if phase == TransitionPhase.PREEMPTING and previous != TransitionPhase.PREEMPTING:
        limit = ("; it may not borrow" if not cap
                 else f" and its borrowing limit ({describe_quantity(cap, r)})")
        out.actions.append(RecordAudit(
            AuditAction.TRANSITION_DEADLINE, Target.policy(policy),
            f"transition of {key.team} {key.flavor_resource} is past its deadline with "
            f"{describe_quantity(forced, r)} in use above the quota in force ({describe_quantity(value, r)})"
            f"{limit}",
            "; ".join(x for x in action.reasons if x.startswith("past the deadline")) or "past the deadline",
            also_on=Target.cluster_queue(key.team)))
    if phase == TransitionPhase.BORROWING and previous != TransitionPhase.BORROWING:
        out.actions.append(RecordAudit(
            AuditAction.TRANSITION_DEADLINE, Target.policy(policy),
            f"transition of {key.team} {key.flavor_resource} is past its deadline with "
            f"{describe_quantity(borrowed, r)} borrowed above the quota in force "
            f"({describe_quantity(value, r)})",
            "the team may borrow idle cohort quota (" + ("no borrowingLimit" if cap is None else
            f"up to its borrowingLimit of {describe_quantity(cap, r)}") + "): its workloads are evicted only "
            "when another team's pending work needs that quota",
            also_on=Target.cluster_queue(key.team)))
    if done and previous != TransitionPhase.COMPLETE:
        out.actions.append(FinishTransition(key))
    out.in_force[key] = in_force(value, limits)
    next_at = next((s.at for s in plan.steps if s.at > now), None)
    if last is not None and not action.done:
        next_at = max(next_at or 0.0, last.at + plan.spec.step_interval)
    if not done:
        out._wake(next_at)
        deadline = plan.deadline_at
        if deadline is not None and now < deadline:
            out._wake(deadline)
    next_text = rfc3339(next_at) if next_at is not None and not action.done else None
    deadline_text = rfc3339(plan.deadline_at) if plan.deadline_at is not None else None
    applied = total if done else (max(0, last.step) if last else 0)
    out.progress.append(Progress(key, value, tgt, applied, total, waiting, last.at if last else None, phase,
                                 next_at if not action.done else None, plan.spec.step_interval))
    old = entry.record if entry is not None and entry.plan is plan else None
    unchanged = (
        old is not None
        and not action.changed
        and (old.phase, old.message, old.next_step_at, old.policy_generation, old.pair_group, old.deadline_at)
        == (phase, message, next_text, gen, group, deadline_text)
    )
    if old is not None and unchanged:
        out.records.append(old)  # nothing moved: the stored record stands (and keeps its parsed plan)
        return
    record = TransitionStatus(
        team=key.team,
        flavor=key.flavor,
        resource=key.resource,
        to=format_milli(tgt),
        current=format_milli(value),
        phase=phase,
        started_at=rfc3339(plan.start),
        policy_generation=gen,
        last_applied_step=last.step if last else -1,
        total_steps=total,
        next_step_at=next_text,
        deadline_at=deadline_text,
        message=message,
        pair_group=group,
        plan=PlanDoc.model_validate(plan_to_dict(plan)),
        last_applied=LastAppliedDoc.model_validate(last_applied_to_dict(last)) if last is not None else None,
    )
    record = _with_from(record, _value(plan.current, key))
    record._parsed = _Stored(record, plan, last, key)
    out.records.append(record)


def _advance_kept(
    memo: TransitionMemo,
    out: TransitionsOutcome,
    key: QuotaKey,
    running: _Running,
    limits: ResourceQuota,
    used: int,
    now: float,
    past_evictions: Sequence[float],
    group: str | None,
    policy: str,
    probe: _Probe,
    cap: int | None,
) -> None:
    """`_advance`, or its quiet part from an earlier step when every input of it is the same (_KeyStep);
    what it read goes to `probe` either way."""
    plan, last, gen, entry = running
    hit = memo.steps.get(key)
    if (
        hit is not None
        and hit.plan is plan
        and hit.last is last
        and hit.entry is entry
        and hit.since <= now < hit.until
        and (not hit.read or hit.used == used)
        and hit.limits == limits
        and hit.gen == gen
        and hit.group == group
        and hit.policy == policy
        and hit.cap == cap
    ):
        memo.step_hits += 1
        out.in_force[key] = hit.in_force
        out.progress.append(hit.progress)
        out.records.append(hit.record)
        out.borrowed.extend(hit.borrowed)
        out._wake(hit.wake)
        if hit.read:
            probe.reads.append((key, used))
        probe.until = min(probe.until, hit.until)
        return
    part, seen = TransitionsOutcome(), _Probe()
    _advance(part, key, plan, last, limits, entry, gen, used, now, past_evictions, group, policy=policy,
             probe=seen, cap=cap)
    out.actions.extend(part.actions)
    out.to_free.extend(part.to_free)
    out.borrowed.extend(part.borrowed)
    out.in_force.update(part.in_force)
    out.progress.extend(part.progress)
    out.records.extend(part.records)
    out._wake(part.wake)
    probe.reads.extend(seen.reads)
    probe.until = min(probe.until, seen.until)
    if (
        entry is not None
        and not part.actions
        and not part.to_free
        and len(part.records) == 1
        and part.records[0] is entry.record
    ):
        memo.steps[key] = _KeyStep(plan, last, limits, entry, gen, group, policy, bool(seen.reads), used, now,
                                   seen.until, part, key, cap)
    else:
        memo.steps.pop(key, None)


def _note(
    probe: _Probe,
    plan: QuotaShiftPlan,
    last: LastApplied | None,
    key: QuotaKey,
    now: float,
    before: int,
    value: int,
    used: int,
    due: int,
) -> None:
    """What `_advance`'s result at `now` reads besides its plan, progress and record objects. Usage: in
    next_action, only a cut reads it (a drain hold when the value applied is above the due step; the
    excess past the deadline), and here only a value above the due step does ("waiting", its message).
    Time: the due step (next_action's bisection), the step-interval window and the deadline each change
    at one instant, and so does the next step's time (the wake-up, `nextStepAt`)."""
    scheduled = _value(plan.steps[due].quotas, key) if due >= 0 else before
    deadline = plan.deadline_at
    cut = _value(plan.target, key) < _value(plan.current, key)
    past = deadline is not None and now >= deadline
    if value > scheduled or (cut and (before > scheduled or past)):
        probe.reads.append((key, used))
    until = next((s.at for s in plan.steps if s.at > now), math.inf)
    if last is not None and last.at + plan.spec.step_interval > now:
        until = min(until, last.at + plan.spec.step_interval)
    if deadline is not None and deadline > now:
        until = min(until, deadline)
    probe.until = min(probe.until, until)
