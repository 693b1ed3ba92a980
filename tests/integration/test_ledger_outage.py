"""Faults: the PostgreSQL server really stops and starts (pg_ctl); the ledger never blocks its caller,
spools what it is handed, and after the restart every record arrives once, in order. Bad URLs and a server
that does not answer at start are one clear line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, select

from ledger import schema as t
from ledger.db import resolve_url
from ledger.errors import LedgerError
from ledger.ledger import LedgerConfig, open_ledger
from ledger.queries import AuditQuery
from ledger.records import AuditEntry, PriceTable, WorkloadObservation
from tests.ledger_db import PostgresServer
from tests.unit.ledger.kueue_docs import HOUR, T0, Doc

CONFIG = LedgerConfig(prices=PriceTable.of({"a100": {"nvidia.com/gpu": "2.5"}}))
OUTAGE_S = 10.0
ROOT = Path(__file__).resolve().parents[2]


def lives(n: int, first: int = 0) -> list[WorkloadObservation]:
    """n workloads' whole lives: submitted, admitted, finished an hour later."""
    out = []
    for i in range(first, first + n):
        d = Doc(f"w{i}", created=T0 + i)
        r = d.reserved(T0 + i + 10)
        out += [d.seen(T0 + i), r.seen(T0 + i + 11), r.finished(T0 + i + 10 + HOUR).seen(T0 + i + HOUR + 11)]
    return out


def audits(n: int, first: int = 0) -> list[AuditEntry]:
    return [AuditEntry(at=T0 + i, action="transition-step", target_kind="ClusterQueue",
                       target_name="research", what=f"step {i}", why="shrink", policy="gpu",
                       policy_generation=2, team="research")
            for i in range(first, first + n)]


def rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    engine = create_engine(resolve_url(url))
    try:
        with engine.connect() as conn:
            return {x.name: sorted(tuple(str(v) for v in r) for r in conn.execute(select(x)))
                    for x in t.metadata.sorted_tables}
    finally:
        engine.dispose()


def reference(server: PostgresServer, tmp_path: Path, observations: list[WorkloadObservation],
              entries: list[AuditEntry]) -> dict[str, list[tuple[Any, ...]]]:
    """The same records written with no outage, into another database of the same server."""
    url = server.create_database("reference")
    with open_ledger(url, spool_dir=tmp_path / "reference-spool", config=CONFIG) as ledger:
        ledger.record_workloads(observations)
        ledger.record_audit(entries)
        assert ledger.flush(60)
    return rows(url)


def test_records_handed_over_while_postgresql_is_stopped_all_arrive_after_it_restarts(
        own_postgres_server: PostgresServer, tmp_path: Path) -> None:
    server = own_postgres_server
    url = server.create_database("ledger")
    before, during = lives(50), lives(50, first=50)
    with open_ledger(url, spool_dir=tmp_path / "spool", config=CONFIG) as ledger:
        ledger.record_workloads(before)
        ledger.record_audit(audits(5))
        assert ledger.flush(30)
        server.stop()
        started = time.monotonic()
        for i in range(0, len(during), 15):  # the operator keeps scheduling: each call returns at once
            ledger.record_workloads(during[i:i + 15])
            ledger.record_audit(audits(1, first=5 + i))
        handed_over_s = time.monotonic() - started
        assert not ledger.flush(OUTAGE_S)  # the server is down for the whole wait: nothing can arrive
        assert ledger.pending() == len(during) + len(range(0, len(during), 15))
        assert ledger.unavailable() is not None
        server.start()
        assert ledger.flush(60)
        assert ledger.unavailable() is None
        trail = ledger.audit(AuditQuery(0, 2**62))
    # Handing 110 records to a spool is milliseconds; waiting on a dead server would take connect timeouts.
    assert handed_over_s < 2.0
    entries = audits(5) + [a for i in range(0, len(during), 15) for a in audits(1, first=5 + i)]
    assert trail == sorted(entries, key=lambda a: a.at)
    assert rows(url) == reference(server, tmp_path, before + during, entries)


_WRITER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    from ledger.ledger import LedgerConfig, open_ledger
    from ledger.records import PriceTable
    from tests.integration.test_ledger_outage import lives, audits
    ledger = open_ledger({url!r}, spool_dir={spool!r},
                         config=LedgerConfig(prices=PriceTable.of({{"a100": {{"nvidia.com/gpu": "2.5"}}}})))
    {stop}
    ledger.record_workloads(lives(40))
    ledger.record_audit(audits(3))
    print("handed over", flush=True)
    import time
    time.sleep(600)
""")


def test_a_writer_killed_while_the_database_is_down_loses_nothing(
        own_postgres_server: PostgresServer, tmp_path: Path) -> None:
    server = own_postgres_server
    url = server.create_database("ledger")
    spool = tmp_path / "spool"
    # The writer opens the ledger while the server is up (start-up checks it), then the server stops.
    flag = tmp_path / "stopped"
    stop = f"import pathlib, time\nwhile not pathlib.Path({str(flag)!r}).exists(): time.sleep(0.05)"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER.format(root=str(ROOT), url=url, spool=str(spool),
                                                                   stop=stop)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 60
        while not (spool / "lock").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        server.stop()
        flag.touch()
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline().strip()
        assert line == "handed over", proc.stderr.read() if proc.poll() is not None else line
        proc.send_signal(signal.SIGKILL)  # no flush, no close: only the fsync'd spool remains
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    server.start()
    with open_ledger(url, spool_dir=spool, config=CONFIG) as ledger:
        assert ledger.flush(60)
    assert rows(url) == reference(server, tmp_path, lives(40), audits(3))


def test_a_server_that_does_not_answer_at_start_is_one_line_without_the_password(
        own_postgres_server: PostgresServer, tmp_path: Path) -> None:
    url = own_postgres_server.create_database("ledger")
    own_postgres_server.stop()
    with pytest.raises(LedgerError) as err:
        open_ledger(url, spool_dir=tmp_path / "spool")
    message = str(err.value)
    assert message.startswith(f"cannot use the ledger database postgresql+psycopg://ledger:***@127.0.0.1:"
                              f"{own_postgres_server.port}/ledger: ")
    assert "Connection refused" in message or "connection" in message.lower()
    assert own_postgres_server.password not in message and "\n" not in message


def test_a_wrong_password_is_one_line_without_the_password(postgres_server: PostgresServer,
                                                           tmp_path: Path) -> None:
    url = postgres_server.url().replace(postgres_server.password, "not-the-password")
    with pytest.raises(LedgerError) as err:
        open_ledger(url, spool_dir=tmp_path / "spool")
    assert "password authentication failed" in str(err.value)
    assert "not-the-password" not in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(("url", "message"), [
    ("mysql://u:secret@db/ledger", "unsupported database URL 'mysql://u:***@db/ledger'"),
    ("postgresql+asyncpg://u:secret@db/ledger", "unsupported database URL"),
    ("sqlite://", "needs a SQLite file, not an in-memory database"),
    ("postgresql://u:secret@db", "the URL names no database"),
    ("postgresql://u:secret@db:notaport/x", "not a database URL: postgresql://u:***@db:notaport…: the port "
                                            "must be a number from 1 to 65535"),
    ("postgresql://u:sec@ret@db:notaport/x", "not a database URL: postgresql://u:***@db:notaport…"),
    ("postgresql://u:secret@secret@db/", "the URL names no database"),
], ids=["another database", "another driver", "in-memory SQLite", "no database name", "a malformed URL",
        "a malformed URL whose password holds an @", "an @ in the password and no database"])
def test_a_bad_database_url_is_one_line_that_never_shows_the_password(url: str, message: str,
                                                                      tmp_path: Path) -> None:
    with pytest.raises(LedgerError) as err:
        open_ledger(url, spool_dir=tmp_path / "spool")
    assert message in str(err.value)
    assert "secret" not in str(err.value)


def test_a_database_of_other_tables_is_not_taken_over(postgres_url: str, tmp_path: Path) -> None:
    engine = create_engine(resolve_url(postgres_url))
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE invoices (id integer)")
    engine.dispose()
    with pytest.raises(LedgerError, match="holds other tables and no ledger schema version"):
        open_ledger(postgres_url, spool_dir=tmp_path / "spool")
