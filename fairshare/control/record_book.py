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
from collections.abc import Sequence
from dataclasses import dataclass

from fairshare.policy.status import EvictionKind, PreemptionRecord, VictimState

from .victims import MAX_RECORDS, TERMINAL, eviction_times

# (at, real, transition, state): the record's time, not dry-run, of kind transition-deadline, its state.
Fact = tuple[float | None, bool, bool, VictimState | None]


def fact_of(r: PreemptionRecord) -> Fact:
    return (r.at, not r.dry_run, r.kind == EvictionKind.TRANSITION, r.state)


class RecordBook:
    """The records of one decision and their facts, in the same order (see the module docstring)."""

    __slots__ = ("facts", "past", "records")

    def __init__(self, records: list[PreemptionRecord], facts: list[Fact],
                 past: dict[EvictionKind, list[float]]) -> None:
        self.records = records
        self.facts = facts
        # eviction_times(records): read-only for the decision's readers (a change builds new lists).
        self.past = past

    @staticmethod
    def of(records: Sequence[PreemptionRecord]) -> RecordBook:
        return RecordBook(list(records), [fact_of(r) for r in records], eviction_times(records))

    def copy(self) -> RecordBook:
        """The same records and facts in new lists (the stored book stays the stored list's)."""
        return RecordBook(list(self.records), list(self.facts), self.past)

    def open_positions(self) -> list[int]:
        """The positions `follow_up` moves: real records not in a terminal state."""
        terminal = TERMINAL
        return [i for i, (_, real, _, state) in enumerate(self.facts) if real and state not in terminal]

    def replace(self, records: list[PreemptionRecord], positions: Sequence[int]) -> None:
        """`follow_up`'s records (it replaced only those at `positions`, and only their lifecycle fields)."""
        self.records = records
        facts = self.facts
        for i in positions:
            facts[i] = fact_of(records[i])

    def in_flight(self) -> bool:
        """`victims.in_flight(records)`."""
        requested = VictimState.REQUESTED
        return any(real and state == requested for _, real, _, state in self.facts)

    def append(self, r: PreemptionRecord) -> None:
        """A record decided now; its time joins the eviction times (in new lists: see `past`)."""
        self.records.append(r)
        f = fact_of(r)
        self.facts.append(f)
        at, real, transition, _ = f
        if real and at is not None:
            kind = EvictionKind.TRANSITION if transition else EvictionKind.EXPERIMENT
            times = list(self.past[kind])
            bisect.insort(times, at)
            self.past = {**self.past, kind: times}

    def trim(self, now: float, keep_for: float) -> RecordBook:
        """`victims.trim(records, now, keep_for)` with its facts and eviction times."""
        facts = self.facts
        if len(facts) <= MAX_RECORDS:
            return RecordBook(list(self.records), list(facts), self.past)
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
        if len(old) <= MAX_RECORDS:  # nothing dropped
            return RecordBook(list(self.records), list(facts), self.past)
        records = [r for r, k in zip(self.records, keep, strict=True) if k]
        kept = [f for f, k in zip(facts, keep, strict=True) if k]
        experiment: list[float] = []
        transition: list[float] = []
        for at, real, tr, _ in kept:
            if real and at is not None:
                (transition if tr else experiment).append(at)
        experiment.sort()
        transition.sort()
        past = {EvictionKind.EXPERIMENT: experiment, EvictionKind.TRANSITION: transition}
        return RecordBook(records, kept, past)


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
