"""`decide(rules, observed, stored, now) -> Decision`: the one policy controller of the project.

Called by the operator on every event and tick, and by the simulator at every instant something changed
or a `WakeAt` falls due (both through `fairshare.control.replay.Controller`, which remembers the last quiet
decision). Pure: it reads the observation and the stored status and returns the new status and the
actions, the one channel of its effects: each is a change from what was observed (a quota, the weights, a
budget's hold, an eviction...) that the shells apply, the operator to the cluster and the simulator to its
model; the snapshot is left as it was found.

Outline of one decision:
  0. Budgets: thresholds due -> quota targets, held queues, records (fairshare.control.budgets).
  1. Transitions: the spec's quotas vs those in force -> steps due now (fairshare.control.transitions).
  2. Storms: repeated preempt -> re-admit cycles, reported and answered (fairshare.control.storm_response);
     weights: history-adjusted fairSharing weights, if the policy pushes them, paced and checked with the
     model for loops (fairshare.control.weights).
  3. With the new quotas and weights in force (a what-if on the snapshot, undone on exit):
     a. follow every eviction request along its lifecycle (fairshare.control.victims);
     b. transitions past their deadline: bounded evictions of what is held above the quota;
     c. starved protected work: the experiment-preemption gate and planner (fairshare.control.experiments).
  4. Status: records, counts; the next time a time-dependent input changes (`WakeAt`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from fairshare.models import ClusterQueueName, FlavorResource, QuotaKey, ResourceQuota
from fairshare.planners.budget import VictimBudget
from fairshare.policy import QuotaPolicy, format_milli
from fairshare.policy.status import (
    BlockedPreemption,
    EvictionKind,
    PreemptionRecord,
    QuotaPolicyStatus,
    StrandedQuota,
)
from fairshare.quantity import describe_quantity, parse_quantity

from .actions import (
    Action,
    ApplyQuota,
    AuditAction,
    PushWeights,
    RecordAudit,
    RequestEviction,
    Target,
    WakeAt,
)
from .budgets import budget_rules, evaluate
from .experiments import GateOutcome, PlanMemo, gate
from .history import HistoryBook, history_weights
from .idle import IdleOutcome, step_idle
from .observed import Observed
from .record_book import RecordBook
from .rules import PolicyRules
from .storm_response import StormOutcome, respond
from .transitions import Progress, ToFree, TransitionsOutcome, step_transitions
from .victims import (
    borrowed_requests,
    deadline_requests,
    eviction_times,
    follow_up,
    hold_record,
    in_flight,
    new_record,
    release_holds,
    trim,
)
from .weights import plan_push

TRANSITION_BUDGET_WINDOW = 3600.0  # maxVictimsPerHour


@dataclass(frozen=True, init=False)
class Decision:
    """The controller's reply: the new status and the actions to apply (what each shell changes), with what
    the operator reports of it (progress, blocked transitions, the gate, idle verdicts)."""

    rules: PolicyRules
    status: QuotaPolicyStatus
    actions: tuple[Action, ...]
    progress: tuple[Progress, ...] = ()
    blocked: tuple[tuple[QuotaKey, str], ...] = ()  # transitions that cannot be planned
    gate: GateOutcome = field(default_factory=GateOutcome)
    idle: IdleOutcome | None = None  # spec.idle: every experiment's activity verdict (None: not enabled)

    def __init__(
        self,
        rules: PolicyRules,
        status: QuotaPolicyStatus,
        actions: tuple[Action, ...],
        progress: tuple[Progress, ...] = (),
        blocked: tuple[tuple[QuotaKey, str], ...] = (),
        gate: GateOutcome | None = None,
        idle: IdleOutcome | None = None,
    ) -> None:
        # (init=False: a dataclass-generated __init__ runs interpreted even compiled; scheduler/types.py)
        object.__setattr__(self, "rules", rules)
        object.__setattr__(self, "status", status)
        object.__setattr__(self, "actions", actions)
        object.__setattr__(self, "progress", progress)
        object.__setattr__(self, "blocked", blocked)
        object.__setattr__(self, "gate", gate if gate is not None else GateOutcome())
        object.__setattr__(self, "idle", idle)

    @property
    def policy(self) -> QuotaPolicy:
        return self.rules.policy

    @property
    def wake_at(self) -> float | None:
        times = [a.at for a in self.actions if isinstance(a, WakeAt)]
        return min(times) if times else None

    @property
    def active_transitions(self) -> int:
        return sum(1 for p in self.progress if p.phase != "Complete")


def live_quotas(
    observed: Observed, policy: QuotaPolicy, teams: Sequence[str] | None = None
) -> dict[str, dict[FlavorResource, ResourceQuota]]:
    """The quotas of each team's ClusterQueue as it exists (teams without one are absent). `teams`: the
    policy's team names in spec order (PolicyRules.team_names), read instead of the spec."""
    out: dict[str, dict[FlavorResource, ResourceQuota]] = {}
    cqs = observed.snapshot.cluster_queues
    for name in teams if teams is not None else [t.name for t in policy.spec.teams]:
        cq = cqs.get(ClusterQueueName(name))
        if cq is not None:
            out[name] = dict(cq.node.quotas)
    return out


def quota_usage(
    observed: Observed,
    policy: QuotaPolicy,
    teams: Sequence[str] | None = None,
    keys: Mapping[str, Mapping[FlavorResource, QuotaKey]] | None = None,
) -> dict[QuotaKey, int]:
    """Quota held now per (team, flavor, resource) by the workloads admitted to the team's ClusterQueue.
    `teams`, `keys`: the team names in spec order and known keys by team and flavor-resource
    (PolicyRules.team_names, quota_keys), used instead of the spec and of equal new keys."""
    out: dict[QuotaKey, int] = {}
    cqs = observed.snapshot.cluster_queues
    none: Mapping[FlavorResource, QuotaKey] = {}
    for name in teams if teams is not None else [t.name for t in policy.spec.teams]:
        cq = cqs.get(ClusterQueueName(name))
        if cq is None:
            continue
        known = keys.get(name, none) if keys is not None else none
        for fr, milli in cq.node.usage.items():
            if milli:
                key = known.get(fr)
                out[key if key is not None else QuotaKey(ClusterQueueName(name), fr)] = milli
    return out


_Live = dict[str, dict[FlavorResource, ResourceQuota]]


class HeldQuota:
    """The quota held per key (`quota_usage`'s map), read from the team's ClusterQueue when a key is asked:
    `get(key, default)` is `quota_usage(...).get(key, default)` (a policy team's ClusterQueue, its usage of
    the flavor-resource when not 0), without building every team's map, of which the transitions step
    reads a few keys. Read while the snapshot is as it was observed (before the decision's what-ifs)."""

    __slots__ = ("_cqs", "_teams")

    def __init__(self, observed: Observed, teams: frozenset[str]) -> None:
        self._cqs = observed.snapshot.cluster_queues
        self._teams = teams

    def get(self, key: QuotaKey, default: int = 0, /) -> int:
        team = key.cluster_queue
        if team not in self._teams:
            return default
        cq = self._cqs.get(team)
        if cq is None:
            return default
        milli = cq.node.usage.get(key.flavor_resource, 0)
        return milli if milli else default


def quotas_now(
    observed: Observed, rules: PolicyRules, memo: PlanMemo | None
) -> tuple[_Live, Mapping[QuotaKey, int] | HeldQuota]:
    """`live_quotas` and `quota_usage` of the observed snapshot. With FastPaths.quota_reads: the live
    quotas of the last decision when it saw the same snapshot object with the same quotas
    (Snapshot.quota_id: changed by every quota change, restored by rollback, never reused) under the same
    rules (the quotas it read are then the same; its readers do not change it), and the quota held as a
    `HeldQuota`."""
    snap = observed.snapshot
    if not snap.paths.quota_reads:
        return (
            live_quotas(observed, rules.policy, rules.team_names),
            quota_usage(observed, rules.policy, rules.team_names, rules.quota_keys),
        )
    held = HeldQuota(observed, rules.teams)
    if memo is not None and memo.quotas is not None:
        seen, quotas, under, live = memo.quotas
        if seen is snap and quotas == snap.quota_id and under is rules:
            return live, held
    live = live_quotas(observed, rules.policy, rules.team_names)
    if memo is not None:
        memo.quotas = (snap, snap.quota_id, rules, live)
    return live, held


def decide(
    rules: PolicyRules,
    observed: Observed,
    stored: QuotaPolicyStatus | None,
    now: float,
    *,
    history: HistoryBook,
    generation: int | None = None,
    memo: PlanMemo | None = None,
) -> Decision:
    """One decision at `now` (seconds since the epoch, or simulated seconds). `rules`: the policy's rules
    (`PolicyRules.of(policy, overrides)`, made once per policy generation); `memo`: the shell's memory of
    the last blocked plan (fairshare.control.experiments.PlanMemo) and of the last quiet transitions step
    (its `transitions`, with FastPaths.memo_transitions), which spares computing unchanged inputs again."""
    previous = stored or QuotaPolicyStatus()
    policy = rules.policy
    name = policy.name
    # 0. Budgets (fairshare.control.budgets): each budget's consumption in its period comes in with the
    #    observation; what its thresholds make due comes out as quota targets that replace the spec's
    #    (shrink, deprioritize: they roll out through the transitions below, like any quota change), held
    #    LocalQueues (hold, rendered as stopPolicy) and records (alert).
    budgets = evaluate(
        policy, budget_rules(policy), rules.targets, observed.budget_usage, previous.budgets, now,
        held_teams(rules, observed),
    )
    stepping = replace(rules, targets={**rules.targets, **budgets.targets}) if budgets.targets else rules
    # 1. Transitions.
    # With FastPaths.records_memo, the records are read through their book (fairshare.control.record_book:
    # the same answers from each record's facts, kept from the last decision for the list it stored).
    book: RecordBook | None = None
    if memo is not None and observed.snapshot.paths.records_memo:
        book = memo.records.book(previous.last_preemptions)
    records = book.records if book is not None else list(previous.last_preemptions)
    # Past eviction requests per kind (each kind's budget). The gate reads the records after follow_up
    # below, which changes only their lifecycle fields (state, evicted_at, overdue), never which are real,
    # their kind or time: the same times.
    past = book.past if book is not None else eviction_times(records)
    live, usage = quotas_now(observed, rules, memo)
    tr: TransitionsOutcome = step_transitions(
        stepping,
        generation,
        previous.transitions,
        live,
        usage,
        now,
        past[EvictionKind.TRANSITION],
        memo.transitions if memo is not None and observed.snapshot.paths.memo_transitions else None,
    )
    actions: list[Action] = list(tr.actions)
    # In force, not live (the transaction sets no other), in key order: found first, then sorted (usually
    # none of the quotas in force differs from the live one, and sorting them all cost more than finding).
    # A team whose ClusterQueue is not there yet gets one with its quota in force: an action when that is
    # not the spec's (a budget's target), as the operator creates it from the spec otherwise.
    # With FastPaths.memo_transitions, the outcome the transitions' memo keeps after this step (if any) is
    # the one just returned (a copy of it, kept now or returned again) and its live quotas equal these (the
    # memo returns it again only then): while the memo keeps the same object, the same quotas differ.
    source = None
    if memo is not None and observed.snapshot.paths.memo_transitions:
        source = memo.transitions.outcome
    last_differs = memo.differs if memo is not None else None
    if source is not None and last_differs is not None and last_differs[0] is source:
        differs = last_differs[1]
    else:
        found: list[tuple[QuotaKey, ResourceQuota]] = []
        spec = rules.targets
        for key, quota in tr.in_force.items():
            team = live.get(key.team)
            if (team.get(key.flavor_resource) if team is not None else spec.get(key)) != quota:
                found.append((key, quota))
        found.sort(key=_first)
        differs = tuple(found)
        if memo is not None and source is not None:
            memo.differs = (source, differs)
    actions.extend(ApplyQuota(key, quota) for key, quota in differs)
    # Quota a change takes from a cohort tree and gives to nobody: reported once when it appears.
    stranded = [
        StrandedQuota(
            cohort=x.root,
            flavor=x.flavor_resource.flavor,
            resource=x.flavor_resource.resource,
            amount=format_milli(x.amount),
        )
        for x in tr.stranded
    ]
    known = {(x.cohort, x.flavor, x.resource, x.amount) for x in previous.stranded_quota}
    for x, raw in zip(stranded, tr.stranded, strict=True):
        if (x.cohort, x.flavor, x.resource, x.amount) not in known:
            actions.append(
                RecordAudit(
                    AuditAction.CAPACITY_STRANDED,
                    Target.policy(name),
                    f"cohort {x.cohort} loses {describe_quantity(raw.amount, x.resource)} of {x.flavor} "
                    "quota that no team receives",
                    "the policy lowers the cohort's total quota below what it had: that capacity "
                    "stays idle unless another team's quota grows by as much (a paired move)",
                )
            )
    # 2. Storms (fairshare.control.storm_response) and weights (fairshare.control.weights): repeated
    #    preempt -> re-admit cycles seen in the evictions are reported and answered (damped weights, a held
    #    preemptor); history-adjusted weights are pushed paced, and only when the model sees no loop under
    #    them.
    wakes: list[tuple[float, str]] = []
    storms = (respond(policy, observed, previous.storms, previous.pushed_weights, previous.weight_push,
                      rules.push_weights, now, rules.weights)
              if observed.evictions or previous.storms else StormOutcome())
    actions.extend(storms.actions)
    if storms.wake is not None:
        wakes.append((storms.wake, "an eviction storm's response ends"))
    weights: dict[str, str] | None = None
    push = previous.weight_push
    if rules.push_weights:
        if storms.weights is not None:
            weights, push = storms.weights, storms.push
        else:
            plan = plan_push(policy, observed, previous.pushed_weights, push,
                             lambda: history_weights(policy, history, now), now)
            weights, push = plan.in_force, plan.record
            actions.extend(plan.actions)
            if plan.wake is not None:
                wakes.append((plan.wake, "a weight push falls due"))
    # The weights in force (pushed, else the spec's) are an action whenever a ClusterQueue carries another
    # one and none was pushed now: after a crash between the status and the write, or when the policy
    # stops pushing or changes a fairShareWeight.
    weights_now: Mapping[str, str] | None = weights
    if not any(isinstance(a, PushWeights) for a in actions):
        in_force = weights if weights is not None else rules.weights
        if _stale_weights(observed, in_force, memo):
            actions.append(PushWeights(in_force, "the ClusterQueues carry other weights than the policy's in "
                                       "force" if weights is not None else "the policy's fairShareWeight"))
            weights_now = in_force
    # 3. Evictions, over the quotas and weights now in force.
    hold = rules.victim_hold_s
    preempt = rules.preemption
    gate_out = GateOutcome()
    snap = observed.snapshot
    with snap.transaction():
        # Only a quota that differs from the live one can differ from the node's (live: the nodes' quotas
        # before this transaction); the check below is the node's own.
        for key, quota in differs:
            cq = snap.cluster_queues.get(key.team)
            if cq is not None and cq.node.quota(key.flavor_resource) != quota:
                snap.set_quota(cq.node, key.flavor_resource, quota)
        for team_name, weight in sorted((weights_now or {}).items()):
            cq = snap.cluster_queues.get(ClusterQueueName(team_name))
            if cq is not None and cq.node.weight != parse_quantity(weight):
                snap.set_fair_sharing_weight(cq.node, parse_quantity(weight))
        if book is None:
            records, lifecycle, hold_wake = follow_up(records, observed, now, hold, name)
        else:
            positions = book.open_positions()
            records, lifecycle, hold_wake = follow_up(records, observed, now, hold, name, positions)
            book.replace(records, positions)
        actions.extend(lifecycle)
        if hold_wake is not None:
            wakes.append((hold_wake, "a victim's hold expires"))
        held, releases, held_wake = release_holds(previous.held_workloads, observed, now, hold)
        actions.extend(releases)
        if held_wake is not None:
            wakes.append((held_wake, "a held competitor's hold expires"))
        flight = book.in_flight() if book is not None else in_flight(records)
        requests: list[RequestEviction] = []
        if (tr.to_free or tr.borrowed) and not flight:
            # b. Past a deadline: what the team may not hold at all must fall (deadline_requests); what it
            #    borrows within its limit is evicted only for another team's pending work that takes it
            #    (borrowed_requests: the what-if), never to be re-admitted by borrowing.
            chosen = deadline_requests(tr.to_free, observed, now, rules.dry_run)
            if tr.borrowed:
                spent = past[EvictionKind.TRANSITION]
                lent, starving = borrowed_requests(
                    tr.borrowed, observed, now, rules.dry_run,
                    lambda key: _hourly(rules, key).remaining(spent, now) - _asked(chosen, key.team),
                    rules.starvation_grace_s,
                    rules.max_evictions_per_workload,
                )
                chosen += lent
                if starving is not None:
                    wakes.append((starving, "another team's pending work reaches its starvation grace"))
                wake = _budget_frees(tr.borrowed, rules, spent, now)
                if wake is not None:
                    wakes.append((wake, "a transition's hourly eviction budget frees a victim"))
            named: set[str] = set()
            for ask in chosen:  # a workload holding several cut flavor-resources is asked for once
                if ask.victim not in named:
                    named.add(ask.victim)
                    requests.append(ask)
        for req in requests:
            _add(records, book, new_record(req, now))
        if preempt is not None and not requests:
            gate_out = gate(
                preempt,
                observed,
                records,
                list(previous.blocked_preemptions),
                rules.teams,
                now,
                history.clamp(now),
                name,
                memo,
                past=past[EvictionKind.EXPERIMENT],
                flight=flight,
            )
            for req in gate_out.requests:
                _add(records, book, new_record(req, now))
            requests.extend(gate_out.requests)
            held += [hold_record(h, now) for h in gate_out.holds]
            actions.extend(gate_out.actions)
            if gate_out.wake is not None:
                wakes.append(
                    (
                        gate_out.wake,
                        "protected work reaches its starvation grace, or a blocked plan's inputs change",
                    )
                )
        # d. Idle GPUs (fairshare.control.idle): experiments whose GPUs did nothing over the window.
        idle_out: IdleOutcome | None = None
        if rules.idle is not None:
            idle_out = step_idle(rules.idle, observed, previous.idle_workloads, records,
                                 {r.victim for r in requests}, list(past[EvictionKind.IDLE]), rules.teams,
                                 now, name)
            for req in idle_out.requests:
                _add(records, book, new_record(req, now))
            requests.extend(idle_out.requests)
            actions.extend(idle_out.actions)
            if idle_out.wake is not None:
                wakes.append((idle_out.wake, "an experiment's GPUs become idle over the window, or its "
                              "reclamation falls due"))
        actions.extend(requests)
        actions.extend(gate_out.holds)
    actions.extend(budgets.actions)
    if budgets.wake is not None:
        wakes.append((budgets.wake, "a budget period ends, or a rolling budget is due a re-check"))
    if tr.wake is not None:
        wakes.append((tr.wake, "a transition step falls due"))
    for at, why in sorted(wakes):
        if at > now:
            actions.append(WakeAt(at, why))
            break
    keep_for = records_kept_for(rules)
    blocked: list[BlockedPreemption] = gate_out.blocked if preempt is not None else []
    if book is not None and memo is not None:
        memo.records.stored = book.trim(now, keep_for)
        kept = memo.records.stored.records
    else:
        kept = trim(records, now, keep_for)
    status = previous.model_copy(
        update={
            "observed_generation": generation,
            "teams": len(policy.spec.teams),
            "active_transitions": tr.active,
            "transitions": tr.records,
            "last_preemptions": kept,
            "blocked_preemptions": blocked,
            "pushed_weights": weights,
            "weight_push": push,
            "storms": storms.records,
            "stranded_quota": stranded,
            "held_workloads": held,
            "budgets": budgets.records,
            **({"idle_workloads": idle_out.records, "telemetry": idle_out.telemetry}
               if idle_out is not None else {}),
        }
    )
    return Decision(
        rules,
        status,
        tuple(actions),
        tuple(tr.progress),
        tuple(tr.blocked),
        gate_out,
        idle_out,
    )


def _hourly(rules: PolicyRules, key: QuotaKey) -> VictimBudget:
    """The transition's maxVictimsPerHour, as the quota-shift planner counts it (quota_shift.next_action)."""
    return VictimBudget(rules.transition_spec(key).max_victims_per_hour, TRANSITION_BUDGET_WINDOW)


def _asked(found: list[RequestEviction], team: str) -> int:
    return sum(1 for r in found if r.team == team)


def _budget_frees(borrowed: list[ToFree], rules: PolicyRules, spent: list[float], now: float) -> float | None:
    """When a borrowing transition whose hourly budget is spent may evict again (its oldest eviction in the
    window leaves it), if any is spent."""
    in_window = [t for t in spent if now - TRANSITION_BUDGET_WINDOW < t <= now]
    if not in_window:
        return None
    for item in borrowed:
        if _hourly(rules, item.key).remaining(spent, now) <= 0:
            return min(in_window) + TRANSITION_BUDGET_WINDOW
    return None


def _stale_weights(observed: Observed, weights: Mapping[str, str], memo: PlanMemo | None = None) -> bool:
    """Whether a team's ClusterQueue carries another fairSharing weight than `weights`. With `memo`, the
    weights are parsed once while the same ones are asked (PlanMemo.weights: every decision asks, with the
    spec's or the pushed weights, which rarely change)."""
    parsed: tuple[tuple[ClusterQueueName, int], ...] | None = None
    if memo is not None:
        kept = memo.weights
        if kept is not None and kept[0] == weights:
            parsed = kept[1]
    if parsed is None:
        parsed = tuple((ClusterQueueName(team), parse_quantity(weight)) for team, weight in weights.items())
        if memo is not None:
            memo.weights = (dict(weights), parsed)
    cqs = observed.snapshot.cluster_queues
    for team, milli in parsed:
        cq = cqs.get(team)
        if cq is not None and cq.node.weight != milli:
            return True
    return False


def held_teams(rules: PolicyRules, observed: Observed) -> frozenset[str]:
    """The teams whose LocalQueues are held in the cluster now (any of them: Observed.held_queues)."""
    held = observed.held_queues
    if not held:
        return frozenset()
    return frozenset(t for t, lqs in rules.local_queues.items() if any(lq in held for lq in lqs))


def records_kept_for(rules: PolicyRules) -> float:
    """How long status keeps a settled eviction record: the longest window an eviction budget counts."""
    preempt, idle = rules.preemption, rules.idle
    return max(preempt.planner.budget.window if preempt else 0.0, TRANSITION_BUDGET_WINDOW,
               idle.budget.window if idle is not None else 0.0)


def _first(pair: tuple[QuotaKey, ResourceQuota]) -> QuotaKey:
    return pair[0]


def _add(records: list[PreemptionRecord], book: RecordBook | None, record: PreemptionRecord) -> None:
    if book is None:
        records.append(record)
    else:
        book.append(record)  # to its records, which are `records`
