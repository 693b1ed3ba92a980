"""fairshare.livelock beyond find_livelock: the same check fed one cycle at a time (a simulator's
cycle loop, LivelockGuard). Loops across instants, seen from the evictions in both shells, are
fairshare.control.storms' (tests/unit/control/test_storms.py)."""

from __future__ import annotations

from fairshare.livelock import WINDOW, LivelockGuard, find_livelock
from fairshare.scheduler import SchedulerConfig
from fairshare.settle import KueueModel
from tests.unit.core.test_settle import _behind_a_parked_head, _flip_flop

FAIR = SchedulerConfig(fair_sharing=True)


def test_the_guard_reports_the_loop_at_the_cycle_find_livelock_first_sees_it() -> None:
    run = KueueModel.from_state(_flip_flop(), FAIR).run(10.0)
    guard = LivelockGuard()
    seen = [guard.add(r) for r in run.cycles]
    last = seen[-1]
    expected = find_livelock(run.cycles)
    assert (
        [s is None for s in seen[:-1]],
        last is not None and expected is not None,
        last is not None and (last.workloads, last.preemptions, last.period),
    ) == (
        [True] * (len(run.cycles) - 1),
        True,
        expected is not None and (expected.workloads, expected.preemptions, expected.period),
    )


def test_the_guard_stays_quiet_on_a_settling_sequence() -> None:
    run = KueueModel.from_state(_behind_a_parked_head(), SchedulerConfig()).run(20.0)
    guard = LivelockGuard()
    assert [guard.add(r) for r in run.cycles] == [None] * len(run.cycles)


def test_the_guard_looks_at_the_last_window_of_busy_cycles_as_find_livelock_does() -> None:
    """More busy cycles than WINDOW before a loop: the guard keeps the last WINDOW (its `first_cycle` counts
    within them), as find_livelock looks only at the last WINDOW of a longer sequence."""
    settling = KueueModel.from_state(_behind_a_parked_head(), SchedulerConfig()).run(20.0).cycles
    admits = [r for r in settling if r.admissions and not r.preemptions]
    loop = KueueModel.from_state(_flip_flop(), FAIR).run(10.0).cycles
    fed = [admits[0]] * (WINDOW + 20) + list(loop)
    guard = LivelockGuard()
    seen = [guard.add(r) for r in fed]
    found = [(i, s) for i, s in enumerate(seen) if s is not None]
    assert found, "the loop is found after the long busy prefix"
    i, livelock = found[0]
    busy = [r for r in fed[: i + 1] if r.admissions or r.preemptions]
    assert len(busy) > WINDOW
    assert livelock == find_livelock(busy[-WINDOW:])
