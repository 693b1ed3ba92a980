"""The eviction records the controller keeps in status (fairshare.control.victims.trim): every record still
in its lifecycle, every one younger than the longest budget window, and the last MAX_RECORDS others, in
their order."""

from __future__ import annotations

import random

from fairshare.control.victims import MAX_RECORDS, eviction_times, past_eviction_times, trim
from fairshare.policy.status import EvictionKind, PreemptionRecord, VictimState

DAY = 86400.0


def _record(i: int, at: float, state: VictimState | None) -> PreemptionRecord:
    return PreemptionRecord(time=f"t{i}", at=at, victim=f"ns/v{i}", reason="r", state=state)


def test_live_and_young_records_stay_and_only_the_last_old_finished_ones_are_kept() -> None:
    now = 100 * DAY
    old_done = [_record(i, now - 50 * DAY + i, VictimState.REQUEUED) for i in range(MAX_RECORDS + 20)]
    old_live = _record(1000, now - 60 * DAY, VictimState.REQUESTED)
    young_done = _record(1001, now - DAY, VictimState.GONE)
    records = [old_live, *old_done[:10], young_done, *old_done[10:]]

    kept = trim(records, now, keep_for=7 * DAY)

    assert kept == [old_live, young_done, *old_done[20:]]
    assert len(kept) == MAX_RECORDS + 2



def test_up_to_max_records_old_finished_ones_are_all_kept_and_one_more_drops_the_oldest() -> None:
    now = 100 * DAY
    old_done = [_record(i, now - 50 * DAY + i, VictimState.GONE) for i in range(MAX_RECORDS + 1)]

    assert trim(old_done[:MAX_RECORDS], now, keep_for=7 * DAY) == old_done[:MAX_RECORDS]
    assert trim(old_done, now, keep_for=7 * DAY) == old_done[1:]


def test_eviction_times_are_each_kinds_real_requests_in_time_order() -> None:
    # Three kinds of eviction exist; eviction_times sorts every record into one of them (no kind: experiment).
    assert set(EvictionKind) == {EvictionKind.EXPERIMENT, EvictionKind.TRANSITION, EvictionKind.IDLE}
    rng = random.Random(7)
    records = [
        PreemptionRecord(time=f"t{i}", at=rng.choice([None, rng.uniform(0, DAY)]), victim=f"ns/v{i}",
                         reason="r", dry_run=rng.random() < 0.2,
                         kind=rng.choice([None, *EvictionKind]))
        for i in range(200)
    ]
    times = eviction_times(records)
    assert times == {kind: past_eviction_times(records, kind) for kind in EvictionKind}
    assert all(times[kind] for kind in EvictionKind)
