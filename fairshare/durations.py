"""The one duration grammar of the project: QuotaPolicy fields, scenario files, conformance cases and
CLI flags (`--since 30d`) all read durations here.

Grammar: Go's `time.ParseDuration` units (h, m, s, ms; decimals allowed) after an optional whole number
of weeks and then of days, e.g. `90s`, `1h30m`, `336h`, `14d`, `2w`, `1d12h`, `1w2d`. No sign, no
spaces. `w` = 7 days and `d` = 24 hours exactly (no calendar or daylight-saving meaning). Weeks and days
come first and are whole numbers so that the CRD's CEL rules can turn them into a CEL duration
(`cel_duration`): CEL's `duration()` knows only Go's units.

A bare number (seconds) is accepted where a file format says so (scenarios, conformance cases), through
`seconds_of(value, allow_number=True)`; the QuotaPolicy API takes strings only.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

DURATION_PATTERN = r"^([0-9]+w)?([0-9]+d)?([0-9]+(\.[0-9]+)?(ms|s|m|h))*$"
MAX_LENGTH = 32
EXAMPLES = "90s, 30m, 1h30m, 336h, 14d, 2w"

_RE = re.compile(DURATION_PATTERN)
_GO_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_UNIT = {"ms": Fraction(1, 1000), "s": Fraction(1), "m": Fraction(60), "h": Fraction(3600)}
DAY = 86400
WEEK = 7 * DAY


def is_duration(text: str) -> bool:
    # fullmatch: `$` alone would also match before a final newline ("1h\n"), which the API server's RE2
    # pattern refuses.
    return bool(text) and len(text) <= MAX_LENGTH and bool(_RE.fullmatch(text))


def parse_duration(text: str) -> Fraction:
    """Exact seconds of a duration string; ValueError (a sentence saying what to write) if malformed."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"must be a duration such as {EXAMPLES}")
    if len(text) > MAX_LENGTH:
        raise ValueError(f"must be a duration of at most {MAX_LENGTH} characters")
    m = _RE.fullmatch(text)
    if m is None:
        hint = ""
        if re.fullmatch(r"[0-9]*\.[0-9]+[wd].*", text):
            hint = "; weeks and days are whole numbers (write 36h for 1.5d)"
        elif re.search(r"[0-9][wd]", text):
            hint = "; weeks and days come first (1d12h, not 12h1d)"
        raise ValueError(f"must be a duration such as {EXAMPLES}{hint}")
    total = Fraction(0)
    if m.group(1):
        total += int(m.group(1)[:-1]) * WEEK
    if m.group(2):
        total += int(m.group(2)[:-1]) * DAY
    rest = text[m.end(2) if m.group(2) else (m.end(1) if m.group(1) else 0):]
    for number, unit in _GO_PART.findall(rest):
        try:
            total += Fraction(Decimal(number)) * _UNIT[unit]
        except InvalidOperation:  # pragma: no cover - the pattern admits only decimal digits
            raise ValueError(f"must be a duration such as {EXAMPLES}") from None
    return total


def seconds_of(value: object, *, allow_number: bool = False) -> float:
    """Seconds (float) of a duration string, or of a non-negative finite number when allowed."""
    if isinstance(value, bool):
        raise ValueError(f"must be a duration such as {EXAMPLES}")
    if isinstance(value, int | float):
        if not allow_number:
            raise ValueError(f"must be a duration string such as {EXAMPLES}")
        if not math.isfinite(value) or value < 0:
            raise ValueError("must be a finite, non-negative number of seconds")
        return float(value)
    if isinstance(value, str):
        return float(parse_duration(value.strip()))
    raise ValueError(f"must be a duration such as {EXAMPLES}")


def to_text(seconds: float | Fraction) -> str:
    """The canonical string of a duration (round-trips through `parse_duration`): 14d, 2w, 1h30m, 90s."""
    if seconds < 0 or not math.isfinite(float(seconds)):
        raise ValueError(f"not a duration: {seconds}")
    total = Fraction(seconds)
    out = ""
    whole = math.floor(total)
    weeks, rem = divmod(whole, WEEK)
    days, rem = divmod(rem, DAY)
    if weeks:
        out += f"{weeks}w"
    if days:
        out += f"{days}d"
    hours, rem = divmod(rem, 3600)
    minutes, secs = divmod(rem, 60)
    frac = total - whole
    if hours:
        out += f"{hours}h"
    if minutes:
        out += f"{minutes}m"
    if secs or frac:
        if frac:
            ms = frac * 1000
            if ms.denominator == 1 and not secs:
                out += f"{ms.numerator}ms"
            else:
                out += f"{float(secs + frac):g}s"
        else:
            out += f"{secs}s"
    return out or "0s"


def format_duration(seconds: float) -> str:
    """A compact human form for messages and tables: 45s, 12m, 3h05m, 2d4h (rounded down to the unit
    shown; use `to_text` where the value must round-trip)."""
    s = max(0, int(seconds))
    d, s = divmod(s, DAY)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}d{h}h" if h else f"{d}d"
    if h:
        return f"{h}h{m:02d}m" if m else f"{h}h"
    if m:
        return f"{m}m"
    return f"{s}s"


def cel_is_go(expr: str) -> str:
    """A CEL test that the duration string `expr` uses Go's units only, so that CEL's `duration()` reads it.
    CRD rules compare durations only then: turning weeks and days into hours takes `find`/`substring`,
    whose results the API server cannot bound, and it rejects such rules as over its cost budget (measured
    on kube-apiserver v1.36: more than 100x). Forms with `w`/`d` are checked by the same rule in Python
    (`fairshare.policy.semantics`, which `qm policy check` and the operator run)."""
    return f"!({expr}).matches('[wd]')"
