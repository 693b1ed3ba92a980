"""What one simulation run records: per workload, per ClusterQueue integrals, samples, preemptions.

Columnar lists indexed by workload number keep a million-workload run cheap; NaN
means "never" (never admitted, not finished).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

from .jobs import JobSpec

NEVER = math.nan


class EvictedBy(StrEnum):
    """Who evicted a workload in a run (the preemption log's `by`)."""

    KUEUE = "kueue"  # a scheduling cycle's preemption
    PLANNER = "planner"  # the policy controller's experiment preemption
    TRANSITION = "transition"  # the policy controller's eviction past a transition's deadline
    HOLD = "hold"  # the policy controller held a pending competitor or a storm's preemptor
    IDLE = "idle"  # the policy controller reclaimed an experiment idle on its GPUs
    INITIAL = "initial"  # inactive in the initial state the run starts from


@dataclass(frozen=True, slots=True)
class PreemptionRecord:
    time: float
    victim: str  # workload key
    victim_cluster_queue: str
    by: EvictedBy
    preemptor: str  # workload key or a reason
    reason: str
    lost_seconds: float  # work thrown away (run time since the last checkpoint)
    gpus_milli: int  # of the primary resource


@dataclass(frozen=True, slots=True)
class Readmission:
    """A workload the policy controller evicted (EvictedBy.PLANNER or TRANSITION) admitted again: when, and
    its ClusterQueue's usage (with it) and nominal quota of the primary resource then. One re-admitted soon
    after its eviction while its team holds more than its quota was evicted for nothing (a futile
    eviction: tests/futile.py)."""

    victim: str
    cluster_queue: str
    evicted_at: float
    time: float
    usage_milli: int
    nominal_milli: int


@dataclass(frozen=True, slots=True)
class QuotaRecord:
    time: float
    cluster_queue: str
    flavor: str
    resource: str
    nominal_milli: int
    note: str


@dataclass(frozen=True, slots=True)
class ActionRecord:
    """One action of the policy controller, as the shell applied it (the twin test compares these with the
    operator's): quota steps, eviction requests, reactivations, pushed weights."""

    time: float
    kind: str  # "quota" | "evict" | "reactivate" | "weights" | "transition-start" | ...
    target: str  # team/flavor/resource, or namespace/name of a workload
    detail: str  # the value or the reason


@dataclass(frozen=True, slots=True)
class Sample:
    time: float
    cluster_queue: str
    usage_milli: int  # primary resource in use (admitted)
    nominal_milli: int  # primary resource nominal quota
    pending: int
    running: int
    pending_milli: int = 0  # primary resource requested by the pending workloads (queued or held)


@dataclass(frozen=True, slots=True)
class CapacitySample:
    """The cluster at a sample time, in the primary resource (milli-units): the capacity present, the
    quota handed out (Σ nominal of the ClusterQueues and Cohorts), the usage and the pending demand."""

    time: float
    capacity_milli: int
    quota_milli: int
    usage_milli: int
    pending_milli: int


@dataclass
class ClusterIntegrals:
    """∫ over the run of the cluster-wide quantities, in units·s (GPU-seconds), see measure.py:

    capacity: the capacity present, max(C, Σ nominal(t), usage(t)) with C the declared capacity
    (`cluster.capacity`) or else Σ nominal at t=0: the simulator models no nodes, so whatever quota lets
    Kueue admit is taken to exist, and utilization can never exceed 100%;
    quota: Σ nominal quota of the ClusterQueues and Cohorts; stranded: max(0, C - Σ nominal(t)), capacity
    in no quota; overcommitted: max(0, capacity(t) - C), capacity that had to be assumed beyond C;
    idle: capacity(t) - usage(t); idle_while_pending: min(idle(t), pending demand(t)), capacity unused
    while work that could use it waits."""

    capacity: float = 0.0
    quota: float = 0.0
    usage: float = 0.0
    stranded: float = 0.0
    overcommitted: float = 0.0
    idle: float = 0.0
    idle_while_pending: float = 0.0


@dataclass
class RunResult:
    """The raw outcome of one replication of one variant."""

    variant: str
    replication: int
    horizon: float
    warmup: float
    primary_resource: str
    jobs: list[JobSpec]
    cluster_queue: list[str]  # per job
    priority: list[int]  # per job
    admitted_at: list[float]  # first admission time
    finished_at: list[float]
    evictions: list[int]
    lost_seconds: list[float]  # per job, work lost to evictions
    held_seconds: list[float]  # per job, time holding quota (all attempts, clipped to the horizon)
    running_at_end: list[bool]  # per job, holding quota at the horizon
    usage_seconds: dict[str, float]  # per CQ: ∫ primary usage dt, in units·s (GPU-seconds)
    quota_seconds: dict[str, float]  # per CQ: ∫ nominal quota dt, units·s
    capacity_milli: int  # C: the declared cluster.capacity of the primary resource, else Σ nominal at t=0
    capacity_declared: bool = False  # C came from the scenario's cluster.capacity
    cluster: ClusterIntegrals = field(default_factory=ClusterIntegrals)
    capacity_samples: list[CapacitySample] = field(default_factory=list)
    preemptions: list[PreemptionRecord] = field(default_factory=list)
    # Per preemption (parallel list): when the beneficiary of a planner eviction was next admitted at or
    # after the eviction (NaN: never, or not a planner eviction).
    beneficiary_admitted_at: list[float] = field(default_factory=list)
    # Every workload the policy controller evicted that Kueue admitted again, with its team's usage then.
    readmissions: list[Readmission] = field(default_factory=list)
    quota_changes: list[QuotaRecord] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    actions: list[ActionRecord] = field(default_factory=list)
    events: int = 0
    cycles: int = 0
    wall_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    restart_seconds: float = 0.0  # unit-seconds of restart cost spent (in lost_seconds too)
    # Per job, seconds at 100% its GPUs did over its attempts (x units: active unit-seconds), when the
    # scenario models activity (workloads[].activity; simulations/activity.py); None: not modelled.
    active_seconds: list[float] | None = None


# The report's CDFs need each run's waits, not every one of them: this many evenly spaced order statistics
# per priority class keep a pooled CDF exact to 1/2000 and a million-workload run's digest small.
DIGEST_POINTS = 2000


@dataclass(frozen=True, slots=True)
class ClassWaits:
    created: int  # workloads of the class created after the warm-up
    admitted: int  # of which admitted by the horizon
    sample: tuple[float, ...]  # sorted admitted waits (seconds), thinned to at most DIGEST_POINTS

    def admitted_within(self, seconds: float) -> float:
        """How many of the created workloads were admitted within `seconds` (interpolated on the sample)."""
        if not self.sample:
            return 0.0
        lo, hi = 0, len(self.sample)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.sample[mid] <= seconds:
                lo = mid + 1
            else:
                hi = mid
        return self.admitted * lo / len(self.sample)


@dataclass(frozen=True, slots=True)
class RunDigest:
    """What the report plots of every replication (the full RunResult is kept for replication 1 only)."""

    variant: str
    replication: int
    horizon: float
    primary_resource: str
    capacity_samples: tuple[CapacitySample, ...]
    waits: dict[str, ClassWaits]  # per priority class ("(none)" = none)
    evictions: tuple[tuple[float, str], ...]  # (time, by)
    quota_steps: tuple[float, ...]  # times a quota changed


def digest(run: RunResult, no_class: str = "(none)") -> RunDigest:
    waits: dict[str, list[float]] = {}
    created: dict[str, int] = {}
    for i, job in enumerate(run.jobs):
        if job.arrival < run.warmup:
            continue
        pc = job.priority_class or no_class
        created[pc] = created.get(pc, 0) + 1
        bucket = waits.setdefault(pc, [])
        adm = run.admitted_at[i]
        if not math.isnan(adm):
            bucket.append(adm - job.arrival)
    classes: dict[str, ClassWaits] = {}
    for pc in sorted(created):
        values = sorted(waits[pc])
        if len(values) > DIGEST_POINTS:
            step = (len(values) - 1) / (DIGEST_POINTS - 1)
            values = [values[round(k * step)] for k in range(DIGEST_POINTS)]
        classes[pc] = ClassWaits(created[pc], len(waits[pc]), tuple(values))
    return RunDigest(
        variant=run.variant,
        replication=run.replication,
        horizon=run.horizon,
        primary_resource=run.primary_resource,
        capacity_samples=tuple(run.capacity_samples),
        waits=classes,
        evictions=tuple((p.time, p.by) for p in run.preemptions),
        quota_steps=tuple(sorted({q.time for q in run.quota_changes})),
    )
