"""Prices per unit-hour of the resource's unit (GiB-hour for memory), a currency on every price, and the
team, LocalQueue, project and user of a workload on its audit rows.

Before this revision a price was applied per Kubernetes base unit: a memory price per *byte*-hour, so the
sample policy's `memory: "0.004"` (meant per GiB-hour) billed millions. From here on a price is per GPU-,
core- or GiB-hour (fairshare/resource_units.py). What the ledger kept is migrated without loss:

- every row stays; quantities, times and usage are unchanged (usage is read in GiB-hours from now on);
- a byte resource's price (memory, ephemeral-storage, hugepages-*) keeps the number the policy wrote and
  is read per GiB-hour, as the policy's author meant (0.004), and the costs kept per life
  (`workload_usage`) are computed again from the segments by the new rule; the daily rollup needs no
  change (its weighted sums are read per GiB from now on);
- except a price below 0.000001 per GiB-hour, which can only have been meant per byte-hour (the parser now
  refuses it): it is converted to its price per GiB-hour (x 2^30), so its costs stay what they were
  (the segments, the transitions that carry it and the rollup's weighted sums follow);
- every price gets a currency: the default, USD (policies had none); usage of the unknown flavor of
  inferred attempts, never priced, gets none (""); the holdings a transition records carry it too;
- the rollup gains the currency as a key (money in two currencies never adds up);
- the audit table gains `local_queue`, `project` and `user_name` (empty for the rows before).

The spool's format 1 lines (written before this revision, applied after it) are read by the same rule
(ledger.codec.v1_price, v1_currency).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from typing import Any

import sqlalchemy as sa
from alembic import op

from ledger.types import ExactDecimal, json_type

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

NAME = 253
CURRENCY = 16
DAY_MS = 86_400_000
GIB = 2**30
MIN_BYTE_PRICE = Decimal("0.000001")  # fairshare.resource_units.MIN_BYTE_PRICE, as of this revision
DEFAULT_CURRENCY = "USD"
MILLI_MS_PER_UNIT_HOUR = 1000 * 3_600_000
COST_QUANTUM = Decimal("1e-9")
DIMS = ("team", "namespace", "local_queue", "priority_class", "project", "cost_center", "flavor", "resource")
_CHUNK = 500


def _is_bytes(resource: str) -> bool:
    return resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-")


def _per_byte(resource: str, price: Decimal | None) -> bool:
    return price is not None and _is_bytes(resource) and 0 < price < MIN_BYTE_PRICE


def _part_cost(quantity: int, duration_ms: int, price: Decimal | None, base: int) -> Decimal:
    """ledger.life.part_cost as of this revision (a migration keeps its own copy of the rules it applies)."""
    if price is None or quantity == 0 or duration_ms == 0:
        return Decimal(0)
    with localcontext() as ctx:
        ctx.prec = 80
        exact = Decimal(quantity * duration_ms) * price / (MILLI_MS_PER_UNIT_HOUR * base)
        return exact.quantize(COST_QUANTUM, rounding=ROUND_HALF_EVEN)


def _day_parts(start_ms: int, end_ms: int) -> Iterable[tuple[int, int]]:
    day = start_ms - start_ms % DAY_MS
    while day < end_ms:
        ms = min(end_ms, day + DAY_MS) - max(start_ms, day)
        if ms > 0:
            yield day, ms
        day += DAY_MS


def upgrade() -> None:
    conn = op.get_bind()
    segments = sa.table("segments", *[sa.column(c) for c in (
        "uid", "attempt", "part", *DIMS, "quantity", "start_ms", "end_ms", "outcome", "currency")],
        sa.column("price", ExactDecimal()))

    # 1. The currency of every price kept: the default (none for the unknown flavor, never priced).
    op.add_column("segments", sa.Column("currency", sa.String(CURRENCY), nullable=False,
                                        server_default=sa.text("''")))
    conn.execute(segments.update().where(segments.c.flavor != "").values(currency=DEFAULT_CURRENCY))

    # 2. Byte resources' prices that can only have been per byte-hour: per GiB-hour (the same costs).
    converted: list[Any] = []
    bytes_ = sa.or_(segments.c.resource.in_(["memory", "ephemeral-storage"]),
                    segments.c.resource.like("hugepages-%"))
    for r in conn.execute(sa.select(segments).where(segments.c.price.is_not(None), bytes_)).fetchall():
        price = Decimal(r.price)
        if _per_byte(r.resource, price):
            converted.append(r)
            conn.execute(segments.update().where(
                segments.c.uid == r.uid, segments.c.attempt == r.attempt, segments.c.part == r.part)
                .values(price=price * GIB))
    _convert_transitions(conn)

    # 3. The rollup, keyed by currency too; the weighted sums of converted prices follow them.
    _rebuild_rollup(conn, converted)

    # 4. The costs kept per life of byte resources, computed again by the new rule.
    _recost_byte_usage(conn, segments)

    # 5. Whose workload an audited action concerns.
    for column in ("local_queue", "project", "user_name"):
        op.add_column("audit", sa.Column(column, sa.String(NAME), nullable=True))


def _convert_transitions(conn: Any) -> None:
    """The holdings a transition records ([flavor, resource, milli, price]) get their currency, and a price
    per byte-hour its price per GiB-hour, as the segments."""
    transitions = sa.table("transitions", sa.column("uid"), sa.column("seq"), sa.column("kind"),
                           sa.column("held", json_type()))
    stmt = sa.select(transitions).where(transitions.c.kind.in_(["admitted", "resized"]))
    updates: list[dict[str, Any]] = []
    for r in conn.execute(stmt).fetchall():
        held = r.held if isinstance(r.held, list) else []
        out = []
        for item in held:
            if isinstance(item, list) and len(item) == 4:
                flavor, resource, price = str(item[0]), str(item[1]), item[3]
                if price is not None and _per_byte(resource, Decimal(str(price))):
                    price = str(Decimal(str(price)) * GIB)
                item = [item[0], item[1], item[2], price, DEFAULT_CURRENCY if flavor else ""]
            out.append(item)
        if out != held:
            updates.append({"b_uid": r.uid, "b_seq": r.seq, "b_held": out})
    if updates:
        conn.execute(transitions.update().where(transitions.c.uid == sa.bindparam("b_uid"),
                                                transitions.c.seq == sa.bindparam("b_seq"))
                     .values(held=sa.bindparam("b_held", type_=json_type())), updates)


def _rebuild_rollup(conn: Any, converted: list[Any]) -> None:
    keys = [*DIMS, "currency"]
    op.create_table(
        "usage_daily_next",
        sa.Column("day_ms", sa.BigInteger, primary_key=True),
        *[sa.Column(d, sa.String(NAME), primary_key=True) for d in DIMS],
        sa.Column("currency", sa.String(CURRENCY), primary_key=True),
        sa.Column("outcome", sa.String(16), primary_key=True),
        sa.Column("milli_ms", ExactDecimal(), nullable=False),
        sa.Column("priced_milli_ms", ExactDecimal(), nullable=False),
    )
    old = sa.table("usage_daily", sa.column("day_ms"), *[sa.column(d) for d in DIMS], sa.column("outcome"),
                   sa.column("milli_ms", ExactDecimal()), sa.column("priced_milli_ms", ExactDecimal()))
    new = sa.table("usage_daily_next", sa.column("day_ms"), *[sa.column(k) for k in keys],
                   sa.column("outcome"), sa.column("milli_ms", ExactDecimal()),
                   sa.column("priced_milli_ms", ExactDecimal()))
    currency = sa.case((old.c.flavor == "", sa.literal("")), else_=sa.literal(DEFAULT_CURRENCY))
    conn.execute(new.insert().from_select(
        ["day_ms", *keys, "outcome", "milli_ms", "priced_milli_ms"],
        sa.select(old.c.day_ms, *[old.c[d] for d in DIMS], currency, old.c.outcome, old.c.milli_ms,
                  old.c.priced_milli_ms)))
    # A converted price weighs its closed segment's days x 2^30 more (the same money, read per GiB).
    deltas: dict[tuple[Any, ...], Decimal] = {}
    for r in converted:
        if r.outcome == "running" or r.end_ms is None:
            continue
        price = Decimal(r.price)
        for day, ms in _day_parts(r.start_ms, r.end_ms):
            key = (day, *(getattr(r, d) for d in DIMS), DEFAULT_CURRENCY, r.outcome)
            deltas[key] = deltas.get(key, Decimal(0)) + Decimal(r.quantity * ms) * (price * GIB - price)
    for key, delta in sorted(deltas.items()):
        where = [new.c.day_ms == key[0], *[new.c[k] == v for k, v in zip(keys, key[1:-1], strict=True)],
                 new.c.outcome == key[-1]]
        row = conn.execute(sa.select(new.c.priced_milli_ms).where(*where)).first()
        if row is not None:  # a day the retention already pruned from the rollup stays pruned
            total = Decimal(row.priced_milli_ms) + delta
            conn.execute(new.update().where(*where).values(priced_milli_ms=total))
    op.drop_table("usage_daily")
    op.rename_table("usage_daily_next", "usage_daily")
    if conn.dialect.name == "postgresql":
        op.execute("ALTER TABLE usage_daily RENAME CONSTRAINT usage_daily_next_pkey TO usage_daily_pkey")


def _recost_byte_usage(conn: Any, segments: Any) -> None:
    usage = sa.table("workload_usage", sa.column("uid"), sa.column("flavor"), sa.column("resource"),
                     sa.column("cost", ExactDecimal()), sa.column("cost_useful", ExactDecimal()),
                     sa.column("cost_lost", ExactDecimal()))
    targets = conn.execute(sa.select(usage.c.uid, usage.c.flavor, usage.c.resource)).fetchall()
    wanted = sorted({(r.uid, r.flavor, r.resource) for r in targets if _is_bytes(r.resource)})
    uids = sorted({u for u, _, _ in wanted})
    costs: dict[tuple[str, str, str], list[Decimal]] = {k: [Decimal(0), Decimal(0)] for k in wanted}
    for i in range(0, len(uids), _CHUNK):
        chunk = uids[i:i + _CHUNK]
        stmt = sa.select(segments).where(segments.c.uid.in_(chunk), segments.c.outcome != "running",
                                         segments.c.end_ms.is_not(None))
        for s in conn.execute(stmt):
            acc = costs.get((s.uid, s.flavor, s.resource))
            if acc is None:
                continue
            price = None if s.price is None else Decimal(s.price)
            duration = int(s.end_ms) - int(s.start_ms)
            acc[0 if s.outcome == "useful" else 1] += _part_cost(int(s.quantity), duration, price, GIB)
    for (uid, flavor, resource), (useful, lost) in sorted(costs.items()):
        where = (usage.c.uid == uid, usage.c.flavor == flavor, usage.c.resource == resource)
        conn.execute(usage.update().where(*where).values(cost=useful + lost, cost_useful=useful,
                                                         cost_lost=lost))


def downgrade() -> None:
    raise NotImplementedError(
        "revision 0003 re-read prices in new units and cannot be undone: restore a backup taken before the "
        "upgrade to run an older queue-manager")
