"""Existing ledgers migrate without loss (Alembic revision 0003: prices per GPU-, core- and GiB-hour, a
currency on every price, workload fields on audit rows), on a SQLite file and a real PostgreSQL server.

The ledger migrated is the one an older queue-manager wrote (tests/data/ledger-0002.json: every row of a
ledger at revision 0002, recorded from tests/ledger_history.py by that version's code, with the reports it
gave). After the migration: every row is still there; usage is what it was; the sample's memory price
(0.004, meant per GiB-hour, billed per byte-hour before) is read per GiB-hour, so the ledger holds exactly
what this version records from the same observations (every row of every table, every report); a memory
price that could only have been per byte-hour keeps the money it billed.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import MetaData, Numeric, create_engine, select, text

from fairshare.resource_units import GIB
from ledger import schema as t
from ledger.db import _config, resolve_url, script_heads
from ledger.ledger import LedgerConfig, open_ledger
from ledger.queries import Dim, UsageQuery, UsageRow
from ledger.records import PriceTable, to_millis
from tests.ledger_db import PostgresServer
from tests.ledger_history import (
    DATA,
    END,
    PER_BYTE_MEMORY,
    SAMPLE_PRICES,
    TABLES,
    audit_entries,
    observations,
    quota_changes,
    windows,
)

OLD = json.loads(DATA.read_text())
# What this version records from the same observations: the sample's prices as written (per GiB-hour), and
# the per-byte-hour memory price as its price per GiB-hour (the parser refuses it as written).
NEW_PRICES = PriceTable.of({"gpu-a100": SAMPLE_PRICES, "per-byte": {
    "nvidia.com/gpu": "1", "memory": str(Decimal(PER_BYTE_MEMORY) * GIB)}})
BY = (Dim.TEAM, Dim.FLAVOR, Dim.RESOURCE)


@pytest.fixture
def fresh_url(request: pytest.FixtureRequest, ledger_url: str, tmp_path: Path) -> str:
    """A second, empty database of the same kind as `ledger_url`."""
    if "://" not in ledger_url:
        return str(tmp_path / "fresh.db")
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.create_database(f"t_{secrets.token_hex(6)}")


def _value(raw: Any, numeric: bool) -> Any:
    if isinstance(raw, dict) and set(raw) == {"decimal"}:
        return Decimal(raw["decimal"]) if numeric else raw["decimal"]
    return raw


def _written_by_the_older_version(url: str, revision: str) -> None:
    """The older version's rows in a database at `revision` (its schema built by the migrations up to it);
    at revision 0001, without the rollup 0002 added (0002 fills it from the segments)."""
    engine = create_engine(resolve_url(url))
    try:
        with engine.begin() as conn:
            cfg = _config()
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
            meta = MetaData()
            meta.reflect(conn)
            for name in TABLES:
                if name not in meta.tables:
                    continue
                table = meta.tables[name]
                numeric = {c.name for c in table.columns if isinstance(c.type, Numeric)}
                rows = [{k: _value(v, k in numeric) for k, v in row.items()} for row in OLD["tables"][name]]
                if rows:
                    conn.execute(table.insert(), rows)
    finally:
        engine.dispose()


def _recorded_by_this_version(url: str, spool: Path) -> None:
    with open_ledger(url, spool_dir=spool, config=LedgerConfig(prices=NEW_PRICES)) as ledger:
        ledger.record_workloads(observations())
        ledger.record_audit(audit_entries())
        ledger.record_quotas(quota_changes())
        assert ledger.flush(60)


def _rows(url: str) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    engine = create_engine(resolve_url(url))
    try:
        with engine.connect() as conn:
            for name in TABLES:
                table = t.metadata.tables[name]
                keys = [c for c in table.primary_key.columns]
                yield name, [dict(r) for r in conn.execute(select(table).order_by(*keys)).mappings()]
    finally:
        engine.dispose()


def _reports(url: str) -> list[list[UsageRow]]:
    with open_ledger(url, read_only=True) as ledger:
        return [ledger.usage(UsageQuery(to_millis(since), to_millis(until), to_millis(END), BY))
                for since, until in windows()]


def _old_reports() -> list[dict[tuple[str, ...], dict[str, Decimal]]]:
    return [{tuple(r["key"]): {k: Decimal(v) for k, v in r.items() if k != "key"} for r in report["rows"]}
            for report in OLD["reports"]]


@pytest.mark.parametrize("revision", ["0002", "0001"])
def test_a_ledger_of_an_older_version_migrates_to_exactly_what_this_version_records(
        ledger_url: str, fresh_url: str, tmp_path: Path, revision: str) -> None:
    assert OLD["revision"] == "0002"
    _written_by_the_older_version(ledger_url, revision)
    open_ledger(ledger_url, spool_dir=tmp_path / "spool").close()  # the operator's start migrates
    _recorded_by_this_version(fresh_url, tmp_path / "fresh-spool")

    migrated, fresh = dict(_rows(ledger_url)), dict(_rows(fresh_url))
    for name in TABLES:
        assert len(migrated[name]) == len(OLD["tables"][name]), f"rows lost or added in {name}"
    # The workload fields of audit rows did not exist: empty, as this version writes them for these.
    assert {(a["local_queue"], a["project"], a["user_name"]) for a in migrated["audit"]} == {
        (None, None, None)}
    for name in TABLES:
        assert migrated[name] == fresh[name], name
    assert _reports(ledger_url) == _reports(fresh_url)
    engine = create_engine(resolve_url(ledger_url))
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one() == script_heads()[0]
    engine.dispose()


def test_the_migration_keeps_every_usage_figure_and_the_money_of_a_per_byte_price(
        ledger_url: str, tmp_path: Path) -> None:
    _written_by_the_older_version(ledger_url, "0002")
    open_ledger(ledger_url, spool_dir=tmp_path / "spool").close()
    for old, new in zip(_old_reports(), _reports(ledger_url), strict=True):
        assert [r.key for r in new] == list(old)
        for row in new:
            before = old[row.key]
            assert (row.useful_seconds, row.lost_seconds, row.running_seconds) == (
                before["useful_seconds"], before["lost_seconds"], before["running_seconds"]), row.key
            _, flavor, resource = row.key
            if resource != "memory":  # GPUs and cores were always priced per GPU- and core-hour
                assert (row.cost_useful, row.cost_lost, row.cost_running) == (
                    before["cost_useful"], before["cost_lost"], before["cost_running"]), row.key
            elif flavor == "per-byte":  # converted to its price per GiB-hour: the same money
                assert row.cost == before["cost_useful"] + before["cost_lost"] + before["cost_running"]
            else:  # the sample's 0.004 per GiB-hour: 2^30 times less than the byte-hours it billed
                billed = before["cost_useful"] + before["cost_lost"] + before["cost_running"]
                assert abs(row.cost - billed / GIB) < Decimal("1e-8"), row.key


def test_a_migrated_ledger_reports_the_currency_of_every_priced_flavor(
        ledger_url: str, tmp_path: Path) -> None:
    _written_by_the_older_version(ledger_url, "0002")
    open_ledger(ledger_url, spool_dir=tmp_path / "spool").close()
    with open_ledger(ledger_url, read_only=True) as ledger:
        rows = ledger.usage(UsageQuery(0, to_millis(END + 86400), to_millis(END), (Dim.FLAVOR, Dim.CURRENCY)))
    assert {r.key for r in rows} == {("", ""), ("gpu-a100", "USD"), ("per-byte", "USD")}
    assert [r.cost for r in rows if r.key == ("", "")] == [Decimal("0E-9")]
