"""summary.json: its pydantic schema (exported as JSON Schema) and how a run is summarized.

Definitions (also in docs/simulator.md):
- wait = first admission time - creation time (Kueue's admission_wait_time); only
  workloads created at or after the warm-up and admitted before the horizon count.
- GPU-hours = ∫ quota held by admitted workloads, in the primary resource (default
  nvidia.com/gpu), including work later lost to preemption.
- utilization of quota = ∫ usage / ∫ nominal quota of the ClusterQueue (can exceed 1
  when borrowing); of the cluster = Σ usage / (capacity x horizon), capacity being the
  total nominal quota at t=0.
- Jain's fairness index over teams (ClusterQueues with non-zero quota at some time):
  J = (Σx)^2 / (n Σx^2) with x = GPU-seconds used / GPU-seconds of quota (1 = all teams
  got the same fraction of their entitlement).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .record import RunResult
from .stats import percentile

SCHEMA_VERSION = 1
NO_CLASS = "(none)"


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WaitStats(_Out):
    count: int = Field(description="Admitted workloads counted (created after the warm-up)")
    mean: float | None = Field(description="Seconds; null when count is 0")
    p50: float | None
    p95: float | None
    p99: float | None


class GroupStats(_Out):
    submitted: int
    admitted: int = Field(description="Admitted at least once")
    finished: int
    pending_at_horizon: int
    running_at_horizon: int
    preempted: int = Field(description="Evictions of workloads of this group")
    wait: WaitStats
    gpu_hours: float = Field(description="Primary-resource hours held, lost work included")
    lost_gpu_hours: float = Field(description="Primary-resource hours of work thrown away by evictions")
    utilization_of_quota: float | None = Field(
        default=None, description="ClusterQueues only: ∫usage/∫nominal (may exceed 1 when borrowing)"
    )
    utilization_of_cluster: float = Field(description="This group's share of the cluster's capacity-time")


class Fairness(_Out):
    jain_index: float | None = Field(description="(Σx)²/(nΣx²), x = used/entitled GPU-seconds per team")
    teams: dict[str, float] = Field(description="x per ClusterQueue")


class LostWork(_Out):
    preemptions: int
    gpu_hours: float
    by: dict[str, int] = Field(description="Evictions by who asked: kueue, planner, transition")


class RunStats(_Out):
    events: int = Field(description="Events processed")
    cycles: int = Field(description="Scheduling cycles run")
    wall_seconds: float
    simulated_seconds: float
    workloads_per_second: float = Field(description="Submitted workloads per wall-second")


class RunSummary(_Out):
    variant: str
    replication: int
    primary_resource: str
    queues: dict[str, GroupStats] = Field(description="Per ClusterQueue")
    priority_classes: dict[str, GroupStats] = Field(description="Per WorkloadPriorityClass ('(none)' = none)")
    cluster: GroupStats
    fairness: Fairness
    lost_work: LostWork
    run: RunStats


class Interval(_Out):
    mean: float | None
    ci95: float | None = Field(description="Half-width of the 95% t-interval over replications (null if n<2)")
    n: int


class VariantSummary(_Out):
    name: str
    description: str
    baseline: bool
    metrics: dict[str, Interval] = Field(description="Headline metrics over replications")
    deltas: dict[str, Interval] = Field(
        description="Variant minus baseline per metric (paired by replication: common random numbers)"
    )
    replications: list[RunSummary]


class Summary(_Out):
    schema_version: int = SCHEMA_VERSION
    scenario: str
    description: str
    replications: int
    horizon_seconds: float
    variants: list[VariantSummary]


def summary_json_schema() -> dict[str, Any]:
    return Summary.model_json_schema()


def _wait_stats(waits: list[float]) -> WaitStats:
    if not waits:
        return WaitStats(count=0, mean=None, p50=None, p95=None, p99=None)
    waits.sort()
    return WaitStats(
        count=len(waits),
        mean=math.fsum(waits) / len(waits),
        p50=percentile(waits, 50.0),
        p95=percentile(waits, 95.0),
        p99=percentile(waits, 99.0),
    )


class _Acc:
    __slots__ = (
        "admitted",
        "evictions",
        "finished",
        "held",
        "lost",
        "pending",
        "running",
        "submitted",
        "waits",
    )

    def __init__(self) -> None:
        self.submitted = 0
        self.admitted = 0
        self.finished = 0
        self.pending = 0
        self.running = 0
        self.evictions = 0
        self.held = 0.0  # unit-seconds
        self.lost = 0.0
        self.waits: list[float] = []

    def stats(self, capacity_seconds: float, quota_seconds: float | None) -> GroupStats:
        return GroupStats(
            submitted=self.submitted,
            admitted=self.admitted,
            finished=self.finished,
            pending_at_horizon=self.pending,
            running_at_horizon=self.running,
            preempted=self.evictions,
            wait=_wait_stats(self.waits),
            gpu_hours=self.held / 3600.0,
            lost_gpu_hours=self.lost / 3600.0,
            utilization_of_quota=(self.held / quota_seconds) if quota_seconds else None,
            utilization_of_cluster=(self.held / capacity_seconds) if capacity_seconds else 0.0,
        )


def summarize(run: RunResult) -> RunSummary:
    """Per ClusterQueue, per priority class and cluster-wide statistics of one run."""
    by_cq: dict[str, _Acc] = defaultdict(_Acc)
    by_class: dict[str, _Acc] = defaultdict(_Acc)
    total = _Acc()
    resource = run.primary_resource
    for cq in run.quota_seconds:
        by_cq[cq]  # every ClusterQueue appears, even without workloads
    for i, job in enumerate(run.jobs):
        units = job.total(resource) / 1000.0
        groups = (by_cq[run.cluster_queue[i]], by_class[job.priority_class or NO_CLASS], total)
        admitted = not math.isnan(run.admitted_at[i])
        finished = not math.isnan(run.finished_at[i])
        wait = run.admitted_at[i] - job.arrival if admitted and job.arrival >= run.warmup else None
        held = run.held_seconds[i] * units
        lost = run.lost_seconds[i] * units
        running = run.running_at_end[i]
        for acc in groups:
            acc.submitted += 1
            acc.admitted += admitted
            acc.finished += finished
            acc.running += running
            acc.pending += not finished and not running
            acc.evictions += run.evictions[i]
            acc.held += held
            acc.lost += lost
            if wait is not None:
                acc.waits.append(wait)
    capacity_seconds = run.capacity_milli / 1000.0 * run.horizon
    teams: dict[str, float] = {}
    for cq, quota_s in sorted(run.quota_seconds.items()):
        if quota_s > 0:
            teams[cq] = by_cq[cq].held / quota_s
    xs = list(teams.values())
    jain = (math.fsum(xs) ** 2 / (len(xs) * math.fsum(x * x for x in xs))) if xs and any(xs) else None
    by_who: dict[str, int] = defaultdict(int)
    for p in run.preemptions:
        by_who[p.by] += 1
    return RunSummary(
        variant=run.variant,
        replication=run.replication,
        primary_resource=resource,
        queues={cq: by_cq[cq].stats(capacity_seconds, run.quota_seconds.get(cq)) for cq in sorted(by_cq)},
        priority_classes={pc: by_class[pc].stats(capacity_seconds, None) for pc in sorted(by_class)},
        cluster=total.stats(capacity_seconds, None),
        fairness=Fairness(jain_index=jain, teams=teams),
        lost_work=LostWork(preemptions=len(run.preemptions), gpu_hours=total.lost / 3600.0, by=dict(by_who)),
        run=RunStats(
            events=run.events,
            cycles=run.cycles,
            wall_seconds=run.wall_seconds,
            simulated_seconds=run.horizon,
            workloads_per_second=len(run.jobs) / run.wall_seconds if run.wall_seconds > 0 else 0.0,
        ),
    )
