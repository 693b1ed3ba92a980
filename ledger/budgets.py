"""Budget consumption measured in the ledger (the operator's `Observed.budget_usage`): for each budget, what
its selection held in its current period, over the period `fairshare.control.budgets.period_at` defines
(the one definition the controller enforces and the gauge shows), up to ``now``.

- A GPU-hours budget counts the resource-hours of its resource held in the period: useful, lost, and what
  is still held (counted up to now), on every flavor.
- A cost budget counts the money of every resource held (each segment at the price in force when it was
  admitted; an unpriced flavor costs nothing), in the budget's currency (the policy's spec.ledger.currency).
- The selection: the budget's team (the ClusterQueue of the workload's admission), project and
  cost-center labels, as the ledger recorded them when each attempt began.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from fairshare.control.budgets import BudgetRule, period_at
from fairshare.control.observed import BudgetUsage
from fairshare.resource_units import unit_of

from .ledger import Ledger
from .queries import Dim, UsageQuery
from .records import to_millis


def query_of(rule: BudgetRule, now: float) -> UsageQuery:
    """The usage query of a budget's current period up to ``now``, split by resource."""
    period = period_at(rule, now)
    filters: list[tuple[Dim, str]] = []
    if rule.team is not None:
        filters.append((Dim.TEAM, rule.team))
    if rule.project is not None:
        filters.append((Dim.PROJECT, rule.project))
    if rule.cost_center is not None:
        filters.append((Dim.COST_CENTER, rule.cost_center))
    if rule.resource is not None:
        filters.append((Dim.RESOURCE, rule.resource))
    else:  # money in the budget's currency (a price in another currency is not counted as this one)
        filters.append((Dim.CURRENCY, rule.currency))
    return UsageQuery(to_millis(period.start), to_millis(now), to_millis(now), (Dim.RESOURCE,),
                      tuple(filters))


def measure(ledger: Ledger, rules: Sequence[BudgetRule], now: float) -> dict[str, BudgetUsage]:
    """Each budget's consumption now, in its unit (resource-hours, or money). Raises LedgerUnavailable
    when the database does not answer (the caller keeps its last measurement)."""
    out: dict[str, BudgetUsage] = {}
    for rule in rules:
        rows = ledger.usage(query_of(rule, now))
        if rule.resource is not None:
            # In hours of the resource's unit (GiB-hours of memory, not byte-hours).
            consumed = sum((r.held_seconds for r in rows), Decimal(0)) / (3600 * unit_of(rule.resource).base)
        else:
            consumed = sum((r.cost for r in rows), Decimal(0))
        out[rule.name] = BudgetUsage(now, consumed)
    return out
