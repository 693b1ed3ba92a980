"""What the GPUs did, in the ledger (docs/ledger.md, "Active vs allocated"): per workload and resource, the
GPU-time its devices were measured (DCGM series present) and the GPU-time they were active (utilization x
time), kept per UTC hour (the `activity` table).

The rule (pure): each valid sample (a number in 0-100%) holds its value from its time until the next sample
of the same series, at most `hold_ms` (the policy's staleAfterScrapes x scrapeInterval: past that the series
is stale and the GPU unmeasured). Over an interval, the measured GPU-ms is the time the workload's series
were held within it, summed over its GPUs; the active GPU-ms the same weighted by utilization / 100.
Integers (milliseconds of GPU-time), rounded once per part: telemetry is a measurement, the sums over it
are exact.

The operator reads the telemetry again and again over a sliding window; each reading hands the ledger the
interval since the one before (`ActivityRecord`: parts that never cross a minute, so never an hour), and
the ledger adds a part only if it begins at or after the end of the last one it added for that workload's
resource and hour (`through_ms`): a reading repeated after a restart, or overlapping the one before, counts
nothing twice (what falls between a crash and the restart's first reading, beyond the window, is
unmeasured).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .records import Millis

MINUTE_MS = 60_000
HOUR_MS = 3_600_000

Part = tuple[Millis, Millis, int, int]  # [start, end) within one minute, measured GPU-ms, active GPU-ms


@dataclass(frozen=True, slots=True)
class ActivityRecord:
    """The measured and active GPU-ms of one workload's resource over consecutive parts, in time order."""

    uid: str
    resource: str
    parts: tuple[Part, ...]


def parts_of(series: Iterable[Sequence[tuple[Millis, float]]], *, since_ms: Millis, until_ms: Millis,
             hold_ms: int) -> tuple[Part, ...]:
    """[since, until) cut at whole minutes, with the measured and active GPU-ms of each part over all
    `series` (one per GPU: (time in ms, utilization percent), in time order); parts no series covers are
    left out."""
    if until_ms <= since_ms:
        return ()
    measured: dict[int, float] = {}
    active: dict[int, float] = {}
    for samples in series:
        valid = [(t, v) for t, v in samples if math.isfinite(v) and 0.0 <= v <= 100.0]
        for i, (t, v) in enumerate(valid):
            end = t + hold_ms
            if i + 1 < len(valid):
                end = min(end, valid[i + 1][0])
            lo, hi = max(t, since_ms), min(end, until_ms)
            m = lo // MINUTE_MS * MINUTE_MS
            while m < hi:
                part = min(hi, m + MINUTE_MS) - max(lo, m)
                if part > 0:
                    measured[m] = measured.get(m, 0.0) + part
                    active[m] = active.get(m, 0.0) + part * v / 100.0
                m += MINUTE_MS
    return tuple((max(m, since_ms), min(m + MINUTE_MS, until_ms), round(measured[m]), round(active[m]))
                 for m in sorted(measured))
