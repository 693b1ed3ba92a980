"""Per-job comparison of the real run and the simulated one, the issue's figures, and the classification of
what is left.

- Order agreement: per ClusterQueue, the jobs in the order the real Kueue first admitted them; each adjacent
  pair counts as agreeing when the simulator admitted them in the same order (its own sequence of admissions,
  which orders admissions at one instant as its cycles made them). A job admitted on one side only is not in a
  pair and is counted apart.
- Waits: first admission minus arrival (real: the Job's creation call on this machine's clock; simulated: its
  arrival second). Mean and p95 deviation: |real - simulated| / real of the mean and of the 95th percentile.
- Evictions: every reservation lost before the job finished (real: seen on the watch; simulated: Kueue's
  model's preemptions and the controller's evictions).
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from .sim import Lifecycle
from .workload import FidelityJob

ORDER_TARGET = 99.0
MEAN_WAIT_TARGET = 2.0


@dataclass(frozen=True)
class Figures:
    order_agreement: float  # percent of adjacent pairs
    pairs: int
    one_sided: int  # jobs admitted on one side only
    mean_wait_real: float
    mean_wait_sim: float
    p95_wait_real: float
    p95_wait_sim: float
    evictions_real: int
    evictions_sim: int
    admission_error: float  # mean |real - simulated| first-admission time, seconds
    discordant: int = 0  # adjacent pairs out of order
    close_discordant: int = 0  # of which admitted within 1 s of each other on the cluster
    spaced_agreement: float = 100.0  # order agreement over the pairs at least 1 s apart on the cluster

    @property
    def mean_deviation(self) -> float:
        return _deviation(self.mean_wait_real, self.mean_wait_sim)

    @property
    def p95_deviation(self) -> float:
        return _deviation(self.p95_wait_real, self.p95_wait_sim)

    def line(self) -> str:
        return (f"fidelity: order agreement {self.order_agreement:.2f}%, mean wait deviation "
                f"{self.mean_deviation:.2f}%, p95 wait deviation {self.p95_deviation:.2f}%, evictions real "
                f"{self.evictions_real} / simulated {self.evictions_sim}")

    def detail(self) -> str:
        return (f"  {self.pairs} adjacent pairs ({self.one_sided} jobs admitted on one side only); mean wait "
                f"real {self.mean_wait_real:.2f}s, simulated {self.mean_wait_sim:.2f}s; p95 real "
                f"{self.p95_wait_real:.2f}s, simulated {self.p95_wait_sim:.2f}s; per-job first admission "
                f"|real - simulated| {self.admission_error:.2f}s on average")

    def misses(self) -> list[str]:
        out = []
        if self.order_agreement < ORDER_TARGET:
            out.append(f"order agreement {self.order_agreement:.2f}% < {ORDER_TARGET:g}%")
        if self.mean_deviation > MEAN_WAIT_TARGET:
            out.append(f"mean wait deviation {self.mean_deviation:.2f}% > {MEAN_WAIT_TARGET:g}%")
        return out


def _deviation(real: float, sim: float) -> float:
    if real == 0:
        return 0.0 if sim == 0 else 100.0
    return abs(real - sim) / real * 100.0


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] if ordered else 0.0


def first_admissions(order: list[tuple[float, str, str]]) -> dict[str, int]:
    """job -> its rank in the sequence of first admissions."""
    out: dict[str, int] = {}
    for _, kind, job in order:
        if kind == "admit" and job not in out:
            out[job] = len(out)
    return out


def figures(jobs: list[FidelityJob], real: Mapping[str, Lifecycle], real_order: list[tuple[float, str, str]],
            sim: Mapping[str, Lifecycle], sim_order: list[tuple[float, str, str]]) -> Figures:
    real_rank, sim_rank = first_admissions(real_order), first_admissions(sim_order)
    agree = pairs = close_bad = spaced = spaced_agree = 0
    real_at = {j: t for t, kind, j in reversed(real_order) if kind == "admit"}  # first admission times
    teams = sorted({j.team for j in jobs})
    for team in teams:
        members = [j.name for j in jobs if j.team == team and j.name in real_rank and j.name in sim_rank]
        members.sort(key=lambda n: real_rank[n])
        for a, b in itertools.pairwise(members):
            pairs += 1
            ok = sim_rank[a] < sim_rank[b]
            agree += ok
            if real_at[b] - real_at[a] < 1.0:
                close_bad += not ok
            else:
                spaced += 1
                spaced_agree += ok
    one_sided = sum(1 for j in jobs if (j.name in real_rank) != (j.name in sim_rank))
    both = [j for j in jobs if real[j.name].admitted is not None and sim[j.name].admitted is not None]
    real_waits = [_wait(real[j.name]) for j in both]
    sim_waits = [_wait(sim[j.name]) for j in both]
    errors = [abs(_admitted(real[j.name]) - _admitted(sim[j.name])) for j in both]
    return Figures(
        order_agreement=100.0 * agree / pairs if pairs else 100.0,
        pairs=pairs,
        one_sided=one_sided,
        mean_wait_real=statistics.fmean(real_waits) if real_waits else 0.0,
        mean_wait_sim=statistics.fmean(sim_waits) if sim_waits else 0.0,
        p95_wait_real=_p95(real_waits),
        p95_wait_sim=_p95(sim_waits),
        evictions_real=sum(len(real[j.name].evictions) for j in jobs),
        evictions_sim=sum(len(sim[j.name].evictions) for j in jobs),
        admission_error=statistics.fmean(errors) if errors else 0.0,
        discordant=pairs - agree,
        close_discordant=close_bad,
        spaced_agreement=100.0 * spaced_agree / spaced if spaced else 100.0,
    )


def _admitted(life: Lifecycle) -> float:
    value = life.admitted
    if value is None:  # pragma: no cover - filtered by the caller
        raise ValueError("not admitted")
    return value


def _wait(life: Lifecycle) -> float:
    return _admitted(life) - life.arrival


def idle_while_pending(jobs: list[FidelityJob], life: Mapping[str, Lifecycle], capacity: int) -> float:
    """GPU-seconds of the cohort's quota left unused while some job was pending (arrived, holding nothing,
    not finished), from the jobs' lifecycles. A saturated queue's waits accumulate it: every second a GPU
    stays free while work waits is a second of service lost to everyone queued behind.

    Each job's own sequence (arrival, then each admission until its eviction or finish) gives its holding
    and pending intervals; every change at one instant is applied before the next stretch is counted, so a
    job evicted and admitted again at the same instant is not left pending."""
    gpus = {j.name: j.gpus for j in jobs}
    changes: list[tuple[float, int, int]] = []  # (t, change in GPUs used, change in jobs pending)
    for name, lc in life.items():
        ends = sorted(lc.evictions) + ([lc.finished] if lc.finished is not None else [])
        waits_from = lc.arrival
        for start, end in zip(lc.admissions, ends, strict=False):
            changes += [(waits_from, 0, 1), (start, 0, -1), (start, gpus[name], 0), (end, -gpus[name], 0)]
            waits_from = end
        if len(lc.admissions) == len(ends) and (lc.finished is None or len(lc.admissions) == 0):
            changes.append((waits_from, 0, 1))  # waiting at the end (never admitted, or evicted last)
        elif len(lc.admissions) > len(ends):  # holding at the end
            changes += [(waits_from, 0, 1), (lc.admissions[-1], 0, -1), (lc.admissions[-1], gpus[name], 0)]
    changes.sort()
    used = pending = 0
    idle = 0.0
    i = 0
    while i < len(changes):
        t = changes[i][0]
        while i < len(changes) and changes[i][0] == t:
            used += changes[i][1]
            pending += changes[i][2]
            i += 1
        if pending > 0 and i < len(changes):
            idle += max(0, capacity - used) * (changes[i][0] - t)
    return idle


def held_gpu_seconds(jobs: list[FidelityJob], life: Mapping[str, Lifecycle]) -> float:
    """GPU-seconds of quota held by the jobs, every attempt (admission to eviction or finish)."""
    gpus = {j.name: j.gpus for j in jobs}
    total = 0.0
    for name, lc in life.items():
        ends = sorted(lc.evictions) + ([lc.finished] if lc.finished is not None else [])
        total += sum(end - start for start, end in zip(lc.admissions, ends, strict=False)) * gpus[name]
    return total
