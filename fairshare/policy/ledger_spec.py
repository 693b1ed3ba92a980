"""The accounting parts of a QuotaPolicy spec: `spec.ledger` (retention, the workload labels accounted) and
`spec.budgets[]` (docs/ledger.md, "Budgets"). Pydantic models like the rest of the spec (fairshare/policy/
model.py imports them); the rules that evaluate budgets are in fairshare/control/budgets.py, the cross-field
checks in fairshare/policy/semantics.py.

A budget counts what a team (a ClusterQueue) or a project / cost-center label consumed in its period, in
resource-hours of one resource (GPU-hours by default) or in money (the flavors' pricePerUnitHour), and at
each threshold does one thing: `alert` (Event, condition, metric), `shrink` (borrowingLimit 0, then the
nominal quota down to the team's transition floor through the ordinary gradual transition), `deprioritize`
(borrowingLimit 0: the team's work is no longer admitted on borrowed quota) or `hold` (Kueue's
`stopPolicy: Hold` on the team's LocalQueues: nothing new is admitted, running work continues). What a
threshold does lasts while the consumption of the current period is at or above it: a calendar period
restores at its boundary, a rolling window as the usage it counted leaves it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from .names import DNS_LABEL, RESOURCE_NAME, LabelKey, LabelValue
from .units import Duration, Integer, Quantity

MAX_BUDGETS = 32
# The shortest rolling window: a budget is decided again every 1/60 of its window, at most once a second
# (fairshare.control.budgets); a window of seconds would only make wake-ups (issue 33). A minute, which the
# compressed-time tests use.
MIN_ROLLING = "1m"
MAX_THRESHOLDS = 8
MAX_LEDGER_LABELS = 16

CURRENCY = r"^[A-Z]{3}$"  # an ISO 4217 alphabetic code

BudgetAction = Literal["alert", "shrink", "deprioritize", "hold"]
ENFORCING_ACTIONS: tuple[str, ...] = ("shrink", "deprioritize", "hold")


class _Spec(BaseModel):
    """The spec's conventions (fairshare.policy.model._Spec, which imports this module): camelCase in YAML,
    unknown fields are an error, frozen."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True,
                              strict=True)


class LedgerSettings(_Spec):
    """What the ledger keeps (docs/ledger.md)."""

    retention: Duration = Field(
        default="180d", description="How long workload lives, quota history and audit records are kept "
        "after they end; older rows are pruned.")
    labels: list[LabelKey] = Field(
        default_factory=list, max_length=MAX_LEDGER_LABELS,
        description="Workload labels to record besides project, team and cost-center (which are always "
        "recorded).", json_schema_extra={"x-kubernetes-list-type": "set"})
    currency: Annotated[str, Field(pattern=CURRENCY, min_length=3, max_length=3)] = Field(
        default="USD", description="ISO 4217 code of the currency the flavors' pricePerUnitHour and cost "
        "budgets are in (e.g. USD, EUR); every cost the ledger reports carries it.")


class BudgetSelector(_Spec):
    """Whose consumption a budget counts: every field given must match (at least one)."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "has(self.team) || has(self.project) || has(self.costCenter)",
        "message": "a selector needs team, project or costCenter"}]})

    team: Annotated[str, Field(pattern=DNS_LABEL, max_length=63)] | None = Field(
        default=None, description="A team of spec.teams (its ClusterQueue). Needed by the shrink, "
        "deprioritize and hold actions, which act on it.")
    project: LabelValue | None = Field(default=None, description="Value of the workloads' project label.")
    cost_center: LabelValue | None = Field(default=None,
                                           description="Value of the workloads' cost-center label.")


class BudgetPeriod(_Spec):
    """The period a budget counts over: a calendar month or week (from its first day at 00:00 in timeZone;
    weeks start on Monday), or a rolling window ending now."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "has(self.calendar) != has(self.rolling)",
        "message": "give exactly one of calendar and rolling"}, {
        # fairshare.policy.semantics (MIN_ROLLING; a form with weeks or days is checked there only).
        "rule": f"!has(self.rolling) || self.rolling.matches('[wd]') || "
                f"duration(self.rolling) >= duration('{MIN_ROLLING}')",
        "message": f"a rolling window must be at least {MIN_ROLLING}", "fieldPath": ".rolling"}]})

    calendar: Literal["Month", "Week"] | None = Field(default=None,
                                                      description="Month or Week: resets at its start.")
    rolling: Duration | None = Field(default=None, description="A window ending now, e.g. 30d or 168h.")
    time_zone: Annotated[str, Field(min_length=1, max_length=64)] = Field(
        default="UTC", description="IANA time zone of the calendar (e.g. Europe/Paris).")


class BudgetLimit(_Spec):
    """The limit: resource-hours of one resource, or money (flavors[].pricePerUnitHour)."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "has(self.gpuHours) != has(self.cost)", "message": "give exactly one of gpuHours and cost"}]})

    gpu_hours: Quantity | None = Field(
        default=None, description="Hours of `resource`'s unit (GPU-hours by default; core-hours of cpu, "
        "GiB-hours of memory) held by the selected workloads in the period, useful and lost.")
    resource: Annotated[str, Field(pattern=RESOURCE_NAME, max_length=63)] = Field(
        default="nvidia.com/gpu", description="The resource gpuHours counts.")
    cost: Quantity | None = Field(default=None, description="Money in spec.ledger.currency: every resource "
                                  "held, priced by its flavor's pricePerUnitHour.")


class BudgetThreshold(_Spec):
    """At `percent` of the limit, do `action` (for as long as the consumption stays at or above it)."""

    percent: Integer = Field(ge=1, le=1000, description="Percent of the limit, e.g. 80 or 100.")
    action: BudgetAction = Field(description="alert (Event, condition, qm_budget_used_ratio), shrink "
                                 "(borrowingLimit 0, then nominal quota down to the floor by the team's "
                                 "transition rules), deprioritize (borrowingLimit 0) or hold (stopPolicy "
                                 "Hold on the team's LocalQueues).")


class Budget(_Spec):
    """A budget of a team or label set, over a period, with thresholds and what each does."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": [{
        "rule": "has(self.selector.team) || self.thresholds.all(x, x.action == 'alert')",
        "message": "shrink, deprioritize and hold act on a team: give selector.team",
        "fieldPath": ".thresholds"}]})

    name: Annotated[str, Field(pattern=DNS_LABEL, min_length=1, max_length=63)] = Field(
        description="Budget name (unique in the policy).")
    selector: BudgetSelector = Field(description="Whose consumption is counted.")
    period: BudgetPeriod = Field(description="Over which period.")
    limit: BudgetLimit = Field(description="The limit, in GPU-hours or money.")
    thresholds: list[BudgetThreshold] = Field(
        min_length=1, max_length=MAX_THRESHOLDS, description="What happens at which share of the limit.")
    dry_run: bool = Field(default=False, description="If true, thresholds are only reported (Events, "
                          "metrics, status), never enforced.")
