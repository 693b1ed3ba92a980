"""Pending queues per ClusterQueue, as Kueue's queue manager keeps them
(pkg/cache/queue/manager.go, cluster_queue.go).

- Each ClusterQueue has a heap ordered by: the sticky preemptor, higher priority, older
  queue-order time, then UID (``baseCompareFunc``); with Admission Fair Sharing on a CQ
  whose ``admissionScope.admissionMode`` asks for it, lower LocalQueue usage comes first.
- ``heads(now)`` pops one head per active ClusterQueue that has one.
- After a cycle, ``requeue_after_cycle(heads, result)`` puts every head not admitted back:
  StrictFIFO heads go straight back to the heap (and keep blocking the CQ);
  BestEffortFIFO heads that did not fit are parked as *inadmissible* until a cluster
  event in their cohort tree (``notify_cohort_event``: a workload finished or was
  evicted, a quota changed, ...) moves them back. With SchedulingEquivalenceHashing (beta,
  on) a head parked for NoFit / no preemption candidates takes every queued workload of
  the same scheduling shape with it.
- A BestEffortFIFO head that waits for its victims stays the head until admitted (the
  "sticky" preemptor, Kueue#6929).
- Workloads with ``status.requeueState.requeueAt`` in the future wait for it (backoff);
  a LocalQueue with a stopPolicy holds its workloads out of the heap.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass

from .afs import local_queue_usage
from .models import AdmissionMode, ClusterQueueName, LocalQueueKey, QueueingStrategy, StopPolicy, WorkloadKey
from .scheduler.cycle import schedule_cycle
from .scheduler.types import CycleResult, EntryStatus, SchedulerConfig
from .snapshot import Snapshot
from .workload import WorkloadInfo

_SortKey = tuple[float, int, float, str]

# Requeue reasons after which Kueue bulk-parks equivalent workloads (cluster_queue.go
# requeueIfNotPresent: RequeueReasonNoFit, RequeueReasonPreemptionNoCandidates).
BULK_PARK_REASONS = frozenset({"NoFit", "PreemptionNoCandidates"})


def scheduling_shape(info: WorkloadInfo) -> Hashable:
    """computeSchedulingHash (pkg/workload/workload.go): effective priority and, per pod set,
    its name, effective count, requests, node selector, tolerations and minCount."""
    wl = info.workload
    return (
        info.priority,
        tuple(
            (ps.name, wl.count_after_reclaim(ps), ps.requests, ps.node_selector, ps.tolerations, ps.min_count)
            for ps in wl.pod_sets
        ),
    )


@dataclass(slots=True, init=False)
class _ClusterQueueQueue:
    name: ClusterQueueName
    strategy: QueueingStrategy
    root: str  # root cohort (or the CQ itself): the scope of inadmissible release
    active: bool
    afs: bool
    heap: list[tuple[_SortKey, int, WorkloadKey]]
    live: dict[WorkloadKey, tuple[int, WorkloadInfo]]  # key -> (seq, info)
    by_shape: dict[Hashable, set[WorkloadKey]]  # live keys by shape
    inadmissible: dict[WorkloadKey, WorkloadInfo]
    backoff: dict[WorkloadKey, WorkloadInfo]
    held: dict[WorkloadKey, WorkloadInfo]  # LocalQueue stopped
    sticky: WorkloadKey | None  # BestEffortFIFO preemptor kept at the head until admitted
    event_seq: int  # last cohort event
    popped_at: dict[WorkloadKey, int]  # event_seq when popped

    def __init__(self, name: ClusterQueueName, strategy: QueueingStrategy, root: str, active: bool = True,
                 afs: bool = False) -> None:
        # (init=False: a dataclass-generated __init__ runs interpreted even compiled; scheduler/types.py)
        self.name, self.strategy, self.root, self.active, self.afs = name, strategy, root, active, afs
        self.heap = []
        self.live = {}
        self.by_shape = {}
        self.inadmissible = {}
        self.backoff = {}
        self.held = {}
        self.sticky = None
        self.event_seq = 0
        self.popped_at = {}


class QueueManager:
    """All ClusterQueues' pending workloads; incremental (heaps), not rebuilt per cycle."""

    def __init__(self, config: SchedulerConfig | None = None, *, equivalence_hashing: bool = True) -> None:
        self.config = config or SchedulerConfig()
        self.equivalence_hashing = equivalence_hashing
        self._cqs: dict[ClusterQueueName, _ClusterQueueQueue] = {}
        # heads() walks, by name, the CQs whose heap or backoff may hold an entry (a superset: stale heap
        # entries count; the others have nothing to pop), and a cohort event touches one root cohort's CQs:
        # both kept up to date here instead of scanning all CQs per call.
        self._ready: set[ClusterQueueName] = set()
        self._by_root: dict[str, list[_ClusterQueueQueue]] = {}
        self._where: dict[WorkloadKey, ClusterQueueName] = {}
        self._seq = itertools.count()
        self._lq_usage: dict[LocalQueueKey, float] = {}
        self._held_lqs: set[LocalQueueKey] = set()
        self._lq_cq: dict[LocalQueueKey, ClusterQueueName] = {}  # LocalQueue -> its ClusterQueue
        self._shapes: dict[WorkloadKey, Hashable] = {}

    # -- setup ---------------------------------------------------------------------------------

    @classmethod
    def from_snapshot(
        cls,
        snapshot: Snapshot,
        config: SchedulerConfig | None = None,
        pending: Iterable[WorkloadInfo] | None = None,
    ) -> QueueManager:
        """Queues for every CQ of the snapshot, filled with ``pending`` (default: snapshot.pending)."""
        qm = cls(config)
        for name in sorted(snapshot.cluster_queues):
            cq = snapshot.cluster_queues[name]
            root = cq.node.root().name if cq.node.parent is not None else name
            qm.add_cluster_queue(
                name,
                cq.spec.queueing_strategy,
                root=root,
                active=cq.active,
                afs=cq.spec.admission_mode == AdmissionMode.USAGE_BASED_AFS,
            )
        for lq in snapshot.local_queues.values():
            if lq.stop_policy != StopPolicy.NONE:
                qm._held_lqs.add(lq.key)
            if lq.afs_consumed:
                qm._lq_usage[lq.key] = qm._afs_usage(lq.afs_consumed, lq.fair_sharing_weight)
        for info in sorted(snapshot.pending.values() if pending is None else pending, key=lambda i: i.key):
            # A workload whose ClusterQueue does not exist (its LocalQueue points at a deleted one) is in no
            # queue: Kueue's queue manager has none to add it to (pkg/cache/queue/manager.go
            # AddOrUpdateWorkload); it waits, never a head.
            if info.cluster_queue in qm._cqs:
                qm.push(info)
        return qm

    def _afs_usage(self, consumed: Iterable[tuple[str, int]], weight_milli: int) -> float:
        """LocalQueue AFS usage: sum_r resourceWeight[r]*consumed[r] / lqWeight (KEP-4136)."""
        afs = self.config.admission_fair_sharing
        weights: Mapping[str, float] = afs.resource_weights if afs is not None else {}
        return local_queue_usage({r: q / 1000.0 for r, q in consumed}, {}, weights, weight_milli / 1000.0)

    def add_cluster_queue(
        self,
        name: ClusterQueueName,
        strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO,
        *,
        root: str | None = None,
        active: bool = True,
        afs: bool = False,
    ) -> None:
        old = self._cqs.get(name)
        if old is not None:
            self._by_root[old.root].remove(old)
        q = _ClusterQueueQueue(name, strategy, root or name, active, afs)
        self._cqs[name] = q
        # Members of a root in the CQs' first-insertion order (the order of self._cqs).
        rank = {n: i for i, n in enumerate(self._cqs)}
        members = self._by_root.setdefault(q.root, [])
        members.append(q)
        members.sort(key=lambda m: rank[m.name])

    def set_local_queue_usage(self, lq: LocalQueueKey, usage: float) -> None:
        """New AFS usage of a LocalQueue: re-sorts the heap that uses it (RebuildHeap)."""
        self.set_local_queue_usages({lq: usage})

    def set_local_queue_usages(self, usages: Mapping[LocalQueueKey, float]) -> None:
        """Several LocalQueues' AFS usage at once; each affected heap is rebuilt once."""
        affected: set[ClusterQueueName] = set()
        for lq, usage in usages.items():
            self._lq_usage[lq] = usage
            cq = self._lq_cq.get(lq)
            if cq is not None and self._cqs[cq].afs:
                affected.add(cq)
        for cq in sorted(affected):
            self._rebuild(self._cqs[cq])

    def set_local_queue_held(self, lq: LocalQueueKey, held: bool) -> None:
        """A LocalQueue's stopPolicy: while held its pending workloads are not heads."""
        if held:
            self._held_lqs.add(lq)
            for q in self._cqs.values():
                for key in [k for k, (_, i) in q.live.items() if i.local_queue == lq]:
                    info = self._deactivate(q, key)
                    if info is not None:
                        q.held[key] = info
                # Parked and backed-off workloads of the queue are held too: a cohort event or the end
                # of a backoff must not make them heads while the queue is stopped.
                for parked in (q.inadmissible, q.backoff):
                    for key in sorted(k for k, i in parked.items() if i.local_queue == lq):
                        q.held[key] = parked.pop(key)
        else:
            self._held_lqs.discard(lq)
            for q in self._cqs.values():
                for key in sorted(k for k, i in q.held.items() if i.local_queue == lq):
                    self._activate(q, q.held.pop(key))

    # -- ordering and the active set -----------------------------------------------------------

    def _key(self, q: _ClusterQueueQueue, info: WorkloadInfo) -> _SortKey:
        afs = 0.0
        if q.afs and self.config.admission_fair_sharing is not None:
            afs = self._lq_usage.get(info.local_queue, 0.0)
        return (afs, -info.priority, info.queue_order_time, info.uid)

    def _rebuild(self, q: _ClusterQueueQueue) -> None:
        q.heap = [(self._key(q, info), seq, k) for k, (seq, info) in q.live.items()]
        heapq.heapify(q.heap)
        if q.heap:
            self._ready.add(q.name)

    def _shape(self, info: WorkloadInfo) -> Hashable:
        shape = self._shapes.get(info.key)
        if shape is None:
            shape = scheduling_shape(info)
            self._shapes[info.key] = shape
        return shape

    def _activate(self, q: _ClusterQueueQueue, info: WorkloadInfo) -> None:
        """Into the heap (the active set)."""
        seq = next(self._seq)
        q.live[info.key] = (seq, info)
        heapq.heappush(q.heap, (self._key(q, info), seq, info.key))
        self._ready.add(q.name)
        q.by_shape.setdefault(self._shape(info), set()).add(info.key)

    def _deactivate(self, q: _ClusterQueueQueue, key: WorkloadKey) -> WorkloadInfo | None:
        """Out of the active set (its heap entry becomes stale)."""
        entry = q.live.pop(key, None)
        if entry is None:
            return None
        keys = q.by_shape.get(self._shape(entry[1]))
        if keys is not None:
            keys.discard(key)
        return entry[1]

    # -- mutation -----------------------------------------------------------------------------

    def push(self, info: WorkloadInfo) -> None:
        """Add or update a pending workload (it goes to the active heap)."""
        self.delete(info.key)
        q = self._cqs.get(info.cluster_queue)
        if q is None:
            raise KeyError(f"unknown ClusterQueue {info.cluster_queue}")
        self._where[info.key] = q.name
        self._lq_cq[info.local_queue] = q.name
        if info.local_queue in self._held_lqs:
            q.held[info.key] = info
            return
        self._activate(q, info)

    def park(self, info: WorkloadInfo) -> None:
        """Add a pending workload straight to its CQ's inadmissible set: a state read from a
        cluster where Kueue already tried and parked it (cluster_queue.go requeueIfNotPresent ->
        inadmissibleWorkloads). It is not a head until a cohort event in its tree
        (``notify_cohort_event``, Kueue's QueueInadmissibleWorkloads)."""
        self.delete(info.key)
        q = self._cqs.get(info.cluster_queue)
        if q is None:
            raise KeyError(f"unknown ClusterQueue {info.cluster_queue}")
        self._where[info.key] = q.name
        self._lq_cq[info.local_queue] = q.name
        q.inadmissible[info.key] = info

    def delete(self, key: WorkloadKey) -> None:
        """The workload is gone (admitted, finished, deleted, deactivated)."""
        name = self._where.pop(key, None)
        if name is None:
            return
        q = self._cqs[name]
        self._deactivate(q, key)
        q.inadmissible.pop(key, None)
        q.backoff.pop(key, None)
        q.held.pop(key, None)
        q.popped_at.pop(key, None)
        self._shapes.pop(key, None)
        if q.sticky == key:
            q.sticky = None

    def heads(self, now: float) -> list[WorkloadInfo]:
        """Pop one head per active ClusterQueue (sorted by CQ name). Popped heads leave the
        queues until ``requeue``/``requeue_after_cycle`` (or ``delete`` once admitted)."""
        out = []
        cqs = self._cqs
        for name in sorted(self._ready):
            q = cqs[name]
            if not q.heap and not q.backoff:
                self._ready.discard(name)  # nothing to pop (every live workload has an entry in the heap)
                continue
            if not q.active:
                continue
            self._release_backoff(q, now)
            if q.sticky is not None and q.sticky in q.live:
                # preemptorWorkload (cluster_queue.go, Kueue#6929): the preempting workload
                # stays the head of a BestEffortFIFO queue until it is admitted.
                info = self._deactivate(q, q.sticky)
                if info is not None:
                    q.popped_at[info.key] = q.event_seq
                    out.append(info)
                    continue
            while q.heap:
                _, seq, key = heapq.heappop(q.heap)
                entry = q.live.get(key)
                if entry is None or entry[0] != seq:
                    continue  # stale heap entry
                info = entry[1]
                self._deactivate(q, key)
                ra = info.workload.requeue_at
                if ra is not None and ra > now:
                    q.backoff[key] = info
                    continue
                q.popped_at[key] = q.event_seq
                out.append(info)
                break
        return out

    def _release_backoff(self, q: _ClusterQueueQueue, now: float) -> None:
        if not q.backoff:
            return
        for key in [k for k, i in q.backoff.items() if (i.workload.requeue_at or 0.0) <= now]:
            self._activate(q, q.backoff.pop(key))

    def requeue(self, info: WorkloadInfo, *, immediate: bool, reason: str = "") -> None:
        """RequeueIfNotPresent: back to the heap, or parked as inadmissible unless a cohort
        event happened since it was popped. Parked for ``reason`` NoFit or
        PreemptionNoCandidates, it takes the queued workloads of the same shape along."""
        q = self._cqs[info.cluster_queue]
        popped = q.popped_at.pop(info.key, -1)
        self._where[info.key] = q.name
        if info.local_queue in self._held_lqs:  # its LocalQueue was stopped while it was a head
            q.held[info.key] = info
            return
        if immediate or q.event_seq > popped:
            self._activate(q, info)
            return
        q.inadmissible[info.key] = info
        if (
            self.equivalence_hashing
            and reason in BULK_PARK_REASONS
            and q.strategy == QueueingStrategy.BEST_EFFORT_FIFO
        ):
            # handleInadmissibleHash: equivalent workloads would not fit either.
            for key in sorted(q.by_shape.get(self._shape(info), ())):
                same = self._deactivate(q, key)
                if same is not None:
                    q.inadmissible[key] = same

    def requeue_after_cycle(self, heads: Iterable[WorkloadInfo], result: CycleResult) -> None:
        """Requeue every head the cycle did not admit, as its outcome says; forget admitted ones."""
        by_key = {h.key: h for h in heads}
        for o in result.outcomes:
            info = by_key.get(o.key)
            if info is None:
                continue
            if o.status == EntryStatus.ADMITTED:
                self.delete(o.key)
                continue
            if o.pending_preemption:
                q = self._cqs[info.cluster_queue]
                q.sticky = o.key if q.strategy == QueueingStrategy.BEST_EFFORT_FIFO else None
            self.requeue(info, immediate=o.requeue_immediately, reason=o.requeue_reason)

    def notify_cohort_event(self, cluster_queue: ClusterQueueName) -> None:
        """QueueInadmissibleWorkloads: something changed in this CQ's cohort tree (a workload
        finished/was evicted, quota changed): inadmissible workloads there get another try."""
        q0 = self._cqs.get(cluster_queue)
        if q0 is None:
            return
        for q in self._by_root[q0.root]:
            q.event_seq += 1
            for key in sorted(q.inadmissible):
                self._activate(q, q.inadmissible[key])
            q.inadmissible.clear()

    # -- queries ------------------------------------------------------------------------------

    def pending_count(self, cluster_queue: ClusterQueueName | None = None) -> tuple[int, int]:
        """(active, inadmissible) pending workloads, for one CQ or all."""
        qs = [self._cqs[cluster_queue]] if cluster_queue else list(self._cqs.values())
        return (sum(len(q.live) + len(q.backoff) for q in qs), sum(len(q.inadmissible) for q in qs))

    def ordered(self, cluster_queue: ClusterQueueName) -> list[WorkloadInfo]:
        """The CQ's active pending workloads in queue order (for explain; O(n log n))."""
        q = self._cqs[cluster_queue]
        return [info for _, info in sorted(q.live.values(), key=lambda e: self._key(q, e[1]))]


def heads_of(snapshot: Snapshot, *, now: float, config: SchedulerConfig | None = None) -> list[WorkloadInfo]:
    """The heads Kueue would pop from ``snapshot.pending`` (one per active ClusterQueue)."""
    return QueueManager.from_snapshot(snapshot, config).heads(now)


def schedule_pending(snapshot: Snapshot, *, now: float, config: SchedulerConfig | None = None) -> CycleResult:
    """One cycle over the heads of ``snapshot.pending`` (a state read from files: conformance cases,
    ``qm explain``); the snapshot is left unchanged."""
    cfg = config or SchedulerConfig()
    return schedule_cycle(snapshot, now=now, config=cfg, heads=heads_of(snapshot, now=now, config=cfg))
