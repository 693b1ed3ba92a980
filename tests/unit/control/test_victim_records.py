"""The eviction records the controller keeps in status (fairshare.control.victims.trim): every record still
in its lifecycle, every one younger than the longest budget window, and the last MAX_RECORDS others, in
their order."""

from __future__ import annotations

from fairshare.control.victims import MAX_RECORDS, trim
from fairshare.policy.status import PreemptionRecord, VictimState

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

