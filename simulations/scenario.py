"""The scenario file: pydantic v2 models (the boundary type) and their JSON Schema.

Field names are camelCase in YAML, as in Kubernetes manifests. `qm simulate --schema`
prints `Scenario.model_json_schema(by_alias=True)`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import InitErrorDetails, PydanticCustomError

from fairshare.durations import format_duration
from fairshare.errors import InputError
from fairshare.quantity import parse_quantity

from .durations import Duration
from .initial import InitialState, RecordedJob, check_work_names
from .objectives import Objective

# The longest horizon a scenario may have: ten years of simulated time. Longer is a unit mistake (100000d),
# and every time-driven count (samples, arrivals) grows with it; what a run would cost is estimated before
# it starts (simulations/guards.py).
MAX_HORIZON = 3650 * 86400.0
# Restart cost of an evicted workload (Scenario.restart_cost): pod start (about a minute) plus checkpoint
# reload (a few minutes), spent holding quota before its work goes on.
RESTART_COST = 300.0

QuantityText = Annotated[str | int | float, Field(description="A Kubernetes quantity, e.g. 1, 500m, 4Gi")]


def _check_quantity(value: str | int | float) -> str | int | float:
    try:
        parse_quantity(value)
    except InputError as err:
        raise ValueError(err.message) from None
    return value


def _check_request(value: str | int | float) -> str | int | float:
    """A request is a quantity >= 0, as in a Pod's resources (the API server rejects a negative one)."""
    try:
        milli = parse_quantity(value)
    except InputError as err:
        raise ValueError(err.message) from None
    if milli < 0:
        raise ValueError("must not be negative")
    return value


RequestText = Annotated[QuantityText, AfterValidator(_check_request)]


def _error_at(loc: tuple[str | int, ...], message: str, value: object) -> ValidationError:
    """A validation error at a field below the model that finds it (a rule across siblings names the one
    that breaks it, e.g. `variants[1].name`, not the list)."""
    error = PydanticCustomError("value_error", "{message}", {"message": message})
    details = InitErrorDetails(type=error, loc=loc, input=value)
    return ValidationError.from_exception_data("Scenario", [details])


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True)


# ---------------------------------------------------------------- cluster


class ClusterSpec(_Model):
    """The cluster: real Kueue v1beta2 manifests (files and/or inline objects)."""

    manifests: list[str] = Field(
        default_factory=list, description="YAML files, relative to the scenario file"
    )
    objects: list[dict[str, Any]] = Field(default_factory=list, description="Inline Kueue manifests")
    quota_policy: str | dict[str, Any] | None = Field(
        default=None,
        description="A QuotaPolicy (file or inline) rendered into Kueue objects by fairshare.policy",
    )
    capacity: dict[str, RequestText] | None = Field(
        default=None,
        description="What the cluster has per resource (e.g. nvidia.com/gpu: 80), for utilization and "
        "stranded capacity; default: the ClusterQueues' and Cohorts' nominal quota at t=0",
    )

    def capacity_milli(self, resource: str) -> int | None:
        """The declared capacity of `resource` in milli-units, or None when not declared."""
        if self.capacity is None or resource not in self.capacity:
            return None
        return parse_quantity(self.capacity[resource])

    @model_validator(mode="after")
    def _not_empty(self) -> ClusterSpec:
        if not self.manifests and not self.objects and self.quota_policy is None:
            raise ValueError("give the cluster as manifests, objects or quotaPolicy")
        return self


# ---------------------------------------------------------------- generators


class PoissonArrivals(_Model):
    kind: Literal["poisson"]
    rate_per_hour: float = Field(gt=0, allow_inf_nan=False, description="Mean arrivals per hour")


class DiurnalArrivals(_Model):
    """Non-homogeneous Poisson: rate(t) = mean * (1 + amplitude * cos(2π (t - peak) / 24h))."""

    kind: Literal["diurnal"]
    mean_rate_per_hour: float = Field(gt=0, allow_inf_nan=False)
    amplitude: float = Field(default=0.5, ge=0, le=1)
    peak_hour: float = Field(default=14.0, ge=0, lt=24)


class ProfileArrivals(_Model):
    """Non-homogeneous Poisson with a piecewise-constant rate repeating every `period`: `ratesPerHour[i]` over
    the i-th of its equal bins; t=0 lies `offset` into the period (qm plan: 168 hourly rates of a week from
    Monday 00:00 UTC, fitted from the ledger, with the time of week of t=0 as the offset)."""

    kind: Literal["profile"]
    rates_per_hour: list[Annotated[float, Field(ge=0, allow_inf_nan=False)]] = Field(
        min_length=1, max_length=10_000)
    period: Duration = Field(default=7 * 86400.0, gt=0)
    offset: Duration = Field(default=0.0)

    @field_validator("rates_per_hour")
    @classmethod
    def _some_rate(cls, rates: list[float]) -> list[float]:
        if not any(r > 0 for r in rates):
            raise ValueError("at least one rate must be above 0")
        return rates


Arrivals = Annotated[PoissonArrivals | DiurnalArrivals | ProfileArrivals, Field(discriminator="kind")]


class ExponentialDurations(_Model):
    kind: Literal["exponential"]
    mean: Duration = Field(gt=0)


class LognormalDurations(_Model):
    """Lognormal with the given median (e^mu) and shape sigma."""

    kind: Literal["lognormal"]
    median: Duration = Field(gt=0)
    sigma: float = Field(ge=0, allow_inf_nan=False)


class EmpiricalDurations(_Model):
    """Sampled from the listed values (with optional weights)."""

    kind: Literal["empirical"]
    values: list[Duration] = Field(min_length=1)
    weights: list[Annotated[float, Field(allow_inf_nan=False)]] | None = None

    @field_validator("weights")
    @classmethod
    def _weights_match(cls, weights: list[float] | None, info: ValidationInfo) -> list[float] | None:
        values = info.data.get("values")
        if weights is None or values is None:
            return weights
        if len(weights) != len(values) or min(weights) < 0:
            raise ValueError("weights must be non-negative, one per value")
        if not any(w > 0 for w in weights):  # random.choices cannot draw from weights that sum to 0
            raise ValueError("weights must not all be zero")
        return weights


class ConstantDurations(_Model):
    kind: Literal["constant"]
    value: Duration = Field(gt=0)


Durations = Annotated[
    ExponentialDurations | LognormalDurations | EmpiricalDurations | ConstantDurations,
    Field(discriminator="kind"),
]


class RequestMix(_Model):
    """One workload shape: per-pod requests, pod count, and its weight in the mix."""

    weight: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    count: int = Field(default=1, ge=1, description="Pods in the workload's single podSet")
    resources: dict[str, RequestText] = Field(min_length=1, description="Per-pod requests")


class PriorityMix(_Model):
    priority_class: str | None = Field(description="A WorkloadPriorityClass name (null: priority 0)")
    weight: float = Field(default=1.0, gt=0, allow_inf_nan=False)


class GeneratorSpec(_Model):
    arrivals: Arrivals
    durations: Durations
    requests: list[RequestMix] = Field(min_length=1)
    priority_classes: list[PriorityMix] = Field(default_factory=list)
    count: int | None = Field(default=None, ge=1, description="Stop after this many workloads")
    until: Duration | None = Field(default=None, description="Stop arrivals at this time (default: horizon)")
    start: Duration = Field(default=0.0, description="First possible arrival time")


# ---------------------------------------------------------------- traces


class SizeRule(_Model):
    max_gpus: float = Field(description="Jobs with at most this many GPUs go to localQueue")
    local_queue: str


class QueueRule(_Model):
    """How trace jobs (which have no team) are assigned to LocalQueues ("namespace/name")."""

    rule: Literal["single", "hash", "column", "size"]
    local_queue: str | None = Field(default=None, description="rule=single: every job goes here")
    local_queues: list[str] = Field(default_factory=list, description="rule=hash: stable hash of the job id")
    column: str | None = Field(default=None, description="rule=column: the column whose value is mapped")
    map: dict[str, str] = Field(default_factory=dict, description="rule=column: value -> LocalQueue")
    default: str | None = Field(default=None, description="rule=column: LocalQueue for unmapped values")
    sizes: list[SizeRule] = Field(default_factory=list, description="rule=size: first rule that fits wins")

    @model_validator(mode="after")
    def _complete(self) -> QueueRule:
        need = {
            "single": self.local_queue is not None,
            "hash": bool(self.local_queues),
            "column": self.column is not None and (bool(self.map) or self.default is not None),
            "size": bool(self.sizes),
        }
        if not need[self.rule]:
            hint = {
                "single": "localQueue",
                "hash": "localQueues",
                "column": "column and map",
                "size": "sizes",
            }
            raise ValueError(f"rule {self.rule} needs {hint[self.rule]}")
        return self


class CsvColumns(_Model):
    """Column mapping of a generic CSV trace (times and durations in seconds times timeScale)."""

    id: str | None = None
    submit: str
    duration: str
    gpus: str
    priority: str | None = Field(default=None, description="Column whose value maps through priorityMap")


class TraceSpec(_Model):
    format: Literal["itp", "openb", "swf", "csv"]
    paths: list[str] = Field(min_length=1, description="Files (globs allowed), relative to the scenario file")
    queues: QueueRule
    resource: str = Field(default="nvidia.com/gpu", description="The resource a job's GPU count requests")
    per_gpu: dict[str, RequestText] = Field(
        default_factory=dict, description="Other resources requested per GPU (e.g. cpu: 8)"
    )
    priority_class: str | None = Field(default=None, description="Priority class of every job")
    priority_map: dict[str, str] = Field(
        default_factory=dict, description="Column value -> priority class (openb: qos; csv: columns.priority)"
    )
    columns: CsvColumns | None = Field(default=None, description="format=csv: the column mapping")
    time_scale: float = Field(
        default=1.0, gt=0, allow_inf_nan=False, description="Multiply trace times and durations by this")
    align_start: bool = Field(default=True, description="Shift times so the first submission is at t=0")
    limit: int | None = Field(default=None, ge=1, description="Only the first N jobs (by submission)")

    @model_validator(mode="after")
    def _csv_columns(self) -> TraceSpec:
        if self.format == "csv" and self.columns is None:
            raise ValueError("format csv needs columns")
        return self


class ActivityMix(_Model):
    """What the GPUs of one kind of job do (docs/simulator.md, "GPU activity"): a utilization while it works
    and, optionally, when it goes idle (a notebook left open, a crashed loop, a job waiting on data) and what
    it shows then, until its run ends."""

    weight: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    utilization: float = Field(ge=0, le=100, allow_inf_nan=False,
                               description="GPU utilization while it works, percent (DCGM_FI_DEV_GPU_UTIL)")
    idle_after: Durations | None = Field(
        default=None, description="How long into each attempt it works before going idle (a distribution); "
        "unset: it works to its end")
    idle_utilization: float = Field(default=0.0, ge=0, le=100, allow_inf_nan=False,
                                    description="Utilization once idle, percent")
    measured: bool = Field(default=True, description="false: its pods report no DCGM series (its activity is "
                           "unknown to spec.idle, which then never reclaims it)")


class WorkloadSource(_Model):
    name: str = Field(description="A label for this source (used in seeds and outputs)")
    local_queue: str | None = Field(default=None, description="namespace/name of the LocalQueue (generators)")
    generator: GeneratorSpec | None = None
    trace: TraceSpec | None = None
    recorded: list[RecordedJob] | None = Field(
        default=None,
        description="Explicit workloads at given times (simulations/initial.py; qm plan --replay)",
    )
    activity: list[ActivityMix] = Field(
        default_factory=list, description="What the jobs' GPUs do, a mix drawn per job (default: not "
        "modelled; counted fully active when other sources model theirs)")

    @model_validator(mode="after")
    def _one_kind(self) -> WorkloadSource:
        if sum(x is not None for x in (self.generator, self.trace, self.recorded)) != 1:
            raise ValueError("give exactly one of generator, trace or recorded")
        if self.generator is not None and self.local_queue is None:
            raise ValueError("a generator needs localQueue")
        if self.recorded is not None and self.local_queue is None:
            raise ValueError("recorded workloads need localQueue")
        if self.local_queue is not None and self.local_queue.count("/") != 1:
            raise ValueError("localQueue must be namespace/name")
        return self


# ---------------------------------------------------------------- policy edits over time


class PolicyEvent(_Model):
    """A change of the QuotaPolicy at a time: what a platform team would `kubectl apply`. The policy's own
    rules then roll it out (its transitions, preemption, fair share), exactly as the operator would."""

    at: Duration = Field(description="When the edit is applied (from the start of the run)")
    policy_patch: dict[str, Any] | None = Field(
        default=None,
        description="A patch of the QuotaPolicy (RFC 7386 merge patch; lists the CRD keys by "
        "name, such as teams, quotas and resources, merge entry by entry: see fairshare.policy.patch)",
    )
    policy: str | dict[str, Any] | None = Field(
        default=None, description="A whole new QuotaPolicy (file, relative to the scenario, or inline)"
    )

    @model_validator(mode="after")
    def _one_kind(self) -> PolicyEvent:
        if (self.policy_patch is None) == (self.policy is None):
            raise ValueError("give exactly one of policyPatch or policy")
        return self


_OLD_EVENT = (
    "quota events are QuotaPolicy edits: write {at: 7d, policyPatch: {spec: {teams: [{name: TEAM, "
    "quotas: [{flavor: FLAVOR, resources: [{name: RESOURCE, nominal: N}]}]}]}}} with the transition "
    "settings in the policy's spec.transitions (cluster.quotaPolicy)"
)
_OLD_KEYS = {
    "experimentPreemption": "experiment preemption is the QuotaPolicy's spec.preemption (protectedClasses, "
    "experimentPriorityThreshold, minRuntime, starvationGrace — was waitThreshold —, "
    "victimHold — was reactivateAfter —, budget): set it in cluster.quotaPolicy",
    "fairShare": "the usage history is the QuotaPolicy's spec.fairShare (halfLife, projectLabel): set it in "
    "cluster.quotaPolicy",
}


class SchedulerSpec(_Model):
    """Kueue Configuration knobs the model honours."""

    fair_sharing: bool = Field(default=False, description="Configuration.fairSharing present")
    preemption_strategies: list[str] | None = None
    eviction_release: Duration = Field(
        default=0.0, ge=0, le=3600,
        description="How long a victim keeps its quota after Kueue evicts it (its Job suspended, its pods "
        "deleted, Kueue's release: tenths of a second on a cluster); its preemptor waits for it. 0: at once")


class Variant(_Model):
    name: str = Field(min_length=1, max_length=80)
    description: str = ""
    overrides: dict[str, Any] = Field(
        default_factory=dict, description="A JSON merge patch over the base scenario (lists are replaced)"
    )
    policy_patch: dict[str, Any] | None = Field(
        default=None, description="A patch of the scenario's QuotaPolicy from t=0 (as events[].policyPatch)"
    )
    lever_of: str | None = Field(
        default=None,
        description="The variant this one is plus a lever (e.g. the same shift with experiment preemption): "
        "the recommendation also says whether the lever pays against that variant",
    )


class Scenario(_Model):
    """A what-if simulation scenario."""

    name: str
    description: str = ""
    seed: int = 0
    replications: int = Field(default=1, ge=1, le=1000)
    horizon: Duration = Field(gt=0)
    warmup: Duration = Field(
        default=0.0, description="Workloads created before this are not in wait statistics"
    )
    checkpoint_interval: Duration | None = Field(
        default=None,
        gt=0,
        description="Evicted work resumes from the last checkpoint (default: restarts from zero)",
    )
    restart_cost: Duration = Field(
        default=RESTART_COST,
        ge=0,
        description="What an evicted workload spends when it is admitted again before its work goes on: pod "
        "start (scheduling, image pull from a warm cache, container start: about a minute) plus checkpoint "
        "reload (a few minutes). Held quota, counted in lost GPU-hours. Default 5m; 0 for none",
    )
    sample_interval: Duration | None = Field(
        default=None, gt=0, description="Time-series step (default horizon/200)"
    )
    time_quantum: Duration = Field(
        default=0.0, description="Round event times up to a multiple of this (0: exact); collapses cycles"
    )
    cluster: ClusterSpec
    workloads: list[WorkloadSource] = Field(min_length=1)
    events: list[PolicyEvent] = Field(default_factory=list, description="QuotaPolicy edits over time")
    scheduler: SchedulerSpec = Field(default_factory=SchedulerSpec)
    baseline: str | None = Field(
        default=None, description="Name of the baseline variant (default: the first)"
    )
    variants: list[Variant] = Field(default_factory=list)
    objectives: list[Objective] = Field(
        default_factory=list,
        description="What the recommendation ranks the variants against (simulations/objectives.py): each "
        "names a metric (e.g. wait_p95[CLASS], goodput[TEAM], lost_gpu_hours) and one of goal "
        "(minimize/maximize), max, min, maxLoss or maxIncrease (a number or a percentage such as 20%)",
    )
    beneficiary_window: Duration = Field(
        default=1.0,
        ge=0,
        description="A planner eviction counts as helping when its beneficiary is admitted this soon after",
    )
    initial: InitialState | None = Field(
        default=None,
        description="The cluster at t=0 (simulations/initial.py; qm plan): its time, Kueue objects, "
        "QuotaPolicy status and Workloads (running ones run on, pending ones wait in Kueue's order)",
    )
    durations: dict[str, Durations] = Field(
        default_factory=dict,
        description="Named duration distributions the initial workloads and recorded jobs draw their work "
        "from (workFrom)",
    )

    @field_validator("horizon")
    @classmethod
    def _horizon_bounded(cls, horizon: float) -> float:
        if horizon > MAX_HORIZON:
            raise ValueError(f"must be at most {format_duration(MAX_HORIZON)} (ten years)")
        return horizon

    @field_validator("warmup")
    @classmethod
    def _warmup_before_horizon(cls, warmup: float, info: ValidationInfo) -> float:
        horizon = info.data.get("horizon")  # absent when the horizon itself is invalid (reported instead)
        if horizon is not None and warmup >= horizon:
            raise ValueError(f"must be shorter than the horizon ({format_duration(horizon)})")
        return warmup

    @model_validator(mode="before")
    @classmethod
    def _old_keys(cls, data: Any) -> Any:
        """Keys of the first scenario format: one line saying what to write instead."""
        if isinstance(data, dict):
            for key, instead in _OLD_KEYS.items():
                if key in data:
                    raise ValueError(f"{key} is no longer a scenario key: {instead}")
            events = data.get("events")
            if isinstance(events, list):
                for i, e in enumerate(events):
                    if isinstance(e, dict) and ("clusterQueue" in e or "nominalQuota" in e):
                        raise ValueError(f"events[{i}]: {_OLD_EVENT}")
        return data

    @model_validator(mode="after")
    def _names(self) -> Scenario:
        names = [v.name for v in self.variants]
        first: dict[str, int] = {}
        for i, name in enumerate(names):
            folder = slug(name)
            if folder in first:
                j = first[folder]
                why = (f"variant name used twice (first at variants[{j}])" if names[j] == name else
                       f"variant name gives the same output folder {folder!r} as variants[{j}] "
                       f"({names[j]!r}): names must differ in more than punctuation or case")
                raise _error_at(("variants", i, "name"), why, name)
            first[folder] = i
        if self.events and self.cluster.quota_policy is None:
            raise ValueError("events edit the QuotaPolicy: give cluster.quotaPolicy")
        if self.baseline is not None and self.baseline not in names:
            raise ValueError(f"baseline {self.baseline!r} is not a variant name")
        for i, v in enumerate(self.variants):
            if v.lever_of is not None and (v.lever_of not in names or v.lever_of == v.name):
                raise _error_at(("variants", i, "leverOf"), "must name another variant of the scenario",
                                v.lever_of)
        sources = [w.name for w in self.workloads]
        if len(set(sources)) != len(sources):
            raise ValueError("workload source names must be unique")
        unknown = check_work_names(self)
        if unknown is not None:
            raise _error_at(tuple(_path(unknown[0])), "no such entry in durations", unknown[1])
        return self


def _path(text: str) -> list[str | int]:
    """`initial.workloads[3].workFrom` -> ["initial", "workloads", 3, "workFrom"] (a pydantic location)."""
    out: list[str | int] = []
    for part in text.split("."):
        name, _, rest = part.partition("[")
        out.append(name)
        for index in rest.rstrip("]").split("][") if rest else []:
            out.append(int(index))
    return out


def slug(name: str) -> str:
    """The output folder of a variant."""
    out = "".join(c if c.isalnum() else "-" for c in name.lower())
    while "--" in out:
        out = out.replace("--", "-")
    return out.strip("-") or "variant"


def scenario_json_schema() -> dict[str, Any]:
    return Scenario.model_json_schema(by_alias=True)
