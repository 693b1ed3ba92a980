"""What one simulation run records: per workload, per ClusterQueue integrals, samples, preemptions.

Columnar lists indexed by workload number keep a million-workload run cheap; NaN
means "never" (never admitted, not finished).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .jobs import JobSpec

NEVER = math.nan


@dataclass(frozen=True, slots=True)
class PreemptionRecord:
    time: float
    victim: str  # workload key
    victim_cluster_queue: str
    by: str  # "kueue" (a cycle's preemption), "planner" (experiment preemption), "transition"
    preemptor: str  # workload key or a reason
    reason: str
    lost_seconds: float  # work thrown away (run time since the last checkpoint)
    gpus_milli: int  # of the primary resource


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
    capacity_milli: int  # primary resource in the whole cluster (Σ nominal at t=0)
    preemptions: list[PreemptionRecord] = field(default_factory=list)
    quota_changes: list[QuotaRecord] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    actions: list[ActionRecord] = field(default_factory=list)
    events: int = 0
    cycles: int = 0
    wall_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
