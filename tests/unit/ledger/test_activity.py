"""What the GPUs did, as the ledger integrates it (ledger.activity): each valid sample holds its value until
the next sample, at most the staleness bound; parts never cross a minute; NaN and out-of-range samples
measure nothing; the spool carries the parts exactly."""

from __future__ import annotations

import math

import pytest

from ledger.activity import ActivityRecord, parts_of
from ledger.codec import CodecError, decode, encode

M = 60_000
T = 1_800_000_000_000  # a whole minute (ms)


@pytest.mark.parametrize(
    ("series", "since", "until", "parts"),
    [
        pytest.param([[(T, 50.0), (T + 30_000, 50.0)]], T, T + M, [(T, T + M, 60_000, 30_000)],
                     id="one GPU at 50% sampled every 30 s: a minute measured, half of it active"),
        pytest.param([[(T, 100.0), (T + 30_000, 0.0)], [(T, 20.0), (T + 30_000, 20.0)]], T, T + M,
                     [(T, T + M, 120_000, 30_000 + 12_000)],
                     id="two GPUs: their times add up (GPU-ms), each weighted by its own value"),
        pytest.param([[(T, 80.0)]], T, T + M, [(T, T + M, 45_000, 36_000)],
                     id="a last sample holds at most the staleness bound (45 s), then the GPU is unmeasured"),
        pytest.param([[(T + 45_000, 40.0), (T + 75_000, 40.0)]], T, T + 2 * M,
                     [(T, T + M, 15_000, 6_000), (T + M, T + 2 * M, 60_000, 24_000)],
                     id="cut at the minute: parts never cross one"),
        pytest.param([[(T, math.nan), (T + 30_000, 101.0), (T + 40_000, -1.0)]], T, T + M, [],
                     id="NaN, above 100% and negative samples measure nothing"),
        pytest.param([[(T, 0.0), (T + 30_000, 0.0)]], T + 20_000, T + 50_000,
                     [(T + 20_000, T + 50_000, 30_000, 0)],
                     id="real zeros are measured and not active; the interval is clipped"),
        pytest.param([[(T, 60.0)]], T + M, T + M, [], id="an empty interval"),
    ],
)
def test_parts_hold_each_sample_until_the_next_within_the_staleness_bound(
    series: list[list[tuple[int, float]]], since: int, until: int, parts: list[tuple[int, int, int, int]]
) -> None:
    assert list(parts_of(series, since_ms=since, until_ms=until, hold_ms=45_000)) == parts


def test_an_activity_record_survives_the_spool_and_a_damaged_one_is_refused() -> None:
    r = ActivityRecord("uid-1", "nvidia.com/gpu", ((T, T + M, 60_000, 12_345),))
    assert decode(encode(r)) == r
    with pytest.raises(CodecError, match="field parts"):
        decode({**encode(r), "parts": [[T, T + M, 1.5, 2]]})
