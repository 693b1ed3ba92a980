"""`qm run` refuses a ledger it cannot use in one line at start, on the real control plane, before it
reconciles anything: a URL that is not a supported database, and a schema migrated by a newer version
(SQLite and PostgreSQL). Exit code 2, the error line names the problem, no traceback, no password."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes import client as k8s
from sqlalchemy import create_engine, make_url, text

from ledger.db import resolve_url
from ledger.ledger import open_ledger
from tests.integration.ledger_operator import ROOT, ledger_admin, ledger_plane
from tests.integration.test_operator_harness import free_port

pytestmark = pytest.mark.integration
__all__ = ["ledger_admin", "ledger_plane"]  # the fixtures, used by name


def _qm_run(kubeconfig: Path, url: str, spool: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "qm", "run", "--kubeconfig", str(kubeconfig), "--no-leader-elect",
         "--bind-address", "127.0.0.1", "--health-port", str(free_port()), "--metrics-port", str(free_port()),
         "--ledger", url, "--ledger-spool", str(spool)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def _refused(done: subprocess.CompletedProcess[str]) -> str:
    """The one error line of a `qm run` that refused to start."""
    assert done.returncode == 2, done.stderr[-4000:]
    assert "Traceback" not in done.stderr + done.stdout
    errors = [line for line in done.stderr.splitlines() if line.startswith("qm run: error: ")]
    assert len(errors) == 1, done.stderr[-4000:]
    return errors[0]


def test_an_unsupported_database_url_is_one_line_at_start(ledger_admin: tuple[k8s.ApiClient, Path],
                                                           tmp_path: Path) -> None:
    _, kubeconfig = ledger_admin
    line = _refused(_qm_run(kubeconfig, "mysql://ledger:secret@db/ledger", tmp_path / "spool"))
    assert "unsupported database URL 'mysql://ledger:***@db/ledger'" in line and "secret" not in line


def test_a_schema_from_a_newer_version_is_one_line_at_start(ledger_admin: tuple[k8s.ApiClient, Path],
                                                            ledger_url: str, tmp_path: Path) -> None:
    _, kubeconfig = ledger_admin
    open_ledger(ledger_url, spool_dir=tmp_path / "first").close()  # created and migrated by this version
    engine = create_engine(resolve_url(ledger_url))
    with engine.begin() as conn:  # as a later version's migration would leave it
        conn.execute(text("UPDATE alembic_version SET version_num = '0042'"))
    engine.dispose()
    line = _refused(_qm_run(kubeconfig, ledger_url, tmp_path / "spool"))
    assert "schema is at revision 0042, which this queue-manager does not know" in line
    password = make_url(ledger_url).password if "://" in ledger_url else None
    assert password is None or str(password) not in line
