"""Prometheus counters of the usage that became final (an attempt that ended, useful or lost).

The operator's registry lives in queue_manager/metrics.py; it passes it here. Counters count from the
process start, as Prometheus counters do (``rate()`` and ``increase()`` handle restarts); the ledger's
tables are the record, these are for dashboards and alerts. A replayed record closes nothing and so adds
nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge

from fairshare.resource_units import unit_of

from .life import MILLI_MS_PER_UNIT_HOUR, ClosedUsage, Outcome


class LedgerMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.resource_hours = Counter(
            "qm_resource_hours", "Resource-hours held by workloads whose attempt ended: useful (the attempt "
            "finished) or lost (evicted or deleted before finishing), in the resource's unit (label unit: "
            "GPU-hours, core-hours, GiB-hours).",
            ["team", "project", "flavor", "resource", "kind", "unit"], registry=registry)
        self.cost = Counter(
            "qm_cost", "Cost (flavors' pricePerUnitHour) of the resource-hours of ended attempts, in the "
            "policy's currency (label currency).",
            ["team", "project", "flavor", "currency"], registry=registry)
        self.spooled = Gauge(
            "qm_ledger_spooled_records",
            "Records handed to the ledger and not in its database yet (the spool).",
            registry=registry)
        self.database_up = Gauge(
            "qm_ledger_database_up", "1 while the ledger's database takes records, 0 while they are spooled "
            "because it does not (unreachable, or a schema this version cannot use).", registry=registry)
        self.database_up.set(1)

    def report(self, spooled: int, up: bool) -> None:
        self.spooled.set(spooled)
        self.database_up.set(1 if up else 0)

    def observe(self, closed: Iterable[ClosedUsage]) -> None:
        for c in closed:
            kind = "useful" if c.outcome is Outcome.USEFUL else "lost"
            if c.milli_ms:
                unit = unit_of(c.resource)
                series = self.resource_hours.labels(c.team, c.project, c.flavor, c.resource, kind,
                                                    unit.hours_long)
                series.inc(c.milli_ms / (MILLI_MS_PER_UNIT_HOUR * unit.base))
            if c.cost:
                self.cost.labels(c.team, c.project, c.flavor, c.currency).inc(float(c.cost))
