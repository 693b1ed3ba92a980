"""Recognise a preemption livelock in a sequence of scheduling cycles.

Kueue can preempt and re-admit the same workloads forever: with fair sharing, a workload A
preempts B (InCohortFairSharing), B is requeued at once (pkg/controller/core/workload_controller.go,
the eviction's Update event pushes it back), and after A is admitted B's share is low enough to
preempt A in turn, and so on. The real Kueue spins (several evictions a second, measured by the
differential harness, docs/core.md "Fidelity"); the model spins the same way. Callers (the
simulator's cycle loop, ``qm explain``) stop and report it instead of spinning:

- :func:`find_livelock` over a sequence of the model's cycles, and :class:`LivelockGuard`, the
  same check fed one cycle at a time (a simulator's cycle loop).

A loop across instants (the preemptor parked, requeued a second later by Kueue's batched requeue)
is seen from the evictions themselves, in both shells: fairshare.control.storms.

Pure: works on :class:`~fairshare.scheduler.types.CycleResult` values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .models import WorkloadKey
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
