"""The records' book (fairshare.control.record_book, FastPaths.records_memo) against the reads of the records
it replaces (fairshare.control.victims): over random runs of decisions, each given the list the last one
stored, the book's eviction times, open positions, in-flight answer and trim are the records' own, and
follow_up over the open positions alone returns what it returns over every record."""

from __future__ import annotations

import dataclasses
import random

import pytest

from fairshare.control.observed import Observed, PendingWorkload
from fairshare.control.record_book import RecordBook, RecordsMemo
from fairshare.control.victims import MAX_RECORDS, eviction_times, follow_up, in_flight, trim
from fairshare.history import HalfLife, UsageHistoryGraph
from fairshare.policy.status import EvictionKind, PreemptionRecord, VictimState
from fairshare.snapshot import Snapshot
from fairshare.workload import WorkloadInfo
from tests.builders import ClusterQueueBuilder, StateBuilder, WorkloadBuilder

GPU = "nvidia.com/gpu"
HOUR = 3600.0
VICTIMS = 12
STATES = [None, *VictimState]


def _record(rng: random.Random, i: int, at: float) -> PreemptionRecord:
    dry = rng.random() < 0.2
    return PreemptionRecord(
        time=f"t{i}",
        at=None if rng.random() < 0.05 else at,
        victim=f"ns/v-{rng.randrange(VICTIMS)}",
        beneficiary=rng.choice(["", "ns/b-1", "ns/b-2"]),
        reason="r",
        dry_run=dry,
        state=VictimState.REPORTED if dry and rng.random() < 0.7 else rng.choice(STATES),  # any, as read back
        kind=rng.choice([None, EvictionKind.EXPERIMENT, EvictionKind.TRANSITION, EvictionKind.IDLE]),
    )


def _moved(rng: random.Random, r: PreemptionRecord) -> PreemptionRecord:
    """What follow_up may do to a record: a new state (its lifecycle fields only)."""
    return r.model_copy(update={"state": rng.choice(STATES), "overdue": rng.choice([None, True])})


@pytest.mark.parametrize("seed", range(12))
def test_a_run_of_decisions_reads_from_the_book_what_the_records_say(seed: int) -> None:
    rng = random.Random(seed)
    memo = RecordsMemo()
    stored: list[PreemptionRecord] = [_record(rng, i, i * 60.0) for i in range(rng.randrange(0, 70))]
    now, n, reused = 5000.0, 1000, 0
    for _ in range(120):
        now += rng.choice([0.0, 30.0, 600.0, 4 * HOUR])
        if rng.random() < 0.1:  # read back from the API server: equal records in another list
            stored = [PreemptionRecord.model_validate(r.model_dump()) for r in stored]
        reused += memo.stored is not None and memo.stored.records is stored
        book = memo.book(stored)
        assert book.records == stored and book.records is not stored
        assert book.past == eviction_times(stored)
        positions = book.open_positions()
        assert positions == [i for i, r in enumerate(stored) if not r.dry_run and r.state not in {
            VictimState.REQUEUED, VictimState.GONE, VictimState.REPORTED, VictimState.RECLAIMED, None}]
        moved = list(book.records)
        for i in positions:
            if rng.random() < 0.4:
                moved[i] = _moved(rng, moved[i])
        book.replace(moved, positions)
        assert book.in_flight() == in_flight(moved)
        expected = list(moved)
        for _ in range(rng.choice([0, 0, 1, 3])):
            r = _record(rng, n, now)
            n += 1
            book.append(r)
            expected.append(r)
        assert book.records == expected and book.past == eviction_times(expected)
        keep_for = rng.choice([HOUR, 6 * HOUR])
        kept = book.trim(now, keep_for)
        assert kept.records == trim(expected, now, keep_for)
        assert kept.past == eviction_times(kept.records)
        assert kept.facts == RecordBook.of(kept.records).facts
        memo.stored = kept
        stored = kept.records
    assert reused > 60  # most decisions read the book of the list the last one stored
    assert len(stored) > MAX_RECORDS  # and trim dropped records in the run


def test_the_stored_list_and_book_are_never_changed_by_the_next_decision() -> None:
    rng = random.Random(3)
    memo = RecordsMemo()
    memo.stored = RecordBook.of([_record(rng, i, i * 60.0) for i in range(10)])
    stored = memo.stored.records  # what the decision stored in status
    facts, past = list(memo.stored.facts), {k: list(v) for k, v in memo.stored.past.items()}
    book = memo.book(stored)
    book.replace([_moved(rng, r) for r in book.records], range(10))
    book.append(_record(rng, 99, 9000.0))
    assert len(stored) == 10 and memo.stored.records is stored
    assert memo.stored.facts == facts and memo.stored.past == past


def _observed(rng: random.Random) -> Observed:
    cq = "biz"
    state = StateBuilder().flavors("a100")
    state = state.cq(ClusterQueueBuilder(cq).quota("a100", GPU, "100"), local_queue="main")
    snap = Snapshot.from_state(state.build())
    pending: dict[str, PendingWorkload] = {}
    for i in range(VICTIMS):
        where = rng.choice(["admitted", "pending", "gone"])
        wl = WorkloadBuilder(cq, f"v-{i}").queue("main").priority(10).request(GPU, "1")
        if where == "admitted":
            built = dataclasses.replace(wl.admitted(cq, "a100", at=100.0).build(), active=rng.random() < 0.5)
            snap.add_workload(WorkloadInfo.admitted(built))
        elif where == "pending":
            info = WorkloadInfo.pending(wl.build(), cq)
            pending[info.key] = PendingWorkload(info, 0.0, rng.random() < 0.5)
    for b in ("b-1", "b-2"):
        if rng.random() < 0.5:
            info = WorkloadInfo.pending(WorkloadBuilder(cq, b).queue("main").request(GPU, "1").build(), cq)
            pending[info.key] = PendingWorkload(info, 0.0, True)
    return Observed(snap, pending, UsageHistoryGraph(HalfLife.of_seconds(86400), created_at=0.0))


@pytest.mark.parametrize("seed", range(30))
def test_follow_up_over_the_open_positions_is_follow_up_over_every_record(seed: int) -> None:
    rng = random.Random(seed)
    observed = _observed(rng)
    records = [_record(rng, i, rng.uniform(0, 2 * HOUR)) for i in range(40)]
    now = 2 * HOUR
    book = RecordBook.of(records)
    everything = follow_up(records, observed, now, 600.0, "pool")
    assert follow_up(records, observed, now, 600.0, "pool", book.open_positions()) == everything
    assert everything[0] != records  # some record moved


@pytest.mark.parametrize("boundary", [0.0, 1e-9, -1e-9])
def test_trim_counts_a_record_exactly_keep_for_old_as_the_records_do(boundary: float) -> None:
    # MAX_RECORDS settled records long past keep_for and one more at now - keep_for (+/- a hair): it is
    # old (not younger than keep_for) exactly when `now - at < keep_for` is false, and then the oldest
    # record is dropped. Its time is joined to the book by a follow-up that settles it, and by an append.
    now, keep_for = 10_000.0, HOUR
    base = [PreemptionRecord(time=f"t{i}", at=float(i), victim=f"ns/v-{i}", beneficiary="", reason="r",
                             state=VictimState.GONE) for i in range(MAX_RECORDS)]
    edge = PreemptionRecord(time="edge", at=now - keep_for + boundary, victim="ns/edge", beneficiary="",
                            reason="r", state=VictimState.REQUESTED)
    for how in ("replaced", "appended"):
        book = RecordBook.of([*base, edge] if how == "replaced" else base)
        settled = edge.model_copy(update={"state": VictimState.REQUEUED})
        if how == "replaced":
            assert book.open_positions() == [MAX_RECORDS] and book.in_flight()
            book.replace([*base, settled], [MAX_RECORDS])
        else:
            book.append(settled)
        assert book.open_positions() == [] and not book.in_flight()
        expected = trim([*base, settled], now, keep_for)
        assert len(expected) == (MAX_RECORDS if boundary <= 0 else MAX_RECORDS + 1)
        assert book.trim(now, keep_for).records == expected, (how, boundary)
