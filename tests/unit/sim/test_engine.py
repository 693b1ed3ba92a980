from __future__ import annotations

import heapq

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simulations.engine import EventQueue, Kind
from simulations.rng import RandomStreams


def test_events_at_the_same_time_come_out_by_kind_then_insertion_order() -> None:
    q = EventQueue()
    q.push(5.0, Kind.ARRIVAL, 1)
    q.push(5.0, Kind.FINISH, 2)
    q.push(1.0, Kind.SAMPLE, 3)
    q.push(5.0, Kind.ARRIVAL, 4)
    q.push(5.0, Kind.POLICY, 5)
    assert [q.pop()[3]] == [3]
    assert [(e[1], e[3]) for e in q.pop_instant()] == [
        (Kind.FINISH, 2),
        (Kind.POLICY, 5),
        (Kind.ARRIVAL, 1),
        (Kind.ARRIVAL, 4),
    ]
    assert len(q) == 0


@given(st.lists(st.tuples(st.integers(0, 20).map(float), st.sampled_from(list(Kind)), st.integers(0, 99))))
def test_the_heap_pops_in_time_kind_sequence_order_whatever_the_push_order(
    events: list[tuple[float, Kind, int]],
) -> None:
    q = EventQueue()
    for t, k, p in events:
        q.push(t, k, p)
    expected = sorted(((t, int(k), i, p) for i, (t, k, p) in enumerate(events)))
    got = []
    while len(q):
        got.extend(q.pop_instant())
    assert got == expected
    assert q.popped == len(events)


def test_extend_sorted_keeps_the_total_order_with_pushed_events() -> None:
    q = EventQueue()
    q.push(2.0, Kind.ARRIVAL, 0)
    q.extend_sorted([(1.0, Kind.ARRIVAL, 1), (2.0, Kind.FINISH, 2)])
    out = [q.pop() for _ in range(3)]
    assert [e[3] for e in out] == [1, 2, 0]
    assert q.total_pushed == 3


_EVENT = st.tuples(st.integers(0, 12).map(float), st.sampled_from(list(Kind)), st.integers(0, 99))


@given(
    st.lists(_EVENT),
    st.lists(st.tuples(st.sampled_from(["push", "extend", "pop", "instant"]), st.lists(_EVENT, max_size=6)),
             max_size=30),
)
def test_bulk_and_pushed_events_pop_in_the_order_of_one_heap_of_them_all(
    bulk: list[tuple[float, Kind, int]], steps: list[tuple[str, list[tuple[float, Kind, int]]]]
) -> None:
    """The stream of events added in bulk beside the heap: every pop, instant and peek is the one a single
    heap of every event gives, with pushes and more bulk (sorted or not) between pops."""
    q = EventQueue()
    heap: list[tuple[float, int, int, int]] = []
    seq = 0

    def add(events: list[tuple[float, Kind, int]], bulk_add: bool) -> None:
        nonlocal seq
        if bulk_add:
            q.extend_sorted([(t, int(k), p) for t, k, p in events])
        for t, k, p in events:
            if not bulk_add:
                q.push(t, k, p)
            heapq.heappush(heap, (t, int(k), seq, p))
            seq += 1

    add(sorted(bulk), True)
    for op, events in [*steps, ("instant", [])] + [("instant", [])] * (len(bulk) + 6 * len(steps)):
        assert len(q) == len(heap)
        assert q.peek_time() == (heap[0][0] if heap else None)
        if op in ("push", "extend"):
            add(events, op == "extend")
        elif heap and op == "pop":
            assert q.pop() == heapq.heappop(heap)
        elif heap:
            t = heap[0][0]
            expected = []
            while heap and heap[0][0] == t:
                expected.append(heapq.heappop(heap))
            assert q.pop_instant() == expected
    assert len(q) == 0 and q.total_pushed == seq


@pytest.mark.parametrize("name", ["arrivals", "durations"], ids=["arrivals", "durations"])
def test_a_named_stream_is_reproducible_and_independent_of_other_streams(name: str) -> None:
    a = [RandomStreams(7, 0).stream(name).random() for _ in range(2)]
    assert a[0] == a[1]
    assert RandomStreams(7, 0).stream(name).random() != RandomStreams(7, 1).stream(name).random()
    assert RandomStreams(7, 0).stream(name).random() != RandomStreams(7, 0).stream(name + "x").random()


def test_the_engine_does_not_touch_global_random_state() -> None:
    import random

    state = random.getstate()
    RandomStreams(1).stream("x").random()
    assert random.getstate() == state
