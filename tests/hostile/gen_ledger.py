"""Hostile inputs of the ledger's commands: `qm usage`, `qm cost`, `qm audit` and `qm budget status` (their
time, count, grouping and output flags, `--db` URLs and paths, the cluster-source flags) and the ledger
URL of `qm run`; each with its exact outcome (tests/hostile/generator.py's rules: exit 2, nothing on
stdout, one stderr line compared whole; or, for an extreme but valid window on a real empty ledger, the
exact report).

Expectations are computed from the input (the bound a window crosses, which character a path holds, where
the password ends), never by running `qm`; the wording is the program's. `{f}` is the case's path: a file
with `content`, a directory, nothing, or (`path_kind` "ledger") an empty ledger of this version that the
test copies there. No case reaches a server that could take seconds to answer: PostgreSQL URLs point at
127.0.0.1:1 and [::1]:1 (refused at once) or fail before any connection.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .generator import DURATION_EXAMPLES, Case

READERS = ("usage", "cost", "audit")
UNTIL = "2027-01-15T12:00:00Z"
EPOCH_TEXT, LATEST_TEXT = "1970-01-01T00:00:00Z", "9999-12-31T23:59:59Z"
LATEST_AT_TEXT = "9999-01-01T00:00:00Z, so that a budget period holding it ends before year 10000"
MISSING = "/nonexistent/ledger.db"
NO_LEDGER = "no ledger database at {path} (the operator creates it; or pass --db URL, or set QM_LEDGER_URL)"
DURATION = f"must be a duration such as {DURATION_EXAMPLES}"
ORDER = "; weeks and days come first (1d12h, not 12h1d)"
REFUSED = 'connection failed: connection to server at "{host}", port 1 failed: Connection refused'
# The ledger schema revision this version knows: the last of ledger/migrations/versions (NNNN_name.py).
HEAD = max(p.name[:4] for p in (Path(__file__).resolve().parents[2] / "ledger" / "migrations" / "versions")
           .glob("[0-9][0-9][0-9][0-9]_*.py"))

POLICY = """\
apiVersion: queuemanager.dev/v1alpha1
kind: QuotaPolicy
metadata: {name: gpus}
spec:
  flavors:
  - name: a100
    pricePerUnitHour: {nvidia.com/gpu: "2.5", memory: "0.004"}
  teams:
  - name: research
    namespaces: [research]
    quotas:
    - flavor: a100
      resources:
      - {name: nvidia.com/gpu, nominal: 4}
"""
BUDGETS = """\
  budgets:
  - name: hour
    selector: {team: research}
    period: {rolling: 1h}
    limit: {gpuHours: "8"}
    thresholds: [{percent: 80, action: alert}]
  - name: money
    selector: {team: research}
    period: {rolling: 1h}
    limit: {cost: "20"}
    thresholds: [{percent: 100, action: alert}]
"""


def _seconds(text: str) -> int:
    return int(dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())


def _rfc3339(seconds: int) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _err(command: str, message: str) -> str:
    return f"qm {command.split()[0]}: error: {message}\n"


def _case(
    id_: str,
    command: str,
    argv: tuple[str, ...],
    message: str,
    *,
    content: bytes | None = None,
    path_kind: str = "missing",
) -> Case:
    return Case(f"{command}: {id_}", command, argv, content, path_kind, 2, "", _err(command, message))


def _argv(command: str) -> tuple[str, ...]:
    return tuple(command.split())


# --- the time window ------------------------------------------------------------------------------------

_UNITS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}


def _span(text: str) -> int:
    """Seconds of a duration made of whole units (the cases' valid spans: "20833d", "1w2d", "90s")."""
    total, number = 0, ""
    for ch in text:
        if ch.isdigit():
            number += ch
        else:
            total += int(number) * _UNITS[ch]
            number = ""
    return total


# Durations outside the grammar, and the reason the grammar gives for each.
BAD_SINCE = {
    "3 days": DURATION,
    "1D": DURATION,
    "1 d": DURATION,
    "٣d": DURATION,
    "1.5.2h": DURATION,
    "1y": DURATION,
    "1mo": DURATION,
    ".5h": DURATION,
    "1.d": DURATION,
    "": DURATION,
    "-1d": DURATION + ORDER,
    "+1d": DURATION + ORDER,
    "1e3d": DURATION + ORDER,
    "0x10d": DURATION + ORDER,
    "1d1d": DURATION + ORDER,
    "1d ": DURATION + ORDER,
    " 1d": DURATION + ORDER,
    "9" * 32: DURATION,
    "9" * 33: "must be a duration of at most 32 characters",
    "1" * 200: "must be a duration of at most 32 characters",
}
# Durations that reach before 1970 from UNTIL (the window's bound), and ones just inside it.
HUGE_SINCE = ("100000000d", "99999999999999999999999999999d", "57000w", "20834d", "500004h", "2976w")
INSIDE_SINCE = ("20833d", "1w", "90s", "2976w")


def window_flags() -> Iterator[Case]:
    until_s = _seconds(UNTIL)
    most = until_s // 86400
    for command in READERS:
        argv = _argv(command)
        for text, why in BAD_SINCE.items():
            yield _case(
                f"--since {_short(text, 40)!r}",
                command,
                (*argv, f"--since={text}", "--until", UNTIL),
                f"--since: {why} (got {_short(text)!r})",
            )
        for text in HUGE_SINCE:
            if _span(text) <= until_s:
                yield _case(
                    f"--since {text} inside the window",
                    command,
                    (*argv, "--since", text, "--until", UNTIL, "--db", MISSING),
                    NO_LEDGER.format(path=MISSING),
                )
                continue
            yield _case(
                f"--since {_short(text, 40)}",
                command,
                (*argv, "--since", text, "--until", UNTIL),
                f"--since: {text} before {UNTIL} reaches before {EPOCH_TEXT}, the earliest time a "
                f"ledger holds (at most {most}d here)",
            )
        for text in INSIDE_SINCE:  # a window on the bound's inner side reaches the database
            yield _case(
                f"--since {text} (inside)",
                command,
                (*argv, "--since", text, "--until", UNTIL, "--db", MISSING),
                NO_LEDGER.format(path=MISSING),
            )
        yield from _moments(command, "--until", LATEST_TEXT, (*argv,), extra=("--since=0s",))


# Times: the text, then how it is judged (None: inside the bounds; "bad": not RFC 3339; "empty").
TIMES: dict[str, str | None] = {
    "0001-01-01T00:00:00Z": "range",
    "1969-12-31T23:59:59Z": "range",
    "1000-06-15T12:00:00Z": "range",
    "0001-01-01T00:00:00+01:00": "range",
    "9999-12-31T23:59:59-01:00": "range",
    "1970-01-01T00:00:00Z": None,
    "9999-12-31T23:59:59Z": None,
    "2027-01-15T12:00:00Z": None,
    "9998-12-31T23:59:59Z": None,
    "1970-01-01T00:00:01+00:00": None,
    "": "empty",
    "   ": "empty",
    "tomorrow": "bad",
    "now": "bad",
    "2027-13-01T00:00:00Z": "bad",
    "2027-02-30T00:00:00Z": "bad",
    "10000-01-01T00:00:00Z": "bad",
    "2027-01-01T00:00:00+25:00": "bad",
    "2027-01-01T25:00:00Z": "bad",
    "2027-01-01 T00:00:00Z": "bad",
    "1e9": "bad",
    "1800000000": "bad",
    "٢٠٢٧-01-01T00:00:00Z": "bad",
    "x" * 500: "bad",
}


def _moments(
    command: str,
    flag: str,
    latest_text: str,
    argv: tuple[str, ...],
    *,
    extra: tuple[str, ...] = (),
    policy: bool = False,
) -> Iterator[Case]:
    latest = _seconds(latest_text.split(",")[0])
    for text, kind in TIMES.items():
        if kind is None and flag == "--at" and _seconds(text) > latest:
            kind = "range"
        full = (*argv, *extra, f"{flag}={text}", "--db", MISSING)
        content = POLICY.encode() if policy else None
        path_kind = "file" if policy else "missing"
        if kind is None:
            message = NO_LEDGER.format(path=MISSING)
        elif kind == "empty":
            message = (
                f"{flag}: empty; give an RFC 3339 time such as 2027-01-15T12:00:00Z (leave the flag out "
                "for now)"
            )
        elif kind == "bad":
            message = f"{flag}: not an RFC 3339 time: {_short(text)!r}"
        else:
            message = f"{flag}: {text} is outside the times a ledger holds ({EPOCH_TEXT} to {latest_text})"
        yield _case(
            f"{flag} {_short(text, 40)!r}", command, full, message, content=content, path_kind=path_kind
        )


# --- counts, groupings, formats --------------------------------------------------------------------------


def limit_flags() -> Iterator[Case]:
    positive = "must be a positive integer"
    cases = {
        "0": positive,
        "-1": positive,
        "-99999999": positive,
        "1.5": positive,
        "1e3": positive,
        "abc": positive,
        "": positive,
        "0000": positive,
        "٣": positive,
        "0x10": positive,
        "+5": positive,
        "1" * 30: "at most 1,000,000 records",
        "1000001": "at most 1,000,000 records",
        "9" * 5000: "at most 1,000,000 records",
        "0" * 40 + "2000000": "at most 1,000,000 records",
        "99999999999999999999": "at most 1,000,000 records",
    }
    for text, why in cases.items():
        yield _case(
            f"--limit {_short(text, 30)!r}",
            "audit",
            ("audit", f"--limit={text}"),
            f"--limit: {why} (got {_short(text)})",
        )
    for text in ("1", "1000000", "0000001", " 7 "):  # inside: the database is reached
        yield _case(
            f"--limit {text!r} (inside)",
            "audit",
            ("audit", f"--limit={text}", "--db", MISSING),
            NO_LEDGER.format(path=MISSING),
        )


DIMS = "team, project, cost-center, namespace, local-queue, priority-class, flavor, resource, user, currency"


def grouping_flags(rng: random.Random) -> Iterator[Case]:
    words = [
        "colour",
        "Team",
        "TEAM",
        "teams",
        "users",
        "cost_center",
        "price",
        "",
        " ",
        "team;drop",
        "ресурс",
        "flavor\x00",
        "x" * 300,
    ]
    for command in ("usage", "cost"):
        for word in words:
            yield _case(
                f"--by {_short(word, 20)!r}",
                command,
                (command, "--by", f"team,{word}"),
                f"--by: unknown dimension {word.strip()!r} (known: {DIMS})",
            )
            yield _case(
                f"--where {_short(word, 20)!r}=x",
                command,
                (command, "--where", f"{word}=x"),
                f"--where: unknown dimension {word.strip()!r} (known: {DIMS})",
            )
        for item in ("team", "", "project:llm", "resource", rng.choice(["flavor", "namespace"])):
            yield _case(
                f"--where {item!r}",
                command,
                (command, "--where", item),
                f"--where: expected DIM=VALUE (got {item!r})",
            )
    for command in READERS:
        for fmt in ("xml", "", "TABLE", "yaml"):
            yield _case(
                f"-o {fmt!r}",
                command,
                (command, "-o", fmt),
                f"argument -o/--output: invalid choice: {fmt!r} (choose from 'table', 'csv', 'json')",
            )


# --- the database ------------------------------------------------------------------------------------------


def _sqlite_bytes(*statements: str) -> bytes:
    """A SQLite database file made with the standard library (not with the program under test)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "db"
        with sqlite3.connect(path) as conn:
            for statement in statements:
                conn.execute(statement)
        conn.close()
        return path.read_bytes()


def _in_file(command: str, argv: tuple[str, ...]) -> Iterator[Case]:
    """`--db {f}`, with {f} a directory, a device, something that is not a ledger, or missing."""
    cannot = "cannot use the ledger database sqlite:///{f}: "
    files: list[tuple[str, bytes | None, str, str]] = [
        ("a directory", None, "dir", "the ledger path {f} is a directory, not a SQLite file"),
        ("a missing file of the case", None, "missing", NO_LEDGER.format(path="{f}")),
        ("a text file", b"not a database, just text\n" * 40, "file", cannot + "file is not a database"),
        ("a file of zeros", b"\0" * 4096, "file", cannot + "file is not a database"),
        (
            "an empty file",
            b"",
            "file",
            "sqlite:///{f}: the database holds no ledger (point --db at the operator's ledger)",
        ),
        (
            "a database of other tables",
            _sqlite_bytes("CREATE TABLE invoices (id INTEGER)"),
            "file",
            "sqlite:///{f}: the database holds tables but no ledger schema version (point --db at the "
            "operator's ledger)",
        ),
        (
            "a ledger of a newer version",
            _sqlite_bytes(
                "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)",
                "INSERT INTO alembic_version VALUES ('0042')",
            ),
            "file",
            f"sqlite:///{{f}}: the ledger schema is at revision 0042, which this queue-manager does not "
            f"know (it knows up to {HEAD}): the database was migrated by a newer version; run that version, "
            "or a newer "
            "one",
        ),
        (
            "a ledger of an older version",
            _sqlite_bytes(
                "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL)",
                "INSERT INTO alembic_version VALUES ('0002')",
            ),
            "file",
            f"sqlite:///{{f}}: the ledger schema is at revision 0002, older than this version's {HEAD}: "
            "start "
            "the operator once to migrate it",
        ),
    ]
    for id_, content, kind, message in files:
        yield _case(f"--db {id_}", command, (*argv, "--db", "{f}"), message, content=content, path_kind=kind)
    yield _case(
        "--db a path under a file",
        command,
        (*argv, "--db", "{f}/ledger.db"),
        NO_LEDGER.format(path="{f}/ledger.db"),
        content=b"x",
        path_kind="file",
    )


def _urls() -> Iterator[tuple[str, str, str]]:
    """(id, --db value, the message every reader gives): paths and URLs that can never be a ledger, and
    passwords of every shape, never shown."""
    long_name = "/tmp/" + "a" * 300 + "/ledger.db"
    yield (
        "a 10,000-character path",
        "/tmp/" + "x" * 9995,
        (f"the ledger URL or path is 10000 characters long (at most 4096): {_short('/tmp/' + 'x' * 9995)}"),
    )
    yield (
        "a 4,097-character URL",
        "postgresql://u:pw@h/" + "d" * 4077,
        (
            f"the ledger URL or path is 4097 characters long (at most 4096): "
            f"{_short('postgresql://u:pw@h/' + 'd' * 4077)}"
        ),
    )
    yield (
        "a 300-byte name",
        long_name,
        (f"the ledger path {_short(long_name, 200)} has a name of 300 bytes (at most 255)"),
    )
    yield (
        "a 128-character name of 2-byte letters",
        "/tmp/" + "é" * 128,
        (f"the ledger path /tmp/{'é' * 128} has a name of 256 bytes (at most 255)"),
    )
    yield "a NUL in the path", "/tmp/led\x00ger.db", "the ledger URL or path holds a NUL character"
    yield "a device", "/dev/null", "the ledger path /dev/null is not a regular file"
    yield "the root directory", "/", "the ledger path / is a directory, not a SQLite file"
    yield "a missing file", MISSING, NO_LEDGER.format(path=MISSING)
    yield (
        "in-memory SQLite",
        "sqlite://",
        ("sqlite://: the ledger needs a SQLite file, not an in-memory database (write sqlite:///PATH)"),
    )
    yield (
        "in-memory SQLite by name",
        "sqlite:///:memory:",
        (
            "sqlite:///%3Amemory%3A: the ledger needs a SQLite file, not an in-memory database (write "
            "sqlite:///PATH)"
        ),
    )
    expected = "a SQLite file path, sqlite:///PATH or postgresql+psycopg://USER:PASSWORD@HOST:PORT/DB"
    yield "no scheme", "://ledger", f"not a database URL (no scheme before ://): expected {expected}"
    yield (
        "a scheme of symbols",
        "+++://ledger",
        f"not a database URL (no scheme before ://): expected {expected}",
    )
    unsupported = (
        ": the ledger uses SQLite (a path or sqlite:///PATH) or PostgreSQL (postgresql+psycopg://...)"
    )
    for scheme in ("mysql", "postgresql+asyncpg", "postgresql+psycopg2", "oracle", "http", "file", "redis"):
        yield (
            f"the scheme {scheme}",
            f"{scheme}://u:s3cret@db/x",
            (f"unsupported database URL '{scheme}://u:***@db/x'{unsupported}"),
        )
    for secret in (
        "p@ss",
        "@@@",
        "p@ss:w/rd?x#y",
        "a@b@c@d",
        "%40%3A",
        "s p a c e",
        "pa$$w0rd!@",
        "ünï@cødé",
        ":",
        "/@/",
        "?",
        "#@#",
    ):
        user = "ledger"
        yield (
            f"a password {secret!r} and a bad port",
            f"postgresql://{user}:{secret}@127.0.0.1:70000/db",
            (
                f"not a database URL: postgresql://{user}:***@127.0.0.1:70000…: the port must be a number "
                "from 1 "
                "to 65535"
            ),
        )
        yield (
            f"a password {secret!r} and no database",
            f"postgresql://{user}:{secret}@127.0.0.1:5432/",
            (f"postgresql://{user}:***@127.0.0.1:5432: the URL names no database (…/DBNAME)"),
        )
        yield (
            f"a password {secret!r} and a bad host",
            f"postgresql://{user}:{secret}@bad host/db",
            (
                f"not a database URL: the host of postgresql://{user}:***@… is not a host name or address "
                f"(expected {expected}; percent-encode an @ in a database name or option)"
            ),
        )
        for host in ("127.0.0.1", "[::1]"):
            yield (
                f"a password {secret!r} at {host}, refused",
                f"postgresql://{user}:{secret}@{host}:1/db",
                (
                    f"cannot use the ledger database postgresql+psycopg://{user}:***@{host}:1/db: "
                    + REFUSED.format(host=host.strip("[]"))
                ),
            )
    for port in ("0", "-1", "x", "1.5", "99999999999999999999", "٣"):
        yield (
            f"the port {port!r}",
            f"postgresql://u:secret@h:{port}/db",
            (f"not a database URL: postgresql://u:***@h:{port}…: the port must be a number from 1 to 65535"),
        )
    yield (
        "credentials without a colon holding an @",
        "postgresql://user@secret@h/db",
        (
            "not a database URL: the credentials of the postgresql:// URL hold an @ and no ':' (write "
            "USER:PASSWORD@HOST; percent-encode @ in a user name as %40)"
        ),
    )


def database_flags() -> Iterator[Case]:
    for command in (*READERS, "budget status"):
        argv = _argv(command)
        policy = command == "budget status"
        if policy:  # `qm budget status POLICY.yaml --db ...`: {f} is the policy
            argv = (*argv, "{f}")
        for id_, value, message in _urls():
            yield _case(
                f"--db {id_}",
                command,
                (*argv, "--db", value),
                message,
                content=POLICY.encode() if policy else None,
                path_kind="file" if policy else "missing",
            )
        yield _case(
            "--db ''",
            command,
            (*argv, "--db", ""),
            "--db: empty; give a SQLite path or a database URL "
            "(leave the flag out for $QM_LEDGER_URL or the default)",
            content=POLICY.encode() if policy else None,
            path_kind="file" if policy else "missing",
        )
        if not policy:
            yield from _in_file(command, argv)


def run_ledger_flags() -> Iterator[Case]:
    """`qm run --ledger`: a URL or SQLite path that can never work stops it in one line, at once (cases
    that would get past the ledger check are not here: they would start an operator)."""
    for id_, value, message in _urls():
        if "refused" in id_ or value == MISSING:
            continue  # a server that is down is spooled; a missing SQLite file is created
        if message.startswith("no ledger") or "cannot use the ledger database" in message:
            continue
        yield _case(f"--ledger {id_}", "run", ("run", "--ledger", value), message)
    for id_, value in (("''", ""), ("'  '", "  ")):
        yield _case(
            f"--ledger {id_}",
            "run",
            ("run", "--ledger", value),
            "--ledger: empty; give a SQLite path or a database URL (leave the flag out for $QM_LEDGER_URL "
            "or the default, or --no-ledger)",
        )
    yield _case(
        "--ledger a directory",
        "run",
        ("run", "--ledger", "{f}"),
        "the ledger path {f} is a directory, not a SQLite file",
        path_kind="dir",
    )
    yield _case(
        "--ledger under a file",
        "run",
        ("run", "--ledger", "{f}/ledger.db"),
        "cannot use the ledger path {f}/ledger.db: File exists",
        content=b"x",
        path_kind="file",
    )


# --- cluster sources, budget status ----------------------------------------------------------------------


def source_flags() -> Iterator[Case]:
    for command in READERS:
        yield _case(
            "--db with --kubeconfig",
            command,
            (command, "--db", MISSING, "--kubeconfig", "{f}"),
            "--db and --kubeconfig exclude each other (--kubeconfig reads the URL from the operator's "
            "Secret)",
            content=b"apiVersion: v1\nkind: Config\n",
            path_kind="file",
        )
        yield _case(
            "--context without --kubeconfig",
            command,
            (command, "--context", "dev"),
            "--context needs --kubeconfig",
        )
        for secret in ("queue-manager", "a/b/c", "/name", "ns/", "", "ns//x"):
            yield _case(
                f"--ledger-secret {secret!r}",
                command,
                (command, "--kubeconfig", "{f}", "--ledger-secret", secret),
                f"--ledger-secret: expected NAMESPACE/NAME (got {secret!r})",
                content=b"apiVersion: v1\nkind: Config\n",
                path_kind="file",
            )


def budget_status_flags() -> Iterator[Case]:
    command = "budget status"
    argv = ("budget", "status", "{f}")
    yield from _moments(command, "--at", LATEST_AT_TEXT, argv, policy=True)
    for flag in (("--kubeconfig", "/x"), ("--context", "dev"), ("--policy", "gpus")):
        yield _case(
            f"POLICY.yaml with {flag[0]}",
            command,
            (*argv, *flag),
            "POLICY.yaml excludes --kubeconfig, --context and --policy",
            content=POLICY.encode(),
            path_kind="file",
        )
    for flag in (("--db", MISSING), ("--at", UNTIL)):
        yield _case(
            f"{flag[0]} without POLICY.yaml",
            command,
            ("budget", "status", *flag),
            "--db and --at need POLICY.yaml (with --kubeconfig the operator's status is read)",
        )
    yield _case(
        "a policy without budgets still opens --db",
        command,
        (*argv, "--db", MISSING),
        NO_LEDGER.format(path=MISSING),
        content=POLICY.encode(),
        path_kind="file",
    )
    yield _case(
        "a policy with budgets opens --db",
        command,
        (*argv, "--db", MISSING),
        NO_LEDGER.format(path=MISSING),
        content=(POLICY + BUDGETS).encode(),
        path_kind="file",
    )
    yield _case(
        "a missing policy",
        command,
        (*argv, "--db", MISSING),
        "{f}: cannot read file: No such file or directory",
    )
    yield _case(
        "a per-byte-hour memory price",
        command,
        (*argv, "--db", MISSING),
        "{f}: QuotaPolicy gpus: field spec.flavors[0].pricePerUnitHour['memory']: memory is priced per "
        "GiB-hour; 0.0000000000037 looks like a price per byte-hour (per GiB-hour that is "
        "0.0039728447488): write the price of one GiB for one hour (got '3.7e-12')",
        content=POLICY.replace('memory: "0.004"', 'memory: "3.7e-12"').encode(),
        path_kind="file",
    )
    for currency in ("usd", "EURO", "€", "12"):
        yield _case(
            f"the currency {currency!r}",
            command,
            (*argv, "--db", MISSING),
            _currency_message(currency),
            content=(POLICY + f"  ledger: {{currency: {json.dumps(currency)}}}\n").encode(),
            path_kind="file",
        )


def _currency_message(currency: str) -> str:
    """pydantic's wording for a currency that is not three capital letters."""
    if len(currency) != 3:
        kind = "at least 3 characters" if len(currency) < 3 else "at most 3 characters"
        field = "{f}: QuotaPolicy gpus: field spec.ledger.currency"
        return f"{field}: String should have {kind} (got {currency!r})"
    return (
        f"{{f}}: QuotaPolicy gpus: field spec.ledger.currency: String should match pattern '^[A-Z]{{3}}$' "
        f"(got {currency!r})"
    )


# --- extreme but valid windows on a real (empty) ledger ----------------------------------------------------


def extreme_windows() -> Iterator[Case]:
    """Valid windows at the edges of the bounds, asked of an empty ledger of this version (`path_kind`
    "ledger"): the exact report, no traceback."""
    windows = [
        ("1s", "1970-01-01T00:00:01Z"),
        ("1s", LATEST_TEXT),
        ("20833d", UNTIL),
        ("1w", LATEST_TEXT),
        ("2976w", UNTIL),
        ("90s", "1970-01-01T00:01:30Z"),
    ]
    for since, until in windows:
        start = _rfc3339(_seconds(until) - _span(since))
        for command in READERS:
            units = {"units": {}} if command == "usage" else {}  # qm usage names each resource's unit
            body = json.dumps({"since": start, "until": until, **units, "rows": []}, indent=2) + "\n"
            yield Case(
                f"{command}: an empty ledger over {since} until {until}",
                command,
                (command, "--db", "{f}", "--since", since, "--until", until, "-o", "json"),
                None,
                "ledger",
                0,
                body,
                "",
            )
    header = (
        "policy,budget,team,period_start,period_end,used,limit,unit,used_pct,reached,enforcing,dry_run,"
        "measured_at"
    )
    for at in ("1970-01-01T01:00:00Z", "1970-01-01T00:00:00Z", "9998-12-31T23:59:59Z", UNTIL):
        start = _rfc3339(_seconds(at) - 3600)
        rows = [
            f"gpus,hour,research,{start},,0.00,8.00,GPU-hours,0.0,,,no,{at}",
            f"gpus,money,research,{start},,0.00,20.00,USD,0.0,,,no,{at}",
        ]
        yield Case(
            f"budget status: an empty ledger at {at}",
            "budget status",
            ("budget", "status", "{f}.policy", "--db", "{f}", "--at", at, "-o", "csv"),
            (POLICY + BUDGETS).encode(),
            "ledger",
            0,
            "\n".join([header, *rows]) + "\n",
            "",
        )


def generate_ledger(seed: int) -> list[Case]:
    """Every ledger case, in a stable order (ids unique within the suite)."""
    rng = random.Random(seed)
    cases = [
        *window_flags(),
        *limit_flags(),
        *grouping_flags(rng),
        *database_flags(),
        *run_ledger_flags(),
        *source_flags(),
        *budget_status_flags(),
        *extreme_windows(),
    ]
    return cases
