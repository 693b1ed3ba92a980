"""The daily rollup of closed segments (``usage_daily``): what `qm usage --since 180d` reads instead of
scanning every segment of 180 days.

A segment whose interval and outcome became final (`ledger.life.FinalPart`, emitted once by the rules
when its attempt ends) adds, for every UTC day its interval overlaps, its milli-unit-milliseconds in that
day and the same weighted by its price (money = that / MILLI_MS_PER_UNIT_HOUR / the base units of the
resource's unit: 2^30 for a GiB), under the reporting dimensions of the segment, its currency and its
outcome. Written in the batch's transaction, so it is exactly as
idempotent as the segments (a replayed record closes nothing and adds nothing).

A report over ``[since, until)`` then reads: the rollup for the whole UTC days inside the window, the
closed segments overlapping the parts of a day at either edge (clipped), and every segment still
running (useful or lost is not known yet, so it is never in the rollup). The sum is the same as the
scan of every segment (tests/integration/test_ledger_store.py compares them).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from decimal import Decimal
from typing import Any

from sqlalchemy import String, and_, select, tuple_, type_coerce
from sqlalchemy.dialects import postgresql as pg
from sqlalchemy.dialects import sqlite as sq
from sqlalchemy.engine import Connection

from . import schema as t
from .life import FinalPart
from .records import Millis

DAY_MS = 86_400_000
PRICE_QUANTUM = Decimal("1e-9")  # what NUMERIC(38, 9) keeps of a price on PostgreSQL
DIMS = ("team", "namespace", "local_queue", "priority_class", "project", "cost_center", "flavor", "resource",
        "currency")
Key = tuple[int, str, str, str, str, str, str, str, str, str, str]  # day, the dims, outcome
_N = len(DIMS)
_CHUNK = 200


def day_parts(start_ms: Millis, end_ms: Millis) -> Iterator[tuple[Millis, Millis]]:
    """(UTC day start, milliseconds of [start, end) inside that day), for every day it overlaps."""
    day = start_ms - start_ms % DAY_MS
    while day < end_ms:
        ms = min(end_ms, day + DAY_MS) - max(start_ms, day)
        if ms > 0:
            yield day, ms
        day += DAY_MS


def contributions(finals: Iterable[FinalPart], *, round_prices: bool) -> dict[Key, list[Any]]:
    """Per rollup key: [milli-unit-milliseconds, price-weighted milli-unit-milliseconds]. ``round_prices``:
    weigh by the price as the database keeps it (PostgreSQL rounds it to 1e-9), so that the rollup and a
    scan of the segments give the same money."""
    out: dict[Key, list[Any]] = {}
    for f in finals:
        d = f.dims
        price = f.price
        if price is not None and round_prices:
            price = price.quantize(PRICE_QUANTUM)
        for day, ms in day_parts(f.start_ms, f.end_ms):
            key: Key = (day, d.team, d.namespace, d.local_queue, d.priority_class, d.project, d.cost_center,
                        f.flavor, f.resource, f.currency, str(f.outcome))
            acc = out.setdefault(key, [0, Decimal(0)])
            acc[0] += f.quantity * ms
            if price is not None:
                acc[1] += Decimal(f.quantity * ms) * price
    return out


def _columns() -> tuple[Any, ...]:
    c = t.usage_daily.c
    return (c.day_ms, c.team, c.namespace, c.local_queue, c.priority_class, c.project, c.cost_center,
            c.flavor, c.resource, c.currency, c.outcome)


def write(conn: Connection, finals: Sequence[FinalPart]) -> None:
    """Add ``finals`` to the rollup (read, add, upsert: SQLite keeps exact decimals as text)."""
    if not finals:
        return
    adds = contributions(finals, round_prices=conn.dialect.name == "postgresql")
    if not adds:
        # Only zero-length segments (admitted and evicted within Kueue's one-second timestamps): nothing to
        # add. An upsert of no rows would run as INSERT ... DEFAULT VALUES ON CONFLICT, a syntax error on
        # SQLite and a NOT NULL violation on PostgreSQL, and take the whole batch with it.
        return
    keys = sorted(adds)
    c = t.usage_daily.c
    existing: dict[Key, tuple[Decimal, Decimal]] = {}
    cols = _columns()
    for i in range(0, len(keys), _CHUNK):
        chunk = keys[i:i + _CHUNK]
        for row in conn.execute(select(*cols, c.milli_ms, c.priced_milli_ms).where(tuple_(*cols).in_(chunk))):
            existing[tuple(row[:_N + 2])] = (row.milli_ms, row.priced_milli_ms)
    rows = []
    for key in keys:
        milli, priced = adds[key]
        old = existing.get(key)
        if old is not None:
            milli, priced = Decimal(milli) + old[0], priced + old[1]
        rows.append({"day_ms": key[0], **dict(zip(DIMS, key[1:_N + 1], strict=True)), "outcome": key[_N + 1],
                     "milli_ms": Decimal(milli), "priced_milli_ms": priced})
    stmt: Any = pg.insert(t.usage_daily) if conn.dialect.name == "postgresql" else sq.insert(t.usage_daily)
    stmt = stmt.on_conflict_do_update(
        index_elements=["day_ms", *DIMS, "outcome"],
        set_={"milli_ms": stmt.excluded.milli_ms, "priced_milli_ms": stmt.excluded.priced_milli_ms})
    conn.execute(stmt, rows)


def full_days(since_ms: Millis, until_ms: Millis) -> tuple[Millis, Millis] | None:
    """The whole UTC days inside [since, until), as [first, end); None when there is none."""
    first = -(-since_ms // DAY_MS) * DAY_MS
    end = until_ms - until_ms % DAY_MS
    return (first, end) if end > first else None


def read(conn: Connection, first_ms: Millis, end_ms: Millis, by: Sequence[str],
         filters: Sequence[tuple[str, str]]) -> Iterator[tuple[tuple[str, ...], str, str, Decimal, Decimal]]:
    """(the `by` dimensions' values, resource, outcome, milli-unit-ms, price-weighted milli-unit-ms) per
    rollup row of the days [first, end), filtered. The resource says what the price is per (its unit)."""
    c = t.usage_daily.c
    wanted = [getattr(c, d) for d in by]
    # Read as the database returns them (a numeric on PostgreSQL, text on SQLite): Decimal() of either is
    # exact, and it spares the column type's per-value conversion (a third of the report's time).
    where = and_(c.day_ms >= first_ms, c.day_ms < end_ms, *[getattr(c, d) == v for d, v in filters])
    stmt = select(*wanted, c.resource, c.outcome, type_coerce(c.milli_ms, String),
                  type_coerce(c.priced_milli_ms, String)).where(where)
    n = len(wanted)
    for row in conn.execute(stmt):
        yield row[:n], row[n], row[n + 1], Decimal(row[n + 2]), Decimal(row[n + 3])
