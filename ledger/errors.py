"""Errors of the ledger, each printed by `qm` and the operator as one line (never a traceback)."""

from __future__ import annotations

from fairshare.errors import QueueManagerError


class LedgerError(QueueManagerError):
    """The ledger cannot be used as asked: a bad URL, a server that does not answer at start, a schema
    written by a newer version, a missing database file for a read-only query."""


class LedgerUnavailable(LedgerError):
    """The database stopped answering during a query (records are spooled, queries are not)."""
