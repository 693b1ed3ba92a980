"""Alembic environment: the caller (ledger.db) passes an open connection in ``config.attributes``."""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from ledger.schema import metadata


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if not isinstance(connection, Connection):  # pragma: no cover - ledger.db always passes one
    raise RuntimeError("the ledger migrations run through ledger.db.migrate(), with a connection")
_run(connection)
