"""The daily rollup (ledger.rollup) on a SQLite file and a real PostgreSQL server: a report read from it is
the report a scan of every segment gives, for any window and grouping, with lives that span days, are
evicted, still run, and are priced below a milli-unit; pruning keeps the reports inside the retention
exact. (Migration 0002 filling it from the segments already kept: tests/integration/test_ledger_migration.py,
from revision 0001.)"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

from sqlalchemy import create_engine, text

from benchmarks.bench_ledger import END, lives
from ledger import rollup
from ledger.db import resolve_url
from ledger.ledger import Ledger, LedgerConfig, open_ledger
from ledger.life import Dims, FinalPart, Outcome
from ledger.queries import Dim, UsageQuery, usage, usage_scanned
from ledger.records import PriceTable, to_millis

HOUR = 3600.0
DAY = 86400.0
PRICES = PriceTable.of({"a100": {"nvidia.com/gpu": "2.5", "cpu": "0.0004"},
                        "l4": {"nvidia.com/gpu": "0.8", "cpu": "3e-7"}})

WINDOWS = [(180 * DAY, (Dim.TEAM, Dim.PROJECT)), (30 * DAY, (Dim.TEAM,)), (36 * HOUR, (Dim.FLAVOR,)),
           (5 * HOUR, (Dim.COST_CENTER, Dim.PRIORITY_CLASS)), (181 * DAY + 7 * HOUR, (Dim.NAMESPACE,))]


def _filled(url: str, spool: Path, n: int = 400) -> None:
    with open_ledger(url, spool_dir=spool, config=LedgerConfig(prices=PRICES)) as ledger:
        observations = lives(n, seed=11)
        # All but the last observations: the latest lives are still pending or running at `now`.
        ledger.record_workloads(observations[: int(len(observations) * 0.97)])
        assert ledger.flush(120)


def _reports(ledger: Ledger, now: float) -> Iterator[tuple[str, object, object]]:
    for span, by in WINDOWS:
        for until in (now, now - 5 * HOUR - 17.5):
            q = UsageQuery(to_millis(until - span), to_millis(until), to_millis(now), (*by, Dim.RESOURCE),
                           ((Dim.RESOURCE, "nvidia.com/gpu"),) if span > 100 * DAY else ())
            yield f"{span / HOUR:.0f}h by {','.join(by)} until {until}", ledger._read(
                lambda c, q=q: usage(c, q)), ledger._read(lambda c, q=q: usage_scanned(c, q))


def test_a_report_from_the_rollup_is_the_report_of_every_segment(ledger_url: str, tmp_path: Path) -> None:
    _filled(ledger_url, tmp_path / "spool")
    with open_ledger(ledger_url, read_only=True) as ledger:
        for what, rolled, scanned in _reports(ledger, END):
            assert rolled == scanned, what
            assert rolled, what


def test_pruning_keeps_every_report_inside_the_retention_exact(ledger_url: str, tmp_path: Path) -> None:
    _filled(ledger_url, tmp_path / "spool")
    retention = 90 * DAY + 5 * HOUR
    with open_ledger(ledger_url, spool_dir=tmp_path / "spool3") as ledger:
        counts = ledger.prune(retention, END)
        assert counts.workloads > 0
        for span in (retention - HOUR, 30 * DAY, 40 * HOUR):
            q = UsageQuery(to_millis(END - span), to_millis(END), to_millis(END), (Dim.TEAM, Dim.RESOURCE))
            rolled = ledger._read(lambda c, q=q: usage(c, q))
            assert rolled == ledger._read(lambda c, q=q: usage_scanned(c, q)), span
            assert sum((r.held_seconds for r in rolled), Decimal(0)) > 0


def test_a_batch_whose_only_final_segment_has_zero_length_adds_nothing_and_fails_nothing(
        ledger_url: str, tmp_path: Path) -> None:
    # Kueue's timestamps have one-second resolution: an attempt admitted, evicted and released within one
    # second ends as a segment of length 0, which adds nothing to any day. Seen in CI: the write of such a
    # batch failed ("near ON: syntax error"), the ledger went "unavailable" and a life lost a transition.
    open_ledger(ledger_url, spool_dir=tmp_path / "spool").close()  # the schema
    at = to_millis(END)
    zero = FinalPart("a100", "nvidia.com/gpu", 1000, Decimal("2.5"), at, at, Outcome.LOST,
                     Dims("research", "research", "research/main", "", "", ""))
    engine = create_engine(resolve_url(ledger_url))
    try:
        with engine.begin() as conn:
            rollup.write(conn, [zero])
            assert conn.execute(text("SELECT count(*) FROM usage_daily")).scalar_one() == 0
    finally:
        engine.dispose()
