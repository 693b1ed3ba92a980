"""The experiment gate's index of experiments per ClusterQueue (FastPaths.index_experiments).

The gate reads, on every decision, which admitted workloads below the experiment priority are past
minRuntime (`experiments._eligible`, the memo keys) and when the next one gets there (its wake-up). The
reference scans every admitted workload each time. Here each ClusterQueue's workloads below the priority
are kept sorted by when they started running (WorkloadInfo.run_start: the quota reservation time less
the time admitted before an eviction), rebuilt only when the ClusterQueue's workloads change
(`ClusterQueueSnapshot.wl_version`, restored by rollback, never reused for other content). With the same
workloads, time alone decides which are eligible, and the eligible ones are a prefix of that order:

- eligible: `start is None or now - start >= min_runtime`. Floating-point subtraction is monotone (a later
  start never gives a larger `now - start`), so the started ones that pass are the earliest: the count of
  them is found by bisection with the reference's own comparison, and names the set exactly.
- next wake-up: the earliest `start + min_runtime` above `now` over the started ones; addition is
  monotone too, so those above `now` are a suffix and the first of it is the minimum.

A ClusterQueue's part of a key is then (name, workloads version, eligible count): equal parts, equal
eligible sets (the converse need not hold: a changed version only misses the memo).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fairshare.snapshot import ClusterQueueSnapshot, Snapshot


@dataclass(slots=True)
class QueueExperiments:
    """One ClusterQueue's admitted workloads below the experiment priority at one workloads version."""

    version: int
    unstarted: int  # workloads without a quota reservation time: eligible at any time (first in `lqs`)
    starts: list[float]  # the others' reservation times, ascending
    lqs: list[str]  # LocalQueue of each: the unstarted ones, then the started ones in `starts` order
    uniform: int  # the longest prefix of `lqs` in one LocalQueue
    name: str  # the ClusterQueue's
    # The last `next_eligible` answer: (minRuntime, the time asked, the answer). The same answer at any
    # later time before it: no start + minRuntime lies between the two times, or the answer (the least one
    # above the first) would be earlier.
    asked: tuple[float, float, float | None] | None = None

    def eligible(self, now: float, min_runtime: float) -> int:
        """How many are eligible at `now`: the unstarted, then the earliest started ones."""
        starts = self.starts
        lo, hi = 0, len(starts)
        while lo < hi:
            mid = (lo + hi) // 2
            if now - starts[mid] >= min_runtime:
                lo = mid + 1
            else:
                hi = mid
        return self.unstarted + lo

    def next_eligible(self, now: float, min_runtime: float) -> float | None:
        """The earliest `start + min_runtime` later than `now` (a started one reaching minRuntime)."""
        kept = self.asked
        if (kept is not None and kept[0] == min_runtime and kept[1] <= now
                and (kept[2] is None or now < kept[2])):
            return kept[2]
        starts = self.starts
        lo, hi = 0, len(starts)
        while lo < hi:
            mid = (lo + hi) // 2
            if starts[mid] + min_runtime > now:
                hi = mid
            else:
                lo = mid + 1
        at = starts[lo] + min_runtime if lo < len(starts) else None
        self.asked = (min_runtime, now, at)
        return at


def _build(cq: ClusterQueueSnapshot, below: int) -> QueueExperiments:
    # By run start (WorkloadInfo.run_start: the reservation time less the time admitted before an
    # eviction), which is what minRuntime counts from (the gate's reference, experiments._eligible).
    unstarted: list[tuple[str, str]] = []
    started: list[tuple[float, str, str]] = []
    for w in cq.workloads.values():
        if w.priority >= below:
            continue
        start = w.run_start
        if start is None:
            unstarted.append((w.key, w.local_queue))
        else:
            started.append((start, w.key, w.local_queue))
    unstarted.sort()
    started.sort()
    lqs = [lq for _, lq in unstarted] + [lq for _, _, lq in started]
    uniform = 0
    while uniform < len(lqs) and lqs[uniform] == lqs[0]:
        uniform += 1
    return QueueExperiments(
        cq.wl_version, len(unstarted), [s for s, _, _ in started], lqs, uniform, cq.name
    )


@dataclass
class ExperimentIndex:
    """Each ClusterQueue's QueueExperiments for one snapshot and experiment priority, rebuilt when its
    workloads change. Held by the gate's memo (experiments.PlanMemo), one per policy."""

    snapshot: Snapshot | None = None
    below: int = 0
    queues: dict[str, QueueExperiments] = field(default_factory=dict)
    # The last `next_eligible` answer: (snapshot state id, minRuntime, the time asked, the answer). The same
    # workloads (Snapshot.state_id: changed by every change, restored by rollback, never reused) give the
    # same answer at any later time before it: no start + minRuntime lies between the two times, or the
    # answer (the least one above the first) would be earlier.
    _next: tuple[int, float, float, float | None] | None = None

    def _queues(self, snap: Snapshot, below: int) -> dict[str, QueueExperiments]:
        """The per-ClusterQueue entries for this snapshot and priority (all dropped for another)."""
        if snap is not self.snapshot or below != self.below:
            self.snapshot, self.below = snap, below
            self.queues.clear()
            self._next = None
        return self.queues

    def of(self, snap: Snapshot, cq: ClusterQueueSnapshot, below: int) -> QueueExperiments:
        return _entry(self._queues(snap, below), cq.name, cq, below)

    def key(self, snap: Snapshot, below: int, now: float, min_runtime: float) -> tuple[object, ...]:
        """The eligible experiments of the whole snapshot, as a key (experiments._eligible's set)."""
        out: list[tuple[str, int, int]] = []
        # In the snapshot's order of its ClusterQueues: each entry names its queue, so two keys are equal
        # only if the same entries sorted are (another order only misses the memo, never matches wrongly).
        for q in self._each(snap, below):
            if q.lqs:
                out.append((q.name, q.version, q.eligible(now, min_runtime)))
        return tuple(out)

    def same_eligible(self, snap: Snapshot, below: int, min_runtime: float, now: float, then: float) -> bool:
        """Whether the eligible experiments at `now` and at `then` are the same (`key` at both times), in
        the snapshot's state now: the same queues and versions at both, so the same counts. Compared by
        count, not trusted to `next_eligible`: its test `start + minRuntime > now` can be false one ulp
        before `now - start >= minRuntime` is true."""
        if now == then:
            return True
        for q in self._each(snap, below):
            if q.lqs and q.eligible(now, min_runtime) != q.eligible(then, min_runtime):
                return False
        return True

    def next_eligible(self, snap: Snapshot, below: int, now: float, min_runtime: float) -> float | None:
        """The earliest time a started workload below the priority reaches minRuntime, after `now`."""
        kept = self._next
        if (kept is not None and snap is self.snapshot and below == self.below and kept[0] == snap.state_id
                and kept[1] == min_runtime and kept[2] <= now and (kept[3] is None or now < kept[3])):
            return kept[3]
        best: float | None = None
        for q in self._each(snap, below):  # a minimum: in any order
            at = q.next_eligible(now, min_runtime)
            if at is not None and (best is None or at < best):
                best = at
        self._next = (snap.state_id, min_runtime, now, best)
        return best

    def _each(self, snap: Snapshot, below: int) -> list[QueueExperiments]:
        """Every ClusterQueue's entry, in the snapshot's order, rebuilt where its workloads changed (`of`
        for all of them, with one check of the snapshot and the dict's own names)."""
        queues = self._queues(snap, below)
        return [_entry(queues, name, cq, below) for name, cq in snap.cluster_queues.items()]


def _entry(queues: dict[str, QueueExperiments], name: str, cq: ClusterQueueSnapshot,
           below: int) -> QueueExperiments:
    """`name`'s entry in `queues`, rebuilt if its ClusterQueue's workloads changed since it was built."""
    q = queues.get(name)
    if q is None or q.version != cq.wl_version:
        q = queues[name] = _build(cq, below)
    return q
