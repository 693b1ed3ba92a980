"""The controller the shells hold (`Controller`): `decide` with its memory, whose one contract is to reply
what `decide` replies. The memory is the shell's `PlanMemo` (the steps' own memos, each behind a
FastPaths switch) and the last quiet decision, returned again while every input it read is the same
(FastPaths.replay_quiet). `python -m benchmarks.differential --controller` checks the contract: whole
simulator runs with the reference paths (no memory at all) and with the fast ones decide the same.

The simulator asks for a decision at every instant Kueue changed something, and the operator on every tick;
most of them find nothing to do: no transition steps, no eviction in flight, protected work not starved or
blocked as before, and they return the status they were given with one wake-up. Such a decision (`quiet`)
read only:

- the status it was given (`stored`) and the rules and generation it was made under;
- the transitions step, which returned its memo's outcome (fairshare.control.transitions.TransitionMemo:
  the same outcome object kept, and its own test `holds` on the new inputs: stored records, live quotas,
  the usage it reads, `now` before its next step, window or deadline);
- the eviction records' book (fairshare.control.record_book) of the list it stored: none open (follow-up
  moves nothing, nothing in flight), and trim keeping every record (`RecordBook.keeps_all` at `now`);
- the held competitors (none), the budgets (none in the policy), pushed weights (off) and eviction storms
  (none recorded, none in the evictions observed: checked before the replay);
- no transition Borrowing past its deadline (its what-if reads every pending workload);
- the experiment gate's protected work waiting (the same PendingWorkload objects in the same order: frozen,
  so the same workloads, since-times and queued flags), which of it is starved (the same before the
  wake-up: a starvation grace passing is one), and the victim budget used at `now` (the records'
  experiment eviction times, read through the book; the budget left follows from it);
- with starved work, the gate's blocked decisions, all read from its memories (`GateOutcome.planned` 0:
  the whole plan's, or each quota tree's, experiments.PlanMemo): they are read again while the same snapshot
  is in the same state (Snapshot.state_id: changed by every change, restored by rollback, never reused), the
  starved work and the budget used are the same, and the same experiments are past minRuntime (the gate's
  experiment index, compared at both times as the gate's memory does);
- `now`, before the decision's wake-up and not before the time it was made.

When all of them are the same, every step of `decide` computes what it computed: the same status, quotas,
progress, gate outcome and actions (the wake-up, which `now` has not reached). The decision object is
returned again; its readers (the shell, the operator) never change it
(tests/unit/control/test_replay.py; `python -m benchmarks.differential --controller`).
"""

from __future__ import annotations

from typing import Final

from fairshare.policy.status import EvictionKind, QuotaPolicyStatus, TransitionPhase
from fairshare.snapshot import Snapshot

from .actions import WakeAt
from .decide import Decision, decide, quotas_now, records_kept_for
from .eligible import ExperimentIndex
from .experiments import PlanMemo, protected_pending
from .history import HistoryBook
from .observed import Observed, PendingWorkload
from .record_book import RecordBook
from .rules import PolicyRules
from .same import same_objects
from .storms import detect_storms
from .transitions import QuotaHeld, TransitionMemo, TransitionsOutcome, _Live

_BORROWING: Final = TransitionPhase.BORROWING  # read once (a member read through its enum is slow compiled)


class QuietDecision:
    """A quiet decision and what it was made from (see the module docstring)."""

    __slots__ = ("at", "book", "decision", "generation", "keep_for", "outcome", "rules", "snapshot", "state",
                 "used", "wake")

    def __init__(self, decision: Decision, at: float, generation: int | None, book: RecordBook,
                 outcome: TransitionsOutcome, keep_for: float, used: int, snapshot: Snapshot) -> None:
        """`used`: the victim budget used as the decision's gate counted it; `snapshot`: the one it observed,
        and its state id then (read when protected work is starved: state ids are one snapshot's own)."""
        self.decision = decision
        self.rules = decision.rules
        self.at = at
        self.generation = generation
        self.book = book
        self.outcome = outcome
        self.keep_for = keep_for
        self.used = used
        self.snapshot = snapshot
        self.state = snapshot.state_id
        self.wake = decision.wake_at

    def again(self, rules: PolicyRules, stored: object, now: float, generation: int | None,
              transitions: TransitionMemo, live: _Live, usage: QuotaHeld, book: RecordBook | None,
              snap: Snapshot, index: ExperimentIndex | None) -> bool:
        """Whether a decision with these inputs is this one, but for the protected work waiting (`waits`).
        `book`: the records' memo's stored book; `live`, `usage`: the quotas read now (`_quotas_now`);
        `snap`: the observed snapshot; `index`: the gate's experiment index (FastPaths.index_experiments)."""
        d = self.decision
        if stored is not d.status or rules is not self.rules or generation != self.generation:
            return False
        if now < self.at or (self.wake is not None and now >= self.wake):
            return False
        if d.gate.starved and not self._same_plan_inputs(rules, snap, index, now):
            return False
        if book is not self.book or not book.keeps_all(now, self.keep_for):
            return False
        if transitions.outcome is not self.outcome or not transitions.holds(
            (rules, generation, d.status.transitions, live), usage, now
        ):
            return False
        preempt = rules.preemption
        if preempt is None:
            return True
        return preempt.planner.budget.used(book.past[EvictionKind.EXPERIMENT], now) == self.used

    def _same_plan_inputs(self, rules: PolicyRules, snap: Snapshot, index: ExperimentIndex | None,
                          now: float) -> bool:
        """With starved work: the same snapshot state, and the same experiments past minRuntime
        (ExperimentIndex.same_eligible, as the gate's own memory compares them)."""
        preempt = rules.preemption
        if snap is not self.snapshot or snap.state_id != self.state or index is None or preempt is None:
            return False
        p = preempt.planner
        return index.same_eligible(snap, p.experiment_below_priority, p.min_runtime, now, self.at)

    def waits(self, waiting: list[PendingWorkload]) -> bool:
        """Whether the gate's protected work waiting now (experiments.protected_pending) is the same objects
        in the same order as this decision's."""
        return same_objects(waiting, self.decision.gate.waiting)


def quiet(decision: Decision, book: RecordBook | None) -> bool:
    """Whether a decision may be returned again (`QuietDecision`): no action but its wake-up, starved work
    decided from the gate's memories alone, no record open in the book it stored, no held competitor, no
    budget, no pushed weights."""
    rules = decision.rules
    if book is None or not book.settled or decision.status.held_workloads or rules.push_weights \
            or decision.status.storms:
        return False
    for t in decision.status.transitions:
        if t.phase is _BORROWING:
            # Its what-if (decide step 3b) reads every pending workload and the snapshot's state, which
            # this replay does not compare: decided again each time.
            return False
    if rules.policy.spec.budgets or rules.idle is not None:
        return False  # (spec.idle: the GPUs' activity, read anew, is an input this replay does not compare)
    if decision.gate.planned:
        return False
    count = 0
    for a in decision.actions:
        if not isinstance(a, WakeAt):
            return False
        count += 1
    return count <= 1


class Controller:
    """One policy's controller as a shell holds it: `decide` with a memory (see the module docstring). The
    simulator holds one per run, the operator one per policy (fairshare.control.cluster)."""

    __slots__ = ("last", "memo")

    def __init__(self) -> None:
        self.memo = PlanMemo()
        self.last: QuietDecision | None = None

    def decide(self, rules: PolicyRules, observed: Observed, stored: QuotaPolicyStatus | None, now: float,
               *, history: HistoryBook, generation: int | None = None) -> Decision:
        """`decide(rules, observed, stored, now, history=, generation=, memo=self.memo)`, or its last
        quiet decision when every input that decision read is the same (FastPaths.replay_quiet)."""
        memo = self.memo
        paths = observed.snapshot.paths
        if self.last is not None and not (observed.evictions and detect_storms(observed.evictions, now)):
            last, self.last = self.last, None
            live, usage = quotas_now(observed, rules, memo)  # what the decision's steps read
            if last.again(rules, stored, now, generation, memo.transitions, live, usage, memo.records.stored,
                          observed.snapshot, memo.index if paths.index_experiments else None) and (
                rules.preemption is None
                or last.waits(protected_pending(rules.preemption, observed, rules.teams))
            ):
                self.last = last
                return last.decision
        decision = decide(rules, observed, stored, now, history=history, generation=generation, memo=memo)
        if paths.replay_quiet and paths.memo_transitions and paths.records_memo:
            outcome, book = memo.transitions.outcome, memo.records.stored
            if outcome is not None and book is not None and quiet(decision, book):
                # The victim budget used as the decision's gate counted it: the stored book's times (trim
                # drops only records older than every budget's window).
                preempt = rules.preemption
                past = book.past[EvictionKind.EXPERIMENT]
                used = 0 if preempt is None else preempt.planner.budget.used(past, now)
                self.last = QuietDecision(decision, now, generation, book, outcome, records_kept_for(rules),
                                          used, observed.snapshot)
        return decision
