"""What the controller's decisions read of the eviction records, kept beside them (FastPaths.records_memo).

Every decision reads the records the last one stored (`status.lastPreemptions`): the eviction times of
each kind (each kind's budget: `victims.eviction_times`), the records `follow_up` moves along their
lifecycle (real, not in a terminal state), whether an eviction is in flight (`victims.in_flight`), and
what `victims.trim` keeps. The records are frozen pydantic models, each field read costing far more than
the decision's use of it; most of them are settled (requeued, gone, reported) and change no more.

A `RecordBook` holds, in the records' order, the facts of each record a decision reads: its time, whether
it is real, whether it is a transition's, and its state. The shell keeps the book of the list a decision
stored (`RecordsMemo`); the next decision, given that same list object, reads the facts instead of the
records, and follows up only the open ones. The facts are the records' own fields (a record is frozen;
`follow_up` replaces one and the book is told), so every answer is the one the records give
(tests/unit/control/test_record_book.py; `python -m benchmarks.differential --controller`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

from fairshare.policy.status import EvictionKind, PreemptionRecord, VictimState

from .victims import KINDS, MAX_RECORDS, TERMINAL, eviction_times

_NO_TIME = -math.inf  # a terminal fact without a time, among the terminal times (always old to trim)

# (at, real, kind, state): the record's time, not dry-run, its kind (no kind: an experiment's), its state.
Fact = tuple[float | None, bool, EvictionKind, VictimState | None]


def fact_of(r: PreemptionRecord) -> Fact:
    return (r.at, not r.dry_run, r.kind or EvictionKind.EXPERIMENT, r.state)


class RecordBook:
    """The records of one decision and their facts, in the same order (see the module docstring).

    Beside them, kept as the facts change: the positions of the open facts (real, not terminal: what
    `follow_up` moves), and the times of the terminal facts in ascending order (no time: -inf), of which
    `trim` counts those too old to keep without reading every fact. A terminal fact never changes (only
    open ones are followed up), so a fact joins the terminal ones when it is appended terminal or
    replaced by a terminal one, and leaves them only when trimmed."""

    __slots__ = ("_open", "_terminal", "facts", "past", "records")

    def __init__(self, records: list[PreemptionRecord], facts: list[Fact],
                 past: dict[EvictionKind, list[float]], open_: list[int] | None = None,
                 terminal: list[float] | None = None) -> None:
        self.records = records
        self.facts = facts
        # eviction_times(records): read-only for the decision's readers (a change builds new lists).
        self.past = past
        if open_ is None or terminal is None:
            open_, terminal = _open_and_terminal(facts)
        self._open = open_
        self._terminal = terminal

    @staticmethod
    def of(records: Sequence[PreemptionRecord]) -> RecordBook:
        return RecordBook(list(records), [fact_of(r) for r in records], eviction_times(records))

    def copy(self) -> RecordBook:
        """The same records and facts in new lists (the stored book stays the stored list's)."""
        return RecordBook(list(self.records), list(self.facts), self.past, list(self._open),
                          list(self._terminal))

    def open_positions(self) -> list[int]:
        """The positions `follow_up` moves: real records not in a terminal state."""
        return list(self._open)

    def replace(self, records: list[PreemptionRecord], positions: Sequence[int]) -> None:
        """`follow_up`'s records (it replaced only those at `positions`, open ones, and only their lifecycle
        fields)."""
        self.records = records
        facts = self.facts
        terminal = TERMINAL
        closed = False
        for i in positions:
            f = facts[i] = fact_of(records[i])
            if f[3] in terminal:
                bisect.insort(self._terminal, _NO_TIME if f[0] is None else f[0])
                closed = True
        if closed:
            self._open = [i for i in self._open if facts[i][3] not in terminal]

    def in_flight(self) -> bool:
        """`victims.in_flight(records)`: a real record in state Requested (not terminal: an open one)."""
        requested = VictimState.REQUESTED
        facts = self.facts
        return any(facts[i][3] == requested for i in self._open)

    def append(self, r: PreemptionRecord) -> None:
        """A record decided now; its time joins the eviction times (in new lists: see `past`)."""
        self.records.append(r)
        f = fact_of(r)
        self.facts.append(f)
        at, real, kind, state = f
        if state in TERMINAL:
            bisect.insort(self._terminal, _NO_TIME if at is None else at)
        elif real:
            self._open.append(len(self.facts) - 1)
        if real and at is not None:
            times = list(self.past[kind])
            bisect.insort(times, at)
            self.past = {**self.past, kind: times}

    @property
    def settled(self) -> bool:
        """No record is open (`follow_up` moves none; `in_flight()` is false)."""
        return not self._open

    def keeps_all(self, now: float, keep_for: float) -> bool:
        """Whether `trim(now, keep_for)` keeps every record: at most MAX_RECORDS of them, or at most
        MAX_RECORDS old ones (terminal, not younger than keep_for)."""
        return len(self.facts) <= MAX_RECORDS or _old_count(self._terminal, now, keep_for) <= MAX_RECORDS

    def trim(self, now: float, keep_for: float) -> RecordBook:
        """`victims.trim(records, now, keep_for)` with its facts and eviction times."""
        facts = self.facts
        if self.keeps_all(now, keep_for):
            # At most MAX_RECORDS old ones (terminal, not younger than keep_for): every record is kept.
            return RecordBook(list(self.records), list(facts), self.past, list(self._open),
                              list(self._terminal))
        terminal = TERMINAL
        keep: list[bool] = []
        old: list[int] = []
        for i, (at, _, _, state) in enumerate(facts):
            young = state not in terminal or (at is not None and now - at < keep_for)
            keep.append(young)
            if not young:
                old.append(i)
        for i in old[-MAX_RECORDS:]:
            keep[i] = True
        records = [r for r, k in zip(self.records, keep, strict=True) if k]
        kept = [f for f, k in zip(facts, keep, strict=True) if k]
        past: dict[EvictionKind, list[float]] = {k: [] for k in KINDS}
        for at, real, kind, _ in kept:
            if real and at is not None:
                past[kind].append(at)
        for times in past.values():
            times.sort()
        return RecordBook(records, kept, past)


def _open_and_terminal(facts: Sequence[Fact]) -> tuple[list[int], list[float]]:
    """The positions of the open facts (real, not terminal) and the terminal facts' times, ascending (no
    time: -inf, which trim's test finds old as it finds no time: `now - -inf < keep_for` is false)."""
    terminal = TERMINAL
    open_: list[int] = []
    times: list[float] = []
    for i, (at, real, _, state) in enumerate(facts):
        if state in terminal:
            times.append(_NO_TIME if at is None else at)
        elif real:
            open_.append(i)
    times.sort()
    return open_, times


def _old_count(times: Sequence[float], now: float, keep_for: float) -> int:
    """How many of the terminal facts' ``times`` (ascending) `trim` finds old at ``now``: not younger than
    ``keep_for`` (its own test, `now - at < keep_for`, which is false for a prefix of ascending times:
    `now - at` does not grow as `at` does, in floating point too)."""
    lo, hi = 0, len(times)
    while lo < hi:
        mid = (lo + hi) // 2
        if not now - times[mid] < keep_for:
            lo = mid + 1
        else:
            hi = mid
    return lo


@dataclass
class RecordsMemo:
    """The book of the records the last decision stored: the next decision's, when it is given that same
    list (by identity: another list, e.g. read back from the API server, is booked afresh)."""

    stored: RecordBook | None = None

    def book(self, records: list[PreemptionRecord]) -> RecordBook:
        kept = self.stored
        if kept is not None and kept.records is records:
            return kept.copy()
        return RecordBook.of(records)
