"""Durations in scenario files: a number of seconds or a string such as "14d", "2h30m", "90s"."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")


def parse_duration(value: object) -> float:
    """Seconds from a number or a Go-style duration string with d and w added."""
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 90, '15m', '2h', '14d'")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return float(value)
    if not isinstance(value, str):
        raise ValueError("expected a duration such as 90, '15m', '2h', '14d'")
    text = value.strip()
    if not text:
        raise ValueError("empty duration")
    pos = 0
    total = 0.0
    while pos < len(text):
        m = _PART.match(text, pos)
        if m is None:
            try:
                number = float(text)
            except ValueError:
                raise ValueError(
                    f"bad duration {value!r}: use e.g. '90s', '15m', '2h', '14d', '1h30m'"
                ) from None
            if number < 0:
                raise ValueError("a duration cannot be negative")
            return number
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return total


def format_duration(seconds: float) -> str:
    """A short human form: 14d, 2h, 90s (for tables and reports)."""
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


Duration = Annotated[float, BeforeValidator(parse_duration)]
