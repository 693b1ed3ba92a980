"""The experiment-preemption gate: when starved protected work makes the controller ask the planner
(`fairshare.planners.experiments`) for victims, and what it does with the answer.

Rules (once, here):
- Protected work: a workload of the policy's queues, pending and queued by Kueue, whose priority is at or
  above the lowest protected class's value.
- Starved: it has waited at least `spec.preemption.starvationGrace` since it last became pending (its
  creation or its last eviction), so that Kueue had the first chance to admit it or to preempt by itself.
- Nothing is planned while an eviction we requested is still in flight (Kueue has not released the quota
  yet: the snapshot would still count the victim).
- The planner sees the quotas that will be in force after this decision's transition steps.
- A beneficiary no valid set can help is reported once per reason (`status.blockedPreemptions`).
- Dry-run: would-be victims are reported once per (victim, beneficiary), nothing is evicted.
- Lost work: a beneficiary whose victims would lose more work (resource-hours: what they hold x how long
  they ran) than `spec.preemption.budget.maxLostHours` leaves in the window is not helped (reported).
- Competitors: the pending experiments Kueue would admit ahead of the beneficiaries with the freed quota
  are held with the victims (`spec.preemption.holdCompetingExperiments`; planner rule 6).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fairshare.models import ClusterQueueName, FlavorResource, QuotaKey, ResourceQuota
from fairshare.planners.experiments import (
    ExperimentPreemptionPlan,
    VictimDecision,
    VictimSearches,
    competing_experiments,
    plan_experiment_preemptions,
)
from fairshare.policy.status import BlockedPreemption, EvictionKind, PreemptionRecord
from fairshare.quota_tree import QuotaNode
from fairshare.snapshot import Snapshot

from .actions import Action, AuditAction, HoldPending, RecordAudit, RequestEviction, Target
from .eligible import ExperimentIndex
from .observed import Observed, PendingWorkload
from .record_book import RecordsMemo
from .rules import PolicyRules, PreemptionRules
from .transitions import TransitionMemo, TransitionsOutcome
from .victims import already_reported, in_flight, lost_in_window, past_eviction_times


@dataclass
class PlanMemo:
    """What the last plans that helped nobody were made from, and their blocked decisions. The operator
    calls the gate on every tick and the simulator at every instant; while protected work stays blocked
    the same inputs would give the same blocked plan again (the candidates' order by decayed history can
    drift between two events, but a plan that finds no set tried every candidate; a decision whose
    reason depends on that order, "needs N victim(s)", is remembered only for a tree whose experiments
    run in one queue, where the order is fixed). Held by the shell, one per policy.

    Two memories. `key`/`decisions`: the whole plan, by the whole snapshot's state id. `trees`: per quota
    tree (root cohort), the blocked decisions of the tree's starved work, by the tree's content token
    (Snapshot.tree_token) and what else the tree's decisions read; valid while `scope` (the snapshot
    object, the planner's rules, the victim budget left and used) is the same. A plan with no
    "preempt" decision decides each tree from that tree alone: a beneficiary's fit, Kueue's own
    preemption targets and the candidate experiments are all within its tree (rule 1), a "fits now"
    admission changes only its tree, and the budget is spent only by a "preempt" decision. So an event
    in one tree re-plans that tree's starved work only."""

    key: tuple[object, ...] | None = None
    decisions: tuple[tuple[str, str], ...] = ()  # (workload, reason) of each blocked beneficiary
    # With FastPaths.index_experiments, `key` leaves out the eligible experiments and `at` is the time it
    # was made at: they are compared (ExperimentIndex.key at both times) only when the rest matches, that
    # is in the same snapshot state, where the index names the same workloads at either time.
    at: float = 0.0
    scope: tuple[object, ...] | None = None
    trees: dict[object, tuple[tuple[object, ...], tuple[tuple[str, str], ...]]] = field(default_factory=dict)
    # The transitions' last quiet outcome (fairshare.control.transitions.TransitionMemo), kept here so the
    # shell holds one memory per policy.
    transitions: TransitionMemo = field(default_factory=TransitionMemo)
    # The experiments per ClusterQueue by reservation time (FastPaths.index_experiments).
    index: ExperimentIndex = field(default_factory=ExperimentIndex)
    # The last decision's live quotas, with the snapshot, its quotas' id (Snapshot.quota_id) and the rules
    # they were read under (FastPaths.quota_reads; fairshare.control.decide).
    quotas: tuple[Snapshot, int, PolicyRules, dict[str, dict[FlavorResource, ResourceQuota]]] | None = None
    # The quotas in force that differ from the live ones, with the transitions outcome they were found in
    # (fairshare.control.decide; reused while that memo returns the same outcome).
    differs: tuple[TransitionsOutcome, tuple[tuple[QuotaKey, ResourceQuota], ...]] | None = None
    # The book of the records the last decision stored (FastPaths.records_memo; fairshare.control.decide).
    records: RecordsMemo = field(default_factory=RecordsMemo)
    # The planner's victim searches of earlier plans (FastPaths.memo_victim_search).
    searches: VictimSearches = field(default_factory=VictimSearches)
    # The fairSharing weights the last decision compared, as given and parsed to milli-units
    # (fairshare.control.decide._stale_weights).
    weights: tuple[Mapping[str, str], tuple[tuple[ClusterQueueName, int], ...]] | None = None


@dataclass(init=False)
class GateOutcome:
    requests: list[RequestEviction] = field(default_factory=list)
    holds: list[HoldPending] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    blocked: list[BlockedPreemption] = field(default_factory=list)
    waiting: list[PendingWorkload] = field(default_factory=list)  # protected work pending now
    starved: int = 0
    planned: int = 0  # starved workloads the planner was asked about (the others' decisions were remembered)
    budget_remaining: int = 0
    wake: float | None = None

    def __init__(self) -> None:
        # (init=False: a dataclass-generated __init__ runs interpreted even compiled; scheduler/types.py)
        self.requests = []
        self.holds = []
        self.actions = []
        self.blocked = []
        self.waiting = []
        self.starved = 0
        self.planned = 0
        self.budget_remaining = 0
        self.wake = None

    def _wake(self, at: float) -> None:
        if self.wake is None or at < self.wake:
            self.wake = at


def protected_pending(
    rules: PreemptionRules, observed: Observed, teams: frozenset[str]
) -> list[PendingWorkload]:
    floor = rules.planner.protected_priority
    pending = observed.pending
    # Filtered, then sorted by key (the keys are unique: the order of sorted(pending.items())).
    return [
        pending[k]
        for k in sorted(
            k
            for k, p in pending.items()
            if p.queued and p.info.priority >= floor and p.info.cluster_queue in teams
        )
    ]


def _memo_key(
    observed: Observed, starved: list[PendingWorkload], remaining: int, eligible: tuple[object, ...]
) -> tuple[object, ...]:
    """The whole plan's memo key; `eligible`: the eligible experiments' names (`_eligible`), or `_BY_TIME`
    alone with the index (PlanMemo.at)."""
    snap = observed.snapshot
    weights = (
        tuple(sorted((n, c.node.weight) for n, c in snap.cluster_queues.items()))
        if observed.config.fair_sharing
        else ()
    )
    keys = tuple(p.info.key for p in starved)
    # The snapshot object with its state id: ids count per snapshot (the operator observes a new one on
    # every tick, whose ids start again).
    return (snap, snap.state_id, keys, remaining, eligible, weights)


_BY_TIME = "(by time: PlanMemo.at)"  # not a workload key (those are namespace/name)


def _eligible(rules: PreemptionRules, snap: Snapshot, now: float) -> tuple[str, ...]:
    """The admitted workloads an experiment plan may consider at `now`: below the experiment priority and
    past minRuntime, counted over all their attempts (WorkloadInfo.run_start; what time alone changes
    between two states of the snapshot)."""
    below, min_runtime = rules.planner.experiment_below_priority, rules.planner.min_runtime
    out: list[str] = []
    for k, w in snap.workloads.items():
        if w.priority >= below:
            continue
        start = w.run_start
        if start is None or now - start >= min_runtime:
            out.append(k)
    out.sort()
    return tuple(out)


def _order(p: PendingWorkload) -> tuple[int, float, str]:
    """The planner's order of beneficiaries (plan_experiment_preemptions: priority, then queue order)."""
    return (-p.info.priority, p.info.queue_order_time, p.info.key)


def _starved_by_root(
    snap: Snapshot, starved: list[PendingWorkload]
) -> tuple[dict[str, QuotaNode], dict[QuotaNode, list[tuple[object, ...]]]]:
    """The root of each starved workload's ClusterQueue (by ClusterQueue) and each root's starved work in
    the planner's order; work of a ClusterQueue the snapshot lacks has no tree."""
    roots: dict[str, QuotaNode] = {}
    work: dict[QuotaNode, list[tuple[object, ...]]] = {}
    for p in sorted(starved, key=_order):
        cq = snap.cluster_queues.get(p.info.cluster_queue)
        if cq is None:
            continue
        root = roots.get(p.info.cluster_queue)
        if root is None:
            root = roots[p.info.cluster_queue] = cq.node.root()
        work.setdefault(root, []).append((p.info.key, p.info.priority, p.info.queue_order_time))
    return roots, work


def _tree_key(
    snap: Snapshot, root: QuotaNode, nodes: list[QuotaNode], starved_here: list[tuple[object, ...]],
    experiments: tuple[object, ...]
) -> tuple[object, ...]:
    return (
        snap.tree_token(root),
        tuple(starved_here),
        experiments,
        tuple((n.name, tuple(sorted(n.quotas.items())), n.weight) for n in nodes),
        tuple(
            (cq.spec, cq.inactive_reason)
            for cq in (snap.cluster_queues[ClusterQueueName(n.name)] for n in nodes if n.is_cluster_queue)
        ),
    )


def _tree_keys(
    snap: Snapshot, starved: list[PendingWorkload], eligible: tuple[str, ...]
) -> tuple[dict[object, tuple[object, ...]], set[object]]:
    """Per quota tree holding starved work: what the tree's blocked decisions are made from. The tree's
    content token covers its usage, quotas, weights and admitted workloads as changed outside this
    decision's transaction; the nodes' quotas and weights as they are now cover the transaction's own
    changes (the steps and weights in force, set before the gate runs); the eligible experiments cover
    minRuntime passing; the starved work, its order. Work of a ClusterQueue the snapshot lacks has no
    tree (planned every time). `eligible`: `_eligible` at this decision.

    Also the trees whose eligible experiments all run in one queue (LocalQueue and ClusterQueue): the
    planner ranks candidates by their queue's over-share first (decayed history, which time alone
    changes), so only there is their order, and a decision that depends on it, fixed by the key."""
    roots, work = _starved_by_root(snap, starved)
    experiments: dict[QuotaNode, list[str]] = {root: [] for root in work}
    queues: dict[QuotaNode, set[tuple[str, str]]] = {root: set() for root in work}
    for k in eligible:
        w = snap.workloads[k]
        cq = snap.cluster_queues.get(w.cluster_queue)
        if cq is None:
            continue
        root = roots.get(w.cluster_queue)
        if root is None:
            root = roots[w.cluster_queue] = cq.node.root()
        if root in experiments:
            experiments[root].append(k)
            queues[root].add((w.local_queue, w.cluster_queue))
    out: dict[object, tuple[object, ...]] = {
        root: _tree_key(snap, root, root.subtree(), starved_here, tuple(experiments[root]))
        for root, starved_here in work.items()
    }
    return out, {root for root, qs in queues.items() if len(qs) <= 1}


def _tree_keys_indexed(
    snap: Snapshot, starved: list[PendingWorkload], index: ExperimentIndex, rules: PreemptionRules, now: float
) -> tuple[dict[object, tuple[object, ...]], set[object]]:
    """`_tree_keys` with each tree's eligible experiments named by its ClusterQueues' parts of
    ExperimentIndex.key (name, workloads version, eligible count) instead of listed (FastPaths.
    index_experiments): equal parts, equal eligible workloads. One queue: the eligible experiments of
    the tree are in at most one ClusterQueue, and there within the prefix of one LocalQueue."""
    below, min_runtime = rules.planner.experiment_below_priority, rules.planner.min_runtime
    _, work = _starved_by_root(snap, starved)
    out: dict[object, tuple[object, ...]] = {}
    one_queue: set[object] = set()
    for root, starved_here in work.items():
        nodes = root.subtree()
        experiments: list[tuple[str, int, int]] = []
        queues = 0
        for n in nodes:
            if not n.is_cluster_queue:
                continue
            q = index.of(snap, snap.cluster_queues[ClusterQueueName(n.name)], below)
            if not q.lqs:
                continue
            count = q.eligible(now, min_runtime)
            experiments.append((n.name, q.version, count))
            if count:
                queues += 1 if count <= q.uniform else 2
        out[root] = _tree_key(snap, root, nodes, starved_here, tuple(experiments))
        if queues <= 1:
            one_queue.add(root)
    return out, one_queue


def gate(
    rules: PreemptionRules,
    observed: Observed,
    records: list[PreemptionRecord],
    stored_blocked: list[BlockedPreemption],
    teams: frozenset[str],
    now: float,
    at: float,
    policy: str,
    memo: PlanMemo | None = None,
    *,
    past: list[float] | None = None,
    flight: bool | None = None,
) -> GateOutcome:
    """`now`: the decision time; `at`: the same time clamped to the history graph's watermark; `past`:
    `past_eviction_times(records, EvictionKind.EXPERIMENT)` and `flight`: `in_flight(records)`, if the
    caller has them."""
    out = GateOutcome()
    if past is None:
        past = past_eviction_times(records, EvictionKind.EXPERIMENT)
    out.budget_remaining = rules.planner.budget.remaining(past, now)
    out.waiting = protected_pending(rules, observed, teams)
    grace = rules.starvation_grace_s
    starved = [p for p in out.waiting if now - p.since >= grace]
    for p in out.waiting:
        if now - p.since < grace:
            out._wake(p.since + grace)
    out.starved = len(starved)
    if not starved or (in_flight(records) if flight is None else flight):
        # Keep what was reported for work still waiting, so it is not reported again next time.
        waiting = {p.info.key for p in out.waiting}
        out.blocked = [b for b in stored_blocked if b.workload in waiting]
        return out
    index = memo.index if memo is not None and observed.snapshot.paths.index_experiments else None
    # The eligible experiments' names (the reference's key), or a mark that the key leaves them out.
    names: tuple[str, ...] = (_BY_TIME,)
    if index is None and memo is not None:
        names = _eligible(rules, observed.snapshot, now)
    key = _memo_key(observed, starved, out.budget_remaining, names) if memo is not None else None
    planner = rules.planner
    if memo is not None and key == memo.key and (index is None or index.same_eligible(
        observed.snapshot, planner.experiment_below_priority, planner.min_runtime, now, memo.at
    )):
        blocked_now = list(memo.decisions)
    else:
        snap = observed.snapshot
        trees: dict[object, tuple[object, ...]] = {}
        one_queue: set[object] = set()
        reused: list[tuple[str, str]] = []
        fresh = starved
        kept: set[object] = set()
        if memo is not None and snap.tracks_trees and not snap.now_sensitive:
            scope = (snap, rules.planner, out.budget_remaining, rules.planner.budget.used(past, now))
            if memo.scope != scope:
                memo.scope = scope
                memo.trees.clear()
            trees, one_queue = (
                _tree_keys_indexed(snap, starved, index, rules, now)
                if index is not None
                else _tree_keys(snap, starved, names)
            )
            kept = {root for root, k in trees.items() if root in memo.trees and memo.trees[root][0] == k}
            if kept:
                roots = {p.info.key: _root_of(snap, p) for p in starved}
                fresh = [p for p in starved if roots[p.info.key] not in kept]
                reused = [d for root in kept for d in memo.trees[root][1]]
        plan = _plan(rules, observed, fresh, past, at, memo)
        preempts = any(d.action == "preempt" for d in plan.decisions)
        if reused and preempts:
            # A preemption spends the budget every later beneficiary sees, in every tree: plan them all.
            reused, fresh, kept = [], starved, set()
            plan = _plan(rules, observed, starved, past, at, memo)
            preempts = any(d.action == "preempt" for d in plan.decisions)
        out.planned = len(fresh)
        order = {p.info.key: _order(p) for p in starved}
        blocked_now = sorted(
            [(d.workload, d.reason) for d in plan.decisions if d.action == "blocked"] + reused,
            key=lambda d: order[d[0]],
        )
        if memo is not None:
            if preempts:
                memo.trees.clear()
            else:
                # Each tree's blocked decisions in their order, bucketed once by the tree of their workload
                # (a workload's ClusterQueue is in one tree), not filtered per tree: with hundreds of
                # ClusterQueues and thousands of starved workloads that was trees x decisions per decision.
                tree_of = {
                    w: root for root, k in trees.items() if root not in kept for w, _, _ in _starved_in(k)
                }
                by_tree: dict[object, list[tuple[str, str]]] = {}
                for blocked_one in blocked_now:
                    home = tree_of.get(blocked_one[0])
                    if home is not None:
                        by_tree.setdefault(home, []).append(blocked_one)
                for root, k in trees.items():
                    if root in kept:
                        continue
                    mine = tuple(by_tree.get(root, ()))
                    if root not in one_queue and any(_order_dependent(reason) for _, reason in mine):
                        memo.trees.pop(root, None)
                    else:
                        memo.trees[root] = (k, mine)
        # The lost-work budget (spec.preemption.budget.maxLostHours): beneficiaries in the planner's order
        # while the work their victims lose still fits in the window.
        # (read only when some beneficiary would be helped: nothing else reads it)
        used = lost_in_window(records, now, rules.planner.budget.window) if preempts else {}
        granted = False
        helped: list[str] = []
        for d in plan.decisions:
            if d.action != "preempt":
                continue
            lost = _lost(d.victims)
            over = [
                r
                for r, limit in sorted(rules.max_lost_milli_hours.items())
                if (used.get(r, 0.0) * 1000 + dict(lost).get(r, 0)) > limit
            ]
            if over:
                r = over[0]
                limit = rules.max_lost_milli_hours[r] / 1000
                blocked_now.append(
                    (
                        d.workload,
                        f"cannot help {d.workload} (priority {d.priority}): its "
                        f"victims would lose {dict(lost)[r] / 1000:.1f} {r}-hours of work and the "
                        f"lost-work budget allows {max(0.0, limit - used.get(r, 0.0)):.1f} more "
                        f"({used.get(r, 0.0):.1f} used, budget {limit:g} per "
                        f"{rules.planner.budget.describe().split(' per ')[1]})",
                    )
                )
                continue
            for resource, milli in lost:
                used[resource] = used.get(resource, 0.0) + milli / 1000
            for v in d.victims:
                if plan.dry_run and already_reported(records, v.victim, v.beneficiary):
                    continue
                granted = True
                out.requests.append(
                    RequestEviction(
                        v.victim,
                        v.beneficiary,
                        v.reason,
                        EvictionKind.EXPERIMENT,
                        dry_run=plan.dry_run,
                        team=v.cluster_queue,
                        lost=_lost([v]),
                    )
                )
            if not plan.dry_run:
                helped.append(d.workload)
        if helped and rules.hold_competitors:
            out.holds = _hold_competitors(rules, observed, helped, [r.victim for r in out.requests], now)
        if memo is not None:
            remember = not granted and not any(_order_dependent(reason) for _, reason in blocked_now)
            memo.key, memo.decisions = (key, tuple(blocked_now)) if remember else (None, ())
            memo.at = now
    # Reported once per workload and kind of block (its reason's numbers move with every event).
    reported = {(b.workload, block_kind(b.reason)) for b in stored_blocked}
    for workload, reason in blocked_now:
        out.blocked.append(BlockedPreemption(workload=workload, reason=reason))
        if (workload, block_kind(reason)) not in reported:
            out.actions.append(
                RecordAudit(
                    AuditAction.PREEMPT_BLOCKED,
                    Target.workload(workload),
                    f"no experiment preempted for {workload}",
                    reason,
                    also_on=Target.policy(policy),
                )
            )
    if blocked_now:
        _wake_when_blocking_inputs_change(out, rules, observed, past, now, index)
    return out


def _plan(
    rules: PreemptionRules, observed: Observed, starved: list[PendingWorkload], past: list[float], at: float,
    memo: PlanMemo | None = None,
) -> ExperimentPreemptionPlan:
    return plan_experiment_preemptions(
        observed.snapshot,
        observed.history,
        rules.planner,
        now=at,
        past_preemptions=past,
        config=observed.config,
        pending=[p.info for p in starved],
        searches=memo.searches if memo is not None else None,
    )


def _root_of(snap: Snapshot, p: PendingWorkload) -> QuotaNode | None:
    cq = snap.cluster_queues.get(p.info.cluster_queue)
    return cq.node.root() if cq is not None else None


def _starved_in(key: tuple[object, ...]) -> tuple[tuple[str, int, float], ...]:
    return key[1]  # type: ignore[return-value]


def _order_dependent(reason: str) -> bool:
    """A blocked reason that names how many victims the chosen set needs ("needs N victim(s), the budget
    allows M"): the set follows the candidates' order by decayed history, which time alone changes."""
    return "victim(s), the budget allows" in reason


def _hold_competitors(
    rules: PreemptionRules, observed: Observed, helped: list[str], victims: list[str], now: float
) -> list[HoldPending]:
    """The pending experiments Kueue would admit ahead of the beneficiaries with the freed quota
    (fairshare.planners.experiments rule 6), to hold with the victims."""
    queued = [p.info for _, p in sorted(observed.pending.items()) if p.queued]
    competition = competing_experiments(
        observed.snapshot, helped, victims, queued, rules.planner, observed.config, now
    )
    if not competition.held:
        return []
    names = ", ".join(helped)
    why = (
        f"Kueue would admit it (within its ClusterQueue's nominal quota, hence ordered first) with the quota "
        f"freed for {names}; held until then (at most the victimHold)"
    )
    # Released once the last beneficiary (in Kueue's order) holds quota: the earlier ones got theirs first.
    return [HoldPending(key, helped[-1], why) for key in competition.held]


def block_kind(reason: str) -> str:
    """The reason label of qm_preemption_blocked_total and of the once-per-reason reports (one rule).
    budget: the victim budget is spent; lost-work: the lost-work budget is; no-set: no set of eligible
    experiments would let it fit."""
    if "lost-work budget" in reason:
        return "lost-work"
    return "budget" if "the budget allows" in reason else "no-set"


def _lost(victims: Sequence[VictimDecision]) -> tuple[tuple[str, int], ...]:
    """Work the victims lose if evicted now (no checkpoints assumed): what they hold x how long they ran,
    per resource, in milli-units x hours."""
    out: dict[str, int] = {}
    for v in victims:
        for fr, milli in v.frees:
            out[fr.resource] = out.get(fr.resource, 0) + round(milli * v.running_for / 3600)
    return tuple(sorted(out.items()))


def _wake_when_blocking_inputs_change(
    out: GateOutcome,
    rules: PreemptionRules,
    observed: Observed,
    past: list[float],
    now: float,
    index: ExperimentIndex | None = None,
) -> None:
    """A blocked plan can change with time alone: the budget window slides past an old eviction, or a
    running experiment reaches minRuntime and becomes a candidate."""
    window = rules.planner.budget.window
    in_window = [t for t in past if now - window < t <= now]
    if in_window:
        out._wake(min(in_window) + window)
    below = rules.planner.experiment_below_priority
    min_runtime = rules.planner.min_runtime
    if min_runtime > 0 and index is not None:
        at = index.next_eligible(observed.snapshot, below, now, min_runtime)
        if at is not None:
            out._wake(at)
    elif min_runtime > 0:
        for w in observed.snapshot.workloads.values():
            started = w.run_start
            if w.priority < below and started is not None and started + min_runtime > now:
                out._wake(started + min_runtime)
