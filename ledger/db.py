"""Connecting to the ledger database: the URL, the engine, the migrations and the schema-version check.

URLs: a SQLite file path (``/var/lib/queue-manager/ledger.db``) or ``sqlite:///PATH``; PostgreSQL as
``postgresql://`` or ``postgresql+psycopg://USER:PASSWORD@HOST:PORT/DB`` (driver psycopg 3). With no URL,
``$QM_LEDGER_URL``, else :data:`DEFAULT_SQLITE_PATH`. Every failure is one :class:`LedgerError` line that
never shows the password.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, event, inspect
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, InterfaceError, OperationalError, SQLAlchemyError

from .errors import LedgerError, LedgerUnavailable

ENV_URL = "QM_LEDGER_URL"
DEFAULT_SQLITE_PATH = Path("~/.local/share/queue-manager/ledger.db")
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
CONNECT_TIMEOUT_S = 5


def default_url() -> str:
    env = os.environ.get(ENV_URL, "").strip()
    return env or str(DEFAULT_SQLITE_PATH.expanduser())


def resolve_url(url: str | None) -> URL:
    """The SQLAlchemy URL of ``url`` (a path, sqlite:///PATH or postgresql[+psycopg]://...)."""
    text = (url or "").strip() or default_url()
    if "://" not in text:
        return URL.create("sqlite", database=str(Path(text).expanduser()))
    try:
        parsed = make_url(text)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise LedgerError(f"not a database URL: {_scrub(text)!r} (expected a SQLite file path, "
                          "sqlite:///PATH or postgresql+psycopg://USER:PASSWORD@HOST:PORT/DB)") from None
    backend, _, driver = parsed.drivername.partition("+")
    if backend == "sqlite" and driver in ("", "pysqlite"):
        if not parsed.database or parsed.database == ":memory:":
            raise LedgerError(f"{_shown(parsed)}: the ledger needs a SQLite file, not an in-memory database "
                              "(write sqlite:///PATH)")
        return parsed.set(drivername="sqlite", database=str(Path(parsed.database).expanduser()))
    if backend in ("postgresql", "postgres") and driver in ("", "psycopg"):
        if not parsed.database:
            raise LedgerError(f"{_shown(parsed)}: the URL names no database (…/DBNAME)")
        return parsed.set(drivername="postgresql+psycopg")
    raise LedgerError(f"unsupported database URL {_shown(parsed)!r}: the ledger uses SQLite "
                      "(a path or sqlite:///PATH) or PostgreSQL (postgresql+psycopg://...)")


def _shown(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def _scrub(text: str) -> str:
    """A URL text with any password masked, for messages about URLs that do not parse."""
    scheme, sep, rest = text.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if sep and at and ":" in userinfo:
        return f"{scheme}://{userinfo.split(':', 1)[0]}:***@{host}"
    return text


def describe(url: URL) -> str:
    """The URL as shown to users (no password)."""
    return _shown(url)


def is_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite"


def make_engine(url: URL) -> Engine:
    if is_sqlite(url):
        engine = create_engine(url, connect_args={"timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return create_engine(
        url, pool_pre_ping=True, pool_size=2, max_overflow=2,
        connect_args={"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "queue-manager-ledger"},
    )


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    if not isinstance(dbapi_connection, sqlite3.Connection):  # pragma: no cover - the SQLite driver
        return
    cur = dbapi_connection.cursor()
    # WAL: `qm usage` reads while the operator writes. synchronous=FULL: a committed batch survives a
    # power loss, since the spool forgets records once their batch committed.
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def first_line(err: BaseException) -> str:
    """The driver's own first line (psycopg and sqlite3 put the reason there), without SQLAlchemy's
    background-link paragraph."""
    orig = err.orig if isinstance(err, DBAPIError) and err.orig is not None else err
    text = str(orig).strip().splitlines()
    return text[0] if text else type(orig).__name__


def _config() -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def script_heads() -> tuple[str, ...]:
    return tuple(ScriptDirectory.from_config(_config()).get_heads())


def check_schema(conn: Connection, url: URL, *, migrate: bool) -> None:
    """Refuse a schema written by a newer version; migrate an older (or empty) one when allowed."""
    script = ScriptDirectory.from_config(_config())
    known = {rev.revision for rev in script.walk_revisions()}
    current = tuple(MigrationContext.configure(conn).get_current_heads())
    unknown = sorted(rev for rev in current if rev not in known)
    heads = tuple(script.get_heads())
    if unknown:
        raise LedgerError(
            f"{_shown(url)}: the ledger schema is at revision {', '.join(unknown)}, which this "
            f"queue-manager does not know (it knows up to {', '.join(heads)}): the database was migrated by "
            "a newer version; run that version, or a newer one")
    if set(current) == set(heads):
        return
    if not migrate:
        if not current:
            tables = set(inspect(conn).get_table_names())
            what = "holds no ledger" if not tables else "holds tables but no ledger schema version"
            raise LedgerError(f"{_shown(url)}: the database {what} (point --db at the operator's ledger)")
        raise LedgerError(f"{_shown(url)}: the ledger schema is at revision {', '.join(current)}, older "
                          f"than this version's {', '.join(heads)}: start the operator once to migrate it")
    if not current and set(inspect(conn).get_table_names()) - {"alembic_version"}:
        raise LedgerError(f"{_shown(url)}: the database holds other tables and no ledger schema version; "
                          "give the ledger a database (or a SQLite file) of its own")
    cfg = _config()
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, "head")


def transient(err: SQLAlchemyError) -> bool:
    """A fault of the connection or the server (retry later), not of what was asked."""
    if isinstance(err, OperationalError | InterfaceError):
        return True
    return isinstance(err, DBAPIError) and err.connection_invalidated


def check_engine(engine: Engine, url: URL, *, migrate: bool) -> None:
    """Check (and migrate when allowed) the schema through ``engine``: LedgerUnavailable when the server does
    not answer, LedgerError for a schema this version cannot use."""
    try:
        with engine.begin() as conn:
            check_schema(conn, url, migrate=migrate)
    except SQLAlchemyError as err:
        kind = LedgerUnavailable if transient(err) else LedgerError
        raise kind(f"cannot use the ledger database {_shown(url)}: {first_line(err)}") from None


def connect_checked(url: URL, *, migrate: bool) -> Engine:
    """An engine on ``url`` whose schema is this version's (migrated when ``migrate``)."""
    if is_sqlite(url):
        path = Path(url.database or "")
        if not migrate and not path.is_file():
            raise LedgerError(f"no ledger database at {path} (the operator creates it; or pass --db URL, "
                              f"or set {ENV_URL})")
        if migrate:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise LedgerError(f"cannot create the directory of {path}: {err.strerror}") from None
    engine = make_engine(url)
    try:
        check_engine(engine, url, migrate=migrate)
    except LedgerError:
        engine.dispose()
        raise
    return engine
