"""Seeded random streams: one independent `random.Random` per named purpose.

A stream's seed is derived from (scenario seed, replication, stream name) by SHA-256,
so adding a workload source does not shift the random numbers of the others (common
random numbers across what-if variants: the same arrivals meet a different policy).
The global `random` state is never touched.
"""

from __future__ import annotations

import hashlib
import random


def stream_seed(seed: int, replication: int, name: str) -> int:
    digest = hashlib.sha256(f"{seed}/{replication}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


class RandomStreams:
    """Factory of reproducible, independent streams for one replication."""

    __slots__ = ("replication", "seed")

    def __init__(self, seed: int, replication: int = 0) -> None:
        self.seed = seed
        self.replication = replication

    def stream(self, name: str) -> random.Random:
        return random.Random(stream_seed(self.seed, self.replication, name))
