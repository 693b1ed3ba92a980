"""The ledger on a real database, a SQLite file and a PostgreSQL server (tests/ledger_db.py): one accounting
row per life, idempotent under replay, restart and a crash between commit and spool, retention, quotas,
audit, and the schema checks."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, select, text

from ledger import schema as t
from ledger.db import resolve_url
from ledger.errors import LedgerError
from ledger.facts import facts_of
from ledger.ledger import Ledger, LedgerConfig, open_ledger
from ledger.queries import AuditQuery, Dim, UsageQuery
from ledger.records import AuditEntry, LabelKeys, PriceTable, QuotaChange
from ledger.spool import Spool
from ledger.store import apply_batch
from tests.unit.ledger.kueue_docs import HOUR, T0, Doc
from tests.unit.ledger.test_accounting import EVICTED_LIFE

PRICES = PriceTable.of({"a100": {"nvidia.com/gpu": "2.5", "cpu": "0.05"}})
CONFIG = LedgerConfig(prices=PRICES, retention_seconds=180 * 86400)
UID = "uid-research-train"
MS = 1000


def opened(url: str, spool: Path) -> Ledger:
    return open_ledger(url, spool_dir=spool, config=CONFIG)


def tables(url: str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every ledger table, sorted: a whole-database comparison."""
    engine = create_engine(resolve_url(url))
    try:
        with engine.connect() as conn:
            return {table.name: sorted(tuple(str(v) for v in row) for row in conn.execute(select(table)))
                    for table in t.metadata.sorted_tables}
    finally:
        engine.dispose()


def audit(i: int, *, team: str = "research", action: str = "preempt", at: float = T0) -> AuditEntry:
    return AuditEntry(at=at + i, action=action, target_kind="Workload", target_name=f"w{i}",
                      target_namespace="research", what=f"evict w{i}", why="business starved", policy="gpu",
                      policy_generation=4, editor="alice", team=team)


def test_a_workload_life_gives_exactly_one_accounting_row_with_its_gpu_hours_and_cost(
        ledger_url: str, tmp_path: Path) -> None:
    with opened(ledger_url, tmp_path / "spool") as ledger:
        ledger.record_workloads(EVICTED_LIFE)
        assert ledger.flush(30)
        life = ledger.life(UID)
    assert life is not None
    rows = tables(ledger_url)
    assert len(rows["workloads"]) == 1
    assert (life.row["phase"], life.row["team"], life.row["owner_kind"], life.row["evictions"],
            life.row["attempts"]) == ("finished", "research", "Job", 1, 2)
    # 2 GPUs: 30 min lost (evicted attempt), 2 h useful; 4 cores likewise; prices 2.5 and 0.05 per hour
    assert [(u["flavor"], u["resource"], u["held_seconds"], u["useful_seconds"], u["lost_seconds"], u["cost"],
             u["cost_useful"], u["cost_lost"]) for u in life.usage] == [
        ("a100", "cpu", Decimal(36000), Decimal(28800), Decimal(7200), Decimal("0.5"), Decimal("0.4"),
         Decimal("0.1")),
        ("a100", "nvidia.com/gpu", Decimal(18000), Decimal(14400), Decimal(3600), Decimal("12.5"),
         Decimal(10), Decimal("2.5")),
    ]
    assert [(x["kind"], x["attempt"]) for x in life.transitions] == [
        ("submitted", 0), ("admitted", 1), ("evicted", 1), ("released", 1), ("admitted", 2), ("finished", 2)]


def test_a_replayed_watch_and_a_restarted_ledger_write_nothing_new(ledger_url: str, tmp_path: Path) -> None:
    with opened(ledger_url, tmp_path / "spool") as ledger:
        ledger.record_workloads(EVICTED_LIFE[:3])
        assert ledger.flush(30)
        ledger.record_workloads(EVICTED_LIFE)
        assert ledger.flush(30)
    first = tables(ledger_url)
    with opened(ledger_url, tmp_path / "spool") as restarted:  # the operator restarted: kopf replays all
        restarted.record_workloads(EVICTED_LIFE + EVICTED_LIFE[::-1] + EVICTED_LIFE)
        assert restarted.flush(30)
    assert tables(ledger_url) == first


def test_a_crash_after_the_database_commit_and_before_the_spool_commit_doubles_nothing(
        ledger_url: str, tmp_path: Path) -> None:
    with opened(ledger_url, tmp_path / "spool") as ledger:
        ledger.record_workloads(EVICTED_LIFE)
        ledger.record_audit([audit(1)])
        ledger.record_quotas([QuotaChange("research", "a100", "nvidia.com/gpu", 4000, None, None, T0)])
        assert ledger.flush(30)
    committed = tables(ledger_url)
    # The same records are still in a spool (the process died before forgetting them): replayed at start.
    spool = Spool(tmp_path / "crashed")
    spool.append([facts_of(o, PRICES, LabelKeys()) for o in EVICTED_LIFE])
    spool.append([audit(1), QuotaChange("research", "a100", "nvidia.com/gpu", 4000, None, None, T0)])
    spool.close()
    with opened(ledger_url, tmp_path / "crashed") as ledger:
        assert ledger.flush(30)
    assert tables(ledger_url) == committed


def test_usage_is_clipped_to_the_window_and_a_held_segment_counts_up_to_now(
        ledger_url: str, tmp_path: Path) -> None:
    running = Doc("serve", labels={"project": "recsys"}).reserved(T0, cluster_queue="business")
    with opened(ledger_url, tmp_path / "spool") as ledger:
        ledger.record_workloads([*EVICTED_LIFE, running.seen(T0 + 1)])
        assert ledger.flush(30)
        # the window [T0+2h, T0+4h), now = T0+3h: research's final attempt ran T0+1h..T0+3h -> 1 h in the
        # window; business's running workload holds 2 GPUs from T0 -> 1 h up to now.
        rows = ledger.usage(UsageQuery(round((T0 + 2 * HOUR) * MS), round((T0 + 4 * HOUR) * MS),
                                       round((T0 + 3 * HOUR) * MS), (Dim.TEAM, Dim.PROJECT, Dim.RESOURCE),
                                       ((Dim.RESOURCE, "nvidia.com/gpu"),)))
    assert [(r.key, r.useful_seconds, r.lost_seconds, r.running_seconds, r.cost) for r in rows] == [
        (("business", "recsys", "nvidia.com/gpu"), Decimal(0), Decimal(0), Decimal(7200),
         Decimal("5.000000000")),
        (("research", "", "nvidia.com/gpu"), Decimal(7200), Decimal(0), Decimal(0), Decimal("5.000000000")),
    ]


def test_pruning_keeps_what_is_inside_the_retention_window(ledger_url: str, tmp_path: Path) -> None:
    old = Doc("old").reserved(T0)
    running = Doc("long").reserved(T0)
    later = T0 + 200 * 86400
    with opened(ledger_url, tmp_path / "spool") as ledger:
        ledger.record_workloads([old.seen(T0 + 1), old.finished(T0 + HOUR).seen(T0 + HOUR),
                                 running.seen(T0 + 1), *EVICTED_LIFE])
        ledger.record_workloads([Doc("recent", created=later).reserved(later).finished(later + HOUR)
                                 .seen(later + HOUR)])
        ledger.record_audit([audit(1), audit(2, at=later)])
        ledger.record_quotas([QuotaChange("research", "a100", "nvidia.com/gpu", q, None, None, at)
                              for q, at in ((8000, T0), (4000, T0 + 86400), (2000, later))])
        assert ledger.flush(30)
        counts = ledger.prune(180 * 86400, later + 2 * HOUR)
        kept = {r[0] for r in tables(ledger_url)["workloads"]}
        quotas = ledger.quotas(since=T0, until=later + 86400, team="research")
        audits = ledger.audit(AuditQuery(0, 2**62))
    assert (counts.workloads, counts.audit, counts.quotas) == (2, 1, 1)
    assert kept == {"uid-research-long", "uid-research-recent"}
    assert [(q.nominal, q.since_ms) for q in quotas] == [
        (4000, round((T0 + 86400) * MS)), (2000, round(later * MS))]
    assert [a.target_name for a in audits] == ["w2"]
    assert tables(ledger_url)["segments"] and all(r[0] in kept for r in tables(ledger_url)["segments"])


def test_a_pruned_life_seen_again_is_not_counted_again(ledger_url: str, tmp_path: Path) -> None:
    done = Doc("done").reserved(T0).finished(T0 + HOUR)
    later = T0 + 200 * 86400
    with opened(ledger_url, tmp_path / "spool") as ledger:
        ledger.record_workloads([done.seen(T0 + HOUR)])
        assert ledger.flush(30)
        ledger.prune(180 * 86400, later)
        ledger.record_workloads([done.seen(later)])  # Kueue still keeps the finished object
        assert ledger.flush(30)
    assert tables(ledger_url)["workloads"] == []


def test_a_quota_repeated_unchanged_is_not_a_new_row_and_history_answers_the_quota_in_force(
        ledger_url: str, tmp_path: Path) -> None:
    changes = [QuotaChange("research", "a100", "nvidia.com/gpu", q, b, None, at, "gpu", g)
               for q, b, at, g in ((4000, None, T0, 1), (4000, None, T0 + 60, 1), (3000, 1000, T0 + 120, 2),
                                   (3000, 1000, T0 + 180, 2))]
    with opened(ledger_url, tmp_path / "spool") as ledger:
        ledger.record_quotas(changes + changes)
        assert ledger.flush(30)
        history = ledger.quotas(since=T0 + 130, until=T0 + 1000)
    assert len(tables(ledger_url)["quotas"]) == 2
    assert [(q.nominal, q.borrowing_limit, q.generation) for q in history] == [(3000, 1000, 2)]


def test_the_audit_trail_is_idempotent_and_filtered_by_team_and_action(
        ledger_url: str, tmp_path: Path) -> None:
    entries = [audit(1), audit(2, team="business"), audit(3, action="preempt-dry-run"),
               audit(4, action="transition-step")]
    with opened(ledger_url, tmp_path / "spool") as ledger:
        ledger.record_audit(entries + entries)
        assert ledger.flush(30)
        everything = ledger.audit(AuditQuery(0, 2**62))
        research_preempts = ledger.audit(AuditQuery(0, 2**62, team="research", actions=("preempt*",)))
        exact = ledger.audit(AuditQuery(0, 2**62, actions=("preempt",)))
    assert everything == entries
    assert [a.target_name for a in research_preempts] == ["w1", "w3"]
    assert [a.target_name for a in exact] == ["w1", "w2"]


def test_the_migrations_build_exactly_the_schema_the_code_declares(ledger_url: str, tmp_path: Path) -> None:
    opened(ledger_url, tmp_path / "spool").close()
    engine = create_engine(resolve_url(ledger_url))
    try:
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), t.metadata) == []
    finally:
        engine.dispose()


def test_a_schema_migrated_by_a_newer_version_is_refused_in_one_line(ledger_url: str, tmp_path: Path) -> None:
    opened(ledger_url, tmp_path / "spool").close()
    engine = create_engine(resolve_url(ledger_url))
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0042'"))
    engine.dispose()
    for read_only in (False, True):
        with pytest.raises(LedgerError) as err:
            open_ledger(ledger_url, spool_dir=tmp_path / "again", read_only=read_only)
        message = str(err.value)
        assert ("schema is at revision 0042, which this queue-manager does not know (it knows up to 0004)"
                in message)
        assert "\n" not in message


def test_a_record_the_database_refuses_is_set_aside_and_the_rest_still_arrive(
        postgres_url: str, tmp_path: Path) -> None:
    too_long = AuditEntry(at=T0, action="x" * 100, target_kind="Workload", target_name="w", what="w",
                          why="y", policy="p")
    with opened(postgres_url, tmp_path / "spool") as ledger:
        ledger.record_audit([audit(1), too_long, audit(2)])
        assert ledger.flush(30)
        names = [a.target_name for a in ledger.audit(AuditQuery(0, 2**62))]
    assert names == ["w1", "w2"]
    rejected = (tmp_path / "spool" / "rejected.jsonl").read_text()
    assert "the database refused the record" in rejected and "x" * 100 in rejected


def test_records_of_one_batch_apply_in_the_order_they_were_handed_over(
        ledger_url: str, tmp_path: Path) -> None:
    opened(ledger_url, tmp_path / "spool").close()
    engine = create_engine(resolve_url(ledger_url))
    try:
        with engine.begin() as conn:
            closed = apply_batch(conn, [facts_of(o, PRICES, LabelKeys()) for o in EVICTED_LIFE],
                                 retention_ms=180 * 86400 * MS)
    finally:
        engine.dispose()
    assert sorted((c.resource, str(c.outcome), c.milli_ms) for c in closed) == [
        ("cpu", "lost", 4000 * 1800 * MS), ("cpu", "useful", 4000 * 7200 * MS),
        ("nvidia.com/gpu", "lost", 2000 * 1800 * MS), ("nvidia.com/gpu", "useful", 2000 * 7200 * MS)]
