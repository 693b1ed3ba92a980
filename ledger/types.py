"""Column types shared by the schema and its migrations (kept stable: migrations import them)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sqlalchemy import JSON, Numeric, String
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine


class ExactDecimal(TypeDecorator[Decimal]):
    """An exact decimal: NUMERIC(38, 9) on PostgreSQL; text on SQLite, whose NUMERIC would round the value
    through a float. Sums over these columns are made in Python (Decimal), never in SQLite."""

    impl = String(64)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(Numeric(38, 9, asdecimal=True))
        return dialect.type_descriptor(String(64))

    def process_bind_param(self, value: Decimal | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        if not isinstance(value, Decimal) or not value.is_finite():
            raise ValueError(f"not a finite Decimal: {value!r}")
        return value if dialect.name == "postgresql" else str(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> Decimal | None:
        if value is None:
            return None
        return value if isinstance(value, Decimal) else Decimal(str(value))


def json_type() -> TypeEngine[Any]:
    """JSON (text on SQLite), JSONB on PostgreSQL."""
    return JSON().with_variant(JSONB(), "postgresql")
