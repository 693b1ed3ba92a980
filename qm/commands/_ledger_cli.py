"""What `qm usage`, `qm cost` and `qm audit` share: the time window, --db, --by, --where and the
table/csv/json output. Figures are exact decimals from the ledger, rounded half-even only here: two
decimals in a table, six in csv and json."""

from __future__ import annotations

import argparse
import csv
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
# Where the operator's PostgreSQL URL lives (docs/ledger.md, "Pointing it at PostgreSQL").
DEFAULT_SECRET = "queue-manager/queue-manager-ledger"
SECRET_KEY = "url"


def add_common(parser: argparse.ArgumentParser, *, since: str) -> None:
    parser.add_argument("--since", default=since, metavar="DURATION",
                        help=f"how far back from --until (90s, 30m, 336h, 14d, 2w; default {since})")
    parser.add_argument("--until", metavar="TIME", help="end of the window (RFC 3339; default: now)")
    parser.add_argument("--db", metavar="URL", help="the ledger: a SQLite path, sqlite:///PATH or "
                        "postgresql+psycopg://USER:PASSWORD@HOST:PORT/DB (default: $QM_LEDGER_URL, else "
                        "~/.local/share/queue-manager/ledger.db)")
    add_cluster_source(parser)
    parser.add_argument("-o", "--output", default="table", choices=FORMATS, help="output format")


def add_cluster_source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", metavar="FILE", help="instead of --db: the ledger the operator "
                        f"writes, its URL read from the Secret --ledger-secret (key {SECRET_KEY!r})")
    parser.add_argument("--context", help="kubeconfig context (with --kubeconfig)")
    parser.add_argument("--ledger-secret", default=DEFAULT_SECRET, metavar="NAMESPACE/NAME",
                        help=f"the operator's ledger Secret (default {DEFAULT_SECRET}; docs/ledger.md)")


def add_grouping(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--by", default="team", metavar="DIMS",
                        help="comma-separated: team, project, cost-center, namespace, local-queue, "
                        "priority-class, flavor, resource, currency, user (who submitted it; default "
                        "team)")
    parser.add_argument("--where", action="append", default=[], metavar="DIM=VALUE",
                        help="keep only this value of a dimension (repeatable), e.g. team=research")


# The times a ledger holds: from the Unix epoch (its times are milliseconds since then) to the last second
# a report can print (RFC 3339 has four-digit years).
EARLIEST = 0.0
LATEST = 253402300799.0  # 9999-12-31T23:59:59Z
EARLIEST_TEXT = "1970-01-01T00:00:00Z"
LATEST_TEXT = "9999-12-31T23:59:59Z"


def moment(flag: str, text: str, *, latest: float = LATEST, latest_text: str = LATEST_TEXT) -> float:
    """An RFC 3339 flag value inside [1970-01-01T00:00:00Z, latest] (one line otherwise). An empty value is
    an error, never "now": leave the flag out for now."""
    from fairshare.errors import InputError
    from fairshare.manifests import parse_time
    from qm.cli import UserError

    if not text.strip():
        raise UserError(f"{flag}: empty; give an RFC 3339 time such as 2027-01-15T12:00:00Z (leave the flag "
                        "out for now)")
    try:
        value = parse_time(text)
    except InputError:
        raise UserError(f"{flag}: not an RFC 3339 time: {short(text)!r}") from None
    except (OverflowError, ValueError):
        raise UserError(f"{flag}: out of range: {short(text)!r}") from None
    if not EARLIEST <= value <= latest:
        raise UserError(f"{flag}: {short(text)} is outside the times a ledger holds ({EARLIEST_TEXT} to "
                        f"{latest_text})")
    return value


def short(text: str, limit: int = 80) -> str:
    """A flag value as an error message shows it: its beginning when it is long."""
    return text if len(text) <= limit else text[:limit] + "…"


def window(args: argparse.Namespace) -> tuple[float, float, float]:
    """(since, until, now) in epoch seconds; the clock is read here, at the shell's edge. The window lies
    inside the times a ledger holds (one line otherwise)."""
    from fairshare.durations import parse_duration
    from fairshare.timestamps import rfc3339
    from qm.cli import UserError

    now = time.time()
    until = now if args.until is None else moment("--until", args.until)
    try:
        span = float(parse_duration(args.since))
    except ValueError as err:
        raise UserError(f"--since: {err} (got {short(args.since)!r})") from None
    if until - span < EARLIEST:
        most = int((until - EARLIEST) // 86400)
        raise UserError(f"--since: {short(args.since)} before {rfc3339(until)} reaches before "
                        f"{EARLIEST_TEXT}, the earliest time a ledger holds (at most {most}d here)")
    return until - span, until, now


def limit(text: str | None, *, most: int = 1_000_000) -> int | None:
    """--limit N: a positive integer of at most `most` (one line otherwise)."""
    from qm.cli import UserError

    if text is None:
        return None
    stripped = text.strip()
    if not (stripped.isascii() and stripped.isdigit()) or not stripped.strip("0"):
        raise UserError(f"--limit: must be a positive integer (got {short(text)})")
    # Compared as text first: int() of thousands of digits is refused (and slow) in Python.
    if len(stripped.lstrip("0")) > len(str(most)) or int(stripped) > most:
        raise UserError(f"--limit: at most {most:,} records (got {short(text)})")
    return int(stripped)


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

    return open_ledger(ledger_url(args), read_only=True)


def ledger_url(args: argparse.Namespace) -> str | None:
    """--db, or with --kubeconfig the URL in the operator's Secret (None: $QM_LEDGER_URL or the default)."""
    from qm.cli import UserError

    if args.db is not None and not str(args.db).strip():
        raise UserError("--db: empty; give a SQLite path or a database URL (leave the flag out for "
                        "$QM_LEDGER_URL or the default)")
    if not getattr(args, "kubeconfig", None):
        if getattr(args, "context", None):
            raise UserError("--context needs --kubeconfig")
        return str(args.db) if args.db else None
    if args.db:
        raise UserError("--db and --kubeconfig exclude each other (--kubeconfig reads the URL from the "
                        "operator's Secret)")
    return secret_url(args.kubeconfig, args.context, args.ledger_secret)


def secret_url(kubeconfig: str, context: str | None, secret: str) -> str:
    """The ledger URL in `secret` (NAMESPACE/NAME, key "url"); every failure is one line."""
    import base64
    import binascii

    from kubernetes import client as k8s

    from qm.cli import UserError
    from qm.live import connect

    namespace, sep, name = secret.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise UserError(f"--ledger-secret: expected NAMESPACE/NAME (got {secret!r})")
    with connect(kubeconfig, context) as reader:
        core = k8s.CoreV1Api(reader.api)
        obj = reader._call(f"get Secret {secret}", lambda: core.read_namespaced_secret(
            name, namespace, _request_timeout=reader.timeout), absent=(404,))
    if obj is None:
        raise UserError(f"--ledger-secret: no Secret {secret} at {reader.server} (the operator's ledger URL "
                        "is kept there when it writes to PostgreSQL; a SQLite ledger on the operator's "
                        "volume is read with --db inside the pod)")
    data = dict(obj.data or {})
    if SECRET_KEY not in data:
        raise UserError(f"--ledger-secret: Secret {secret} has no key {SECRET_KEY!r} (keys: "
                        f"{', '.join(sorted(data)) or 'none'})")
    try:
        return base64.b64decode(data[SECRET_KEY], validate=True).decode().strip()
    except (binascii.Error, UnicodeDecodeError):
        raise UserError(f"--ledger-secret: Secret {secret} key {SECRET_KEY!r} is not base64 text") from None


def hours(seconds: Decimal, places: int, base: int = 1) -> str:
    """Resource-seconds (of the Kubernetes base unit: bytes, cores) as hours of a unit of ``base`` of them
    (2^30 for GiB-hours)."""
    return fixed(seconds / (3600 * base), places)


def fixed(value: Decimal, places: int) -> str:
    return str(value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_EVEN))


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
