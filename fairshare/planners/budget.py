"""A victim budget over a sliding time window (max N preemptions per window), shared by both planners."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from fairshare.durations import to_text
from fairshare.models import Seconds


@dataclass(frozen=True, slots=True)
class VictimBudget:
    """At most ``max_victims`` preemptions in any window of ``window`` seconds ending now."""

    max_victims: int
    window: Seconds = 3600.0
    # describe()'s text, made at its first call (the window's canonical text goes through Fractions, in
    # interpreted code, and blocked plans describe the budget in every reason)
    _text: str = field(default="", init=False, repr=False, compare=False)

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
        if not self._text:
            object.__setattr__(self, "_text", f"{self.max_victims} per {to_text(self.window)}")
        return self._text
