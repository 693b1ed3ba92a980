"""Active vs allocated GPU-hours in the ledger (the `activity` table, ledger.activity) on a SQLite file and a
real PostgreSQL server: each part is added once whatever the readings repeat; hours take the dimensions and
price of what the life held; `usage` reports measured, active and idle GPU-hours per team and project, and
the idle part's cost; pruning keeps nothing past the retention."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from ledger.activity import ActivityRecord
from ledger.ledger import LedgerConfig, open_ledger
from ledger.queries import Dim, UsageQuery
from ledger.records import PriceTable, to_millis
from tests.unit.ledger.kueue_docs import HOUR, T0, Doc

GPU = "nvidia.com/gpu"
MIN = 60_000


def _parts(start: float, minutes: int, gpus: int, percent: int) -> tuple[tuple[int, int, int, int], ...]:
    s = to_millis(start)
    return tuple((s + i * MIN, s + (i + 1) * MIN, gpus * MIN, gpus * MIN * percent // 100)
                 for i in range(minutes))


def test_active_and_idle_gpu_hours_per_team_and_project_each_part_counted_once(ledger_url: str,
                                                                               tmp_path: Path) -> None:
    # Two research experiments on a100 (2.5 per GPU-hour): llm holds 2 GPUs for 2 h, its GPUs at 10%;
    # vision 1 GPU for 2 h at 90%. Business on l4 has no telemetry.
    llm = Doc("llm", "research", labels={"project": "llm"}).reserved(T0, cluster_queue="research", gpus=2)
    vision = Doc("vision", "research", labels={"project": "vision"}).reserved(T0, cluster_queue="research",
                                                                              gpus=1)
    serve = Doc("serve", "biz").reserved(T0, cluster_queue="business", flavor="l4")
    config = LedgerConfig(prices=PriceTable.of({"a100": {GPU: "2.5"}, "l4": {GPU: "1"}}))
    with open_ledger(ledger_url, spool_dir=tmp_path / "spool", config=config) as ledger:
        ledger.record_workloads([llm.seen(T0), vision.seen(T0), serve.seen(T0)])
        parts = _parts(T0, 120, 2, 10)
        # The operator's readings overlap (a sliding window) and repeat after a restart: the same parts
        # again, a shifted overlap, in pieces and whole.
        for chunk in (parts[:30], parts[:45], parts[20:90], parts, parts[100:]):
            ledger.record_activity([ActivityRecord("uid-research-llm", GPU, chunk)])
        ledger.record_activity([ActivityRecord("uid-research-vision", GPU, _parts(T0, 120, 1, 90))])
        assert ledger.flush(30)
        rows = ledger.usage(UsageQuery(to_millis(T0 - HOUR), to_millis(T0 + 4 * HOUR),
                                       to_millis(T0 + 2 * HOUR), (Dim.TEAM, Dim.PROJECT, Dim.RESOURCE)))
    got = {r.key: (r.held_seconds / 3600, r.measured_seconds, r.active_seconds, r.idle_seconds, r.cost_idle)
           for r in rows if r.key[2] == GPU}
    hours = Decimal(3600)
    assert got == {
        ("business", "", GPU): (Decimal(4), None, None, None, None),  # no telemetry: unknown, not idle
        ("research", "llm", GPU): (Decimal(4), 4 * hours, Decimal("0.4") * hours, Decimal("3.6") * hours,
                                   Decimal("9.000000000")),  # 3.6 idle GPU-hours x 2.5
        ("research", "vision", GPU): (Decimal(2), 2 * hours, Decimal("1.8") * hours, Decimal("0.2") * hours,
                                      Decimal("0.500000000")),
    }


def test_hours_split_by_their_start_and_a_window_counts_whole_hours_pruned_with_their_lives(
        ledger_url: str, tmp_path: Path) -> None:
    done = Doc("done", "research").reserved(T0, cluster_queue="research")
    with open_ledger(ledger_url, spool_dir=tmp_path / "spool") as ledger:
        ledger.record_workloads([done.seen(T0), done.finished(T0 + 2 * HOUR).seen(T0 + 2 * HOUR)])
        ledger.record_activity([ActivityRecord("uid-research-done", GPU, _parts(T0 + 1800, 60, 1, 50))])
        assert ledger.flush(30)
        q = UsageQuery(to_millis(T0 + HOUR), to_millis(T0 + 2 * HOUR), to_millis(T0 + 2 * HOUR), (Dim.TEAM,))
        [row] = [r for r in ledger.usage(q) if r.measured_seconds is not None]
        # Half an hour in the hour from T0 and half in the next: the window [T0+1h, T0+2h) has the second.
        assert (row.measured_seconds, row.active_seconds) == (Decimal(1800), Decimal(900))
        ledger.prune(180 * 86400, T0 + 200 * 86400)
        assert [r for r in ledger.usage(q) if r.measured_seconds is not None] == []
