"""A ledger's history to migrate: the same observations, audit rows and quotas recorded by an older
queue-manager (tests/data/ledger-0002.json, written by `python -m tests.ledger_history` run with the code of
schema revision 0002) and by this one (tests/integration/test_ledger_migration.py compares them).

It uses only what both versions share (fairshare.models, ledger.records' observation, quota and audit
records), so the older code can write it. Two flavors: the shipped sample's prices (memory 0.004, meant
per GiB-hour and billed per byte-hour before revision 0003) and one whose memory price could only have
been per byte-hour (5e-9: 5.37 per GiB-hour), over three days, with evictions, a life still running, one
inferred from Kueue's counters, the project label of the sample and one audit row per kind of target.
"""

from __future__ import annotations

import json
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

from fairshare.models import Admission, Condition, PodSet, PodSetAssignment, Workload

START = 1_800_000_000.0  # 2027-01-15T08:00:00Z
END = START + 3 * 86400.0
GIB = 2**30
SAMPLE_PRICES = {"nvidia.com/gpu": "2.5", "cpu": "0.03", "memory": "0.004"}
PER_BYTE_MEMORY = "5e-9"  # per byte-hour: 5e-9 x 2^30 = 5.36870912 per GiB-hour
OLD_PRICES = {"gpu-a100": SAMPLE_PRICES, "per-byte": {"nvidia.com/gpu": "1", "memory": PER_BYTE_MEMORY}}
DATA = Path(__file__).resolve().parent / "data" / "ledger-0002.json"
TABLES = ("workloads", "workload_usage", "transitions", "segments", "quotas", "audit", "usage_daily")


def _workload(i: int, created: float, conds: tuple[Condition, ...], admitted: bool, *,
              evictions: tuple[tuple[str, str, int], ...] = (), accumulated: int | None = None) -> Workload:
    team = "ai-frontier-research" if i % 2 else "biz-model-serving"
    flavor = "gpu-a100" if i % 3 else "per-byte"
    gpus, cpus, memory = (2, 4, 32) if i % 2 else (4, 8, 64)
    per_pod = (("cpu", cpus * 1000), ("memory", memory * GIB * 1000), ("nvidia.com/gpu", gpus * 1000))
    admission = None
    if admitted:
        admission = Admission(team, (PodSetAssignment("main", tuple((r, flavor) for r, _ in per_pod),
                                                      per_pod, 1),))
    return Workload(namespace=team, name=f"job-{i}", queue_name=team, pod_sets=(PodSet("main", 1, per_pod),),
                    creation_timestamp=created, uid=f"uid-{i}", priority_class="batch",
                    labels=(("project", f"p-{i % 3}"), ("queuemanager.dev/project", "scaling-laws")),
                    admission=admission, conditions=conds, owner_kind="Job", owner_name=f"job-{i}",
                    eviction_stats=evictions, accumulated_past_execution_seconds=accumulated)


def observations() -> list[Any]:
    """Every observation, in time order (as a watch delivers them)."""
    from ledger.records import WorkloadObservation

    events: list[tuple[float, int, Any]] = []

    def seen(at: float, i: int, wl: Workload) -> None:
        events.append((at, i, WorkloadObservation(wl, at + 1)))

    for i in range(24):
        created = START + i * 9_000.0 + 17.0
        start = created + 60 + 7 * i
        run = 1_800.0 + 5_400.0 * (i % 5)  # up to 6.5 h: several cross a UTC midnight
        seen(created, i, _workload(i, created, (), False))
        if i % 4 == 0:  # evicted once, then admitted again
            evicted, released = start + run / 3, start + run / 3 + 30
            held = Condition("QuotaReserved", True, "QuotaReserved", "", start)
            seen(start, i, _workload(i, created, (held,), True))
            gone = Condition("Evicted", True, "Preempted", "", evicted)
            seen(evicted, i, _workload(i, created, (held, gone), True))
            released_cond = Condition("QuotaReserved", False, "Pending", "", released)
            seen(released, i, _workload(i, created, (released_cond, gone), False))
            start = released + 60
        held = Condition("QuotaReserved", True, "QuotaReserved", "", start)
        seen(start, i, _workload(i, created, (held,), True))
        if i != 23:  # the last one still runs at END
            end = start + run
            finished = Condition("Finished", True, "Succeeded", "", end)
            seen(end, i, _workload(i, created, (held, finished), True))
    # First seen pending after two evictions the service missed: inferred lost time, unknown flavor.
    created = START + 3_600.0
    seen(START + 40_000.0, 99, _workload(99, created, (), False, evictions=(("Preempted", "", 2),),
                                         accumulated=5_400))
    events.sort(key=lambda e: (e[0], e[1]))
    return [e[2] for e in events]


def audit_entries() -> list[Any]:
    from ledger.records import AuditEntry

    return [
        AuditEntry(at=START + 100, action="preempt", target_kind="Workload", target_name="job-1",
                   target_namespace="ai-frontier-research", what="asked Kueue to evict job-1", why="starved",
                   policy="gpu-cluster", policy_generation=2, editor="kubectl-client-side-apply"),
        AuditEntry(at=START + 200, action="transition-step", target_kind="ClusterQueue",
                   target_name="ai-frontier-research", what="nominalQuota 4 -> 3", why="step 1/3",
                   policy="gpu-cluster", policy_generation=2, team="ai-frontier-research"),
    ]


def quota_changes() -> list[Any]:
    from ledger.records import QuotaChange

    return [QuotaChange("ai-frontier-research", "gpu-a100", "nvidia.com/gpu", 4000, None, None, START,
                        "gpu-cluster", 1),
            QuotaChange("ai-frontier-research", "gpu-a100", "nvidia.com/gpu", 3000, None, None, START + 200,
                        "gpu-cluster", 2)]


def windows() -> list[tuple[float, float]]:
    """[since, until) of the reports compared: the whole history, whole days, parts of days."""
    return [(START - 86400, END + 86400), (START, START + 86400), (START + 3_600, START + 2 * 86400 + 7_200),
            (START + 50_000, START + 60_000)]


def _jsonable(value: Any) -> Any:
    if isinstance(value, Decimal):
        return {"decimal": str(value)}
    return value


def main() -> None:
    """Record the history with the code on sys.path (the older version's) and write every row and report."""
    import tempfile

    from sqlalchemy import create_engine, select

    from ledger import schema as t
    from ledger.db import resolve_url
    from ledger.ledger import LedgerConfig, open_ledger
    from ledger.queries import Dim, UsageQuery
    from ledger.records import PriceTable, to_millis

    with tempfile.TemporaryDirectory() as tmp:
        url = f"{tmp}/ledger.db"
        config = LedgerConfig(prices=PriceTable.of(OLD_PRICES))
        with open_ledger(url, spool_dir=f"{tmp}/spool", config=config) as ledger:
            ledger.record_workloads(observations())
            ledger.record_audit(audit_entries())
            ledger.record_quotas(quota_changes())
            assert ledger.flush(60)
            reports = []
            for since, until in windows():
                q = UsageQuery(to_millis(since), to_millis(until), to_millis(END), (
                    Dim.TEAM, Dim.FLAVOR, Dim.RESOURCE))
                reports.append({"since": since, "until": until, "rows": [
                    {"key": list(r.key), "useful_seconds": str(r.useful_seconds),
                     "lost_seconds": str(r.lost_seconds), "running_seconds": str(r.running_seconds),
                     "cost_useful": str(r.cost_useful), "cost_lost": str(r.cost_lost),
                     "cost_running": str(r.cost_running)} for r in ledger.usage(q)]})
        engine = create_engine(resolve_url(url))
        with engine.connect() as conn:
            revision = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar_one()
            tables = {name: [{k: _jsonable(v) for k, v in row.items()}
                             for row in conn.execute(select(t.metadata.tables[name])).mappings()]
                      for name in TABLES}
        engine.dispose()
    DATA.write_text(json.dumps({"revision": revision, "tables": tables, "reports": reports}, indent=1,
                               sort_keys=True) + "\n")
    print(f"wrote {DATA} (revision {revision})", file=sys.stderr)


if __name__ == "__main__":
    main()
