"""summary.json: its pydantic schema (exported as JSON Schema) and how a run is summarized.

Definitions (also in docs/simulator.md, "Definitions"):
- wait = first admission time - creation time (Kueue's admission_wait_time), over the workloads created at
  or after the warm-up. `wait` counts a workload never admitted by the horizon with the wait it had so far
  (censored at the horizon: a lower bound, exact when `censored` is 0; Kaplan-Meier quantiles beside it,
  simulations/waits.py); `wait_admitted` is the admitted workloads only.
- GPU-hours held = ∫ quota held by admitted workloads (the primary resource, default nvidia.com/gpu),
  lost work included; lost = work thrown away by evictions (run time since the last checkpoint); useful =
  held - lost; goodput = the work of the workloads that finished (duration x GPUs).
- demand = the work each submitted workload could have done by the horizon had it started at submission
  (GPUs x min(duration, horizon - creation)); share of demand met = useful / demand.
- capacity present at t = max(C, Σ nominal(t), usage(t)), C = the scenario's cluster.capacity or else Σ
  nominal at t=0 (simulations/measure.py); utilization = ∫ usage / ∫ capacity present (never above 1);
  with activity modelled (workloads[].activity), active GPU-hours = Σ utilization x GPU-hours held and
  utilization active = active GPU-hours / ∫ capacity present (what the GPUs did, where utilization is what was
  allocated);
  stranded = capacity in no quota; idle while pending = idle capacity that pending demand could have used.
- fairness (see `Fairness`): max-min and Jain over the teams' shares of demand met; Jain over used /
  entitled GPU-seconds is kept as `jain_entitlement` (it moves with the entitlement a variant changes).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fairshare.control.storms import Eviction, EvictionSource, find_storms

from .initial import PENDING_AT_START
from .record import EvictedBy, RunResult
from .stats import percentile
from .waits import Observation, censored_waits

SCHEMA_VERSION = 2
NO_CLASS = "(none)"
# A workload evicted this many times or more is counted as thrashing (issue 14: "evicted >= 3 times").
THRASH_EVICTIONS = 3
DEFAULT_BENEFICIARY_WINDOW = 1.0  # seconds: a planner eviction "helped" if its beneficiary got in this soon


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WaitStats(_Out):
    count: int = Field(description="Workloads counted (created after the warm-up)")
    censored: int = Field(default=0, description="Of which never admitted by the horizon (censored)")
    mean: float | None = Field(description="Seconds; null when count is 0")
    p50: float | None
    p95: float | None
    p99: float | None
    km_p50: float | None = Field(
        default=None, description="Kaplan-Meier median (censoring-aware); null when not reached"
    )
    km_p95: float | None = Field(
        default=None, description="Kaplan-Meier 95th percentile; null when not reached"
    )


class EvictionStats(_Out):
    evicted_workloads: int = Field(description="Workloads evicted at least once")
    max: int = Field(description="Most evictions of one workload")
    p95: float | None = Field(description="95th percentile of evictions among the evicted workloads")
    evicted_3plus: int = Field(description=f"Workloads evicted {THRASH_EVICTIONS} times or more")


class GroupStats(_Out):
    submitted: int
    admitted: int = Field(description="Admitted at least once")
    finished: int
    pending_at_horizon: int = Field(description="Neither finished nor running at the horizon (reclaimed ones "
                                    "left out)")
    reclaimed: int = Field(default=0, description="Reclaimed for idle GPUs (spec.idle) and left deactivated")
    running_at_horizon: int
    preempted: int = Field(description="Evictions of workloads of this group")
    wait: WaitStats = Field(description="Never-admitted workloads counted, censored at the horizon")
    wait_admitted: WaitStats = Field(description="Admitted workloads only")
    evictions: EvictionStats
    gpu_hours: float = Field(description="Primary-resource hours held, lost work included")
    useful_gpu_hours: float = Field(description="Held minus lost: work kept")
    lost_gpu_hours: float = Field(description="Primary-resource hours of work thrown away by evictions")
    goodput_gpu_hours: float = Field(description="Work of the workloads that finished (duration x GPUs)")
    demand_gpu_hours: float = Field(description="Work the submitted workloads could have done by the horizon")
    utilization_of_quota: float | None = Field(
        default=None, description="ClusterQueues only: ∫usage/∫nominal (may exceed 1 when borrowing)"
    )
    utilization_of_cluster: float = Field(description="This group's share of the capacity present (∫)")
    active_gpu_hours: float | None = Field(
        default=None, description="What the GPUs it held did: Σ utilization x GPU-hours held (workloads[]."
        "activity; a workload without a profile counts fully active); null when the scenario models none")


class CapacityStats(_Out):
    capacity: float = Field(description="C in units of the primary resource (declared, or Σ nominal at t=0)")
    declared: bool = Field(description="C comes from the scenario's cluster.capacity")
    capacity_gpu_hours: float = Field(description="∫ capacity present: max(C, Σ nominal(t), usage(t))")
    quota_gpu_hours: float = Field(description="∫ Σ nominal quota of the ClusterQueues and Cohorts")
    usage_gpu_hours: float
    stranded_gpu_hours: float = Field(description="∫ max(0, C - Σ nominal): capacity handed to no quota")
    overcommitted_gpu_hours: float = Field(description="∫ capacity present above C (quota beyond C)")
    idle_gpu_hours: float
    idle_while_pending_gpu_hours: float = Field(
        description="∫ min(idle, pending demand): capacity unused while work that could use it waits"
    )
    utilization: float = Field(description="∫ usage / ∫ capacity present (at most 1): allocated")
    active_gpu_hours: float | None = Field(
        default=None, description="What the allocated GPUs did (null: activity not modelled)")
    utilization_active: float | None = Field(
        default=None, description="active GPU-hours / ∫ capacity present: what the GPUs did, where "
        "`utilization` is what was allocated (null: activity not modelled)")


class Fairness(_Out):
    """Fairness that does not reward shrinking an entitlement. Each team's share of its demand met
    (useful GPU-hours / the GPU-hours it asked for, see `GroupStats.demand_gpu_hours`) is independent of
    quota: a variant that cuts a team's quota can only lower that team's share, never raise it by
    shrinking the denominator. `max_min_demand_met` is the worst-served team's share (the max-min
    criterion of fair allocation, Bertsekas & Gallager §6.5.2); `jain_demand_met` is Jain's index
    (Σx)²/(nΣx²) over the shares (1 = every team got the same fraction of what it asked for).
    `jain_entitlement` is the former index over used / entitled GPU-seconds, kept for comparison: it is
    measured against each variant's own quotas, so cutting a quota changes the yardstick."""

    max_min_demand_met: float | None = Field(description="min over teams of useful / demand")
    jain_demand_met: float | None = Field(description="Jain's index over the teams' shares of demand met")
    demand_met: dict[str, float] = Field(description="useful / demand per ClusterQueue with demand")
    jain_entitlement: float | None = Field(description="(Σx)²/(nΣx²), x = used/entitled GPU-seconds per team")
    entitlement_share: dict[str, float] = Field(description="x per ClusterQueue (used / entitled)")


class PlannerEvictions(_Out):
    """Evictions the experiment planner asked for, and whether their beneficiary got the freed quota."""

    evictions: int
    window_seconds: float = Field(description="A beneficiary admitted within this of the eviction counts")
    beneficiary_admitted_within_window: int
    share_within_window: float | None = Field(description="Of the planner evictions; null when none")
    beneficiary_never_admitted: int = Field(description="Beneficiary not admitted by the horizon")
    median_delay_seconds: float | None = Field(
        description="Median of eviction -> beneficiary admission (never admitted = infinite; null when the "
        "median is infinite or there are no planner evictions)"
    )


class LostWork(_Out):
    preemptions: int
    gpu_hours: float
    by: dict[str, int] = Field(description="Evictions by who asked: kueue, planner, transition")
    policy_max: int = Field(
        default=0,
        description="Most evictions of one workload asked for by the policy controller (planner, "
        "transition): what spec.preemption.maxEvictionsPerWorkload caps; Kueue's own reclaims are in "
        "kueue_max",
    )
    restart_gpu_hours: float = Field(
        default=0.0, description="Of gpu_hours: the restart cost spent by evicted workloads admitted again "
        "(the scenario's restartCost: pod start and checkpoint reload)")
    kueue_max: int = Field(
        default=0,
        description="Most evictions of one workload by Kueue's own preemption (reclaim, fair sharing, within "
        "a ClusterQueue), which maxEvictionsPerWorkload does not cap",
    )
    kueue_max_workload: str | None = Field(default=None, description="That workload (namespace/name)")
    kueue_max_team: str | None = Field(default=None, description="Its team (ClusterQueue)")
    kueue_max_reasons: dict[str, int] = Field(
        default_factory=dict, description="Its evictions by Kueue's reason (InCohortReclamation, ...)"
    )


class StormSummary(_Out):
    """An eviction storm (fairshare.control.storms: one workload evicted 5 times in 2 minutes, or the same
    preemptor evicting the same victims 3 times in that window), as an episode of the run."""

    preemptor: str | None = Field(description="The workload the evictions were for (null: none named)")
    victims: list[str]
    evictions: int
    start_seconds: float
    end_seconds: float
    per_minute: float = Field(description="Evictions per minute over the episode")
    sources: list[str] = Field(description="kueue, policy")
    reasons: list[str]
    message: str


class BudgetEvent(_Out):
    """A budget threshold reached or an enforcement lifted in the run (fairshare.control.budgets, as the
    operator's BudgetThresholdCrossed / BudgetEnforcementLifted Events): when a budget would bite."""

    time: float = Field(description="Simulated seconds")
    budget: str
    kind: str = Field(description="crossed | lifted")
    detail: str = Field(description="The controller's reason: consumption, limit, threshold and action")


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
    capacity: CapacityStats
    fairness: Fairness
    lost_work: LostWork
    planner: PlannerEvictions
    budgets: list[BudgetEvent] = Field(default_factory=list, description="Budget crossings and lifts, in "
                                       "time order (spec.budgets; empty without budgets)")
    storms: list[StormSummary] = Field(default_factory=list, description="Eviction storms, in the order "
                                       "they started (empty: none)")
    storms_answered: int = Field(default=0, description="Storms the policy controller saw and answered "
                                 "(damped weights, a held preemptor): its `storm` actions")
    run: RunStats


class Interval(_Out):
    mean: float | None
    ci95: float | None = Field(description="Half-width of the 95% t-interval over replications (null if n<2)")
    n: int


class MetricInfo(_Out):
    label: str = Field(description="The row's name in the table and the report")
    unit: str
    direction: int = Field(description="+1: higher is better, -1: lower is better, 0: neither")


class VariantSummary(_Out):
    name: str
    description: str
    baseline: bool
    lever_of: str | None = Field(default=None, description="The variant this one is plus a lever (leverOf)")
    metrics: dict[str, Interval] = Field(description="Headline metrics over replications (keys: metric refs)")
    deltas: dict[str, Interval] = Field(
        description="Variant minus baseline per metric (paired by replication: common random numbers)"
    )
    replications: list[RunSummary]


class ObjectiveResult(_Out):
    objective: str = Field(description="The objective as written, e.g. 'wait_p95[hi]: minimize'")
    metric: str
    status: str = Field(description="met | missed | uncertain (the 95% CI straddles the bound or zero)")
    detail: str = Field(description="The figures behind the status")


class VariantVerdict(_Out):
    name: str
    rank: int = Field(description="1 = recommended (unless flagged)")
    description: str = Field(default="", description="The variant's description, as the scenario gives it")
    met: list[str]
    missed: list[str]
    uncertain: list[str]
    results: list[ObjectiveResult]
    verdict: str = Field(default="", description="Whether the variant's change pays against the baseline: "
                         "'pays', 'does not pay', 'costs' or 'the baseline', with the figures")
    flags: list[str] = Field(default_factory=list,
                             description="Why it is never recommended (eviction storms)")


class Recommendation(_Out):
    variant: str | None = Field(description="The variant recommended (null: every variant is flagged)")
    reasons: list[str] = Field(description="Why, one sentence per objective, recommended variant first")
    paragraph: str = Field(description="The recommendation in at most three sentences")
    tie_break: str | None = Field(
        default=None,
        description="The least-disruption rule, when it chose between variants tied within the CIs")
    notes: list[str] = Field(default_factory=list, description="What the figures say beyond the ranking: "
                             "flagged variants, a cut team borrowing its goodput back, Kueue's own "
                             "evictions thrashing, deterministic runs")
    objectives: list[str] = Field(description="The objectives ranked against (declared, or the defaults)")
    declared: bool = Field(description="The scenario declared its objectives (false: defaults used)")
    ranking: list[VariantVerdict]
    more_replications: str | None = Field(
        description="Advice when a delta that decides the ranking is not significant (null: none needed)"
    )


class Summary(_Out):
    schema_version: int = SCHEMA_VERSION
    scenario: str
    description: str
    replications: int
    horizon_seconds: float
    metric_info: dict[str, MetricInfo] = Field(default_factory=dict, description="Per metric key")
    variants: list[VariantSummary]
    recommendation: Recommendation | None = None


def summary_json_schema() -> dict[str, Any]:
    return Summary.model_json_schema()


def _wait_stats(observations: list[Observation]) -> WaitStats:
    w = censored_waits(observations)
    return WaitStats(
        count=w.n,
        censored=w.censored,
        mean=w.mean,
        p50=w.p50,
        p95=w.p95,
        p99=w.p99,
        km_p50=w.km_p50,
        km_p95=w.km_p95,
    )


def _admitted_stats(waits: list[float]) -> WaitStats:
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


def _eviction_stats(counts: list[int]) -> EvictionStats:
    evicted = sorted(c for c in counts if c > 0)
    return EvictionStats(
        evicted_workloads=len(evicted),
        max=evicted[-1] if evicted else 0,
        p95=percentile([float(c) for c in evicted], 95.0) if evicted else None,
        evicted_3plus=sum(1 for c in evicted if c >= THRASH_EVICTIONS),
    )


class _Acc:
    __slots__ = (
        "active",
        "admitted",
        "admitted_waits",
        "demand",
        "eviction_counts",
        "evictions",
        "finished",
        "goodput",
        "held",
        "lost",
        "observations",
        "pending",
        "reclaimed",
        "running",
        "submitted",
    )

    def __init__(self) -> None:
        self.submitted = 0
        self.admitted = 0
        self.finished = 0
        self.pending = 0
        self.running = 0
        self.reclaimed = 0
        self.evictions = 0
        self.held = 0.0  # unit-seconds
        self.active: float | None = None  # unit-seconds at 100%, when modelled
        self.lost = 0.0
        self.goodput = 0.0
        self.demand = 0.0
        self.observations: list[Observation] = []
        self.admitted_waits: list[float] = []
        self.eviction_counts: list[int] = []

    def stats(self, capacity_seconds: float, quota_seconds: float | None) -> GroupStats:
        return GroupStats(
            submitted=self.submitted,
            admitted=self.admitted,
            finished=self.finished,
            pending_at_horizon=self.pending,
            reclaimed=self.reclaimed,
            running_at_horizon=self.running,
            preempted=self.evictions,
            wait=_wait_stats(self.observations),
            wait_admitted=_admitted_stats(self.admitted_waits),
            evictions=_eviction_stats(self.eviction_counts),
            gpu_hours=self.held / 3600.0,
            useful_gpu_hours=(self.held - self.lost) / 3600.0,
            lost_gpu_hours=self.lost / 3600.0,
            goodput_gpu_hours=self.goodput / 3600.0,
            demand_gpu_hours=self.demand / 3600.0,
            utilization_of_quota=(self.held / quota_seconds) if quota_seconds else None,
            utilization_of_cluster=(self.held / capacity_seconds) if capacity_seconds else 0.0,
            active_gpu_hours=None if self.active is None else self.active / 3600.0,
        )


def _jain(xs: list[float]) -> float | None:
    return (math.fsum(xs) ** 2 / (len(xs) * math.fsum(x * x for x in xs))) if xs and any(xs) else None


def _planner(run: RunResult, window: float) -> PlannerEvictions:
    delays: list[float] = []
    for p, admitted in zip(run.preemptions, run.beneficiary_admitted_at, strict=False):
        if p.by == EvictedBy.PLANNER:
            delays.append(math.inf if math.isnan(admitted) else admitted - p.time)
    if not delays:
        return PlannerEvictions(
            evictions=0,
            window_seconds=window,
            beneficiary_admitted_within_window=0,
            share_within_window=None,
            beneficiary_never_admitted=0,
            median_delay_seconds=None,
        )
    delays.sort()
    within = sum(1 for d in delays if d <= window)
    n = len(delays)
    # The median of the delays with "never" as +inf (a median over the admitted ones only would hide them).
    mid = delays[(n - 1) // 2] if n % 2 else (delays[n // 2 - 1] + delays[n // 2]) / 2.0
    return PlannerEvictions(
        evictions=n,
        window_seconds=window,
        beneficiary_admitted_within_window=within,
        share_within_window=within / n,
        beneficiary_never_admitted=sum(1 for d in delays if math.isinf(d)),
        median_delay_seconds=None if math.isinf(mid) else mid,
    )


def _capacity(run: RunResult, active: float | None) -> CapacityStats:
    """`active`: the active unit-seconds of every workload (None: activity not modelled)."""
    c = run.cluster
    return CapacityStats(
        capacity=run.capacity_milli / 1000.0,
        declared=run.capacity_declared,
        capacity_gpu_hours=c.capacity / 3600.0,
        quota_gpu_hours=c.quota / 3600.0,
        usage_gpu_hours=c.usage / 3600.0,
        stranded_gpu_hours=c.stranded / 3600.0,
        overcommitted_gpu_hours=c.overcommitted / 3600.0,
        idle_gpu_hours=c.idle / 3600.0,
        idle_while_pending_gpu_hours=c.idle_while_pending / 3600.0,
        utilization=c.usage / c.capacity if c.capacity > 0 else 0.0,
        active_gpu_hours=None if active is None else active / 3600.0,
        utilization_active=None if active is None else (active / c.capacity if c.capacity > 0 else 0.0),
    )


def storms_of(run: RunResult) -> list[StormSummary]:
    """The run's eviction storms: the controller's rule (fairshare.control.storms.find_storms) over every
    eviction, Kueue's and the policy's."""
    evictions = [
        Eviction(p.victim, p.time, EvictionSource.KUEUE if p.by == EvictedBy.KUEUE else EvictionSource.POLICY,
                 p.preemptor if p.by in (EvictedBy.KUEUE, EvictedBy.PLANNER) else "", p.reason)
        for p in run.preemptions
    ]
    return [
        StormSummary(preemptor=s.preemptor or None, victims=list(s.victims), evictions=s.evictions,
                     start_seconds=s.first, end_seconds=s.last, per_minute=round(s.per_minute, 2),
                     sources=list(s.sources), reasons=list(s.reasons), message=s.message())
        for s in find_storms(evictions)
    ]


def summarize(run: RunResult, *, beneficiary_window: float = DEFAULT_BENEFICIARY_WINDOW) -> RunSummary:
    """Per ClusterQueue, per priority class and cluster-wide statistics of one run."""
    by_cq: dict[str, _Acc] = defaultdict(_Acc)
    by_class: dict[str, _Acc] = defaultdict(_Acc)
    total = _Acc()
    resource = run.primary_resource
    horizon = run.horizon
    for cq in run.quota_seconds:
        by_cq[cq]  # every ClusterQueue appears, even without workloads
    idle = {p.victim for p in run.preemptions if p.by == EvictedBy.IDLE}  # reclaimed: left deactivated
    for i, job in enumerate(run.jobs):
        units = job.total(resource) / 1000.0
        groups = (by_cq[run.cluster_queue[i]], by_class[job.priority_class or NO_CLASS], total)
        admitted_at = run.admitted_at[i]
        admitted = not math.isnan(admitted_at)
        finished = not math.isnan(run.finished_at[i])
        observation: Observation | None = None
        if job.arrival >= run.warmup or job.source == PENDING_AT_START:  # the backlog at t=0 (initial.py)
            observation = Observation(
                (admitted_at if admitted else horizon) - job.arrival, admitted
            )
        held = run.held_seconds[i] * units
        active = None if run.active_seconds is None else run.active_seconds[i] * units
        lost = run.lost_seconds[i] * units
        goodput = job.duration * units if finished else 0.0
        demand = min(job.duration, max(0.0, horizon - job.arrival)) * units
        running = run.running_at_end[i]
        reclaimed = not running and not finished and job.key in idle
        evictions = run.evictions[i]
        for acc in groups:
            acc.submitted += 1
            acc.admitted += admitted
            acc.finished += finished
            acc.running += running
            acc.pending += not finished and not running and not reclaimed
            acc.reclaimed += reclaimed
            acc.evictions += evictions
            acc.eviction_counts.append(evictions)
            acc.held += held
            if active is not None:
                acc.active = active + (acc.active or 0.0)
            acc.lost += lost
            acc.goodput += goodput
            acc.demand += demand
            if observation is not None:
                acc.observations.append(observation)
                if admitted:
                    acc.admitted_waits.append(observation.seconds)
    if run.active_seconds is not None:  # modelled: a group without workloads did 0 GPU-hours, not "unknown"
        for acc in (*by_cq.values(), *by_class.values(), total):
            if acc.active is None:
                acc.active = 0.0
    capacity_seconds = run.cluster.capacity or run.capacity_milli / 1000.0 * horizon
    entitlement: dict[str, float] = {}
    demand_met: dict[str, float] = {}
    for cq, quota_s in sorted(run.quota_seconds.items()):
        acc = by_cq[cq]
        if quota_s > 0:
            entitlement[cq] = acc.held / quota_s
        if acc.demand > 0:
            demand_met[cq] = (acc.held - acc.lost) / acc.demand
    by_who: dict[str, int] = defaultdict(int)
    by_policy: dict[str, int] = defaultdict(int)
    by_kueue: dict[str, int] = defaultdict(int)
    for p in run.preemptions:
        by_who[p.by] += 1
        if p.by != EvictedBy.KUEUE:
            by_policy[p.victim] += 1
        else:
            by_kueue[p.victim] += 1
    kueue_top = max(by_kueue, key=lambda k: (by_kueue[k], k)) if by_kueue else None
    kueue_reasons: dict[str, int] = defaultdict(int)
    kueue_team: str | None = None
    if kueue_top is not None:
        for p in run.preemptions:
            if p.by == EvictedBy.KUEUE and p.victim == kueue_top:
                kueue_reasons[p.reason] += 1
                kueue_team = p.victim_cluster_queue
    return RunSummary(
        variant=run.variant,
        replication=run.replication,
        primary_resource=resource,
        queues={cq: by_cq[cq].stats(capacity_seconds, run.quota_seconds.get(cq)) for cq in sorted(by_cq)},
        priority_classes={pc: by_class[pc].stats(capacity_seconds, None) for pc in sorted(by_class)},
        cluster=total.stats(capacity_seconds, None),
        capacity=_capacity(run, total.active),
        fairness=Fairness(
            max_min_demand_met=min(demand_met.values()) if demand_met else None,
            jain_demand_met=_jain(list(demand_met.values())),
            demand_met=demand_met,
            jain_entitlement=_jain(list(entitlement.values())),
            entitlement_share=entitlement,
        ),
        lost_work=LostWork(
            preemptions=len(run.preemptions),
            gpu_hours=total.lost / 3600.0,
            by=dict(by_who),
            restart_gpu_hours=run.restart_seconds / 3600.0,
            policy_max=max(by_policy.values(), default=0),
            kueue_max=by_kueue[kueue_top] if kueue_top is not None else 0,
            kueue_max_workload=kueue_top,
            kueue_max_team=kueue_team,
            kueue_max_reasons=dict(sorted(kueue_reasons.items())),
        ),
        planner=_planner(run, beneficiary_window),
        budgets=[BudgetEvent(time=a.time, budget=a.target, kind=a.kind.removeprefix("budget-"),
                             detail=a.detail)
                 for a in run.actions if a.kind in ("budget-crossed", "budget-lifted")],
        storms=storms_of(run),
        storms_answered=sum(1 for a in run.actions if a.kind == "storm"),
        run=RunStats(
            events=run.events,
            cycles=run.cycles,
            wall_seconds=run.wall_seconds,
            simulated_seconds=run.horizon,
            workloads_per_second=len(run.jobs) / run.wall_seconds if run.wall_seconds > 0 else 0.0,
        ),
    )
