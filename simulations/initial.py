"""A what-if that starts from a cluster as it is (`qm plan`), not from an empty one: the scenario's
`initial:` state and its `recorded:` workload sources.

`initial:` (docs/plan.md, "The initial state"):

- `at`: the wall-clock time of t=0 (RFC 3339 or epoch seconds). Kueue's model and the policy controller
  see wall-clock times (`at` + t), so the stored status (a transition's plan and step times, eviction
  records, a budget's calendar period) and the workloads' own timestamps mean what they mean on the
  cluster; the measurement, the outputs and the horizon stay in seconds from t=0.
- `objects`: the Kueue objects as they exist (ResourceFlavors, Cohorts, ClusterQueues, LocalQueues,
  WorkloadPriorityClasses). When given, they are the cluster at t=0 instead of the QuotaPolicy's rendering:
  a quota in force mid-transition, or held down by a budget, is the live one.
- `status`: the QuotaPolicy's status at t=0 (transitions in flight, eviction records, the usage history);
  `generation`: the policy's generation then. The controller continues from them as a restarted operator
  does (docs/control.md, "Inputs").
- `workloads`: the Workloads at t=0 (real Kueue v1beta2 objects). One holding quota (status.admission and
  QuotaReserved=True) runs on with the flavors it was admitted with; the others are pending in Kueue's
  queues in Kueue's order (a deactivated one is held, not queued), pending since `pendingSince` (default:
  its creation). Each has its total `work` (seconds), or draws it from the named distribution `workFrom` of
  the scenario's `durations:`; a running workload's draw is conditioned on exceeding the time it has run
  (the residual life of its kind), so it never finishes in the past; one that has outlived every value of
  its distribution runs on past the horizon (`draw_work`).

`recorded:` (a workload source): explicit workloads at given times (`qm plan --replay`: the arrivals the
ledger recorded), each with its `work` or `workFrom` as above.

Accounting of the workloads present at t=0 (simulations/summary.py): a workload pending at t=0 counts in
the waits from its creation (it is the backlog a policy change reorders); one running at t=0 does not (its
wait is history). Held, useful, lost GPU-hours and goodput of a workload count its whole attempt, the part
before t=0 included (an eviction throws away everything since the attempt started); the cluster-wide
integrals (utilization, idle, stranded capacity) count [0, horizon] only.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from fairshare.errors import InputError, Location
from fairshare.manifests import parse_object, parse_time
from fairshare.models import Workload
from fairshare.quantity import parse_quantity

from .durations import RUNS_ON, Duration
from .jobs import JobSpec

if TYPE_CHECKING:
    from .rng import RandomStreams
    from .scenario import Durations, Scenario, WorkloadSource

# JobSpec.source of the workloads present at t=0: the summary counts the waits of the pending ones.
RUNNING_AT_START = "(running at t=0)"
PENDING_AT_START = "(pending at t=0)"
# Draws of a conditioned duration before the fallback rule (`draw_work`).
MAX_DRAWS = 1000


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True)


class _Work(_Model):
    work: Duration | None = Field(default=None, gt=0, description="Total work of the workload (seconds)")
    work_from: str | None = Field(
        default=None,
        description="Draw the total work from this entry of the scenario's `durations:` (a running "
        "workload's draw exceeds the time it has run)",
    )

    @model_validator(mode="after")
    def _one_work(self) -> _Work:
        if (self.work is None) == (self.work_from is None):
            raise ValueError("give exactly one of work or workFrom")
        return self


class InitialWorkload(_Work):
    """A Workload present at t=0, and how much work it has in all."""

    workload: dict[str, Any] = Field(description="The Kueue v1beta2 Workload as the API server returns it")
    pending_since: float | str | None = Field(
        default=None,
        description="When it last became pending (RFC 3339 or epoch seconds; default its creation): what "
        "the policy controller's starvation grace counts from",
    )

    @field_validator("pending_since")
    @classmethod
    def _time(cls, value: float | str | None) -> float | str | None:
        if value is not None:
            wall_clock(value)
        return value


class InitialState(_Model):
    """The cluster at t=0 (see simulations/initial.py)."""

    at: float | str = Field(description="Wall-clock time of t=0: RFC 3339, or seconds since the epoch")
    objects: list[dict[str, Any]] = Field(
        default_factory=list,
        description="The Kueue objects as they exist at t=0 (they replace the QuotaPolicy's rendering)",
    )
    status: dict[str, Any] | None = Field(
        default=None, description="The QuotaPolicy's status at t=0 (transitions, evictions, usage history)"
    )
    generation: int = Field(default=1, ge=1, description="The QuotaPolicy's generation at t=0")
    workloads: list[InitialWorkload] = Field(default_factory=list)

    @field_validator("at")
    @classmethod
    def _at(cls, value: float | str) -> float | str:
        wall_clock(value)
        return value

    @property
    def origin(self) -> float:
        """t=0 in seconds since the epoch."""
        return wall_clock(self.at)


class RecordedJob(_Work):
    """One workload of a `recorded:` source: created at `at` (seconds from t=0) in the source's LocalQueue."""

    at: Duration = Field(description="Creation time, from t=0")
    work_at_least: Duration = Field(
        default=0.0,
        description="workFrom: draw a work above this (a recorded life still running had run so long)")
    count: int = Field(default=1, ge=1, description="Pods")
    resources: dict[str, str | int | float] = Field(min_length=1, description="Per-pod requests")
    priority_class: str | None = None

    @field_validator("resources")
    @classmethod
    def _requests(cls, value: dict[str, str | int | float]) -> dict[str, str | int | float]:
        for q in value.values():
            try:
                milli = parse_quantity(q)
            except InputError as err:
                raise ValueError(err.message) from None
            if milli < 0:
                raise ValueError("must not be negative")
        return value


def wall_clock(value: float | str) -> float:
    """Seconds since the epoch of an RFC 3339 time or a number; ValueError when it is neither."""
    if isinstance(value, bool):
        raise ValueError("must be an RFC 3339 time or seconds since the epoch")
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise ValueError("must be an RFC 3339 time or seconds since the epoch")
        return float(value)
    try:
        return parse_time(value)
    except InputError:
        raise ValueError("must be an RFC 3339 time or seconds since the epoch") from None


def check_work_names(scenario: Scenario) -> tuple[str, str] | None:
    """The first `workFrom` that names no entry of `durations:`: (its field path, the name); None if none."""
    names = scenario.durations
    if scenario.initial is not None:
        for i, w in enumerate(scenario.initial.workloads):
            if w.work_from is not None and w.work_from not in names:
                return f"initial.workloads[{i}].workFrom", w.work_from
    for i, source in enumerate(scenario.workloads):
        for j, job in enumerate(source.recorded or []):
            if job.work_from is not None and job.work_from not in names:
                return f"workloads[{i}].recorded[{j}].workFrom", job.work_from
    return None


# ------------------------------------------------------------------------------------------- the workloads


def parse_workloads(initial: InitialState) -> list[Workload]:
    """The initial Workloads in the core's model (one located error line for one it cannot read)."""
    out: list[Workload] = []
    for i, entry in enumerate(initial.workloads):
        doc = dict(entry.workload)
        doc.setdefault("apiVersion", "kueue.x-k8s.io/v1beta2")
        doc.setdefault("kind", "Workload")
        try:
            wl = parse_object(doc)
        except InputError as err:
            raise err.at(field_prefix=f"initial.workloads[{i}].workload") from None
        if not isinstance(wl, Workload):
            raise InputError("not a Workload", location=Location(field=f"initial.workloads[{i}].workload"),
                             value=doc.get("kind"))
        out.append(wl)
    keys = [w.key for w in out]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise InputError("a Workload given twice", location=Location(field="initial.workloads"), value=dup)
    return out


def holds_quota(wl: Workload) -> bool:
    """Admitted (QuotaReserved) and not finished: it holds quota at t=0 (Snapshot.from_state's rule)."""
    return wl.has_quota_reservation and wl.admission is not None and not wl.is_finished


def total_requests(wl: Workload) -> tuple[tuple[str, int], ...]:
    """Every pod set's requests times its count, per resource (a JobSpec has one pod set: the quota a
    workload needs is the sum)."""
    out: dict[str, int] = {}
    for ps in wl.pod_sets:
        for resource, milli in ps.requests:
            out[resource] = out.get(resource, 0) + milli * ps.count
    return tuple(sorted(out.items()))


def draw_work(spec: Durations, rng: random.Random, at_least: float = 0.0) -> float:
    """A total work from `spec`, conditioned on exceeding `at_least` (the time a running workload has run).
    An empirical distribution is restricted to its values above it (exact); the others are drawn again up
    to MAX_DRAWS times. When nothing exceeds it (the workload has outlived every recorded run time of its
    kind) the work is RUNS_ON: nothing recorded says when such work ends, so it runs on past the horizon,
    as `qm plan`'s transition plan assumes of every running workload (docs/plan.md). Guessing an end (its age
    plus the median, before) made a forecast end, within seconds, long jobs that a short ledger had only
    seen short ones of, and land steps the plan, and then the operator, held for drain."""
    from .generators import sampler
    from .scenario import EmpiricalDurations

    if isinstance(spec, EmpiricalDurations):
        weights = spec.weights or [1.0] * len(spec.values)
        kept = [(v, w) for v, w in zip(spec.values, weights, strict=True) if v > at_least and w > 0]
        if kept:
            return rng.choices([v for v, _ in kept], weights=[w for _, w in kept])[0]
        return max(RUNS_ON, at_least + 1.0)
    sample = sampler(spec, rng)
    for _ in range(MAX_DRAWS):
        d = sample()
        if d > at_least:
            return d
    return max(RUNS_ON, at_least + 1.0)


def initial_jobs(
    scenario: Scenario, workloads: Sequence[Workload], streams: RandomStreams
) -> list[JobSpec]:
    """A JobSpec per initial workload, in the given order, with its total work (drawn per replication from
    its own stream: every variant of a replication sees the same work)."""
    initial = scenario.initial
    if initial is None:
        return []
    origin = initial.origin
    out: list[JobSpec] = []
    for entry, wl in zip(initial.workloads, workloads, strict=True):
        running = holds_quota(wl)
        ran = max(0.0, origin - (wl.quota_reserved_time or origin)) if running else 0.0
        if entry.work is not None:
            work = max(entry.work, ran + 1.0) if running else entry.work
        else:
            spec = scenario.durations[str(entry.work_from)]
            work = draw_work(spec, streams.stream(f"initial:{wl.key}"), ran)
        out.append(JobSpec(
            name=wl.name,
            namespace=wl.namespace,
            local_queue=wl.queue_name,
            arrival=wl.creation_timestamp - origin,
            duration=work,
            count=1,
            requests=total_requests(wl),
            priority_class=wl.priority_class,
            source=RUNNING_AT_START if running else PENDING_AT_START,
        ))
    return out


def recorded_jobs(source: WorkloadSource, scenario: Scenario, *, horizon: float,
                  rng: random.Random) -> list[JobSpec]:
    """The jobs of a `recorded:` source created before the horizon, in creation order."""
    if source.local_queue is None:  # pragma: no cover - the schema requires it
        raise ValueError("a recorded source needs localQueue")
    namespace, lq = source.local_queue.split("/", 1)
    out: list[JobSpec] = []
    for i, job in enumerate(source.recorded or []):
        if job.at >= horizon:
            continue
        work = job.work if job.work is not None else \
            draw_work(scenario.durations[str(job.work_from)], rng, job.work_at_least)
        out.append(JobSpec(
            name=f"{source.name}-{i:07d}",
            namespace=namespace,
            local_queue=lq,
            arrival=job.at,
            duration=work,
            count=job.count,
            requests=tuple(sorted((r, parse_quantity(q)) for r, q in job.resources.items())),
            priority_class=job.priority_class,
            source=source.name,
        ))
    out.sort(key=lambda j: (j.arrival, j.name))
    return out


def pending_since(entry: InitialWorkload, wl: Workload) -> float:
    """When the workload last became pending (wall clock): the given time, else its creation."""
    return wall_clock(entry.pending_since) if entry.pending_since is not None else wl.creation_timestamp


def by_key(initial: InitialState, workloads: Sequence[Workload]) -> Mapping[str, InitialWorkload]:
    return {wl.key: entry for entry, wl in zip(initial.workloads, workloads, strict=True)}
