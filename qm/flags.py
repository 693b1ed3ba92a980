"""Flag value types shared by the sub-commands (argparse `type=`): one error wording per kind of value."""

from __future__ import annotations

import argparse
import math


def seconds(text: str) -> float:
    """A duration flag: the project's one duration grammar (fairshare/durations.py: 500ms, 2s, 1m, 1d), or a
    bare number of seconds (flags always took those: --tick 0.5); finite and > 0."""
    from fairshare.durations import EXAMPLES, parse_duration

    try:
        value = float(text)
    except ValueError:
        try:
            value = float(parse_duration(text.strip()))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not a duration (e.g. {EXAMPLES}, or seconds): {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite duration > 0: {text!r}")
    return value
