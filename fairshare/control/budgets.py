"""Budgets (`spec.budgets[]`, docs/ledger.md "Budgets"): the period each budget counts over, what its
thresholds make due, and the quota overrides, held queues and records that follow. Pure: the consumption
comes in with the observation (`Observed.budget_usage`: the operator measures it in the ledger, the
simulator with `fairshare.control.budget_meter`), both over the period `period_at` defines here, so that
the figure users see (status, `qm budget status`, `qm_budget_used_ratio`) and the enforcement are one
definition (Slurm's rolling decay against a calendar reset makes them disagree; here they cannot).

Rules (each once, here):
- The period: a calendar month or week (weeks start on Monday) from its first day at 00:00 in the budget's
  time zone, up to the next one; or a rolling window ending now.
- A consumption measured in an earlier calendar period than now's is no measurement of this one (the
  period reset): nothing is due until the shell measures the new period.
- A threshold is due while the consumption of the current period is at or above it (percent of the
  limit). A calendar period therefore restores at its boundary, a rolling window as the usage it counted
  leaves it. Each threshold reached is reported once per time it is reached (`BudgetCrossed`), each
  enforcement that ends once (`BudgetLifted`).
- What a due threshold does to its team (never in dry-run):
  * alert: nothing to the cluster (the record, the Event, the condition and the metric);
  * shrink: borrowingLimit 0 (Kueue takes no new borrowing; what runs keeps running: Kueue never preempts
    on a quota change), and the nominal quota down to the team's transition floor through the ordinary
    transition (`fairshare.control.transitions`: the team's duration, steps, drain and deadline rules);
    a higher target again when the threshold is no longer due, so the quota comes back the way any
    growth does (at once unless rampUp);
  * deprioritize: borrowingLimit 0 (the team's experiments are no longer admitted on borrowed quota);
  * hold: Kueue's `stopPolicy: Hold` on the team's LocalQueues (apis/kueue/v1beta2/localqueue_types.go:
    "Hold" stops new admissions and lets admitted workloads run; "HoldAndDrain" would evict them).
- A rolling budget with a threshold reached asks to be decided again every 1/60 of its window (its
  consumption falls as time passes, with no event to say so); a calendar one at its period's end.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from decimal import ROUND_HALF_EVEN, Decimal
from zoneinfo import ZoneInfo

from fairshare.models import QuotaKey, ResourceQuota
from fairshare.policy import QuotaPolicy, transition_settings
from fairshare.policy.ledger_spec import ENFORCING_ACTIONS, Budget
from fairshare.policy.owners import local_queue_keys
from fairshare.policy.status import BudgetCrossing, BudgetStatus
from fairshare.policy.units import duration_seconds, to_milli
from fairshare.resource_units import unit_of
from fairshare.timestamps import rfc3339

from .actions import Action, BudgetCrossed, BudgetLifted, HoldQueues
from .observed import BudgetUsage

RECHECK_FRACTION = 60  # a rolling window is re-decided every 1/60 of it while a threshold is reached
MIN_RECHECK_S = 1.0  # and at most once a second, whatever its window (spec: a rolling window is >= 1m)
_CALENDAR_S = {"Week": 7 * 86400.0, "Month": 28 * 86400.0}  # the shortest period of each calendar
_SHOWN = Decimal("0.01")


@dataclass(frozen=True, slots=True)
class Threshold:
    percent: int
    action: str  # alert | shrink | deprioritize | hold


@dataclass(frozen=True, slots=True)
class BudgetRule:
    """One budget, resolved: the limit in its unit (resource-hours of `resource`, or money when `resource`
    is None), the period and the thresholds (sorted)."""

    name: str
    team: str | None
    project: str | None
    cost_center: str | None
    calendar: str | None  # "Month" | "Week"; None: rolling
    rolling_s: float | None
    zone: ZoneInfo
    resource: str | None  # None: a cost budget
    limit: Decimal
    thresholds: tuple[Threshold, ...]
    dry_run: bool
    currency: str = "USD"  # of a cost budget: the policy's spec.ledger.currency

    @property
    def unit(self) -> str:
        """What the limit counts, as a person reads it: "GPU-hours", "core-hours", "GiB-hours" of the
        resource (fairshare/resource_units.py), or the currency of a cost budget ("USD")."""
        return self.currency if self.resource is None else unit_of(self.resource).hours_long

    @classmethod
    def of(cls, b: Budget, currency: str = "USD") -> BudgetRule:
        limit_text = b.limit.cost if b.limit.cost is not None else b.limit.gpu_hours
        # Quantities are exact in milli-units; the limit is a count of hours or of money, kept exact.
        limit = Decimal(to_milli(limit_text or "0")) / 1000
        return cls(
            name=b.name, team=b.selector.team, project=b.selector.project, cost_center=b.selector.cost_center,
            calendar=b.period.calendar,
            rolling_s=None if b.period.rolling is None else float(duration_seconds(b.period.rolling)),
            zone=ZoneInfo(b.period.time_zone),
            resource=None if b.limit.cost is not None else b.limit.resource, limit=limit,
            thresholds=tuple(sorted((Threshold(t.percent, t.action) for t in b.thresholds),
                                    key=lambda x: (x.percent, x.action))),
            dry_run=b.dry_run, currency=currency)

    def selects(self, team: str, labels: Mapping[str, str], *, project_label: str = "project",
                cost_center_label: str = "cost-center") -> bool:
        """Whether a workload of ClusterQueue `team` with these labels counts (every given field matches)."""
        if self.team is not None and team != self.team:
            return False
        if self.project is not None and labels.get(project_label) != self.project:
            return False
        return self.cost_center is None or labels.get(cost_center_label) == self.cost_center


def recheck_seconds(rolling_s: float) -> float:
    """How long a rolling budget with a threshold reached waits before it is decided again."""
    return max(MIN_RECHECK_S, rolling_s / RECHECK_FRACTION)


def wakeups(policy: QuotaPolicy, seconds: float) -> float:
    """At most how many times the policy's budgets ask the controller to decide again (WakeAt) over
    `seconds`: every recheck of a rolling budget (as if a threshold were reached all along) and every end of
    a calendar period. What the simulator's guards count before a run (simulations/guards.py)."""
    total = 0.0
    for rule in budget_rules(policy):
        step = recheck_seconds(rule.rolling_s) if rule.rolling_s is not None else \
            _CALENDAR_S[rule.calendar or "Week"]
        total += seconds / step + 1.0
    return total


def budget_rules(policy: QuotaPolicy) -> tuple[BudgetRule, ...]:
    """The policy's budgets, resolved (in spec order)."""
    return tuple(BudgetRule.of(b, policy.spec.ledger.currency) for b in policy.spec.budgets)


def hold_teams(rules: Sequence[BudgetRule]) -> frozenset[str]:
    """The teams a budget's hold threshold can act on (not dry-run): their LocalQueues carry a stopPolicy,
    Hold while a hold is due and None otherwise (fairshare.control.objects)."""
    return frozenset(r.team for r in rules if r.team is not None and not r.dry_run
                     and any(t.action == "hold" for t in r.thresholds))


# --------------------------------------------------------------------------------------------- periods


@dataclass(frozen=True, slots=True)
class Period:
    """[start, end) in epoch seconds; `end` None for a rolling window (it moves with now)."""

    start: float
    end: float | None


def period_at(rule: BudgetRule, t: float) -> Period:
    """The period of `rule` that contains `t` (the one definition the gauge and the enforcement share)."""
    if rule.rolling_s is not None:
        return Period(t - rule.rolling_s, None)
    local = datetime.fromtimestamp(t, rule.zone)
    if rule.calendar == "Month":
        first = local.date().replace(day=1)
        after = first.replace(year=first.year + 1, month=1) if first.month == 12 else \
            first.replace(month=first.month + 1)
    else:  # "Week": ISO weeks start on Monday
        first = local.date() - timedelta(days=local.weekday())
        after = first + timedelta(days=7)
    # Local midnight of a date, whatever the UTC offset that day (daylight saving changes it).
    start = datetime.combine(first, time(0), rule.zone).timestamp()
    end = datetime.combine(after, time(0), rule.zone).timestamp()
    return Period(start, end)


def consumed(rule: BudgetRule, usage: BudgetUsage | None, now: float) -> Decimal | None:
    """The consumption of the current period, if the observation measured this period."""
    if usage is None:
        return None
    if rule.calendar is not None and period_at(rule, usage.measured_at).start != period_at(rule, now).start:
        return None  # measured in the previous period: this one starts afresh
    return usage.consumed


# --------------------------------------------------------------------------------------------- outcome


@dataclass
class BudgetOutcome:
    """What the budgets make due now: records for status, actions, quota targets that replace the spec's,
    the teams whose LocalQueues are held, and when to decide again."""

    records: list[BudgetStatus] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)
    targets: dict[QuotaKey, ResourceQuota] = field(default_factory=dict)
    held_teams: frozenset[str] = frozenset()
    wake: float | None = None

    def _wake(self, at: float | None) -> None:
        if at is not None and (self.wake is None or at < self.wake):
            self.wake = at


def _shown(value: Decimal) -> str:
    return str(value.quantize(_SHOWN, rounding=ROUND_HALF_EVEN))


def _local_queues(policy: QuotaPolicy, team: str) -> tuple[str, ...]:
    for t in policy.spec.teams:
        if t.name == team:
            return tuple(sorted(local_queue_keys(t)))
    return ()


def _enforced_targets(policy: QuotaPolicy, team: str, actions: frozenset[str],
                      targets: Mapping[QuotaKey, ResourceQuota]) -> dict[QuotaKey, ResourceQuota]:
    """The team's quota targets while `actions` (shrink and/or deprioritize) are in force."""
    spec_team = next((t for t in policy.spec.teams if t.name == team), None)
    if spec_team is None:
        return {}
    cohort = spec_team.cohort is not None
    settings = transition_settings(policy, team)
    out: dict[QuotaKey, ResourceQuota] = {}
    for key in sorted(k for k in targets if k.team == team):
        q = targets[key]
        nominal = q.nominal
        if "shrink" in actions:
            nominal = min(nominal, settings.floor_for(key.resource))
        # Kueue: borrowingLimit needs a cohort (ClusterQueue validation); 0 = borrow nothing more.
        borrowing = 0 if cohort else q.borrowing_limit
        # Kueue: lendingLimit <= nominalQuota.
        lending = None if q.lending_limit is None else min(q.lending_limit, nominal)
        out[key] = ResourceQuota(nominal, borrowing, lending)
    return out


def evaluate(policy: QuotaPolicy, rules: Sequence[BudgetRule], targets: Mapping[QuotaKey, ResourceQuota],
             usage: Mapping[str, BudgetUsage], previous: Sequence[BudgetStatus], now: float,
             held_now: frozenset[str] = frozenset()) -> BudgetOutcome:
    """Every budget at `now`. `targets`: the spec's quotas (milli-units); `usage`: the consumption the shell
    measured per budget name; `previous`: the records of the last decision (status.budgets); `held_now`:
    the teams whose LocalQueues are held in the cluster now (Observed.held_queues)."""
    out = BudgetOutcome()
    before = {r.name: r for r in previous}
    enforcing_by_team: dict[str, set[str]] = {}
    for rule in rules:
        period = period_at(rule, now)
        prev = before.get(rule.name)
        same_period = prev is not None and (rule.calendar is None or prev.period_start_at == period.start)
        used = consumed(rule, usage.get(rule.name), now)
        if used is not None:
            percent = used * 100 / rule.limit
            reached = [t for t in rule.thresholds if percent >= t.percent]
        else:  # not measured (yet) in this period: keep what a measurement of it said, else nothing
            reached = [t for t in rule.thresholds if same_period and prev is not None and any(
                (c.percent, c.action) == (t.percent, t.action) for c in prev.crossed)]
        had = {(c.percent, c.action): c for c in (prev.crossed if prev is not None and same_period else [])}
        crossed: list[BudgetCrossing] = []
        for t in reached:
            old = had.get((t.percent, t.action))
            if old is not None:
                crossed.append(old)
                continue
            crossed.append(BudgetCrossing(percent=t.percent, action=t.action, at=rfc3339(now)))
            out.actions.append(_crossed(rule, t, used))
        enforcing = sorted({t.action for t in reached if t.action in ENFORCING_ACTIONS}) \
            if not rule.dry_run else []
        for action in sorted(set(prev.enforcing if prev is not None else []) - set(enforcing)):
            why = "a new period started" if not same_period else \
                f"consumption fell below the {action} threshold"
            out.actions.append(BudgetLifted(rule.name, rule.team, action, why))
        if enforcing and rule.team is not None:
            enforcing_by_team.setdefault(rule.team, set()).update(enforcing)
        if reached:
            if rule.calendar is not None:
                out._wake(period.end)
            elif rule.rolling_s is not None:
                out._wake(now + recheck_seconds(rule.rolling_s))
        elif rule.calendar is not None and used is not None:
            out._wake(period.end)
        out.records.append(BudgetStatus(
            name=rule.name, team=rule.team, period_start=rfc3339(period.start), period_start_at=period.start,
            period_end=None if period.end is None else rfc3339(period.end),
            used=None if used is None else _shown(used), limit=_shown(rule.limit), unit=rule.unit,
            used_ratio=None if used is None else float(used / rule.limit),
            measured_at=None if used is None else rfc3339(usage[rule.name].measured_at),
            crossed=crossed, enforcing=enforcing, dry_run=rule.dry_run))
    held: set[str] = set()
    for team in sorted(enforcing_by_team):
        actions = frozenset(enforcing_by_team[team])
        if actions & {"shrink", "deprioritize"}:
            out.targets.update(_enforced_targets(policy, team, actions, targets))
        if "hold" in actions:
            held.add(team)
    out.held_teams = frozenset(held)
    # A hold is an action whenever the cluster differs from what is due, for the teams a hold can act on
    # and those the last decision held: so a hold recorded in status but not in place (a crash in between)
    # is put in place, and one lifted is lifted.
    was_held = {r.team for r in previous if r.team is not None and "hold" in r.enforcing}
    for team in sorted(hold_teams(rules) | was_held):
        on = team in held
        if on != (team in held_now):
            out.actions.append(HoldQueues(team, _local_queues(policy, team), on,
                                          "a budget's hold threshold is reached" if on else "no budget holds "
                                          "the team's work any more"))
    return out


def _crossed(rule: BudgetRule, t: Threshold, used: Decimal | None) -> BudgetCrossed:
    shown = "?" if used is None else _shown(used)
    what = {"alert": "alert", "shrink": "shrink the team's quota to its floor (gradually)",
            "deprioritize": "no more borrowing by the team", "hold": "hold the team's new work"}[t.action]
    dry = " (dry-run: reported only)" if rule.dry_run and t.action != "alert" else ""
    why = (f"budget {rule.name}: {shown} of {_shown(rule.limit)} {rule.unit} used in the period "
           f"({t.percent}% threshold): {what}{dry}")
    return BudgetCrossed(rule.name, rule.team, t.percent, t.action, shown, _shown(rule.limit), rule.unit,
                         rule.dry_run, why)
