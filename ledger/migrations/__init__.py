"""Alembic migrations of the ledger schema (run by :func:`ledger.db.migrate`, not by the alembic CLI)."""
