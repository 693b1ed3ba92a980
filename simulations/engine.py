"""The event heap: simulated time only, deterministic order.

Events are plain tuples ``(time, kind, seq, payload)`` so that ``heapq`` compares
them in C: time first, then the kind's priority (a finish at t frees capacity before
an arrival at t is considered), then the insertion sequence number, which makes the
order total and independent of payload contents. Payloads are ints (an index into
the model's tables), never objects, so no comparison ever falls through to them.
"""

from __future__ import annotations

import heapq
from enum import IntEnum
from typing import Final

Event = tuple[float, int, int, int]


class Kind(IntEnum):
    """Event kinds; the value is the priority among events at the same instant."""

    FINISH = 0  # a running workload completes: frees quota first
    POLICY = 1  # a QuotaPolicy edit (a scenario event)
    ARRIVAL = 2  # a workload is created in its LocalQueue
    REQUEUE = 3  # Kueue's batched requeue of parked workloads falls due (KueueModel.next_timer)
    CONTROL = 4  # the policy controller asked to be called again (a WakeAt)
    SAMPLE = 5  # a time-series sample (taken after the state at t is settled)


KIND_COUNT: Final = len(Kind)


class EventQueue:
    """A min-heap of events ordered by (time, kind, sequence), beside a sorted stream of the events added
    in bulk (the arrivals known at the start): a pop takes the lesser of the two heads, so the heap holds
    only what is pushed while running (finishes, timers, samples) and an arrival costs one comparison
    instead of a pop from a heap of every arrival. The same total order as one heap of all of them (each
    event's sequence number is its own; tests/unit/sim/test_engine.py)."""

    __slots__ = ("_heap", "_next", "_seq", "_stream", "popped")

    def __init__(self) -> None:
        self._heap: list[Event] = []
        self._seq = 0
        self.popped = 0
        self._stream: list[Event] = []  # sorted; the events before _next are popped
        self._next = 0

    def __len__(self) -> int:
        return len(self._heap) + len(self._stream) - self._next

    def push(self, time: float, kind: int, payload: int) -> None:
        seq = self._seq
        self._seq = seq + 1
        heapq.heappush(self._heap, (time, kind, seq, payload))

    def extend_sorted(self, events: list[tuple[float, int, int]]) -> None:
        """Add many (time, kind, payload) events at once, numbered in the order given (sorted by time and
        kind they cost one comparison each to pop; any order is still popped in the total order)."""
        seq = self._seq
        added = [(t, k, seq + i, p) for i, (t, k, p) in enumerate(events)]
        self._seq = seq + len(events)
        # (sorted() finds the sorted runs: linear for the arrivals, which come sorted)
        self._stream = sorted(self._stream[self._next :] + added)
        self._next = 0

    def peek_time(self) -> float | None:
        heap, stream, i = self._heap, self._stream, self._next
        if i < len(stream):
            t = stream[i][0]
            return heap[0][0] if heap and heap[0][0] < t else t
        return heap[0][0] if heap else None

    def _take(self) -> Event:
        heap, stream, i = self._heap, self._stream, self._next
        if i < len(stream) and (not heap or stream[i] < heap[0]):
            self._next = i + 1
            return stream[i]
        return heapq.heappop(heap)

    def pop(self) -> Event:
        self.popped += 1
        return self._take()

    def pop_instant(self) -> list[Event]:
        """Pop every event that shares the earliest timestamp, in (kind, seq) order.

        The model handles them all and then runs ONE scheduling cycle: Kueue's scheduler
        sees the cluster state after all simultaneous changes, not once per change.
        """
        first = self._take()
        out = [first]
        t = first[0]
        heap, stream = self._heap, self._stream
        while True:
            i = self._next
            if i < len(stream) and stream[i][0] == t:
                if heap and heap[0][0] == t and heap[0] < stream[i]:
                    out.append(heapq.heappop(heap))
                else:
                    out.append(stream[i])
                    self._next = i + 1
            elif heap and heap[0][0] == t:
                out.append(heapq.heappop(heap))
            else:
                break
        self.popped += len(out)
        return out

    @property
    def total_pushed(self) -> int:
        return self._seq
