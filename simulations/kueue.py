"""A simulated Kueue: the core's model of Kueue's decisions (fairshare: snapshot, queues, scheduling cycle)
driven with Kueue's timing, in simulated time.

Timing (Kueue pkg/scheduler/scheduler.go): the scheduler runs a cycle whenever something changed and keeps
cycling; each cycle pops one head per ClusterQueue (pkg/cache/queue/manager.go Heads). All events at one
instant are applied first and then the cycles run for the instant (Kueue sees the state after every
simultaneous change). Cycles go on until one decides nothing new: no admission, no preemption, and the
same heads as the cycle before (in BestEffortFIFO a head that cannot be admitted is parked and the next
cycle pops the workload behind it, so a cycle that admits nothing is not the end). A cycle's preemptions
evict their victims (requeued, as Kueue requeues a preempted workload); the preemptor waits for the evictions
to complete, as in Kueue, and is admitted by a later cycle. An eviction completes at once by default, or
`eviction_release` seconds later (SchedulerSpec.eviction_release: on a cluster the Job is suspended, its pods
deleted and Kueue clears the reservation in tenths of a second): meanwhile the victim keeps its quota, carries
the Evicted condition (Kueue's preemption orders evicted candidates first, preemption/common ordering), and a
cycle that targets it again issues nothing new (preemption.go IssuePreemptions skips a target already
evicted); its preemptor is requeued at once and retried (RequeueReasonPendingPreemption).

Evictions asked for by the policy controller (experiment victims, transition deadlines) are
deactivations, as the service does them (docs/controlplane.md): the workload releases its quota and stays
a pending Workload that Kueue does not queue until it is reactivated.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from fairshare import settle
from fairshare.control import PendingWorkload
from fairshare.livelock import LivelockGuard
from fairshare.models import ClusterQueueName, ClusterState, FlavorResource, ResourceQuota, WorkloadKey
from fairshare.queues import QueueManager
from fairshare.scheduler.types import SchedulerConfig
from fairshare.settle import REQUEUE_BATCH_SECONDS, KueueTiming
from fairshare.snapshot import FAST, FastPaths, Snapshot
from fairshare.workload import WorkloadInfo

from .record import EvictedBy

# A guard against a cycle loop that never settles at one instant (e.g. two workloads preempting each other
# forever under fair sharing); Kueue would spin the same way, so the simulator stops and notes it.
MAX_CYCLES_PER_INSTANT = 10_000


class KueueListener(Protocol):
    """What the simulation does when Kueue admits or evicts (the workload lifecycle and measurement)."""

    def admitted(self, info: WorkloadInfo, t: float) -> None: ...

    def evicting(self, info: WorkloadInfo, t: float) -> None:
        """Kueue began evicting a workload (its pods stop); `evicted` follows when its quota is released."""

    def evicted(
        self, info: WorkloadInfo, t: float, *, by: EvictedBy, preemptor: str, reason: str
    ) -> None: ...


class KueueModel:
    def __init__(
        self,
        state: ClusterState,
        config: SchedulerConfig,
        listener: KueueListener,
        *,
        track_pending: bool = False,
        core: FastPaths = FAST,
        requeue_batch: float = REQUEUE_BATCH_SECONDS,
        eviction_release: float = 0.0,
    ) -> None:
        # The core's exact fast paths by default (benchmarks/differential.py proves them identical to the
        # reference on the conformance corpus and random scenarios; `qm simulate --core reference`).
        self.snapshot = Snapshot.from_state(state, paths=core)
        self.config = config
        self.queues = QueueManager.from_snapshot(self.snapshot, config, pending=())
        # The core's Kueue between outside events (fairshare/settle.py): one cycle with its flavor scan
        # progress, the batched requeue timers; the same code the differential harness checks against the
        # real Kueue. The simulator adds the workload lifecycle around it (listener, deactivations, holds).
        self.core = settle.KueueModel(self.snapshot, self.queues, config,
                                      KueueTiming(requeue_batch_seconds=requeue_batch))
        self.listener = listener
        self.track_pending = track_pending
        # Pending workloads with when they last became pending and whether Kueue queues them (the policy
        # controller's observation; kept only when a policy controller runs).
        self.pending: dict[WorkloadKey, PendingWorkload] = {}
        self.held: dict[WorkloadKey, WorkloadInfo] = {}  # deactivated workloads, not queued
        self.version = 0  # bumped on every change a policy controller may want to look at
        self.cycles = 0
        self.notes: list[str] = []
        self._changed: set[ClusterQueueName] = set()
        self._held: set[str] = set()  # LocalQueues with a stopPolicy
        self.eviction_release = eviction_release
        # Kueue's evictions in progress (eviction_release > 0), in the order they complete:
        # (when the quota is released, victim, preemptor, reason, when the eviction began).
        self._releasing: list[tuple[float, WorkloadKey, str, str, float]] = []

    # --- inputs -------------------------------------------------------------------------------------------

    def submit(self, info: WorkloadInfo, t: float) -> None:
        """A new (or requeued) pending workload in Kueue's queues."""
        self.queues.push(info)
        self.version += 1
        if self.track_pending:
            self.pending[info.key] = PendingWorkload(info, t, queued=True)

    def release(self, key: WorkloadKey) -> WorkloadInfo:
        """A workload stops holding quota (finished, evicted): a cohort event for its tree."""
        info = self.core.remove(key)
        if info.local_queue not in self._held:
            # Kueue requeues the cohort's inadmissible workloads through the released workload's LocalQueue
            # (manager.go QueueAssociatedInadmissibleWorkloadsAfter); a stopped one has left the queue
            # manager (localqueue_controller.go: stopPolicy != None -> DeleteLocalQueue): no requeue.
            self._changed.add(info.cluster_queue)
        self.version += 1
        return info

    def deactivate(self, key: WorkloadKey, t: float, *, by: EvictedBy, preemptor: str, reason: str) -> bool:
        """spec.active=false on a workload: an admitted one is evicted through Kueue's path and held; a
        queued one leaves the queue. False if it is neither (already held, or finished). A workload whose
        eviction is in progress is released now and held."""
        if key in self.snapshot.workloads:
            info = self.release(key)
            self.listener.evicted(info, t, by=by, preemptor=preemptor, reason=reason)
            pending = WorkloadInfo.pending(info.workload.after_eviction("Deactivated", ran=_ran(info, t)),
                                           info.cluster_queue)
        else:
            entry = self.pending.get(key)
            if entry is None or not entry.queued:
                return False
            self.queues.delete(key)
            pending = entry.info
        self.held[key] = pending
        if self.track_pending:
            self.pending[key] = PendingWorkload(pending, t, queued=False)
        self.version += 1
        return True

    def reactivate(self, key: WorkloadKey, t: float) -> bool:
        """spec.active=true: Kueue queues it again (a cohort event, as a requeue)."""
        info = self.held.pop(key, None)
        if info is None:
            return False
        self.submit(info, t)
        self._changed.add(info.cluster_queue)
        return True

    def set_quota(self, cluster_queue: ClusterQueueName, fr: FlavorResource, quota: ResourceQuota) -> bool:
        node = self.snapshot.cluster_queue(cluster_queue).node
        if node.quota(fr) == quota:
            return False
        self.snapshot.set_quota(node, fr, quota)
        self._changed.add(cluster_queue)
        self.version += 1
        return True

    def set_weight(self, cluster_queue: ClusterQueueName, weight_milli: int) -> None:
        node = self.snapshot.cluster_queue(cluster_queue).node
        if node.weight != weight_milli:
            self.snapshot.set_fair_sharing_weight(node, weight_milli)
            self._changed.add(cluster_queue)
            self.version += 1

    @property
    def held_queues(self) -> frozenset[str]:
        """The LocalQueues held now (stopPolicy Hold): what the policy controller observes."""
        return frozenset(self._held)

    def hold_local_queues(self, held: set[str]) -> None:
        """Exactly these LocalQueues ("namespace/name") have a stopPolicy (Hold): nothing new is admitted
        from them; running work continues."""
        for lq in sorted(held - self._held):
            self.queues.set_local_queue_held(lq, True)
        for lq in sorted(self._held - held):
            self.queues.set_local_queue_held(lq, False)
            self._changed.add(self.snapshot.local_queues[lq].cluster_queue)
        if held != self._held:
            self.version += 1
        self._held = set(held)

    # --- Kueue's scheduler ------------------------------------------------------------------------------

    def _notify(self, changed: Iterable[ClusterQueueName], t: float) -> None:
        """QueueInadmissibleWorkloads once per cohort tree that changed (it releases the whole tree), after
        Kueue's requeue batch (fairshare/settle.py KueueModel.cohort_event); a workload arriving meanwhile
        is tried at once."""
        for cq in sorted(changed):
            self.core.cohort_event(cq, t)

    def next_timer(self) -> float | None:
        """When a batched requeue falls due or an eviction completes (the simulator's next Kueue event)."""
        at = self.core.next_timer()
        if self._releasing:
            due = self._releasing[0][0]
            return due if at is None or due < at else at
        return at

    def _begin_eviction(self, key: WorkloadKey, t: float, preemptor: str, reason: str) -> None:
        """Kueue set the Evicted condition on an admitted victim: its pods stop (KueueListener.evicting), its
        quota stays reserved until the eviction completes `eviction_release` later."""
        info = self.snapshot.remove_workload(key)
        marked = WorkloadInfo(info.key, info.workload, info.cluster_queue, info.local_queue, info.priority,
                              info.queue_order_time, info.uid, info.usage, info.quota_reserved_time,
                              evicted=True)
        self.snapshot.add_workload(marked)
        self.core.evicting.add(key)
        self._releasing.append((t + self.eviction_release, key, preemptor, reason, t))
        self.listener.evicting(marked, t)
        self.version += 1

    def _complete_evictions(self, t: float) -> None:
        """The evictions due by `t` complete: each victim gives its quota back and is requeued."""
        while self._releasing and self._releasing[0][0] <= t + 1e-6:
            _, key, preemptor, reason, began = self._releasing.pop(0)
            if key not in self.core.evicting:
                continue  # released otherwise meanwhile (deactivated)
            self._preempted(key, t, preemptor, reason, began)

    def _preempted(self, key: WorkloadKey, t: float, preemptor: str, reason: str, began: float) -> None:
        """A preemption completes at `t`: the victim gives its quota back (a cohort event for its tree) and
        is requeued, having run until its eviction `began`."""
        info = self.release(key)
        self.listener.evicted(info, t, by=EvictedBy.KUEUE, preemptor=preemptor, reason=reason)
        requeued = info.workload.after_eviction("Preempted", reason, ran=_ran(info, began))
        self.submit(WorkloadInfo.pending(requeued, info.cluster_queue), t)

    def settle(self, t: float) -> None:
        """Run Kueue's cycles at `t` until they decide nothing new (fairshare/settle.py's stopping rule:
        no heads, or an idle cycle that sees the heads and flavor scan progress an idle cycle since the
        last decision saw), or until they repeat a preemption pattern (a livelock, noted)."""
        self._complete_evictions(t)
        # (a microsecond of slack: the simulator passes origin + its own time, and back again may round)
        self.core.fire_timers(t + 1e-6)
        self._notify(self._changed, t)
        self._changed.clear()
        idle_seen: set[tuple[object, ...]] = set()
        guard = LivelockGuard()  # this instant's cycles
        for _ in range(MAX_CYCLES_PER_INSTANT):
            heads, result = self.core.cycle(t)
            if result is None:
                return
            self.cycles += 1
            issued = False
            for p in result.preemptions:
                if p.victim not in self.snapshot.workloads or p.victim in self.core.evicting:
                    continue  # already evicted: Kueue issues nothing new for it
                issued = True
                if self.eviction_release > 0:
                    self._begin_eviction(p.victim, t, p.preemptor, str(p.reason))
                    continue
                self._preempted(p.victim, t, p.preemptor, str(p.reason), t)  # release() notes its tree
            for a in result.admissions:
                self.pending.pop(a.info.key, None)
                self.version += 1
                self.listener.admitted(a.info, t)
            self._notify(self._changed, t)
            self._changed.clear()
            if result.admissions or issued:
                livelock = guard.add(result)
                if livelock is not None:
                    self.notes.append(f"t={t:.0f}s: {livelock.message()}; the cycles stopped there")
                    return
                idle_seen.clear()
                continue
            state = self.core.idle_state(heads)
            if state in idle_seen:
                return
            idle_seen.add(state)
        self.notes.append(
            f"t={t:.0f}s: stopped after {MAX_CYCLES_PER_INSTANT} cycles at one instant "
            "(a preemption loop that never settles)"
        )


def _ran(info: WorkloadInfo, t: float) -> int | None:
    """The whole seconds an evicted workload was admitted in this attempt, as Kueue adds them to
    status.accumulatedPastExecutionTimeSeconds (pkg/workload/admissionchecks.go SyncAdmittedCondition:
    int32 of the seconds since the Admitted condition's lastTransitionTime, truncated)."""
    start = info.quota_reserved_time
    return None if start is None else int(t - start)
