"""What `qm usage`, `qm cost` and `qm audit` share: the time window, --db, --by, --where and the
table/csv/json output. Figures are exact decimals from the ledger, rounded half-even only here: two
decimals in a table, six in csv and json."""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import sys
import time
from collections.abc import Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ledger.ledger import Ledger
    from ledger.queries import Dim

FORMATS = ("table", "csv", "json")


def add_common(parser: argparse.ArgumentParser, *, since: str) -> None:
    parser.add_argument("--since", default=since, metavar="DURATION",
                        help=f"how far back from --until (90s, 30m, 336h, 14d, 2w; default {since})")
    parser.add_argument("--until", metavar="TIME", help="end of the window (RFC 3339; default: now)")
    parser.add_argument("--db", metavar="URL", help="the ledger: a SQLite path, sqlite:///PATH or "
                        "postgresql+psycopg://USER:PASSWORD@HOST:PORT/DB (default: $QM_LEDGER_URL, else "
                        "~/.local/share/queue-manager/ledger.db)")
    parser.add_argument("-o", "--output", default="table", choices=FORMATS, help="output format")


def add_grouping(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--by", default="team", metavar="DIMS",
                        help="comma-separated: team, project, cost-center, namespace, local-queue, "
                        "priority-class, flavor, resource (default team)")
    parser.add_argument("--where", action="append", default=[], metavar="DIM=VALUE",
                        help="keep only this value of a dimension (repeatable), e.g. team=research")


def window(args: argparse.Namespace) -> tuple[float, float, float]:
    """(since, until, now) in epoch seconds; the clock is read here, at the shell's edge."""
    from fairshare.durations import parse_duration
    from fairshare.errors import InputError
    from fairshare.manifests import parse_time
    from qm.cli import UserError

    now = time.time()
    until = now
    if args.until:
        try:
            until = parse_time(args.until)
        except InputError:
            raise UserError(f"--until: not an RFC 3339 time: {args.until!r}") from None
    try:
        span = float(parse_duration(args.since))
    except ValueError as err:
        raise UserError(f"--since: {err} (got {args.since!r})") from None
    return until - span, until, now


def dims(text: str, *, flag: str = "--by") -> tuple[Dim, ...]:
    from ledger.queries import Dim
    from qm.cli import UserError

    out: list[Dim] = []
    for part in (p.strip() for p in text.split(",")):
        try:
            dim = Dim(part)
        except ValueError:
            known = ", ".join(d.value for d in Dim)
            raise UserError(f"{flag}: unknown dimension {part!r} (known: {known})") from None
        if dim not in out:
            out.append(dim)
    return tuple(out)


def filters(items: Sequence[str]) -> tuple[tuple[Dim, str], ...]:
    from qm.cli import UserError

    out = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise UserError(f"--where: expected DIM=VALUE (got {item!r})")
        out.append((dims(name, flag="--where")[0], value))
    return tuple(out)


def open_read(args: argparse.Namespace) -> Ledger:
    from ledger.ledger import open_ledger

    return open_ledger(args.db, read_only=True)


def hours(seconds: Decimal, places: int) -> str:
    return fixed(seconds / 3600, places)


def fixed(value: Decimal, places: int) -> str:
    return str(value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_EVEN))


def rfc3339(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def emit(fmt: str, headers: Sequence[str], rows: Sequence[Sequence[str]], *, title: str,
         meta: dict[str, object], keys: Sequence[str] | None = None) -> None:
    """Print ``rows`` under ``headers`` as a table (rich), csv, or json (``keys`` name the json fields)."""
    if fmt == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(headers)
        writer.writerows(rows)
        return
    if fmt == "json":
        names = list(keys or headers)
        json.dump({**meta, "rows": [dict(zip(names, r, strict=True)) for r in rows]}, sys.stdout, indent=2,
                  ensure_ascii=False)
        sys.stdout.write("\n")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_edge=False, header_style="bold")
    numeric = [bool(rows) and all(_is_number(r[i]) for r in rows) for i in range(len(headers))]
    for header, right in zip(headers, numeric, strict=True):
        table.add_column(header, justify="right" if right else "left", overflow="fold")
    for row in rows:
        table.add_row(*row)
    # Piped output gets the table's natural width rather than 80 columns that would fold it.
    console = Console(width=None if sys.stdout.isatty() else 10_000, highlight=False, soft_wrap=False)
    console.print(table)
    if not rows:
        console.print("(no rows in this window)")


def _is_number(text: str) -> bool:
    try:
        Decimal(text)
    except ArithmeticError:
        return False
    return text != ""
