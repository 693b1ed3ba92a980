"""Exact Kubernetes quantities as integer milli-units.

Grammar (k8s.io/apimachinery/pkg/api/resource/quantity.go):
``<sign><digits>[.<digits>]<suffix>`` with suffix one of the binary SI suffixes
(Ki Mi Gi Ti Pi Ei), the decimal SI suffixes (n u m "" k M G T P E) or a decimal
exponent (``e``/``E`` followed by a signed integer). Values are kept exactly as
``int`` milli-units ("1" == 1000, "500m" == 500, "1Ki" == 1_024_000). A value finer
than one milli-unit is rounded up, as ``Quantity.MilliValue()`` does.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction

from .errors import InputError

MILLI = 1000

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# ASCII digits only: Python's \d and int() also take "٤" or "４", which no Kubernetes quantity is.
_NUMBER = re.compile(r"^([+-]?)([0-9]*)(?:\.([0-9]*))?(.*)$", re.DOTALL)
_EXPONENT = re.compile(r"^[eE]([+-]?[0-9]+)\Z")
# Kubernetes caps quantities far below this; the bound keeps "1e999999" from
# building a gigantic integer.
_MAX_EXPONENT = 40
# Same reason for the mantissa (Python also refuses int() of more than 4300 digits).
_MAX_DIGITS = 64
# Kueue counts quota as int64 (resources.ResourceValue: Value() or MilliValue()); a larger amount
# would overflow there, so it is rejected here rather than silently meaning something else.
MAX_UNITS = 2**63 - 1


# Memoized: the controller re-reads the same few quantities of its status on every decision (a pure
# function of its argument; typed, so True, 1 and 1.0 are separate keys; errors are never cached).
def parse_quantity(text: object) -> int:
    """Parse a Kubernetes quantity into integer milli-units (rounded up below 1m). `text`: any value read
    from a file (typed `object`: the compiled core checks declared types at the call, a bad file's list
    must be an InputError here, not a TypeError there)."""
    if not isinstance(text, str | int | float):  # a list or a mapping from a bad file: not a cache key
        raise InputError("not a quantity", value=text)
    return _parse_quantity(text)


@functools.lru_cache(maxsize=4096, typed=True)
def _parse_quantity(text: str | int | float) -> int:
    if isinstance(text, bool):
        raise InputError("not a quantity", value=text)
    if isinstance(text, int):
        if abs(text) > MAX_UNITS:
            raise InputError("quantity too large (Kueue counts at most 2^63-1 units)", value=text)
        return text * MILLI
    number = exact_quantity(text)
    milli = abs(number) * MILLI
    value = -(-milli.numerator // milli.denominator)  # round up (away from zero), as MilliValue()
    if value > MAX_UNITS * MILLI:
        raise InputError("quantity too large (Kueue counts at most 2^63-1 units)", value=text)
    return -value if number < 0 else value


def exact_quantity(text: object) -> Fraction:
    """The exact value of a Kubernetes quantity in units, not rounded (prices per unit-hour such as
    "0.0004" are below a milli-unit); `text` as for parse_quantity."""
    if isinstance(text, bool):
        raise InputError("not a quantity", value=text)
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        # YAML turns `cpu: 1.5` into a float; its decimal text is what the user wrote.
        text = repr(text)
    if not isinstance(text, str):
        raise InputError("not a quantity", value=text)
    raw = text.strip()
    match = _NUMBER.match(raw)
    if not raw or match is None:
        raise InputError("not a quantity", value=text)
    sign, whole, frac, suffix = match.groups()
    frac = frac or ""
    if not whole and not frac:
        raise InputError("not a quantity: no digits", value=text)
    if len(whole) + len(frac) > _MAX_DIGITS:
        raise InputError(f"not a quantity: more than {_MAX_DIGITS} digits", value=text)
    number = Fraction(int(whole or "0") * 10 ** len(frac) + int(frac or "0"), 10 ** len(frac))
    if suffix in _BINARY:
        number *= _BINARY[suffix]
    elif suffix in _DECIMAL:
        number *= Fraction(10) ** _DECIMAL[suffix]
    else:
        exp = _EXPONENT.match(suffix)
        if exp is None:
            raise InputError(f"not a quantity: unknown suffix {suffix!r}", value=text)
        power = int(exp.group(1))
        if abs(power) > _MAX_EXPONENT:
            raise InputError("quantity exponent out of range", value=text)
        number *= Fraction(10) ** power
    return -number if sign == "-" else number


def format_quantity(milli: int) -> str:
    """Canonical text for a milli-unit amount: "2", "1500m", "-250m"; exact inverse of parse."""
    if milli % MILLI == 0:
        return str(milli // MILLI)
    return f"{milli}m"


def format_human(milli: int, resource: str = "") -> str:
    """A short readable form for tables: memory in Ki/Mi/Gi when exact, else canonical."""
    if resource in ("memory", "ephemeral-storage") and milli % MILLI == 0 and milli > 0:
        units = milli // MILLI
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            if units % _BINARY[suffix] == 0:
                return f"{units // _BINARY[suffix]}{suffix}"
    return format_quantity(milli)


def describe_quantity(milli: int, resource: str) -> str:
    """An amount of a resource in words for messages and Events: "1 GPU", "3 GPUs", "500m CPU", "4 CPUs",
    "256Gi memory", "2 example.com/fpga" (status fields keep the canonical quantity)."""
    name = resource.rsplit("/", 1)[-1]
    if name.lower() in ("gpu", "tpu"):
        unit = name.upper()
        amount = format_quantity(milli)
        return f"{amount} {unit}" if milli == MILLI else f"{amount} {unit}s"
    if resource == "cpu":
        amount = format_quantity(milli)
        return f"{amount} CPU" if milli == MILLI or milli % MILLI else f"{amount} CPUs"
    return f"{format_human(milli, resource)} {resource}"
