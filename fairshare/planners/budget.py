"""A victim budget over a sliding time window (max N preemptions per window), shared by both planners."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fairshare.models import Seconds


@dataclass(frozen=True, slots=True)
class VictimBudget:
    """At most ``max_victims`` preemptions in any window of ``window`` seconds ending now."""

    max_victims: int
    window: Seconds = 3600.0

    def __post_init__(self) -> None:
        if self.max_victims < 0 or self.window <= 0:
            raise ValueError(f"invalid victim budget: {self.max_victims} per {self.window}s")

    def used(self, past: Iterable[Seconds], now: Seconds) -> int:
        """Preemptions counted against the window (now - window, now]."""
        lo = now - self.window
        return sum(1 for t in past if lo < t <= now)

    def remaining(self, past: Iterable[Seconds], now: Seconds) -> int:
        return max(0, self.max_victims - self.used(past, now))

    def describe(self) -> str:
        return f"{self.max_victims} per {_duration(self.window)}"


def _duration(seconds: Seconds) -> str:
    s = int(seconds)
    if s and s % 3600 == 0:
        return f"{s // 3600}h"
    if s and s % 60 == 0:
        return f"{s // 60}m"
    return f"{seconds:g}s"


def format_duration(seconds: Seconds) -> str:
    """Compact human duration: 12m, 3h05m, 2d4h, 45s."""
    s = max(0, int(seconds))
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}d{h}h" if h else f"{d}d"
    if h:
        return f"{h}h{m:02d}m" if m else f"{h}h"
    if m:
        return f"{m}m"
    return f"{s}s"
