"""Flag value types shared by the sub-commands (argparse `type=`): one error wording per kind of value."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def seconds(text: str) -> float:
    """A duration flag: the project's one duration grammar (fairshare/durations.py: 500ms, 2s, 1m, 1d), or a
    bare number of seconds (flags always took those: --tick 0.5); finite and > 0. ASCII only: float() would
    also read "١٠", "５" or "1_0" as a number."""
    from fairshare.durations import EXAMPLES, parse_duration

    try:
        if not text.isascii() or "_" in text:
            raise ValueError(text)
        value = float(text)
    except ValueError:
        try:
            if not text.isascii():
                raise ValueError(text)
            value = float(parse_duration(text.strip()))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not a duration (e.g. {EXAMPLES}, or seconds): {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite duration > 0: {text!r}")
    return value


def bounded_seconds(most: str, *, least: str | None = None) -> Callable[[str], float]:
    """`seconds`, between `least` and `most` (durations in the same grammar): a flag such as
    `--lease-duration 100000000d` is one line, not a date past year 9999 later (issue 33)."""
    from fairshare.durations import parse_duration

    high = float(parse_duration(most))
    low = float(parse_duration(least)) if least is not None else None

    def parse(text: str) -> float:
        value = seconds(text)
        if low is not None and value < low:
            raise argparse.ArgumentTypeError(f"must be at least {least}: {text!r}")
        if value > high:
            raise argparse.ArgumentTypeError(f"must be at most {most}: {text!r}")
        return value

    return parse
