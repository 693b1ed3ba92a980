"""A budget meter for a shell without a ledger (the simulator): what each budget's selection consumed in
its current period (`fairshare.control.budgets.period_at`), fed with the workloads' quota as they start and
stop holding it. The operator measures the same thing in the ledger (`ledger.budgets`); both count what
an admitted workload holds (status.admission's usage) for as long as it holds it, useful or lost.

Exact: time is kept as the shells give it (float seconds, converted exactly to Fractions) and quantities
in milli-units; the consumption is rounded half-even to 1e-9 of the budget's unit only when it is
reported. A calendar budget keeps one running sum per period, a rolling one the closed holdings that
still overlap its window.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction

from fairshare.models import FlavorResource, WorkloadKey
from fairshare.policy import QuotaPolicy
from fairshare.policy.owners import project_label as policy_project_label
from fairshare.quantity import exact_quantity
from fairshare.resource_units import unit_of

from .budgets import BudgetRule, budget_rules, period_at
from .observed import BudgetUsage

_QUANTUM = Decimal("1e-9")
_MILLI_SECONDS_PER_UNIT_HOUR = 1000 * 3600


def prices_of(policy: QuotaPolicy) -> dict[FlavorResource, Fraction]:
    """flavors[].pricePerUnitHour, exact."""
    return {FlavorResource(f.name, r): exact_quantity(p) for f in policy.spec.flavors
            for r, p in sorted(f.price_per_unit_hour.items())}


def rate_of(rule: BudgetRule, usage: Mapping[FlavorResource, int],
            prices: Mapping[FlavorResource, Fraction]) -> Fraction:
    """What holding `usage` (milli-units of each resource's base unit: bytes, cores) costs the budget per
    second, in its unit: hours of the resource's unit (a GiB is 2^30 bytes), or money (prices are per
    unit-hour of that unit; fairshare/resource_units.py)."""
    if rule.resource is not None:
        milli = sum(q for fr, q in usage.items() if fr.resource == rule.resource)
        return Fraction(milli, _MILLI_SECONDS_PER_UNIT_HOUR * unit_of(rule.resource).base)
    money = sum((Fraction(q, unit_of(fr.resource).base) * prices[fr]
                 for fr, q in usage.items() if fr in prices), Fraction(0))
    return money / _MILLI_SECONDS_PER_UNIT_HOUR


@dataclass
class _Account:
    rule: BudgetRule
    open: dict[WorkloadKey, tuple[Fraction, Fraction]] = field(default_factory=dict)  # key -> (start, rate)
    closed: deque[tuple[Fraction, Fraction, Fraction]] = field(default_factory=deque)  # rolling: (s, e, rate)
    period_start: float | None = None  # calendar: the period `closed_sum` counts
    closed_sum: Fraction = Fraction(0)

    def stop(self, key: WorkloadKey, t: Fraction) -> None:
        held = self.open.pop(key, None)
        if held is None:
            return
        start, rate = held
        if self.rule.rolling_s is not None:
            self.closed.append((start, t, rate))
            return
        period = Fraction(period_at(self.rule, float(t)).start)
        if self.period_start is None or float(period) != self.period_start:
            self.period_start, self.closed_sum = float(period), Fraction(0)
        self.closed_sum += rate * max(Fraction(0), t - max(start, period))

    def consumed(self, now: Fraction) -> Fraction:
        since = Fraction(period_at(self.rule, float(now)).start)
        total = Fraction(0)
        if self.rule.rolling_s is not None:
            while self.closed and self.closed[0][1] <= since:  # ended before the window: gone for good
                self.closed.popleft()
            total += sum((r * (e - max(s, since)) for s, e, r in self.closed if e > since), Fraction(0))
        elif self.period_start == float(since):
            total += self.closed_sum
        total += sum((r * max(Fraction(0), now - max(s, since)) for s, r in self.open.values()), Fraction(0))
        return total


class BudgetMeter:
    """Feed it `start`/`stop` as workloads take and release quota; `usage(now)` is `Observed.budget_usage`."""

    def __init__(self, policy: QuotaPolicy, *, project_label: str | None = None,
                 cost_center_label: str = "cost-center") -> None:
        self.prices = prices_of(policy)
        # The policy's project label (spec.fairShare.projectLabel), as the ledger reads it.
        self.project_label = project_label if project_label is not None else policy_project_label(policy)
        self.cost_center_label = cost_center_label
        self.accounts = [_Account(rule) for rule in budget_rules(policy)]
        # What is held now (for a budget added by a later policy generation): key -> team, labels, usage, t
        self.holding: dict[WorkloadKey, tuple[str, dict[str, str], dict[FlavorResource, int], float]] = {}

    @classmethod
    def follow(cls, old: BudgetMeter, policy: QuotaPolicy) -> BudgetMeter:
        """A meter for a new generation of the policy, keeping what `old` counted for budgets of the same
        name and definition. A budget that is new or changed counts what is held now (from when it was
        taken) and what is released from now on; what was released before is not known to it."""
        new = cls(policy, project_label=old.project_label, cost_center_label=old.cost_center_label)
        new.holding = dict(old.holding)
        before = {a.rule.name: a for a in old.accounts}
        for i, account in enumerate(new.accounts):
            kept = before.get(account.rule.name)
            if kept is not None and kept.rule == account.rule and new.prices == old.prices:
                new.accounts[i] = kept
                continue
            for key, (team, labels, usage, t) in sorted(new.holding.items()):
                new._open(account, key, team, labels, usage, t)
        return new

    @property
    def empty(self) -> bool:
        return not self.accounts

    def start(self, key: WorkloadKey, team: str, labels: Mapping[str, str],
              usage: Mapping[FlavorResource, int], t: float) -> None:
        """The workload `key` of ClusterQueue `team` holds `usage` from `t` on."""
        self.holding[key] = (team, dict(labels), dict(usage), t)
        for account in self.accounts:
            self._open(account, key, team, labels, usage, t)

    def _open(self, account: _Account, key: WorkloadKey, team: str, labels: Mapping[str, str],
              usage: Mapping[FlavorResource, int], t: float) -> None:
        rule = account.rule
        if rule.selects(team, labels, project_label=self.project_label,
                        cost_center_label=self.cost_center_label):
            rate = rate_of(rule, usage, self.prices)
            if rate:
                account.open[key] = (Fraction(t), rate)

    def stop(self, key: WorkloadKey, t: float) -> None:
        self.holding.pop(key, None)
        at = Fraction(t)
        for account in self.accounts:
            account.stop(key, at)

    def usage(self, now: float) -> dict[str, BudgetUsage]:
        at = Fraction(now)
        out: dict[str, BudgetUsage] = {}
        for account in self.accounts:
            value = account.consumed(at)
            decimal = Decimal(value.numerator) / Decimal(value.denominator)
            out[account.rule.name] = BudgetUsage(now, decimal.quantize(_QUANTUM, rounding=ROUND_HALF_EVEN))
        return out
