"""Connecting to the ledger database: the URL, the engine, the migrations and the schema-version check.

URLs: a SQLite file path (``/var/lib/queue-manager/ledger.db``) or ``sqlite:///PATH``; PostgreSQL as
``postgresql://`` or ``postgresql+psycopg://USER:PASSWORD@HOST:PORT/DB`` (driver psycopg 3). With no URL,
``$QM_LEDGER_URL``, else :data:`DEFAULT_SQLITE_PATH`. Every failure is one :class:`LedgerError` line that
never shows the password.
"""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, event, inspect
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, InterfaceError, OperationalError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from .errors import LedgerError, LedgerUnavailable

ENV_URL = "QM_LEDGER_URL"
DEFAULT_SQLITE_PATH = Path("~/.local/share/queue-manager/ledger.db")
MIGRATIONS = Path(__file__).resolve().parent / "migrations"
CONNECT_TIMEOUT_S = 5


def default_url() -> str:
    env = os.environ.get(ENV_URL, "").strip()
    return env or str(DEFAULT_SQLITE_PATH.expanduser())


MAX_URL = 4096  # characters of a URL or path (PATH_MAX); more is refused, never half-printed
_SHOWN_MAX = 80
EXPECTED = "a SQLite file path, sqlite:///PATH or postgresql+psycopg://USER:PASSWORD@HOST:PORT/DB"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_HOST = re.compile(r"^([0-9A-Fa-f:.]+|[A-Za-z0-9._%-]*)$")  # a name, an IPv4 or (in brackets) IPv6 address


def resolve_url(url: str | None) -> URL:
    """The SQLAlchemy URL of ``url`` (a path, sqlite:///PATH or postgresql[+psycopg]://...).

    A server URL is parsed here, not by SQLAlchemy's pattern (which ends the password at its first "@" and
    would take the rest of it for the host): the password is everything between the first ":" of the
    credentials and the *last* "@", so an unencoded "@", "/", ":" or "?" in it stays in it. No message, log
    line or directory name ever shows any part of a password (`describe` masks it)."""
    text = (url or "").strip() or default_url()
    if len(text) > MAX_URL:
        raise LedgerError(f"the ledger URL or path is {len(text)} characters long (at most {MAX_URL}): "
                          f"{_head(text)}")
    if "\x00" in text:
        raise LedgerError("the ledger URL or path holds a NUL character")
    scheme = _SCHEME.match(text)
    if scheme is None:
        if "://" in text:
            raise LedgerError(f"not a database URL (no scheme before ://): expected {EXPECTED}")
        return URL.create("sqlite", database=str(Path(text).expanduser()))
    backend, _, driver = scheme.group(1).lower().partition("+")
    if backend == "sqlite" and driver in ("", "pysqlite"):
        try:
            parsed = make_url(text)
        except (ArgumentError, ValueError):
            raise LedgerError(f"not a database URL: {_head(text)!r} (expected {EXPECTED})") from None
        if not parsed.database or parsed.database == ":memory:":
            raise LedgerError(f"{_shown(parsed)}: the ledger needs a SQLite file, not an in-memory database "
                              "(write sqlite:///PATH)")
        return parsed.set(drivername="sqlite", database=str(Path(parsed.database).expanduser()))
    parsed = _server_url(scheme.group(1), text[scheme.end():])
    if backend in ("postgresql", "postgres") and driver in ("", "psycopg"):
        if not parsed.database:
            raise LedgerError(f"{_shown(parsed)}: the URL names no database (…/DBNAME)")
        return parsed.set(drivername="postgresql+psycopg")
    raise LedgerError(f"unsupported database URL {_shown(parsed)!r}: the ledger uses SQLite "
                      "(a path or sqlite:///PATH) or PostgreSQL (postgresql+psycopg://...)")


def _server_url(scheme: str, rest: str) -> URL:
    """``USER:PASSWORD@HOST:PORT/DB?QUERY`` (every part optional but the scheme); percent-escapes decoded."""
    userinfo: str | None = None
    at = rest.rfind("@")
    if at >= 0:
        userinfo, rest = rest[:at], rest[at + 1:]
    user, password = None, None
    if userinfo is not None:
        name, colon, secret = userinfo.partition(":")
        if not colon and "@" in name:  # "user@secret@host": which part is the user is anyone's guess
            raise LedgerError(f"not a database URL: the credentials of the {scheme}:// URL hold an @ and no "
                              "':' (write USER:PASSWORD@HOST; percent-encode @ in a user name as %40)")
        user, password = unquote(name) or None, (unquote(secret) if colon else None)
    shown_user = "" if user is None else _head(user, 63)
    masked = f"{scheme}://" + (f"{shown_user}{':***' if password is not None else ''}@"
                               if userinfo is not None else "")
    location, _, query = rest.partition("?")
    hostport, _, database = location.partition("/")
    host, port_text = hostport, ""
    if hostport.startswith("["):  # [IPv6]:PORT
        close = hostport.find("]")
        host, port_text = hostport[1:close], hostport[close + 1:].removeprefix(":")
    elif ":" in hostport:
        host, _, port_text = hostport.rpartition(":")
    if not _HOST.match(host) or (hostport.startswith("[") and "]" not in hostport):
        raise LedgerError(f"not a database URL: the host of {masked}… is not a host name or address "
                          f"(expected {EXPECTED}; percent-encode an @ in a database name or option)")
    port = None
    if port_text:
        if not port_text.isascii() or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise LedgerError(f"not a database URL: {masked}{_head(host, 63)}:{_head(port_text, 20)}…: the "
                              "port must be a number from 1 to 65535")
        port = int(port_text)
    options: dict[str, list[str]] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        options.setdefault(key, []).append(value)
    return URL.create(scheme, username=user, password=password, host=unquote(host) or None, port=port,
                      database=unquote(database) or None,
                      query={k: v[0] if len(v) == 1 else tuple(v) for k, v in options.items()})


def _head(text: str, limit: int = _SHOWN_MAX) -> str:
    """A long value shown by its beginning only."""
    return text if len(text) <= limit else text[:limit] + "…"


def _shown(url: URL) -> str:
    return url.render_as_string(hide_password=True)


def describe(url: URL) -> str:
    """The URL as shown to users (no password)."""
    return _shown(url)


def is_sqlite(url: URL) -> bool:
    return url.get_backend_name() == "sqlite"


def make_engine(url: URL, *, read_only: bool = False) -> Engine:
    """An engine on ``url``. ``read_only`` (the CLI, the forecaster): the database cannot be changed through
    it, not by a byte. SQLite is opened with ``mode=ro`` and ``query_only`` (no journal-mode change: a
    rollback-journal file stays one), PostgreSQL with ``default_transaction_read_only``."""
    if is_sqlite(url):
        if read_only:
            path = url.database or ""

            def connect() -> sqlite3.Connection:
                # A URI filename: the path percent-encoded, so "?" or "#" in it are not URI syntax.
                return sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True, timeout=30,
                                       check_same_thread=False)

            # A connection per use (NullPool): "sqlite://" alone would get the in-memory database's
            # one-connection-per-thread pool.
            engine = create_engine("sqlite://", creator=connect, poolclass=NullPool)
            event.listen(engine, "connect", _sqlite_read_only)
            return engine
        engine = create_engine(url, connect_args={"timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    args: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_S, "application_name": "queue-manager-ledger"}
    if read_only:
        args["options"] = "-c default_transaction_read_only=on"
    return create_engine(url, pool_pre_ping=True, pool_size=2, max_overflow=2, connect_args=args)


def _sqlite_read_only(dbapi_connection: Any, _record: Any) -> None:
    if not isinstance(dbapi_connection, sqlite3.Connection):  # pragma: no cover - the SQLite driver
        return
    cur = dbapi_connection.cursor()
    cur.execute("PRAGMA query_only=ON")  # per connection; changes nothing in the file
    cur.close()


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


def transient(err: SQLAlchemyError, url: URL | None = None) -> bool:
    """A fault of the connection or the server (retry later), not of what was asked. A SQLite file has no
    server that comes back: only a lock held by another process passes; any other failure to open or read
    it (a directory, no permission, not a database) is permanent."""
    if url is not None and is_sqlite(url):
        text = first_line(err).lower()
        return "locked" in text or "busy" in text
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
        kind = LedgerUnavailable if transient(err, url) else LedgerError
        raise kind(f"cannot use the ledger database {_shown(url)}: {first_line(err)}") from None


def check_sqlite_path(url: URL, *, writer: bool) -> None:
    """What makes a SQLite ledger path unusable for good (LedgerError, one line): a name too long, a
    directory or a device, a missing file to read, a file or directory without permission. A writer's
    missing directories are created."""
    path = Path(url.database or "")
    shown = _head(str(path), 200)
    too_long = next((p for p in path.parts if len(os.fsencode(p)) > 255), None)
    if too_long is not None:
        raise LedgerError(f"the ledger path {shown} has a name of {len(os.fsencode(too_long))} bytes "
                          "(at most 255)")
    try:
        exists = path.exists()
        if exists and path.is_dir():
            raise LedgerError(f"the ledger path {shown} is a directory, not a SQLite file")
        if exists and not path.is_file():
            raise LedgerError(f"the ledger path {shown} is not a regular file")
        if not writer:
            if not exists:
                raise LedgerError(f"no ledger database at {shown} (the operator creates it; or pass --db "
                                  f"URL, or set {ENV_URL})")
            if not os.access(path, os.R_OK):
                raise LedgerError(f"cannot read the ledger database {shown}: permission denied")
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        if exists and not os.access(path, os.R_OK | os.W_OK):
            raise LedgerError(f"cannot write the ledger database {shown}: permission denied")
        if not os.access(path.parent, os.W_OK | os.X_OK):
            raise LedgerError(f"cannot write in the directory of the ledger database {shown}: permission "
                              "denied")
    except OSError as err:
        raise LedgerError(f"cannot use the ledger path {shown}: {err.strerror}") from None


def connect_checked(url: URL, *, migrate: bool) -> Engine:
    """An engine on ``url`` whose schema is this version's (migrated when ``migrate``; else read-only)."""
    if is_sqlite(url):
        check_sqlite_path(url, writer=migrate)
    engine = make_engine(url, read_only=not migrate)
    try:
        check_engine(engine, url, migrate=migrate)
    except LedgerError:
        engine.dispose()
        raise
    return engine
