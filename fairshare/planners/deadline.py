"""Victims of a quota transition past its deadline (DESIGN.md, "Quota transitions").

Before the deadline a shrinking quota waits for running work to drain; after it, what the team still
holds above the quota in force is one of two things (docs/policy.md, "What a cut means"), and this module
chooses WHICH workloads go in each case, so the operator and the simulator make the same choice:

1. Above what the team may hold at all (its nominal quota plus its Kueue borrowingLimit; a team without
   a cohort cannot borrow): the usage must fall, and Kueue cannot re-admit a victim by borrowing
   (`deadline_victims`). Lowest priority first, then least work lost (most recently admitted), then key,
   taken until the excess is freed or the hourly allowance is used, then filled back as Kueue's
   preemption does (preemption.go fillBackWorkloads): a victim whose return still leaves the excess freed
   is not evicted, so none is evicted for nothing.
2. Borrowed within what it may hold: Kueue lets the team borrow idle cohort quota, so an eviction frees
   quota for someone only if someone needs it; otherwise Kueue re-admits the victim at once by borrowing
   again (seen on a live cluster: two victims back within 2 s, the work lost for nothing). Victims are
   chosen only for another team's pending work that Kueue cannot admit by itself (neither a fit nor its
   own preemption, the experiment planner's rule 1) and that fits once they are gone (`borrowed_victims`:
   the same order, the smallest prefix that lets it fit, filled back; none that Kueue would let reclaim
   the quota back, rule 4); the model's next cycles must then admit it with the victims gone
   (Kueue's entry ordering: another pending workload may come first). Each victim names its
   beneficiary, so the controller holds it (deactivated) until the beneficiary holds the quota.

The same preference order as the experiment-preemption planner after fair share (priority, then least work
lost).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from fairshare.durations import format_duration
from fairshare.models import ClusterQueueName, FlavorResource, WorkloadKey
from fairshare.planners.experiments import as_admitted, would_reclaim
from fairshare.quantity import describe_quantity
from fairshare.queues import QueueManager
from fairshare.scheduler import (
    Mode,
    SchedulerConfig,
    apply_cycle,
    assign,
    assign_with_targets,
    schedule_cycle,
)
from fairshare.snapshot import Snapshot
from fairshare.workload import WorkloadInfo

MAX_MODEL_CYCLES = 16  # Kueue cycles modelled to see the beneficiaries admitted (each admits or preempts)


@dataclass(frozen=True, slots=True)
class Holder:
    """A workload holding the contested flavor-resource of the shrinking ClusterQueue."""

    key: str  # namespace/name
    priority: int
    admitted_at: float  # QuotaReserved time, seconds since the epoch
    held: int  # milli-units of the contested flavor-resource


@dataclass(frozen=True, slots=True)
class DeadlineVictim:
    key: str
    held: int
    reason: str
    beneficiary: WorkloadKey | None = None  # the other team's pending work it is evicted for (case 2)


def _order(holders: Iterable[Holder]) -> list[Holder]:
    return sorted((h for h in holders if h.held > 0), key=lambda h: (h.priority, -h.admitted_at, h.key))


def _prefix(ordered: Sequence[Holder], excess: int, allowed: int) -> list[Holder]:
    """The holders taken in order until `excess` is freed or `allowed` are taken."""
    out: list[Holder] = []
    freed = 0
    for h in ordered:
        if freed >= excess or len(out) >= allowed:
            break
        freed += h.held
        out.append(h)
    return out


def deadline_victims(holders: Iterable[Holder], *, excess: int, allowed: int, now: float,
                     what: str, resource: str) -> list[DeadlineVictim]:
    """Case 1: the victims, in eviction order; `what` names the transition in the reasons
    (e.g. "transition of ai-frontier-research gpu/nvidia.com/gpu"), amounts of `resource` in its units."""
    taken = _prefix(_order(holders), excess, allowed)
    # Fill back (preemption.go fillBackWorkloads): the last one taken is needed (before it the excess was
    # not freed); an earlier one whose return still leaves it freed is not.
    freed = sum(h.held for h in taken)
    for h in list(reversed(taken[:-1])):
        if freed - h.held >= excess:
            taken.remove(h)
            freed -= h.held
    return [DeadlineVictim(
        h.key, h.held,
        f"preempt {h.key}: {what} is past its deadline with {describe_quantity(excess, resource)} in use "
        f"above what its team may hold; priority {h.priority}, running "
        f"{format_duration(now - h.admitted_at)}; frees {describe_quantity(h.held, resource)}")
        for h in taken]


def borrowed_victims(snapshot: Snapshot, team: ClusterQueueName, fr: FlavorResource,
                     holders: Iterable[Holder], pending: Sequence[WorkloadInfo], *, excess: int, allowed: int,
                     now: float, what: str, config: SchedulerConfig,
                     queued: Sequence[WorkloadInfo] | None = None) -> list[DeadlineVictim]:
    """Case 2: victims among `holders` (the team's workloads holding `fr`) of the `excess` the team
    borrows, each for a pending workload of another ClusterQueue of its quota tree (of `pending`: the ones
    that may be helped) that takes the quota they free; none when nobody would (the quota stays borrowed).
    `queued`: every workload Kueue queues (default `pending`), which the model's cycles order.
    Pure: the snapshot is left unchanged."""
    cqs = snapshot.cluster_queues
    if team not in cqs or allowed <= 0 or excess <= 0:
        return []
    root = cqs[team].node.root()
    tree = {n.name for n in root.subtree_cluster_queues()} if not root.is_cluster_queue else {team}
    wanted = [p for p in pending
              if p.cluster_queue != team and p.cluster_queue in tree and p.cluster_queue in cqs
              and fr.resource in p.workload.total_requests()]
    if not wanted:
        return []
    wanted.sort(key=lambda p: (-p.priority, p.queue_order_time, p.key))
    left = _order(holders)
    by_key = {h.key: h for h in left}
    chosen: list[tuple[list[Holder], WorkloadInfo]] = []
    resource = fr.resource
    with snapshot.transaction():
        for b in wanted:
            budget = allowed - sum(len(v) for v, _ in chosen)
            candidates = _prefix(left, excess, budget)
            if not candidates:
                break
            assignment, targets = assign_with_targets(snapshot, b, config, now=now)
            if assignment.mode == Mode.FIT or targets:
                # Kueue admits it by itself (in the quota left, or by its own preemption): it takes what
                # it takes without us, and the next one is looked at as if it had.
                for t in targets:
                    snapshot.remove_workload(t.key)
                snapshot.add_workload(as_admitted(b, assignment.usage, now))
                continue
            victims = _smallest_set(snapshot, b, candidates, config, now)
            if not victims:
                continue
            infos = [snapshot.workloads[h.key] for h in victims]
            if would_reclaim(snapshot, b, infos, config, now):
                continue  # requeued, Kueue would give the quota back to them
            for h in victims:
                snapshot.remove_workload(h.key)
            snapshot.add_workload(as_admitted(b, assign(snapshot, b, config, now=now).usage, now))
            chosen.append((victims, b))
            gone = {h.key for h in victims}
            left = [h for h in left if h.key not in gone]
            excess -= sum(h.held for h in victims)
            if excess <= 0:
                break
    if not chosen:
        return []
    # Kueue's next cycles, the victims gone (held) and every other pending workload queued: a beneficiary
    # it does not admit (another head is ordered first and takes the quota) is no reason to evict.
    evicted = [h.key for v, _ in chosen for h in v]
    admitted = _admitted_by_model(snapshot, evicted, pending if queued is None else queued,
                                  {b.key for _, b in chosen}, config, now)
    out: list[DeadlineVictim] = []
    for victims, b in chosen:
        if b.key not in admitted:
            continue
        for h in victims:
            held = by_key[h.key].held
            out.append(DeadlineVictim(
                h.key, held,
                f"preempt {h.key}: {what} is past its deadline and its team borrows "
                f"{describe_quantity(sum(x.held for x in victims), resource)} that {b.key} (priority "
                f"{b.priority}) needs, which Kueue would not admit by itself; priority {h.priority}, running "
                f"{format_duration(now - h.admitted_at)}; frees {describe_quantity(held, resource)}",
                b.key))
    return out


def _smallest_set(snapshot: Snapshot, b: WorkloadInfo, candidates: list[Holder], config: SchedulerConfig,
                  now: float) -> list[Holder]:
    """The shortest prefix of `candidates` whose removal lets `b` fit, filled back (preemption.go
    fillBackWorkloads); none if removing them all does not. Fitting is monotone in what is removed."""

    def fits(removed: Sequence[Holder]) -> bool:
        with snapshot.simulate_removal([h.key for h in removed]):
            return assign(snapshot, b, config, now=now).mode == Mode.FIT

    if not fits(candidates):
        return []
    lo, hi = 1, len(candidates)
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(candidates[:mid]):
            hi = mid
        else:
            lo = mid + 1
    victims = list(candidates[:hi])
    for v in list(reversed(victims)):
        trial = [h for h in victims if h.key != v.key]
        if trial and fits(trial):
            victims = trial
    return victims


def _admitted_by_model(snapshot: Snapshot, evicted: Sequence[WorkloadKey], pending: Sequence[WorkloadInfo],
                       wanted: set[WorkloadKey], config: SchedulerConfig, now: float) -> set[WorkloadKey]:
    """Which of `wanted` the model's next cycles admit with `evicted` gone (held, not queued)."""
    gone = set(evicted)
    got: set[WorkloadKey] = set()
    with snapshot.simulate_removal(evicted):
        queued = [p for p in pending if p.key not in gone]
        qm = QueueManager.from_snapshot(snapshot, config, pending=queued)
        for _ in range(MAX_MODEL_CYCLES):
            heads = qm.heads(now)
            if not heads:
                break
            result = schedule_cycle(snapshot, now=now, config=config, heads=heads)
            got.update(a.info.key for a in result.admissions if a.info.key in wanted)
            if got == wanted:
                break
            apply_cycle(snapshot, result)
            qm.requeue_after_cycle(heads, result)
            if not result.admissions and not result.preemptions:
                break
    return got
