"""The QuotaPolicy status (`queuemanager.dev/v1alpha1`), typed: what the operator reads and writes, and what
the policy controller (`fairshare.control`) takes as its memory and returns updated.

These models generate the status part of the CRD (`fairshare.policy.crd`), like the spec models. Unknown
fields are kept (`extra="allow"`): a status written by a newer operator survives an older one, and a status
written by an older one is read without loss (tests/unit/policy/test_status.py keeps a recorded one).
Times are RFC 3339 strings where users read them (`kubectl get -o yaml`) and epoch seconds (`at`) where the
controller computes with them; quantities are Kubernetes quantity strings, human units in messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, WithJsonSchema
from pydantic.alias_generators import to_camel

from .units import Quantity


class _Status(BaseModel):
    """Status objects are written by the operator; unknown fields are kept (newer operator, older reader)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow", frozen=True)


class Condition(_Status):
    """A status condition (metav1.Condition)."""

    type: str = Field(max_length=316, description="Condition type, e.g. Ready, Transitioning, Degraded.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str | None = Field(default=None, max_length=1024, description="CamelCase reason.")
    message: str | None = Field(default=None, max_length=32768, description="Human-readable details.")
    last_transition_time: str | None = Field(default=None, description="When the status last changed "
                                             "(RFC 3339).", json_schema_extra={"format": "date-time"})
    observed_generation: int | None = Field(default=None, ge=0, description="Generation the condition is "
                                            "about.")


# ------------------------------------------------------------------------------------------- transitions


class TransitionPhase(StrEnum):
    """Where one quota transition is."""

    RUNNING = "Running"  # steps are applied on schedule
    DRAINING = "Draining"  # the due step waits for running work to finish (drain)
    PREEMPTING = "Preempting"  # past the deadline: bounded preemption frees what the team may not hold
    # past the deadline, the team borrows idle cohort quota above its quota in force, within its borrowing
    # limit: its workloads are evicted only when another team's pending work needs that quota
    BORROWING = "Borrowing"
    COMPLETE = "Complete"  # the target is in force
    BLOCKED = "Blocked"  # the transition cannot be planned (e.g. the target is below the floor)


# The planner's own serialization (fairshare.planners.quota_shift.plan_to_dict): schema-versioned rows of
# [clusterQueue, flavor, resource, milli]. Typed here for Python, opaque in the CRD (rows are heterogeneous
# arrays, which a structural schema cannot describe).
QuotaRow = list[str | int]
_OPAQUE = WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True})


class PlanSpecDoc(_Status):
    duration: float | None = None
    step_interval: float | None = None
    curve: str | None = None
    drain: bool | None = None
    deadline: float | None = None
    max_victims_per_hour: int = 0
    ramp_growth: bool = False
    floor: list[list[str | int]] = Field(default_factory=list)
    granularity: list[list[str | int]] = Field(default_factory=list)


class PlanDoc(_Status):
    """A quota-shift plan as the planner serializes it (steps are recomputed on load). Every field is
    optional here: a plan the planner cannot read (another schema version) makes the controller re-plan
    from the quota in force, it never makes the policy unreadable."""

    schema_version: int | None = None
    start: float | None = None
    spec: PlanSpecDoc | None = None
    current: list[QuotaRow] = Field(default_factory=list)
    target: list[QuotaRow] = Field(default_factory=list)


class LastAppliedDoc(_Status):
    """Progress of a plan: the last applied step, the quotas then applied and when (epoch seconds)."""

    step: int | None = None
    at: float | None = None
    quotas: list[QuotaRow] = Field(default_factory=list)


class TransitionStatus(_Status):
    """Plan and progress of one quota transition (one team, flavor and resource)."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-preserve-unknown-fields": True})

    team: str = Field(description="Team (ClusterQueue) name.")
    flavor: str = Field(description="Flavor name.")
    resource: str = Field(description="Resource name.")
    from_: Quantity | None = Field(default=None, alias="from", description="Quota when the transition "
                                   "started.")
    to: Quantity | None = Field(default=None, description="Target quota.")
    current: Quantity | None = Field(default=None, description="Quota applied now.")
    phase: TransitionPhase | None = Field(default=None, description="Running, Draining, Preempting, "
                                          "Borrowing, Complete or Blocked.")
    started_at: str | None = Field(default=None, description="Start time (RFC 3339).")
    policy_generation: int | None = Field(default=None, description="Policy generation that started it.")
    last_applied_step: int | None = Field(default=None, description="Index of the last step applied "
                                          "(-1 = none).")
    total_steps: int | None = Field(default=None, description="Number of steps in the plan.")
    next_step_at: str | None = Field(default=None, description="When the next step is due (RFC 3339).")
    deadline_at: str | None = Field(default=None, description="When the transition's deadline passes (RFC "
                                    "3339; unset: no deadline): from then on, what drain held back is cut.")
    message: str | None = Field(default=None, description="What the transition waits for, or why it is "
                                "blocked.")
    pair_group: str | None = Field(default=None, description="A paired move (cuts and grants of one resource "
                                   "in one cohort tree, made by one edit): receivers get what givers free.")
    plan: Annotated[PlanDoc | None, _OPAQUE] = Field(default=None, description="The planner's serialized "
                                                     "plan.")
    last_applied: Annotated[LastAppliedDoc | None, _OPAQUE] = Field(
        default=None, description="The last applied step, its quotas and time (epoch seconds).")
    # The controller's own reading of `plan` and `lastApplied` (fairshare.control.transitions), kept with
    # the record it made so that the next decision does not rebuild the plan's steps; never serialized.
    _parsed: object = PrivateAttr(default=None)

    def __eq__(self, other: object) -> bool:
        """The records' equality: their fields, not `_parsed` (a cache of them that refers back to its
        record: pydantic's comparison of the private values recursed without end between two equal
        records that each carried one)."""
        if not isinstance(other, TransitionStatus):
            return NotImplemented
        return (type(self) is type(other) and self.__dict__ == other.__dict__
                and self.__pydantic_extra__ == other.__pydantic_extra__)


# ------------------------------------------------------------------------------------------- evictions


class VictimState(StrEnum):
    """Life of one eviction request (the victim lifecycle, fairshare.control.victims)."""

    REQUESTED = "Requested"  # we deactivated the victim (spec.active=false)
    EVICTED = "Evicted"  # Kueue released its quota
    REACTIVATED = "Reactivated"  # its beneficiary got in (or the hold expired): spec.active=true again
    REQUEUED = "Requeued"  # Kueue requeued it
    GONE = "Gone"  # the victim no longer exists
    REPORTED = "Reported"  # dry-run: only reported
    # an idle workload reclaimed (spec.idle): Kueue released its quota and it stays deactivated until its
    # owner reactivates it (spec.active=true) or deletes it
    RECLAIMED = "Reclaimed"


class EvictionKind(StrEnum):
    """Why an eviction was requested; each kind has its own budget."""

    EXPERIMENT = "starved-protected-work"  # spec.preemption: an experiment for starved protected work
    TRANSITION = "transition-deadline"  # a transition past its deadline (maxVictimsPerHour)
    IDLE = "idle-gpus"  # spec.idle: an experiment whose GPUs stayed idle past its warning's grace


class PreemptionRecord(_Status):
    """One eviction request (or, in dry-run, one that would have happened) and what became of it."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-preserve-unknown-fields": True})

    time: str = Field(description="When it was decided (RFC 3339).")
    at: float | None = Field(default=None, description="When it was decided (epoch seconds).")
    victim: str = Field(description="namespace/name of the victim Workload.")
    beneficiary: str | None = Field(default=None, description="namespace/name of the workload it makes room "
                                    "for (empty for a transition).")
    reason: str = Field(description="One-line reason.")
    dry_run: bool = Field(default=False, description="True if only reported.")
    state: VictimState | None = Field(default=None, description="Requested, Evicted, Reactivated, Requeued, "
                                      "Gone, Reported or Reclaimed.")
    kind: EvictionKind | None = Field(default=None, description="starved-protected-work (the default), "
                                      "transition-deadline or idle-gpus.")
    evicted_at: str | None = Field(default=None, description="When Kueue released the quota (RFC 3339).")
    team: str | None = Field(default=None, description="The victim's team (ClusterQueue).")
    lost_hours: dict[str, float] | None = Field(default=None, description="Work the eviction loses, in "
                                                "resource-hours per resource.")
    overdue: bool | None = Field(default=None, description="True once Kueue had not evicted the victim "
                                 "within the hold time.")

    @property
    def eviction_kind(self) -> EvictionKind:
        return self.kind or EvictionKind.EXPERIMENT


class BlockedPreemption(_Status):
    """Protected work that waits and that no valid victim set can help (reported once per reason)."""

    workload: str = Field(description="namespace/name of the waiting workload.")
    reason: str = Field(description="Why no experiment is preempted for it.")


# ------------------------------------------------------------------------------------------- budgets


class BudgetCrossing(_Status):
    """A threshold of a budget reached in the current period (reported once per period)."""

    percent: int = Field(description="The threshold, in percent of the limit.")
    action: str = Field(description="alert, shrink, deprioritize or hold.")
    at: str | None = Field(default=None, description="When it was reached (RFC 3339).")


class BudgetStatus(_Status):
    """A budget in its current period (fairshare.control.budgets): the figures `qm budget status` and
    the metric qm_budget_used_ratio show are the ones enforcement uses."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-preserve-unknown-fields": True})

    name: str = Field(description="Budget name.")
    team: str | None = Field(default=None, description="The team its actions act on.")
    period_start: str | None = Field(default=None, description="Start of the current period (RFC 3339).")
    period_start_at: float | None = Field(default=None, description="The same, epoch seconds (the "
                                          "controller's key of the period).")
    period_end: str | None = Field(default=None, description="End of a calendar period (RFC 3339); unset "
                                   "for a rolling window.")
    used: str | None = Field(default=None, description="Consumed in the period, in the limit's unit.")
    limit: str | None = Field(default=None, description="The limit.")
    unit: str | None = Field(default=None, description="Hours of the resource's unit (GPU-hours, "
                             "core-hours, GiB-hours) or the currency of a cost budget (e.g. USD).")
    used_ratio: float | None = Field(default=None, description="used / limit (1 = the whole budget).")
    measured_at: str | None = Field(default=None, description="When the consumption was measured "
                                    "(RFC 3339); unset when no measurement is available yet.")
    crossed: list[BudgetCrossing] = Field(default_factory=list,
                                          description="Thresholds reached in this period.")
    enforcing: list[str] = Field(default_factory=list, description="Actions in force now (shrink, "
                                 "deprioritize, hold); empty in dry-run.")
    dry_run: bool = Field(default=False, description="True if the budget only reports.")


class StrandedQuota(_Status):
    """Quota a policy change takes from a cohort tree without giving it to any team there."""

    cohort: str = Field(description="Root Cohort of the tree (or cq:<team> for a team without a cohort).")
    flavor: str = Field(description="Flavor name.")
    resource: str = Field(description="Resource name.")
    amount: Quantity = Field(description="Quota handed to nobody.")


class PolicyPhase(StrEnum):
    """One word for `kubectl get qp` (printer column Phase): the most pressing of the policy's states."""

    INVALID = "Invalid"  # the policy was rejected (Ready=False, reason InvalidPolicy): nothing applied
    DEGRADED = "Degraded"  # the Degraded condition is True (a transition blocked, an eviction failed, ...)
    PREEMPTING = "Preempting"  # a transition is past its deadline and frees quota by bounded preemption
    DRAINING = "Draining"  # a transition's due step waits for running work to finish
    TRANSITIONING = "Transitioning"  # a transition applies its steps on schedule
    # past a deadline, a team borrows idle quota above its new quota until another team needs it
    BORROWING = "Borrowing"
    READY = "Ready"  # the Kueue objects match the policy and no transition is in progress


def policy_phase(transitions: Sequence[TransitionStatus], *, degraded: bool) -> PolicyPhase:
    """The Phase column: Degraded over the transitions' own phases, the most pressing of them first."""
    phases = {t.phase for t in transitions}
    if degraded or TransitionPhase.BLOCKED in phases:
        return PolicyPhase.DEGRADED
    for phase, shown in ((TransitionPhase.PREEMPTING, PolicyPhase.PREEMPTING),
                         (TransitionPhase.DRAINING, PolicyPhase.DRAINING),
                         (TransitionPhase.RUNNING, PolicyPhase.TRANSITIONING),
                         (TransitionPhase.BORROWING, PolicyPhase.BORROWING)):
        if phase in phases:
            return shown
    return PolicyPhase.READY


def next_step_at(transitions: Sequence[TransitionStatus]) -> str | None:
    """The Next Step column: the earliest `nextStepAt` of the transitions still in progress (RFC 3339 UTC
    strings of one format, so the earliest is the least)."""
    due = [t.next_step_at for t in transitions if t.next_step_at and t.phase not in (
        TransitionPhase.COMPLETE, TransitionPhase.BLOCKED)]
    return min(due) if due else None


class HeldWorkload(_Status):
    """A pending experiment held (spec.active=false) so that Kueue, which orders it before a borrowing
    beneficiary, does not give it the quota freed for that beneficiary; released (spec.active=true) when
    the beneficiary holds quota, is gone, or after victimHold."""

    workload: str = Field(description="namespace/name of the held Workload.")
    beneficiary: str = Field(description="namespace/name of the workload the freed quota is for.")
    time: str = Field(description="When it was held (RFC 3339).")
    at: float | None = Field(default=None, description="When it was held (epoch seconds).")


class StormResponse(StrEnum):
    """What the controller does about an eviction storm (fairshare.control.storm_response)."""

    DAMP_WEIGHTS = "DampWeights"  # pushed weights moved back to weights under which the model sees no loop
    HOLD_PREEMPTOR = "HoldPreemptor"  # the preemptor deactivated (spec.active=false) for the cool-down
    REPORT = "Report"  # reported only (nothing the policy pushes or holds feeds it)


class StormRecord(_Status):
    """An eviction storm the controller saw (repeated preempt -> re-admit cycles across instants), and what
    it does about it until `untilAt`."""

    preemptor: str | None = Field(default=None, description="namespace/name of the workload the evictions "
                                  "are for (absent: they name none).")
    victims: list[str] = Field(default_factory=list, description="namespace/name of the evicted workloads.")
    evictions: int = Field(default=0, description="Evictions of the victims in the storm window when seen.")
    per_minute: float | None = Field(default=None, description="Their rate, evictions per minute.")
    sources: list[str] = Field(default_factory=list, description="Who evicted: kueue, policy.")
    time: str = Field(description="When the controller first saw it (RFC 3339).")
    at: float | None = Field(default=None, description="The same, epoch seconds.")
    response: StormResponse | None = Field(default=None, description="DampWeights, HoldPreemptor or Report.")
    until_at: float | None = Field(default=None, description="The response holds until then (epoch seconds); "
                                   "a held preemptor is released then.")
    message: str | None = Field(default=None, description="The storm and the response, in one line.")


class WeightPush(_Status):
    """The pacing of history-adjusted weights (spec.fairShare.pushWeightsToKueue): last push, a freeze."""

    time: str | None = Field(default=None, description="When weights were last pushed (RFC 3339).")
    at: float | None = Field(default=None, description="The same, epoch seconds.")
    checked_at: float | None = Field(default=None, description="When the history-adjusted weights were last "
                                     "compared with those in force (epoch seconds).")
    frozen_until_at: float | None = Field(default=None, description="No push before then (epoch seconds).")
    reason: str | None = Field(default=None, description="Why pushes are frozen.")


# ------------------------------------------------------------------------------------------- idle GPUs


class IdleWorkload(_Status):
    """An experiment whose GPUs were idle over spec.idle.window: warned, and reclaimed at `reclaimAt` if it is
    still idle then (fairshare.control.idle)."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-preserve-unknown-fields": True})

    workload: str = Field(description="namespace/name of the Workload.")
    team: str | None = Field(default=None, description="Its team (ClusterQueue).")
    idle_since: str | None = Field(default=None, description="Since when all its GPUs are below the "
                                   "threshold, as far as the telemetry shows (RFC 3339).")
    warned_at: str | None = Field(default=None, description="When it was warned (RFC 3339).")
    at: float | None = Field(default=None, description="The same, epoch seconds.")
    reclaim_at: str | None = Field(default=None, description="When it is reclaimed if still idle (RFC 3339): "
                                   "warning + grace + what its keep-idle annotation adds.")
    keep: str | None = Field(default=None, description="What its keep-idle annotation adds (within "
                             "spec.idle.keep.maxDuration), or why the annotation was not honoured.")
    dry_run: bool = Field(default=False, description="True if only reported.")
    reported: bool | None = Field(default=None, description="Dry run: its would-be reclamation was reported.")


class TelemetryStatus(_Status):
    """What the last reading of the GPUs' activity showed (spec.idle): workloads idle, busy and unknown."""

    source: str | None = Field(default=None, description="The Prometheus the activity is read from.")
    error: str | None = Field(default=None, description="Why the last reading failed (every workload's "
                              "activity is then unknown).")
    idle: int = Field(default=0, description="Experiments idle over the window.")
    busy: int = Field(default=0, description="Experiments with a busy sample in the window.")
    unknown: int = Field(default=0, description="Experiments whose activity is unknown (no series, stale "
                         "series, too few GPUs reporting, or the window not covered yet).")
    unknown_reasons: list[str] = Field(default_factory=list, description="Why, per workload (at most 20).")


# ------------------------------------------------------------------------------------------- forecasts


class ForecastPhase(StrEnum):
    """Where one forecast is (docs/operator.md, "Forecasts")."""

    COMPUTING = "Computing"  # the simulator runs in the background
    FORECAST = "Forecast"  # predictions recorded; the horizon has not passed yet
    SCORED = "Scored"  # the observed values are beside the predictions
    FAILED = "Failed"  # no forecast (message says why); never blocks the transition


class ForecastValue(_Status):
    """One metric: predicted over the simulated replications, observed in the ledger."""

    metric: str = Field(description="The metric, e.g. wait_p95[high-priority-business].")
    unit: str | None = Field(default=None, description="Its unit (h, %, GPU-h).")
    predicted: float | None = Field(default=None, description="Mean over the replications (null: the "
                                    "replications have no value, e.g. no workload of that class).")
    ci95: float | None = Field(default=None, description="Half-width of the 95% confidence interval of that "
                               "mean.")
    low: float | None = Field(default=None, description="Lower end of the 95% prediction interval of one "
                              "outcome (what one realization, the observed one, falls in).")
    high: float | None = Field(default=None, description="Upper end of that interval.")
    observed: float | None = Field(default=None, description="The value the ledger observed over the "
                                   "same window.")
    within_ci: bool | None = Field(default=None, description="observed within predicted ± ci95.")
    within_interval: bool | None = Field(default=None, description="observed within [low, high].")
    error_ratio: float | None = Field(default=None, description="|observed - predicted| / max(|predicted|, "
                                      "ci95) (0 = exact).")


class Forecast(_Status):
    """The forecast made when a transition started, and its score once its horizon passed."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-preserve-unknown-fields": True})

    policy_generation: int | None = Field(default=None, description="The generation that started the "
                                          "transition(s).")
    phase: ForecastPhase | None = Field(default=None, description="Computing, Forecast, Scored or Failed.")
    started_at: str | None = Field(default=None, description="Start of the window: the transition's start "
                                   "(RFC 3339).")
    at: float | None = Field(default=None, description="The same, epoch seconds.")
    horizon_end: str | None = Field(default=None, description="End of the window (RFC 3339).")
    horizon_end_at: float | None = Field(default=None, description="The same, epoch seconds.")
    replications: int | None = Field(default=None, description="Replications simulated.")
    resource: str | None = Field(default=None, description="The resource the GPU-hours count (the "
                                 "simulator's primary resource).")
    computed_seconds: float | None = Field(default=None, description="Wall time the forecast took.")
    scored_at: str | None = Field(default=None, description="When the observed values were read (RFC 3339).")
    message: str | None = Field(default=None, description="Why it failed, or notes of the simulation.")
    values: list[ForecastValue] = Field(default_factory=list, description="One per metric.")


# ------------------------------------------------------------------------------------------- reports


class PendingReport(_Status):
    """A fact about a ClusterQueue write (a transition's start, step, cancellation or end), recorded with the
    status before the write and reported (Event, audit row, log line) once the write is in place: never
    before (an Event says a step happened only when it did), never lost to a crash in between (the next
    reconcile finds it here). Dropped if the write is refused: the transition is then decided again."""

    fact: str = Field(description="The fact's identity (its Events and audit row are named after it).")
    action: str = Field(description="The audit action (transition-start, transition-step, ...).")
    kind: str = Field(description="Kind of the object the fact is about.")
    name: str = Field(description="Name of that object.")
    what: str = Field(description="What happened.")
    why: str = Field(description="Why.")
    team: str | None = Field(default=None, description="The team it concerns.")
    cluster_queue: str = Field(description="The ClusterQueue whose write it reports.")
    generation: int | None = Field(default=None, description="The policy generation that decided it.")
    also_on_policy: bool = Field(default=False, description="Reported on the QuotaPolicy too.")


class QuotaPolicyStatus(_Status):
    """Observed state, written by the operator."""

    observed_generation: int | None = Field(default=None, description="Generation last reconciled.")
    teams: int | None = Field(default=None, description="Number of teams (printer column).")
    active_transitions: int | None = Field(default=None, description="Transitions not yet complete "
                                           "(printer column).")
    phase: PolicyPhase | None = Field(default=None, description="Invalid, Degraded, Preempting, Draining, "
                                      "Transitioning, Borrowing or Ready: the most pressing state (printer "
                                      "column).")
    next_step_at: str | None = Field(default=None, description="When the next quota step of a transition "
                                     "in progress is due (RFC 3339).")
    next_step: str | None = Field(default=None, description="What the most pressing transition waits for "
                                  "and when (printer column NEXT STEP): its next step and its time, the "
                                  "running work a step waits for (drain) and its deadline, the evictions "
                                  "past a deadline, or the borrowed quota kept until another team needs "
                                  "it.")
    conditions: list[Condition] = Field(
        default_factory=list, description="Ready, Transitioning, Degraded, ...",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]})
    transitions: list[TransitionStatus] = Field(
        default_factory=list, description="Plan and progress per team, flavor and resource.")
    history: dict[str, object] | None = Field(
        default=None, description="Serialized usage history graph (opaque; schema-versioned by the core).",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True, "type": "object"})
    last_preemptions: list[PreemptionRecord] = Field(default_factory=list,
                                                     description="Most recent eviction requests.")
    blocked_preemptions: list[BlockedPreemption] = Field(
        default_factory=list, description="Waiting protected workloads no experiment preemption can help.")
    held_workloads: list[HeldWorkload] = Field(
        default_factory=list, description="Pending experiments held (spec.active=false) while the quota "
        "freed for a beneficiary would otherwise go to them (spec.preemption.holdCompetingExperiments).")
    stranded_quota: list[StrandedQuota] = Field(
        default_factory=list, description="Quota the policy's change hands to no team (capacity left idle).")
    pushed_weights: dict[str, str] | None = Field(
        default=None, description="History-adjusted fairSharing weights written to the ClusterQueues, by "
        "team (spec.fairShare.pushWeightsToKueue).")
    weight_push: WeightPush | None = Field(
        default=None, description="When weights were last pushed, and a freeze of the pushes (a storm, or a "
        "push the model says would start a preemption loop).")
    storms: list[StormRecord] = Field(
        default_factory=list, description="Eviction storms seen (repeated preempt -> re-admit cycles) and "
        "the response in force.")
    budgets: list[BudgetStatus] = Field(
        default_factory=list, description="Each budget in its current period: used, limit, thresholds "
        "reached, actions in force (spec.budgets).")
    forecasts: list[Forecast] = Field(
        default_factory=list, description="The forecasts of the latest transitions (spec.forecasts), oldest "
        "first, with the values observed once their horizon passed.")
    idle_workloads: list[IdleWorkload] = Field(
        default_factory=list, description="Experiments warned for idle GPUs (spec.idle), until they are busy "
        "again, reclaimed or gone.")
    telemetry: TelemetryStatus | None = Field(
        default=None, description="The GPUs' activity as last read (spec.idle).")
    pending_reports: list[PendingReport] = Field(
        default_factory=list, description="Facts of ClusterQueue writes not reported yet: reported once the "
        "write is in place (queue_manager/reconcile.py).")


def read_status(raw: object) -> tuple[QuotaPolicyStatus, list[str]]:
    """The stored status, read leniently: an entry this version cannot read (a newer operator's, or a
    damaged one) is left out with a warning instead of making the whole status unreadable. Returns the
    status and the warnings."""
    if not isinstance(raw, dict):
        problem = [] if raw is None else [f"status is not an object: {type(raw).__name__}"]
        return QuotaPolicyStatus(), problem
    try:
        return QuotaPolicyStatus.model_validate(raw), []
    except ValidationError:
        pass
    warnings: list[str] = []
    kept: dict[str, object] = {}
    for key, value in raw.items():
        try:
            QuotaPolicyStatus.model_validate({key: value})
        except ValidationError as err:
            if isinstance(value, list):
                good = []
                for i, item in enumerate(value):
                    try:
                        QuotaPolicyStatus.model_validate({key: [item]})
                    except ValidationError as item_err:
                        warnings.append(f"status.{key}[{i}] dropped: {item_err.errors()[0]['msg']}")
                    else:
                        good.append(item)
                kept[key] = good
            else:
                warnings.append(f"status.{key} dropped: {err.errors()[0]['msg']}")
            continue
        kept[key] = value
    return QuotaPolicyStatus.model_validate(kept), warnings
