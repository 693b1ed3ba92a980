"""Experiment-preemption planner: free quota for starved protected work by preempting experiments.

For each pending workload at or above the protected priority that the core's model of Kueue says
Kueue cannot admit now (``fairshare.scheduler.assign`` mode is not Fit, and Kueue's own preemption finds
no targets), choose the smallest set of experiment victims after whose removal it fits:

1. Candidates: admitted workloads with priority below ``experiment_below_priority``, not in a protected
   priority class, running at least ``min_runtime`` in all (its attempts before an eviction count:
   Kueue's ``accumulatedPastExecutionTimeSeconds``, ``WorkloadInfo.run_start``), evicted fewer than
   ``max_evictions`` times (anti-thrash), in the same quota tree (root cohort) as the
   beneficiary, holding a resource the beneficiary requests.
2. Order: the queue (LocalQueue node of the history graph, else its ClusterQueue node) most over its
   historical fair share first (Fair Tree global usage / global share), then lowest priority, then least
   work lost (most recently started), then workload key.
3. Greedy: remove candidates in that order until the beneficiary fits (``Snapshot.simulate_removal`` what-if,
   undone), then fill back as Kueue does (preemption.go fillBackWorkloads): walk the victims in reverse
   and keep out any whose return still lets the beneficiary fit. Because freeing more never hurts a fit,
   the result is minimal: returning any single victim breaks the fit (tested).
4. Durable: a plan Kueue would undo is no plan. The service deactivates the victims and requeues them
   once the beneficiary holds the freed quota; a victim whose ClusterQueue may then take it back (it is
   under its nominal quota and its ``reclaimWithinCohort`` lets it preempt the beneficiary, which
   borrows) would be admitted by preempting the beneficiary, losing work for nothing. The model is asked
   (``assign`` + ``preemption_targets`` with the victims removed and the beneficiary admitted); such
   victims are excluded and the set is chosen again from the rest.
5. Budget: at most ``budget.max_victims`` preemptions in any ``budget.window``, counting past ones. With
   the budget spent, a beneficiary that preempting every eligible experiment would let fit is blocked by
   the budget without its set being chosen (the set would be thrown away; it is chosen once the budget
   allows one); one that no removal would let fit is blocked as "no set", as with budget left.
6. Competitors (``competing_experiments``): Kueue orders a head that fits within its ClusterQueue's nominal
   quota before one that borrows (scheduler.go entry ordering), so the victims' team's other pending
   experiments would take the quota freed for a borrowing beneficiary. The model runs Kueue's next cycles
   with the victims gone; the pending experiments admitted ahead of a beneficiary are held (deactivated
   like the victims) until it holds quota. Holding their LocalQueue instead (stopPolicy: Hold) does not
   work in Kueue: a stopped LocalQueue leaves the queue manager, and the release of its workloads then
   requeues nothing (manager.go QueueAssociatedInadmissibleWorkloadsAfter), so the beneficiary waits.
   Only the beneficiaries' quota trees compete: a workload of another tree cannot take their freed quota
   (quota is lent within a tree only), so it is neither modelled nor held.

Decisions for several beneficiaries are planned in order (priority, then queue order), each assuming the
previous ones happened; the snapshot is left exactly as it was. Every decision has a one-line reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction
from typing import Final

from fairshare.durations import format_duration
from fairshare.history.fair_tree import FairTreeConfig, FairTreeResult, OverShares, fair_tree
from fairshare.history.graph import UsageHistoryGraph
from fairshare.history.paths import NodeKind, NodePath
from fairshare.models import ClusterQueueName, FlavorResource, Milli, ResourceName, Seconds, WorkloadKey
from fairshare.planners.budget import VictimBudget
from fairshare.quantity import format_human
from fairshare.queues import QueueManager, scheduling_shape
from fairshare.quota_tree import QuotaNode
from fairshare.scheduler import (
    Mode,
    SchedulerConfig,
    apply_cycle,
    assign,
    assign_with_targets,
    schedule_cycle,
)
from fairshare.snapshot import Snapshot, workload_key
from fairshare.workload import WorkloadInfo

DEFAULT_BUDGET = VictimBudget(max_victims=10, window=3600.0)


@dataclass(frozen=True, slots=True)
class ExperimentPolicy:
    experiment_below_priority: int  # priority < this: an experiment, a possible victim
    protected_priority: int  # pending workloads at or above this are helped
    protected_priority_classes: frozenset[str] = frozenset()  # never victims
    min_runtime: Seconds = 0.0  # a workload younger than this is never preempted
    budget: VictimBudget = DEFAULT_BUDGET
    dry_run: bool = False
    max_evictions: int | None = None  # a workload evicted this many times already is left alone (anti-thrash)

    def __post_init__(self) -> None:
        if self.min_runtime < 0:
            raise ValueError(f"min_runtime must be >= 0, got {self.min_runtime}")
        if self.experiment_below_priority > self.protected_priority:
            raise ValueError("experiment_below_priority must not exceed protected_priority: a protected "
                             "workload could then be an experiment")


@dataclass(frozen=True, slots=True)
class VictimDecision:
    victim: WorkloadKey
    cluster_queue: ClusterQueueName
    priority: int
    queue: NodePath | None  # the history node whose fair share ranked it
    queue_over_share: Fraction | None  # global usage / global share of that queue
    running_for: Seconds
    frees: tuple[tuple[FlavorResource, Milli], ...]
    beneficiary: WorkloadKey
    reason: str


@dataclass(frozen=True, slots=True, init=False)
class BeneficiaryDecision:
    workload: WorkloadKey
    cluster_queue: ClusterQueueName
    priority: int
    victims: tuple[VictimDecision, ...]  # empty when nothing is to be preempted
    action: str  # "preempt" | "none" | "blocked"
    reason: str

    def __init__(self, workload: WorkloadKey, cluster_queue: ClusterQueueName, priority: int,
                 victims: tuple[VictimDecision, ...], action: str, reason: str) -> None:
        # (init=False: a dataclass-generated __init__ runs interpreted even compiled; scheduler/types.py)
        object.__setattr__(self, "workload", workload)
        object.__setattr__(self, "cluster_queue", cluster_queue)
        object.__setattr__(self, "priority", priority)
        object.__setattr__(self, "victims", victims)
        object.__setattr__(self, "action", action)
        object.__setattr__(self, "reason", reason)


@dataclass(frozen=True, slots=True, init=False)
class ExperimentPreemptionPlan:
    at: Seconds
    dry_run: bool
    decisions: tuple[BeneficiaryDecision, ...]

    def __init__(self, at: Seconds, dry_run: bool, decisions: tuple[BeneficiaryDecision, ...]) -> None:
        # (init=False: a dataclass-generated __init__ runs interpreted even compiled; scheduler/types.py)
        object.__setattr__(self, "at", at)
        object.__setattr__(self, "dry_run", dry_run)
        object.__setattr__(self, "decisions", decisions)

    @property
    def victims(self) -> tuple[VictimDecision, ...]:
        return tuple(v for d in self.decisions for v in d.victims)

    def lines(self) -> list[str]:
        """One line per decision, victims first: what an operator logs or an Event says."""
        prefix = "[dry-run] " if self.dry_run else ""
        out = [prefix + v.reason for v in self.victims]
        out += [prefix + d.reason for d in self.decisions if d.action != "preempt"]
        return out


# What a victim search found (_search): the victims' keys and the candidates Kueue would let reclaim.
_Found = tuple[tuple[WorkloadKey, ...], tuple[WorkloadKey, ...]]


class VictimSearches:
    """The victim searches of earlier plans (FastPaths.memo_victim_search), one per beneficiary: what
    `_search` found, with what it was made from. Held by the caller across plans (the policy controller's
    PlanMemo) and given to `plan_experiment_preemptions`.

    A search (rule 3's shortest prefix and fill back, rule 4's reclaim check, repeated without the
    reclaimers) reads the beneficiary (key, ClusterQueue, namespace, scheduling shape), the candidates in
    rule 2's order, the scheduler config and the content of the beneficiary's quota tree: the flavor
    assigner and Kueue's preemption search read nothing outside the tree (preemption.go candidates come
    from the ClusterQueue's cohort tree). The tree's content is its token (Snapshot.tree_token) with its
    nodes' quotas and weights as they are now and its ClusterQueues' specs (a decision's what-if sets
    quotas and weights without a new token), read only while the plan has changed nothing in that tree.
    Time enters in one place: the beneficiary is admitted in the what-if at `now`, and Kueue's candidate
    order ranks the most recently admitted first (candidate_order_key), so a search is kept only when every
    workload of the tree was admitted before `now`; at any later time the beneficiary is again the newest,
    and workloads without an admission time (Snapshot.now_sensitive) turn the memo off. The same inputs
    then give the same search, and a later plan whose inputs are equal reuses it (a blocked "needs N
    victim(s)" decision, re-planned on every event while its order can drift, is the common case)."""

    __slots__ = ("_found", "_scope", "hits")

    LIMIT = 4096  # beneficiaries remembered; past it the memory restarts (the same answers, recomputed)

    def __init__(self) -> None:
        self._scope: tuple[object, ...] | None = None
        self._found: dict[WorkloadKey, tuple[tuple[object, ...], _Found]] = {}
        self.hits = 0  # searches reused (for tests and benchmarks)

    def scoped(self, snapshot: Snapshot, cfg: SchedulerConfig) -> None:
        """Forget every search made on another snapshot object or under another config."""
        scope = (snapshot, cfg)
        kept = self._scope
        if kept is None or kept[0] is not snapshot or (kept[1] is not cfg and kept[1] != cfg):
            self._scope = scope
            self._found.clear()

    def get(self, beneficiary: WorkloadKey, key: tuple[object, ...]) -> _Found | None:
        hit = self._found.get(beneficiary)
        if hit is not None and hit[0] == key:
            self.hits += 1
            return hit[1]
        return None

    def put(self, beneficiary: WorkloadKey, key: tuple[object, ...], found: _Found) -> None:
        if len(self._found) >= self.LIMIT and beneficiary not in self._found:
            self._found.clear()
        self._found[beneficiary] = (key, found)


def _tree_content(snapshot: Snapshot, root: QuotaNode) -> tuple[object, ...]:
    """What a search reads of the quota tree under ``root`` (VictimSearches)."""
    nodes = root.subtree()
    cqs = snapshot.cluster_queues
    return (
        snapshot.tree_token(root),
        tuple((n.name, tuple(sorted(n.quotas.items())), n.weight) for n in nodes),
        tuple(
            (cq.spec, cq.inactive_reason)
            for cq in (cqs[ClusterQueueName(n.name)] for n in nodes if n.is_cluster_queue)
        ),
    )


def _admitted_before(snapshot: Snapshot, root: QuotaNode, now: Seconds) -> bool:
    """Every workload of the tree under ``root`` was admitted (quota reserved) before ``now``."""
    cqs = snapshot.cluster_queues
    for cq in [root] if root.is_cluster_queue else root.subtree_cluster_queues():
        for w in cqs[ClusterQueueName(cq.name)].workloads.values():
            t = w.quota_reserved_time
            if t is None or t >= now:
                return False
    return True


class _SearchSlot:
    """One beneficiary's place in VictimSearches for one plan; its key (`key`) is made when a search is
    about to run: the beneficiary, its tree's content and the candidates in their order."""

    __slots__ = ("beneficiary", "memo", "root", "shape", "snapshot")

    def __init__(self, memo: VictimSearches, snapshot: Snapshot, beneficiary: WorkloadInfo, shape: object,
                 root: QuotaNode) -> None:
        self.memo, self.snapshot, self.beneficiary = memo, snapshot, beneficiary
        self.shape, self.root = shape, root

    def key(self, candidates: Sequence[WorkloadInfo]) -> tuple[object, ...]:
        b = self.beneficiary
        return (b.cluster_queue, b.workload.namespace, self.shape, _tree_content(self.snapshot, self.root),
                tuple(c.key for c in candidates))


# Over-share by queue path, and the path of each LocalQueue and ClusterQueue name.
_Shares = tuple[Callable[[NodePath], Fraction | None], Mapping[str, NodePath], Mapping[str, NodePath]]


def _queue_index(paths: Iterable[NodePath]) -> tuple[dict[str, NodePath], dict[str, NodePath]]:
    """The first path (in path order) of each LocalQueue and ClusterQueue name."""
    lqs: dict[str, NodePath] = {}
    cqs: dict[str, NodePath] = {}
    for p in sorted(paths):
        kind = p.kind
        if kind is NodeKind.LOCAL_QUEUE:
            lqs.setdefault(p.name, p)
        elif kind is NodeKind.CLUSTER_QUEUE:
            cqs.setdefault(p.name, p)
    return lqs, cqs


def _shares_of(shares: FairTreeResult) -> _Shares:
    nodes = shares.nodes

    def over_share(q: NodePath) -> Fraction | None:
        return nodes[q].over_share

    return (over_share, *_queue_index(nodes))


def _root_name(snap: Snapshot, cq: ClusterQueueName) -> str:
    node = snap.cluster_queues[cq].node
    while node.parent is not None:
        node = node.parent
    return node.name if node is not snap.cluster_queues[cq].node else f"cq:{cq}"


def _fmt_ratio(x: Fraction | None) -> str:
    return "no fair-share history" if x is None else f"at {float(x):.1f}x its fair share"


def _frees_text(frees: Sequence[tuple[FlavorResource, Milli]]) -> str:
    by_resource: dict[ResourceName, Milli] = {}
    for fr, q in frees:
        by_resource[fr.resource] = by_resource.get(fr.resource, 0) + q
    return ", ".join(f"{format_human(q, r)} {r}" for r, q in sorted(by_resource.items()))


def plan_experiment_preemptions(
    snapshot: Snapshot,
    history: UsageHistoryGraph | FairTreeResult,
    policy: ExperimentPolicy,
    *,
    now: Seconds,
    past_preemptions: Sequence[Seconds] = (),
    config: SchedulerConfig | None = None,
    fair_tree_config: FairTreeConfig | None = None,
    pending: Sequence[WorkloadInfo] | None = None,
    searches: VictimSearches | None = None,
) -> ExperimentPreemptionPlan:
    """Plan experiment preemptions at ``now`` (pure: the snapshot is left unchanged).

    ``pending`` defaults to ``snapshot.pending``; ``history`` is a graph (its Fair Tree is computed at
    ``now``) or a precomputed Fair Tree result; ``searches``: the victim searches of earlier plans, read
    and kept with FastPaths.memo_victim_search (VictimSearches).
    """
    cfg = config or SchedulerConfig()
    # The Fair Tree only orders candidates; a plan that chooses no victims (the budget spent, every
    # beneficiary fitting) never asks for it. Of it the plan reads only over-shares: with
    # FastPaths.lazy_over_shares those of the candidates' queues alone (OverShares: the same values), found
    # by name in the graph's index of its nodes (UsageHistoryGraph.first_by_name: _queue_index's paths,
    # kept until a node is added).
    lazy = snapshot.paths.lazy_over_shares
    tree: list[_Shares] = []
    lazy_shares: list[OverShares] = []

    def fair_shares() -> _Shares:
        if not tree:
            if isinstance(history, FairTreeResult):
                tree.append(_shares_of(history))
            elif lazy:
                shares = OverShares(history, now, fair_tree_config)
                lazy_shares.append(shares)
                tree.append((shares.of,
                             history.first_by_name(NodeKind.LOCAL_QUEUE),
                             history.first_by_name(NodeKind.CLUSTER_QUEUE)))
            else:
                tree.append(_shares_of(fair_tree(history, now, fair_tree_config)))
        return tree[0]
    pend = list(pending) if pending is not None else [snapshot.pending[k] for k in sorted(snapshot.pending)]
    beneficiaries = sorted((w for w in pend if w.priority >= policy.protected_priority),
                           key=lambda w: (-w.priority, w.queue_order_time, w.key))
    if not beneficiaries:
        return ExperimentPreemptionPlan(now, policy.dry_run, ())  # nobody to help (the gate's kept trees)
    remaining = policy.budget.remaining(past_preemptions, now)
    used_in_window = policy.budget.used(past_preemptions, now)
    decisions: list[BeneficiaryDecision] = []
    chosen: set[WorkloadKey] = set()

    def queue_of(w: WorkloadInfo) -> NodePath | None:
        _, lq_paths, cq_paths = fair_shares()
        return lq_paths.get(w.local_queue) or cq_paths.get(w.cluster_queue)

    over_shares: dict[WorkloadKey, Fraction | None] = {}

    def over_share(w: WorkloadInfo) -> Fraction | None:
        if w.key not in over_shares:
            q = queue_of(w)
            over_shares[w.key] = fair_shares()[0](q) if q is not None else None
        return over_shares[w.key]

    # Rule 2 reads the over-shares' order only: with FastPaths.lazy_over_shares, and when a queue's billed
    # usage does not read the root's, ordered by OverShares.order_key (the same order and ties, without the
    # whole tree's usage); the values themselves are read for the reasons of the victims chosen.
    def order_key(w: WorkloadInfo) -> Fraction | None:
        fair_shares()
        if not lazy_shares or not lazy_shares[0].orders_without_root:
            return over_share(w)
        q = queue_of(w)
        return lazy_shares[0].order_key(q) if q is not None else None

    # A beneficiary blocked in some state of the snapshot blocks every workload of the same shape (Kueue's
    # scheduling hash), ClusterQueue and namespace in that same state: nothing it was decided from differs.
    # Remembered until a decision changes the snapshot (an admission, a preemption).
    blocked: dict[tuple[object, ...], BeneficiaryDecision] = {}
    roots = {cq: _root_name(snapshot, cq) for cq in snapshot.cluster_queues}  # the tree does not change here
    # The experiments of each quota tree, classified once: a plan only removes workloads (victims, Kueue's
    # own targets) and adds beneficiaries, which are never experiments. Built when the first beneficiary
    # needs it; with FastPaths.index_experiments, each tree's when the first of its beneficiaries does
    # (_TreeExperiments: classified later, a tree's list lacks only workloads the plan removed meanwhile,
    # which _plan_one skips as absent).
    experiments = _TreeExperiments(snapshot, policy, now, roots)
    # Searches are remembered across plans only while nothing makes them read time (Snapshot.now_sensitive)
    # and, per tree, until this plan changes the tree (`touched`: an admission, a preemption).
    if searches is not None and (not snapshot.paths.memo_victim_search or snapshot.now_sensitive
                                 or not snapshot.tracks_trees):
        searches = None
    if searches is not None:
        searches.scoped(snapshot, cfg)
    touched: set[str] = set()
    with snapshot.transaction():
        for b in beneficiaries:
            same = (b.cluster_queue, b.workload.namespace, scheduling_shape(b))
            known = blocked.get(same)
            if known is not None:
                decisions.append(BeneficiaryDecision(b.key, b.cluster_queue, b.priority, (), "blocked",
                                                     known.reason.replace(known.workload, b.key)))
                continue
            if b.cluster_queue not in snapshot.cluster_queues:
                decisions.append(BeneficiaryDecision(
                    b.key, b.cluster_queue, b.priority, (), "none",
                    f"skip {b.key}: ClusterQueue {b.cluster_queue} does not exist"))
                continue
            assignment, targets = assign_with_targets(snapshot, b, cfg, now=now)
            if assignment.mode == _FIT:
                decisions.append(BeneficiaryDecision(b.key, b.cluster_queue, b.priority, (), "none",
                                                     f"no preemption for {b.key}: it fits now"))
                blocked.clear()
                touched.add(roots[b.cluster_queue])
                snapshot.add_workload(as_admitted(b, assignment.usage, now))
                continue
            if targets:  # (assign_with_targets finds targets for mode Preempt only)
                names = ", ".join(t.key for t in targets)
                decisions.append(BeneficiaryDecision(
                    b.key, b.cluster_queue, b.priority, (), "none",
                    f"no preemption for {b.key}: Kueue preempts {names} itself"))
                blocked.clear()
                touched.add(roots[b.cluster_queue])
                for t in targets:
                    snapshot.remove_workload(t.key)
                snapshot.add_workload(as_admitted(b, assignment.usage, now))
                continue
            slot = None
            if searches is not None and roots[b.cluster_queue] not in touched:
                root = snapshot.cluster_queues[b.cluster_queue].node.root()
                slot = _SearchSlot(searches, snapshot, b, same[2], root)
            decision = _plan_one(snapshot, b, policy, cfg, now, chosen, queue_of, over_share, order_key,
                                 remaining, used_in_window + len(chosen),
                                 experiments.of(roots[b.cluster_queue]), slot)
            decisions.append(decision)
            if decision.action == "blocked":
                blocked[same] = decision
            if decision.action == "preempt":
                blocked.clear()
                touched.add(roots[b.cluster_queue])
                for v in decision.victims:
                    chosen.add(v.victim)
                    snapshot.remove_workload(v.victim)
                remaining -= len(decision.victims)
                final = assign(snapshot, b, cfg, now=now)
                snapshot.add_workload(as_admitted(b, final.usage, now))
    return ExperimentPreemptionPlan(now, policy.dry_run, tuple(decisions))


MAX_COMPETITOR_ROUNDS = 4  # re-runs with the competitors found so far held
MAX_MODEL_CYCLES = 16  # Kueue cycles modelled per run (each admits or preempts, or the run stops)


@dataclass(frozen=True, slots=True)
class Competition:
    """Pending experiments to hold so that the beneficiaries get the freed quota; `admitted`: the model
    admits every beneficiary with them held (False: work Kueue orders first that is no experiment, or
    more than the model's cycles, gets it instead; nothing to hold can change that)."""

    held: tuple[WorkloadKey, ...]
    admitted: bool


def is_candidate_class(w: WorkloadInfo, policy: ExperimentPolicy) -> bool:
    """An experiment by priority and class (rule 1's first two conditions)."""
    return (w.priority < policy.experiment_below_priority
            and (w.workload.priority_class or "") not in policy.protected_priority_classes)


def competing_experiments(snapshot: Snapshot, beneficiaries: Sequence[WorkloadKey],
                          victims: Sequence[WorkloadKey],
                          pending: Sequence[WorkloadInfo], policy: ExperimentPolicy, cfg: SchedulerConfig,
                          now: Seconds) -> Competition:
    """Rule 6: the pending experiments (of ``pending``, the workloads Kueue queues) that Kueue's next cycles
    would admit before the beneficiaries once the victims are gone. Pure: the snapshot is left unchanged."""
    wanted = set(beneficiaries)
    gone = set(victims)
    # Only the beneficiaries' trees: another tree's heads neither use their freed quota nor change what
    # Kueue admits in them (usage, fit and preemption targets are per tree), so they are not competitors.
    queues = snapshot.cluster_queues
    roots = {queues[p.cluster_queue].node.root() for p in pending
             if p.key in wanted and p.cluster_queue in queues}
    pending = [p for p in pending
               if p.cluster_queue in queues and queues[p.cluster_queue].node.root() in roots]
    # Kueue's entry ordering puts a head that fits without borrowing first: every pending experiment that
    # would fit within its ClusterQueue's nominal quota once the victims are gone takes the freed quota
    # before a borrowing beneficiary (one per cycle and ClusterQueue, until none fits).
    held: list[WorkloadKey] = []
    fits_unborrowed: dict[tuple[object, ...], bool] = {}
    with snapshot.simulate_removal(victims):
        for p in pending:
            if p.key in wanted or p.key in gone or not is_candidate_class(p, policy):
                continue
            shape = (p.cluster_queue, scheduling_shape(p))
            if shape not in fits_unborrowed:
                a = assign(snapshot, p, cfg, now=now)
                fits_unborrowed[shape] = a.mode == Mode.FIT and a.borrowing == 0
            if fits_unborrowed[shape]:
                held.append(p.key)
    # Then the model's own cycles: whatever else it admits first (e.g. by borrowing within a tree's slack).
    for _ in range(MAX_COMPETITOR_ROUNDS):
        admitted_first: list[WorkloadInfo] = []
        with snapshot.simulate_removal(victims):
            queued = [p for p in pending if p.key not in held and p.key not in gone]
            qm = QueueManager.from_snapshot(snapshot, cfg, pending=queued)
            got: set[WorkloadKey] = set()
            for _cycle in range(MAX_MODEL_CYCLES):
                heads = qm.heads(now)
                if not heads:
                    break
                result = schedule_cycle(snapshot, now=now, config=cfg, heads=heads)
                keys = [a.info.key for a in result.admissions]
                got.update(k for k in keys if k in wanted)
                if got == wanted:
                    break
                admitted_first += [a.info for a in result.admissions if a.info.key not in wanted]
                apply_cycle(snapshot, result)
                qm.requeue_after_cycle(heads, result)
                if not result.admissions and not result.preemptions:
                    break
        if got == wanted:
            return Competition(tuple(sorted(held)), True)
        more = sorted(w.key for w in admitted_first if is_candidate_class(w, policy))
        if not more:
            return Competition(tuple(sorted(held)), False)
        held += more
    return Competition(tuple(sorted(held)), False)


def as_admitted(b: WorkloadInfo, usage: Mapping[FlavorResource, int], now: Seconds) -> WorkloadInfo:
    return WorkloadInfo.admitted(b.workload, cluster_queue=b.cluster_queue, usage=usage, reserved_at=now)


def would_reclaim(snapshot: Snapshot, b: WorkloadInfo, victims: Sequence[WorkloadInfo], cfg: SchedulerConfig,
                   now: Seconds) -> list[WorkloadKey]:
    """The victims that, requeued once ``b`` holds the freed quota, Kueue would admit by preempting ``b``
    (rule 4 of the module docstring); asked of the same model as every other decision."""
    out: list[WorkloadKey] = []
    with snapshot.simulate_removal([v.key for v in victims]):
        usage = assign(snapshot, b, cfg, now=now).usage
        with snapshot.simulate_addition([as_admitted(b, usage, now)]):
            for v in victims:
                requeued = WorkloadInfo.pending(v.workload, v.cluster_queue)
                again, targets = assign_with_targets(snapshot, requeued, cfg, now=now)
                if again.mode != Mode.PREEMPT:
                    continue
                if any(t.key == b.key for t in targets):
                    out.append(v.key)
    return out


class _Class(Enum):
    CANDIDATE = "candidate"
    YOUNG = "young"  # running less than min_runtime
    PROTECTED = "protected"  # in a protected priority class
    WORN = "worn"  # evicted max_evictions times already


# Read once (see fairshare/control/transitions.py: a member read through its enum class is slow compiled).
_CANDIDATE: Final = _Class.CANDIDATE
_YOUNG: Final = _Class.YOUNG
_PROTECTED: Final = _Class.PROTECTED
_WORN: Final = _Class.WORN
_FIT: Final = Mode.FIT


def _experiments_by_root(snapshot: Snapshot, policy: ExperimentPolicy, now: Seconds,
                         roots: Mapping[ClusterQueueName, str],
                         ) -> dict[str, list[tuple[WorkloadInfo, _Class]]]:
    """Rule 1 over the admitted workloads below the experiment priority, per quota tree, in key order (the
    reference: every admitted workload scanned; `_tree_experiments` is one tree's part from the index)."""
    out: dict[str, list[tuple[WorkloadInfo, _Class]]] = {}
    below = policy.experiment_below_priority
    for key in sorted(snapshot.workloads):
        w = snapshot.workloads[key]
        if w.evicted or w.priority >= below:
            continue
        root = roots.get(w.cluster_queue)
        if root is None:
            continue
        out.setdefault(root, []).append((w, _classify(w, policy, now)))
    return out


def _tree_experiments(snapshot: Snapshot, policy: ExperimentPolicy, now: Seconds,
                      members: Sequence[ClusterQueueName]) -> list[tuple[WorkloadInfo, _Class]]:
    """One quota tree's part of `_experiments_by_root` with FastPaths.index_experiments: its ClusterQueues'
    (`members`) workloads below the priority (Snapshot.below_priority, by key: the same workloads, as each
    admitted workload is in its ClusterQueue's) merged by key, classified."""
    below = policy.experiment_below_priority
    cqs = snapshot.cluster_queues
    ws: list[WorkloadInfo] = []
    for name in members:
        ws.extend(snapshot.below_priority(cqs[name], below))
    ws.sort(key=workload_key)
    return [(w, _classify(w, policy, now)) for w in ws]


class _TreeExperiments:
    """The experiments of each quota tree for one plan (`_experiments_by_root`'s lists), classified when
    first asked: with FastPaths.index_experiments one tree at a time (`_tree_experiments`), else every
    tree at once by the full scan."""

    __slots__ = ("_all", "_members", "_now", "_policy", "_roots", "_snapshot", "_trees")

    def __init__(self, snapshot: Snapshot, policy: ExperimentPolicy, now: Seconds,
                 roots: Mapping[ClusterQueueName, str]) -> None:
        self._snapshot, self._policy, self._now, self._roots = snapshot, policy, now, roots
        self._trees: dict[str, list[tuple[WorkloadInfo, _Class]]] = {}
        self._members: dict[str, list[ClusterQueueName]] | None = None
        self._all = False

    def of(self, root: str) -> Sequence[tuple[WorkloadInfo, _Class]]:
        trees = self._trees
        if root in trees or self._all:
            return trees.get(root, ())
        snap = self._snapshot
        if not snap.paths.index_experiments:
            trees.update(_experiments_by_root(snap, self._policy, self._now, self._roots))
            self._all = True
            return trees.get(root, ())
        if self._members is None:
            members: dict[str, list[ClusterQueueName]] = {}
            for name in snap.cluster_queues:
                r = self._roots.get(name)
                if r is not None:
                    members.setdefault(r, []).append(name)
            self._members = members
        out = trees[root] = _tree_experiments(snap, self._policy, self._now, self._members.get(root, ()))
        return out


def _classify(w: WorkloadInfo, policy: ExperimentPolicy, now: Seconds) -> _Class:
    # minRuntime counts every attempt (run_start: Kueue's accumulatedPastExecutionTimeSeconds), so an
    # eviction, ours or Kueue's, does not make a workload that already ran long enough young again.
    run_start = w.run_start
    started = run_start if run_start is not None else now
    if (w.workload.priority_class or "") in policy.protected_priority_classes:
        return _PROTECTED
    if policy.max_evictions is not None and w.workload.eviction_count >= policy.max_evictions:
        return _WORN
    if now - started < policy.min_runtime:
        return _YOUNG
    return _CANDIDATE


def _in_rule_2_order(candidates: list[WorkloadInfo], over_share: Callable[[WorkloadInfo], Fraction | None],
                     now: Seconds) -> list[WorkloadInfo]:
    """Rule 2's order: the queue most over its fair share first (no history last), then lowest priority,
    then most recently started, then key. The over-shares are compared once per distinct value (their
    rank among them) rather than in every comparison of the sort: the same order as sorting by
    `(share is None, -share, priority, -started, key)`, without a Python-level Fraction comparison per
    pair (the candidates of one queue share one over-share object). `over_share` reads a candidate's queue
    only (its LocalQueue and ClusterQueue): it is asked once per queue."""
    by_queue: dict[tuple[str, str], Fraction | None] = {}
    shares: list[Fraction | None] = []
    for w in candidates:
        queue = (w.local_queue, w.cluster_queue)
        if queue in by_queue:
            shares.append(by_queue[queue])
        else:
            share = by_queue[queue] = over_share(w)
            shares.append(share)
    distinct = sorted({id(x): x for x in shares if x is not None}.values(), reverse=True)
    rank: dict[int, int] = {}
    r = 0
    for i, x in enumerate(distinct):
        if i and x != distinct[i - 1]:
            r = i
        rank[id(x)] = r
    keyed: list[tuple[int, int, int, float, str, WorkloadInfo]] = []
    for w, share in zip(candidates, shares, strict=True):
        started = w.quota_reserved_time if w.quota_reserved_time is not None else now
        keyed.append((0, rank[id(share)], w.priority, -started, w.key, w) if share is not None
                     else (1, 0, w.priority, -started, w.key, w))
    keyed.sort()  # the keys are unique: no two tuples reach their workloads
    return [k[5] for k in keyed]


def _search(snapshot: Snapshot, b: WorkloadInfo, cfg: SchedulerConfig, now: Seconds,
            candidates: list[WorkloadInfo], fits: Callable[[Sequence[WorkloadInfo]], bool],
            reclaimers: list[WorkloadKey]) -> tuple[list[WorkloadInfo], list[WorkloadInfo]]:
    """Rules 3 and 4 over ``candidates`` in rule 2's order, all of which removed let ``b`` fit: the victims
    (none: without the reclaimers no set lets it fit) and the candidates left; the reclaimers found are
    added to ``reclaimers``."""
    first = True
    while True:
        # The shortest prefix of the candidates whose removal lets it fit. Fitting is monotone in what is
        # removed (a removal only raises what is available at every node of the quota tree, so a flavor
        # that fits still fits): no prefix fits when all of them removed does not, and the shortest one
        # is found by bisection, with the same answer as trying the prefixes one by one.
        if not candidates or not (first or fits(candidates)):
            return [], candidates
        first = False
        lo, hi = 1, len(candidates)  # fits(candidates[:hi]); not known for shorter ones
        while lo < hi:
            mid = (lo + hi) // 2
            if fits(candidates[:mid]):
                hi = mid
            else:
                lo = mid + 1
        victims = list(candidates[:hi])
        # Fill back (Kueue preemption.go fillBackWorkloads), over every victim: keep out only the
        # necessary ones.
        for v in list(reversed(victims)):
            trial = [w for w in victims if w.key != v.key]
            if fits(trial):
                victims = trial
        back = would_reclaim(snapshot, b, victims, cfg, now)
        if not back:
            return victims, candidates
        reclaimers.extend(back)
        candidates = [c for c in candidates if c.key not in back]


def _plan_one(snapshot: Snapshot, b: WorkloadInfo, policy: ExperimentPolicy, cfg: SchedulerConfig,
              now: Seconds, chosen: set[WorkloadKey], queue_of: Callable[[WorkloadInfo], NodePath | None],
              over_share: Callable[[WorkloadInfo], Fraction | None],
              order_key: Callable[[WorkloadInfo], Fraction | None], remaining: int,
              used_in_window: int,
              experiments: Sequence[tuple[WorkloadInfo, _Class]],
              slot: _SearchSlot | None = None) -> BeneficiaryDecision:
    """`experiments`: those of the beneficiary's quota tree, classified (`_TreeExperiments.of`); `order_key`:
    what orders them as their queues' over-shares do (`over_share`, or a stand-in); `slot`: its place among
    the searches of earlier plans (VictimSearches), if they may be read."""
    wanted = set(b.workload.total_requests())
    young = protected = worn = 0
    candidates: list[WorkloadInfo] = []
    present = snapshot.workloads
    for w, klass in experiments:
        if w.key in chosen or w.key not in present or not any(fr.resource in wanted for fr in w.usage):
            continue
        if klass is _CANDIDATE:
            candidates.append(w)
        elif klass is _PROTECTED:
            protected += 1
        elif klass is _WORN:
            worn += 1
        else:
            young += 1

    def fits(removed: Sequence[WorkloadInfo]) -> bool:
        with snapshot.simulate_removal([w.key for w in removed]):
            return assign(snapshot, b, cfg, now=now).mode == _FIT

    if remaining <= 0 and candidates and fits(candidates):
        # The victim budget is spent and at least one victim is needed: blocked whatever the set, which
        # is chosen once the budget allows one (choosing it now would be thrown away).
        return BeneficiaryDecision(
            b.key, b.cluster_queue, b.priority, (), "blocked",
            f"cannot help {b.key} (priority {b.priority}): needs at least 1 victim, the budget allows 0 more "
            f"now ({used_in_window} used, budget {policy.budget.describe()})")

    # Rule 2's order decides which set is chosen, not whether one exists: removing every candidate is the
    # same what-if in any order. With FastPaths.lazy_over_shares the candidates are ordered (and their
    # queues' over-shares computed) only once all of them removed would let the beneficiary fit.
    ordered = not snapshot.paths.lazy_over_shares
    if ordered:
        candidates = _in_rule_2_order(candidates, order_key, now)

    excluded = []
    if young:
        excluded.append(f"{young} running less than {format_duration(policy.min_runtime)}")
    if protected:
        excluded.append(f"{protected} in protected priority classes")
    if worn:
        excluded.append(f"{worn} evicted {policy.max_evictions} times already")
    excluded_text = f" ({'; '.join(excluded)} excluded)" if excluded else ""

    reclaimers: list[WorkloadKey] = []
    victims: list[WorkloadInfo] = []
    if candidates and fits(candidates):
        if not ordered:
            candidates, ordered = _in_rule_2_order(candidates, order_key, now), True
        key: tuple[object, ...] = ()
        found = None
        if slot is not None:
            key = slot.key(candidates)
            found = slot.memo.get(b.key, key)
        if found is not None:
            victim_keys, back = found
            reclaimers = list(back)
            if reclaimers:
                gone = set(reclaimers)
                candidates = [c for c in candidates if c.key not in gone]
            by_key = {c.key: c for c in candidates}
            victims = [by_key[k] for k in victim_keys]
        else:
            victims, candidates = _search(snapshot, b, cfg, now, candidates, fits, reclaimers)
            if slot is not None and _admitted_before(snapshot, slot.root, now):
                slot.memo.put(b.key, key, (tuple(v.key for v in victims), tuple(reclaimers)))
    if not victims:
        what = f"all {len(candidates)} eligible experiments" if candidates else "no eligible experiment"
        if reclaimers:
            names = ", ".join(reclaimers)
            excluded.append(f"{len(reclaimers)} that Kueue would let reclaim it back: {names}")
            excluded_text = f" ({'; '.join(excluded)} excluded)"
        with snapshot.simulate_removal([w.key for w in candidates]):
            why = assign(snapshot, b, cfg, now=now).message()
        return BeneficiaryDecision(
            b.key, b.cluster_queue, b.priority, (), "blocked",
            f"cannot help {b.key} (priority {b.priority}): preempting {what} would not let it fit"
            f"{excluded_text}" + (f"; the model says: {why}" if why else ""))
    if len(victims) > remaining:
        return BeneficiaryDecision(
            b.key, b.cluster_queue, b.priority, (), "blocked",
            f"cannot help {b.key} (priority {b.priority}): needs {len(victims)} victim(s), the budget allows "
            f"{remaining} more now ({used_in_window} used, budget {policy.budget.describe()})")
    out: list[VictimDecision] = []
    for v in victims:
        queue = queue_of(v)
        share = over_share(v)
        started = v.quota_reserved_time if v.quota_reserved_time is not None else now
        frees = tuple(sorted((fr, q) for fr, q in v.usage.items() if fr.resource in wanted))
        reason = (f"preempt {v.key}: priority {v.priority} < {b.priority}; queue {_fmt_ratio(share)}; "
                  f"running {format_duration(now - started)}; frees {_frees_text(frees)} for {b.key}")
        out.append(VictimDecision(v.key, v.cluster_queue, v.priority, queue, share, now - started, frees,
                                  b.key, reason))
    names = ", ".join(v.victim for v in out)
    return BeneficiaryDecision(b.key, b.cluster_queue, b.priority, tuple(out), "preempt",
                               f"admit {b.key} (priority {b.priority}) by preempting {names}")
