"""A real, throwaway PostgreSQL server for the ledger's tests and benchmark (no mock database).

``PostgresServer`` runs Debian's PostgreSQL binaries (``/usr/lib/postgresql/*/bin``; `.ci/run` installs the
``postgresql`` package when they are missing): ``initdb`` into a temporary directory, then ``pg_ctl`` on a
free loopback port, with password authentication (the ledger's URL carries the password, as it would from
a Secret). PostgreSQL refuses to run as root, so under root the server runs as the ``postgres`` user
(created by the package). ``stop()``/``start()`` really stop and start the server (the spool tests).

Fixtures (registered by tests/conftest.py): ``postgres_server`` (one per session), ``postgres_url`` (a fresh
database per test), ``ledger_url`` (parametrized: a SQLite file and a PostgreSQL database).
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

PASSWORD_USER = "ledger"


class PostgresMissing(RuntimeError):
    pass


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise PostgresMissing("PostgreSQL binaries not found in /usr/lib/postgresql/*/bin "
                              "(apt-get install -y postgresql; .ci/run does it)")
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    def __init__(self) -> None:
        self.bin = _bin_dir()
        self.root = Path(tempfile.mkdtemp(prefix="qm-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = _free_port()
        self.password = secrets.token_hex(12)
        self._user: dict[str, Any] = {}
        if os.geteuid() == 0:
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                raise PostgresMissing("running as root and there is no 'postgres' user to run PostgreSQL "
                                      "as (the postgresql package creates it)") from None
            self._user = {"user": pw.pw_uid, "group": pw.pw_gid}
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self.root.chmod(0o700)
        pwfile = self.root / "pw"
        pwfile.write_text(self.password + "\n")
        if self._user:
            os.chown(pwfile, self._user["user"], self._user["group"])
        self._run([str(self.bin / "initdb"), "-D", str(self.data), "-U", PASSWORD_USER,
                   "--pwfile", str(pwfile), "--auth=scram-sha-256", "--encoding=UTF8", "--locale=C",
                   "--no-sync"])
        pwfile.unlink()
        self.running = False

    def _run(self, argv: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False, cwd=self.root,
                                **self._user)
        if check and result.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(argv[:2])} failed: {result.stderr.strip()} {log[-2000:]}")
        return result

    def start(self) -> None:
        # Loopback only, no Unix socket outside the temp dir; fsync off: a test server, not a ledger.
        opts = (f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.root} "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off")
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-o", opts,
                   "-w", "-t", "60", "start"])
        self.running = True

    def stop(self) -> None:
        if self.running:
            self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "-t", "60",
                       "stop"], check=False)
            self.running = False

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{PASSWORD_USER}:{self.password}@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(self.url().replace("+psycopg", ""), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def start_server() -> PostgresServer:
    server = PostgresServer()
    try:
        server.start()
    except BaseException:
        server.destroy()
        raise
    return server


def _server_or_fail() -> PostgresServer:
    try:
        return start_server()
    except PostgresMissing as err:
        # Never skipped: the ledger's PostgreSQL support is only tested against a real server.
        pytest.fail(f"a real PostgreSQL server is needed: {err}", pytrace=False)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = _server_or_fail()
    try:
        yield server
    finally:
        server.destroy()


@pytest.fixture
def own_postgres_server() -> Iterator[PostgresServer]:
    """A server of the test's own (for tests that stop and start it)."""
    server = _server_or_fail()
    try:
        yield server
    finally:
        server.destroy()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> str:
    if not postgres_server.running:
        postgres_server.start()
    return postgres_server.create_database(f"t_{secrets.token_hex(6)}")


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty ledger database: a SQLite file, then a PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "ledger.db")
    server: PostgresServer = request.getfixturevalue("postgres_server")
    if not server.running:
        server.start()
    return server.create_database(f"t_{secrets.token_hex(6)}")
