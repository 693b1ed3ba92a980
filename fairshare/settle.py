"""Kueue between two outside events: scheduling cycles until nothing changes, with what Kueue
does asynchronously around them (evictions completing, victims requeued, the batched requeue of
inadmissible workloads), in model time.

This is how the differential harness (tests/differential) drives the model over the same
submissions as the real Kueue, how ``qm conformance`` runs a case with ``spec.cycles:
UntilSettled``, and how ``qm explain`` looks for a preemption livelock. The simulator's Kueue
(simulations/kueue.py) runs its cycles through :meth:`KueueModel.cycle` and its timers.

What it follows (Kueue v0.19.2):

- Cycles: pkg/scheduler/scheduler.go ``schedule`` runs as long as ``Heads`` returns heads
  (``wait.UntilWithBackoff``), whether or not the last cycle admitted anything: a BestEffortFIFO
  head that did not fit is parked and the next cycle pops the workload behind it. The loop here
  stops when there is no head, or when an idle cycle (nothing admitted or preempted) sees the
  same heads, with the same flavor scan progress, as an idle cycle since the last decision
  (every head went straight back to its heap: StrictFIFO, or a preemptor waiting; the cycles
  after it would decide the same).
- Preemption: a victim's quota is released after the cycle that chose it, and the victim is
  pushed back to its queue at once (workload_controller.go ``Update``, case
  FromQuotaReservedOrAdmittedToPending: ``cache.DeleteWorkload`` and ``AddOrUpdateWorkload`` in
  one critical section).
- The batched requeue: a quota release asks for the inadmissible workloads of the victim's cohort
  tree to be requeued ``requeueBatchPeriod`` (1 s) later (pkg/cache/queue/inadmissible_workloads.go,
  ``AddAfter``; a request already waiting keeps its earlier time). Until then parked workloads stay
  parked; victims and preemptors do not wait for it. ``KueueTiming(requeue_batch_seconds=0)``
  requeues them at once, as :meth:`QueueManager.notify_cohort_event` alone does.
- Evictions already in progress in the starting state (a Workload with ``Evicted=True`` that
  still holds quota) are seen by the first cycle and complete right after it.
- Flavor scan progress: a workload that was evaluated and not admitted keeps where each pod
  set's flavor scan stopped (entry.LastAssignment; cleared when it issued preemptions or got a
  deferred fit), and its next evaluation resumes at the flavor after it. The progress is dropped
  as outdated (pkg/scheduler/scheduler.go lastAssignmentOutdated, with
  FlavorFungibilityPreserveScanProgress, beta and on) when it is older than the immediately
  preceding cycle and a workload of its ClusterQueue released quota since
  (``AllocatableResourceGeneration``: pkg/cache/scheduler/clusterqueue.go deleteWorkload).
  Between two runs Kueue has either waited with empty heaps (the next cycle follows the last) or
  kept cycling on heads that went straight back to their heaps (many cycles in between): the
  model follows which of the two its last run ended in.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .livelock import Livelock, find_livelock
from .models import ClusterQueueName, ClusterState, Condition, Workload, WorkloadKey
from .queues import QueueManager
from .scheduler.cycle import schedule_cycle
from .scheduler.types import (
    AdmissionDecision,
    CycleResult,
    EntryStatus,
    PreemptionDecision,
    ScanProgress,
    SchedulerConfig,
    next_scan,
)
from .snapshot import Snapshot
from .workload import WorkloadInfo

REQUEUE_BATCH_SECONDS = 1.0  # requeueBatchPeriod (pkg/cache/queue/inadmissible_workloads.go)
MAX_CYCLES = 2_000

Flavors = dict[str, dict[str, str]]  # pod set -> resource -> flavor


@dataclass(frozen=True, slots=True)
class KueueTiming:
    """What the model does between cycles, as Kueue does it asynchronously."""

    requeue_batch_seconds: float = REQUEUE_BATCH_SECONDS
    # Release a cycle's victims one at a time, cycles in between (the API server processes each
    # eviction on its own); False releases them together after the cycle.
    release_victims_one_by_one: bool = False
    # With ``release_victims_one_by_one``: the victim chosen last gives its quota back first. Kueue
    # issues a cycle's evictions in parallel (pkg/scheduler/preemption/preemption.go
    # IssuePreemptions: workqueue.ParallelizeUntil), so which completes first is not ordered.
    release_victims_last_first: bool = False
    # Also requeue a tree's inadmissible workloads (after the batch) when a workload of it is
    # admitted or submitted, if the tree has a Cohort object: Kueue's ClusterQueue status update
    # reaches the cohort controller (clusterqueue_controller.go Update -> notifyWatchers ->
    # cohort_controller.go NotifyClusterQueueUpdate -> Reconcile -> qManager.AddOrUpdateCohort ->
    # notifyCohort). Observed in Kueue's log; when it lands (its status update is itself
    # delayed) is timing, so the default leaves it out and the harness tries it as a variant.
    requeue_on_status_change: bool = False


@dataclass(frozen=True)
class SettleResult:
    cycles: tuple[CycleResult, ...]
    admissions: tuple[AdmissionDecision, ...]  # in order (a workload may appear more than once)
    evictions: tuple[PreemptionDecision, ...]  # new evictions, in order
    settled: bool  # False: stopped by a livelock or after MAX_CYCLES
    livelock: Livelock | None
    end: float  # model time of the last cycle


@dataclass
class KueueModel:
    """The model's Kueue: the snapshot (quota), the pending queues and the pending requeue timers."""

    snapshot: Snapshot
    queues: QueueManager
    config: SchedulerConfig
    timing: KueueTiming = field(default_factory=KueueTiming)
    flavors: dict[WorkloadKey, Flavors] = field(default_factory=dict)  # admitted workloads' flavors
    evicting: set[WorkloadKey] = field(default_factory=set)  # evictions in progress
    _timers: dict[str, float] = field(default_factory=dict)  # root -> when its inadmissible requeue fires
    _timer_cq: dict[str, ClusterQueueName] = field(default_factory=dict)  # root -> a CQ of that tree
    # Flavor scan progress per pending workload: (progress, cycle number, CQ generation then).
    _scan: dict[WorkloadKey, tuple[ScanProgress, int, int]] = field(default_factory=dict)
    _generation: dict[ClusterQueueName, int] = field(default_factory=dict)  # AllocatableResourceGeneration
    _cycle_no: int = 0
    _spinning: bool = False  # the last run ended with heads going straight back to their heaps
    snapshot_cohort_objects: frozenset[str] = frozenset()  # Cohorts that are objects (not implicit)

    @classmethod
    def from_state(
        cls,
        state: ClusterState,
        config: SchedulerConfig,
        *,
        parked: Iterable[WorkloadKey] = (),
        timing: KueueTiming | None = None,
    ) -> KueueModel:
        """The model of a cluster read from ``state``; ``parked`` pending workloads sit in Kueue's
        inadmissible lists (not heads until a cohort event in their tree)."""
        snap = Snapshot.from_state(state)
        parked_keys = set(parked)
        # (A workload whose ClusterQueue does not exist is in no queue: QueueManager.from_snapshot skips it,
        # and it is not parked either.)
        queues = QueueManager.from_snapshot(
            snap, config, pending=[i for k, i in snap.pending.items() if k not in parked_keys]
        )
        for key in sorted(parked_keys):
            info = snap.pending.get(key)
            if info is not None and info.cluster_queue in snap.cluster_queues:
                queues.park(info)
        flavors = {k: _admitted_flavors(state, k) for k in snap.workloads}
        evicting = {k for k, i in snap.workloads.items() if i.evicted}
        model = cls(snap, queues, config, timing or KueueTiming(), flavors, evicting)
        model.snapshot_cohort_objects = frozenset(state.cohorts)
        return model

    @property
    def spinning(self) -> bool:
        """The last run ended with heads going straight back to their heaps: Kueue goes on cycling."""
        return self._spinning

    def root_of(self, cluster_queue: ClusterQueueName) -> str:
        node = self.snapshot.cluster_queue(cluster_queue).node
        return node.root().name if node.parent is not None else cluster_queue

    def submit(self, info: WorkloadInfo, now: float | None = None) -> None:
        """A new pending workload (Kueue: the Workload's Create event pushes it to its queue)."""
        self.queues.push(info)
        if now is not None:
            self.status_changed(info.cluster_queue, now)

    def status_changed(self, cluster_queue: ClusterQueueName, now: float) -> None:
        """A ClusterQueue's status changed (a workload of it was admitted or submitted): with
        ``KueueTiming.requeue_on_status_change`` and a Cohort object above it, its tree's
        inadmissible workloads are requeued after the batch."""
        if not self.timing.requeue_on_status_change:
            return
        node = self.snapshot.cluster_queue(cluster_queue).node
        if any(anc.name in self.snapshot_cohort_objects for anc in node.ancestors()):
            self.cohort_event(cluster_queue, now)

    def admitted(self) -> dict[WorkloadKey, Flavors]:
        """Workloads holding quota and their flavors."""
        return {k: self.flavors.get(k, {}) for k in sorted(self.snapshot.workloads)}

    # -- what happens between cycles ------------------------------------------------------------

    def release(self, key: WorkloadKey, now: float, *, requeue: bool = True) -> None:
        """A workload gives its quota back (eviction done): requeued at once, and the inadmissible
        workloads of its cohort tree requeued after the batch period."""
        info = self.remove(key)
        if requeue:
            self.queues.push(WorkloadInfo.pending(_as_pending(info), info.cluster_queue))
        self.cohort_event(info.cluster_queue, now)

    def remove(self, key: WorkloadKey) -> WorkloadInfo:
        """The workload stops holding quota (its ClusterQueue's AllocatableResourceGeneration moves on);
        what is then requeued, and whether its tree hears of it, is the caller's (:meth:`release`)."""
        info = self.snapshot.remove_workload(key)
        self.flavors.pop(key, None)
        self.evicting.discard(key)
        self._generation[info.cluster_queue] = self._generation.get(info.cluster_queue, 0) + 1
        return info

    def cohort_event(self, cluster_queue: ClusterQueueName, now: float) -> None:
        """Quota changed in the ClusterQueue's tree: its inadmissible workloads are requeued after the
        batch (a request already waiting keeps its time), or at once with a zero batch."""
        if self.timing.requeue_batch_seconds <= 0:
            self.queues.notify_cohort_event(cluster_queue)
            return
        root = self.root_of(cluster_queue)
        self._timers.setdefault(root, now + self.timing.requeue_batch_seconds)
        self._timer_cq.setdefault(root, cluster_queue)

    def fire_timers(self, upto: float) -> bool:
        """Requeue the parked workloads of every tree whose batch fell due by ``upto``."""
        due = sorted(root for root, at in self._timers.items() if at <= upto)
        for root in due:
            del self._timers[root]
            self.queues.notify_cohort_event(self._timer_cq.pop(root))
        return bool(due)

    def next_timer(self) -> float | None:
        # (a loop: `min(..., default=None)` is a generic call from compiled code, 2% of a trace replay)
        best: float | None = None
        for at in self._timers.values():
            if best is None or at < best:
                best = at
        return best

    # -- cycles ---------------------------------------------------------------------------------

    def _scan_starts(self, heads: list[WorkloadInfo]) -> dict[WorkloadKey, tuple[dict[str, int], ...]]:
        """Where each head's flavor scan resumes; outdated progress is dropped (lastAssignmentOutdated)."""
        out = {}
        for h in heads:
            kept = self._scan.get(h.key)
            if kept is None:
                continue
            progress, cycle_no, generation = kept
            adjacent = self._cycle_no - cycle_no <= 1
            if adjacent or self._generation.get(h.cluster_queue, 0) <= generation:
                out[h.key] = next_scan(progress)
            else:
                del self._scan[h.key]
        return out

    def cycle(self, now: float) -> tuple[list[WorkloadInfo], CycleResult | None]:
        """One scheduling cycle at ``now``, committed; (heads, result) or ([], None) without heads."""
        heads = self.queues.heads(now)
        if not heads:
            return heads, None
        self._cycle_no += 1
        scan = self._scan_starts(heads)
        result = schedule_cycle(self.snapshot, now=now, config=self.config, heads=heads, scan=scan)
        for a in result.admissions:
            self.snapshot.add_workload(a.info)
            self.flavors[a.key] = a.flavors
            self.status_changed(a.cluster_queue, now)
        for o in result.outcomes:
            if o.status == EntryStatus.ADMITTED or o.scan is None:
                self._scan.pop(o.key, None)
            else:
                self._scan[o.key] = (o.scan, self._cycle_no, self._generation.get(o.cluster_queue, 0))
        self.queues.requeue_after_cycle(heads, result)
        return heads, result

    def run(self, now: float, *, until: float | None = None, max_cycles: int = MAX_CYCLES) -> SettleResult:
        """Cycles from ``now`` until nothing changes (or a livelock), firing the batched requeues
        due by ``until`` (default: all of them; a simulator passes the time of its next event and
        calls ``run`` again at ``next_timer()``, so that what arrives within the batch period is
        tried before the parked workloads, as in Kueue)."""
        cycles: list[CycleResult] = []
        admissions: list[AdmissionDecision] = []
        evictions: list[PreemptionDecision] = []
        t = now
        # Evictions the state started with complete after the first cycle, like the new ones.
        releases: list[WorkloadKey] = sorted(self.evicting)

        if self._spinning:
            self._cycle_no += 2  # Kueue kept cycling since: the last evaluations are not the preceding cycle
        self._spinning = False

        def done(settled: bool, livelock: Livelock | None = None) -> SettleResult:
            return SettleResult(tuple(cycles), tuple(admissions), tuple(evictions), settled, livelock, t)

        while True:
            idle_seen: set[tuple[object, ...]] = set()
            while len(cycles) < max_cycles:
                heads, result = self.cycle(t)
                if result is None:
                    if not releases:
                        break
                    self._release_some(releases, t)
                    continue
                cycles.append(result)
                admissions.extend(result.admissions)
                new = [p for p in result.preemptions if p.victim not in self.evicting]
                evictions.extend(new)
                self.evicting.update(p.victim for p in new)
                releases.extend(p.victim for p in new)
                released = self._release_some(releases, t)
                if new:
                    livelock = find_livelock(cycles)
                    if livelock is not None:
                        return done(False, livelock)
                if result.admissions or new or released:
                    idle_seen.clear()
                    continue
                # Nothing decided. The next cycle decides the same when it sees the same heads
                # with the same flavor scan progress as an idle cycle before it (the progress of
                # a head retried every cycle goes round its flavors): Kueue goes on cycling.
                state = self.idle_state(heads)
                if state in idle_seen:
                    self._spinning = True
                    break
                idle_seen.add(state)
            if len(cycles) >= max_cycles:
                return done(False)
            at = self.next_timer()
            if at is None or (until is not None and at > until):
                return done(True)
            t = max(t, at)
            self.fire_timers(t)

    def idle_state(self, heads: Iterable[WorkloadInfo]) -> tuple[object, ...]:
        """What an idle cycle saw: its heads and their flavor scan progress. An idle cycle that sees what
        an idle cycle since the last decision saw decides the same as every cycle after it."""
        return tuple(sorted((h.key, self._scan.get(h.key, ((), 0, 0))[0]) for h in heads))

    def _release_some(self, releases: list[WorkloadKey], now: float) -> bool:
        """Complete the pending evictions: all of them, or the first one when victims come back one
        at a time (``KueueTiming.release_victims_one_by_one``)."""
        if self.timing.release_victims_one_by_one and self.timing.release_victims_last_first:
            done = releases[-1:]
            del releases[-1:]
        else:
            count = 1 if self.timing.release_victims_one_by_one else len(releases)
            done = releases[:count]
            del releases[:count]
        for key in done:
            if key in self.snapshot.workloads:
                self.release(key, now)
        return bool(done)


def _as_pending(info: WorkloadInfo) -> Workload:
    """The evicted workload as Kueue requeues it: no admission, Evicted=True (reason Preempted:
    its queue order stays its creation time, pkg/workload GetQueueOrderTimestamp)."""
    wl = info.workload
    conds = [c for c in wl.conditions if c.type not in ("QuotaReserved", "Evicted", "Admitted")]
    conds.append(Condition("Evicted", True, "Preempted", "", wl.creation_timestamp))
    return wl.without_admission(tuple(conds), wl.eviction_stats)


def _admitted_flavors(state: ClusterState, key: WorkloadKey) -> Flavors:
    wl = state.workloads.get(key)
    if wl is None or wl.admission is None:
        return {}
    return {psa.name: dict(psa.flavors) for psa in wl.admission.pod_set_assignments}


