"""Recognise a preemption livelock in a sequence of scheduling cycles.

Kueue can preempt and re-admit the same workloads forever: with fair sharing, a workload A
preempts B (InCohortFairSharing), B is requeued at once (pkg/controller/core/workload_controller.go,
the eviction's Update event pushes it back), and after A is admitted B's share is low enough to
preempt A in turn, and so on. The real Kueue spins (several evictions a second, measured by the
differential harness, docs/core.md "Fidelity"); the model spins the same way. Callers (the
simulator's cycle loop, ``qm explain``) stop and report it instead of spinning:

- :func:`find_livelock` over a sequence of the model's cycles, and :class:`LivelockGuard`, the
  same check fed one cycle at a time (a simulator's cycle loop);
- :func:`observe_preemptions` over Workloads observed in a real cluster (the operator): a workload
  Kueue preempted ``LOOP_PREEMPTIONS`` times within ``LOOP_WINDOW_SECONDS`` is in a loop.

Pure: works on :class:`~fairshare.scheduler.types.CycleResult` and
:class:`~fairshare.models.Workload` values; time is an argument.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .models import Workload, WorkloadKey
from .scheduler.types import CycleResult

# A cycle's signature: what it admitted (workload, flavors) and whom it preempted (victim, reason, preemptor).
_Admit = tuple[WorkloadKey, tuple[tuple[str, tuple[tuple[str, str], ...]], ...]]
_Preempt = tuple[WorkloadKey, str, WorkloadKey]
_Signature = tuple[frozenset[_Admit], frozenset[_Preempt]]

MIN_REPETITIONS = 3  # a pattern seen this many times in a row is a loop, not a coincidence
WINDOW = 96  # busy cycles looked at (the tail of the sequence)


@dataclass(frozen=True, slots=True)
class PreemptionStep:
    victim: WorkloadKey
    reason: str
    preemptor: WorkloadKey


@dataclass(frozen=True, slots=True)
class Livelock:
    """A repeating preempt/admit pattern: ``period`` busy cycles, seen ``repetitions`` times in a row."""

    period: int
    repetitions: int
    workloads: tuple[WorkloadKey, ...]  # admitted and preempted within one period, sorted
    preemptions: tuple[PreemptionStep, ...]  # one period's, in cycle order
    first_cycle: int  # index (in the given sequence) of the first cycle of the repeating tail

    def message(self) -> str:
        steps = "; ".join(f"{p.preemptor} preempts {p.victim} ({p.reason})" for p in self.preemptions)
        return (
            f"preemption livelock: {', '.join(self.workloads)} are preempted and re-admitted in a loop "
            f"({steps}; every {self.period} busy cycle(s), seen {self.repetitions} times): "
            "Kueue would spin the same way"
        )


def _signature(result: CycleResult) -> _Signature:
    admits = frozenset(
        (a.key, tuple((ps, tuple(sorted(res.items()))) for ps, res in sorted(a.flavors.items())))
        for a in result.admissions
    )
    preempts = frozenset((p.victim, p.reason.value, p.preemptor) for p in result.preemptions)
    return admits, preempts


def find_livelock(
    results: Sequence[CycleResult], *, min_repetitions: int = MIN_REPETITIONS
) -> Livelock | None:
    """The shortest preempt/admit pattern that repeats ``min_repetitions`` times at the end of
    ``results`` (cycles that neither admit nor preempt are ignored), or None.

    A pattern counts only if, within one period, some workload is both admitted and preempted:
    the same workloads keep coming back, which a settling sequence never does.
    """
    busy: list[tuple[int, _Signature]] = []
    for i in range(len(results) - 1, -1, -1):
        r = results[i]
        if r.admissions or r.preemptions:
            busy.append((i, _signature(r)))
            if len(busy) >= WINDOW:
                break
    busy.reverse()
    sigs = [s for _, s in busy]
    n = len(sigs)
    for period in range(1, n // min_repetitions + 1):
        tail = sigs[n - period :]
        reps = 1
        while reps * period + period <= n and sigs[n - (reps + 1) * period : n - reps * period] == tail:
            reps += 1
        if reps < min_repetitions:
            continue
        admitted = {k for adm, _ in tail for k, _ in adm}
        preempted = {v for _, pre in tail for v, _, _ in pre}
        churn = admitted & preempted
        if not churn:
            continue
        steps = tuple(PreemptionStep(v, reason, p) for _, pre in tail for v, reason, p in sorted(pre))
        return Livelock(
            period=period,
            repetitions=reps,
            workloads=tuple(sorted(churn | {s.preemptor for s in steps})),
            preemptions=steps,
            first_cycle=busy[n - reps * period][0],
        )
    return None


class LivelockGuard:
    """:func:`find_livelock` fed one cycle at a time, for a cycle loop that must not spin: ``add``
    each committed cycle's result; it returns the :class:`Livelock` once the busy cycles' tail
    repeats (``first_cycle`` then counts within the kept window). Keeps the last ``WINDOW`` busy
    cycles; looks only after a cycle that preempted (a loop's period always has one)."""

    def __init__(self, *, min_repetitions: int = MIN_REPETITIONS) -> None:
        # A list trimmed to WINDOW, not a deque with a maxlen: one guard per settle call in the simulator,
        # most with no busy cycle, and making a deque is a generic call from compiled code.
        self._busy: list[CycleResult] = []
        self._min = min_repetitions

    def add(self, result: CycleResult) -> Livelock | None:
        if not (result.admissions or result.preemptions):
            return None
        busy = self._busy
        busy.append(result)
        if len(busy) > WINDOW:
            del busy[0]
        if not result.preemptions or len(busy) < 2 * self._min:
            return None
        return find_livelock(tuple(busy), min_repetitions=self._min)


# Observed in a real cluster (the operator). The real Kueue's livelock evicted the same workload
# 4 times in 1.3 s (docs/core.md "Fidelity"); a workload preempted 4 times within a minute is
# re-admitted and evicted again and again, which no settling sequence of decisions does.
LOOP_PREEMPTIONS = 4
LOOP_WINDOW_SECONDS = 60.0
PREEMPTED = "Preempted"  # kueue.WorkloadEvictedByPreemption: the Evicted reason and schedulingStats reason


@dataclass(frozen=True, slots=True)
class PreemptionLoop:
    """A workload Kueue keeps preempting: ``preemptions`` within the last ``window_seconds``."""

    workload: WorkloadKey
    preemptions: int
    window_seconds: float
    reasons: tuple[str, ...]  # the Preempted condition's reasons seen (InCohortFairSharing, ...), sorted

    def message(self) -> str:
        return (
            f"preemption livelock: Kueue preempted {self.workload} {self.preemptions} times in "
            f"{self.window_seconds:g} s ({', '.join(self.reasons)}) and keeps re-admitting it"
        )


@dataclass(frozen=True)
class PreemptionHistory:
    """What :func:`observe_preemptions` remembers between two observations."""

    counts: Mapping[WorkloadKey, int] = field(default_factory=dict)  # Preempted evictions last seen
    # Preemptions within the window: (when observed, the Preempted condition's reason)
    recent: Mapping[WorkloadKey, tuple[tuple[float, str], ...]] = field(default_factory=dict)


def preempted_count(wl: Workload) -> int:
    """How often Kueue preempted ``wl``: status.schedulingStats.evictions with reason Preempted
    (pkg/workload workloadEvictionStateInc counts every eviction under its reason)."""
    return sum(n for reason, _, n in wl.eviction_stats if reason == PREEMPTED)


def _reason(wl: Workload) -> str:
    # The Preempted condition's reason names the preemption kind (InClusterQueue,
    # InCohortReclamation, InCohortFairSharing, ...: pkg/scheduler/preemption HumanReadablePreemptionReasons).
    cond = wl.condition(PREEMPTED)
    return cond.reason if cond is not None and cond.reason else PREEMPTED


def observe_preemptions(
    history: PreemptionHistory,
    workloads: Iterable[Workload],
    now: float,
    *,
    window: float = LOOP_WINDOW_SECONDS,
    threshold: int = LOOP_PREEMPTIONS,
) -> tuple[PreemptionHistory, tuple[PreemptionLoop, ...]]:
    """Fold one observation of the Workloads into ``history``; the workloads in a preemption loop.

    A workload's Preempted count rising between two observations dates that many preemptions at
    ``now`` (the observation's resolution); a workload seen for the first time is a baseline (a
    restarted operator does not know when its past preemptions were). Workloads no longer
    observed are forgotten. A workload with ``threshold`` preemptions within ``window`` seconds is
    reported, ordered by key.
    """
    counts: dict[WorkloadKey, int] = {}
    recent: dict[WorkloadKey, tuple[tuple[float, str], ...]] = {}
    loops: list[PreemptionLoop] = []
    for wl in workloads:
        key = wl.key
        count = preempted_count(wl)
        counts[key] = count
        kept = tuple(e for e in history.recent.get(key, ()) if e[0] > now - window)
        before = history.counts.get(key)
        if before is not None and count > before:
            kept += ((now, _reason(wl)),) * (count - before)
        if kept:
            recent[key] = kept
        if len(kept) >= threshold:
            loops.append(PreemptionLoop(key, len(kept), window, tuple(sorted({r for _, r in kept}))))
    return PreemptionHistory(counts, recent), tuple(sorted(loops, key=lambda p: p.workload))
