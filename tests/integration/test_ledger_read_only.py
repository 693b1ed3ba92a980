"""Read-only means read-only: `qm usage`, `qm cost`, `qm audit` and `qm budget status` open a ledger without
changing a byte of it (no journal-mode change, no migration, no write), on a SQLite file and a real
PostgreSQL server; and a ledger path that can never work stops `qm run` in one line, while a server that is
merely down is spooled (tests/integration/test_ledger_outage.py)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import SQLAlchemyError

from ledger.db import resolve_url, script_heads
from ledger.errors import LedgerError
from ledger.ledger import LedgerConfig, open_ledger
from ledger.records import AuditEntry, PriceTable
from qm.cli import main
from tests.integration.test_ledger_migration import _written_by_the_older_version
from tests.unit.ledger.test_accounting import EVICTED_LIFE

POLICY = """apiVersion: queuemanager.dev/v1alpha1
kind: QuotaPolicy
metadata: {name: gpu}
spec:
  flavors: [{name: a100, pricePerUnitHour: {nvidia.com/gpu: "2.5"}}]
  teams: [{name: research, namespaces: [research], quotas: [{flavor: a100, resources: [
    {name: nvidia.com/gpu, nominal: 8}]}]}]
  budgets: [{name: week, selector: {team: research}, period: {calendar: Week},
             limit: {gpuHours: "10"}, thresholds: [{percent: 80, action: alert}]}]
"""
COMMANDS = [["usage", "--since", "3650d"], ["cost", "--since", "3650d"], ["audit", "--since", "3650d"]]


def _filled(url: str, spool: Path) -> None:
    config = LedgerConfig(prices=PriceTable.of({"a100": {"nvidia.com/gpu": "2.5"}}))
    with open_ledger(url, spool_dir=spool, config=config) as ledger:
        ledger.record_workloads(EVICTED_LIFE)
        ledger.record_audit([AuditEntry(at=1_800_000_100.0, action="preempt", target_kind="Workload",
                                        target_name="train", what="evict", why="starved", policy="gpu")])
        assert ledger.flush(30)


def _digest(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())
            if p.is_file()}


def _every_command(url: str, policy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in [*COMMANDS, ["budget", "status", str(policy)]]:
        assert main([*argv, "--db", url, "-o", "json"]) == 0, capsys.readouterr().err
    capsys.readouterr()


def test_the_ledger_commands_change_no_byte_of_a_rollback_journal_sqlite_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "ledger" / "ledger.db"
    _filled(str(db), tmp_path / "spool")
    with sqlite3.connect(db) as conn:  # an auditor's copy, as a plain rollback-journal database
        assert conn.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
    (tmp_path / "policy.yaml").write_text(POLICY)
    before = _digest(db.parent)
    assert set(before) == {"ledger.db"}
    _every_command(str(db), tmp_path / "policy.yaml", capsys)
    assert _digest(db.parent) == before  # the same bytes, and no -wal, -shm or journal file left
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)


def test_a_read_only_ledger_refuses_every_write(ledger_url: str, tmp_path: Path) -> None:
    _filled(ledger_url, tmp_path / "spool")
    with open_ledger(ledger_url, read_only=True) as ledger:
        with pytest.raises(SQLAlchemyError) as err, ledger._engine.begin() as conn:
            conn.execute(text("DELETE FROM audit"))
        assert "read" in str(err.value).lower()  # "readonly database" / "read-only transaction"
        with pytest.raises(LedgerError, match="opened read-only"):
            ledger.record_audit([])


def test_an_older_schema_is_never_migrated_by_a_read(ledger_url: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    _written_by_the_older_version(ledger_url, "0002")
    code = main(["usage", "--db", ledger_url, "--since", "3650d"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    head = ", ".join(script_heads())
    assert head > "0002"
    assert f"the ledger schema is at revision 0002, older than this version's {head}: start the operator " \
           "once to migrate it" in err
    engine = create_engine(resolve_url(ledger_url))
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one() == "0002"
    engine.dispose()


def test_budget_status_opens_the_ledger_even_when_the_policy_has_no_budgets(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY.split("  budgets:")[0])
    code = main(["budget", "status", str(policy), "--db", str(tmp_path / "missing.db")])
    assert (code, capsys.readouterr().err) == (
        2, f"qm budget: error: no ledger database at {tmp_path / 'missing.db'} (the operator creates it; or "
           "pass --db URL, or set QM_LEDGER_URL)\n")


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: p.mkdir(), "is a directory, not a SQLite file"),
    (lambda p: p.write_text("not a database at all, just text\n" * 10), "file is not a database"),
], ids=["a directory", "a file that is not a database"])
def test_a_ledger_path_that_can_never_work_stops_the_operator_s_ledger_in_one_line(
        tmp_path: Path, make: object, message: str) -> None:
    path = tmp_path / "ledger.db"
    make(path)  # type: ignore[operator]
    with pytest.raises(LedgerError) as err:
        open_ledger(str(path), spool_dir=tmp_path / "spool", tolerate_unavailable=True)
    assert message in str(err.value) and "\n" not in str(err.value)
