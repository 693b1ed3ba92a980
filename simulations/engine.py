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
    """A min-heap of events ordered by (time, kind, sequence)."""

    __slots__ = ("_heap", "_seq", "popped")

    def __init__(self) -> None:
        self._heap: list[Event] = []
        self._seq = 0
        self.popped = 0

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, time: float, kind: int, payload: int) -> None:
        seq = self._seq
        self._seq = seq + 1
        heapq.heappush(self._heap, (time, kind, seq, payload))

    def extend_sorted(self, events: list[tuple[float, int, int]]) -> None:
        """Add many (time, kind, payload) events at once (heapify is O(n), pushes are O(n log n))."""
        seq = self._seq
        self._heap.extend((t, k, seq + i, p) for i, (t, k, p) in enumerate(events))
        self._seq = seq + len(events)
        heapq.heapify(self._heap)

    def peek_time(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def pop(self) -> Event:
        self.popped += 1
        return heapq.heappop(self._heap)

    def pop_instant(self) -> list[Event]:
        """Pop every event that shares the earliest timestamp, in (kind, seq) order.

        The model handles them all and then runs ONE scheduling cycle: Kueue's scheduler
        sees the cluster state after all simultaneous changes, not once per change.
        """
        heap = self._heap
        first = heapq.heappop(heap)
        out = [first]
        t = first[0]
        while heap and heap[0][0] == t:
            out.append(heapq.heappop(heap))
        self.popped += len(out)
        return out

    @property
    def total_pushed(self) -> int:
        return self._seq
