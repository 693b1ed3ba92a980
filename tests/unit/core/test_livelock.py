"""fairshare.livelock beyond find_livelock: the same check fed one cycle at a time (a simulator's
cycle loop, LivelockGuard), and a preemption loop recognised in Workloads observed in a real
cluster (the operator, observe_preemptions)."""

from __future__ import annotations

import dataclasses

from fairshare.livelock import (
    WINDOW,
    LivelockGuard,
    PreemptionHistory,
    PreemptionLoop,
    find_livelock,
    observe_preemptions,
)
from fairshare.models import Condition, Workload
from fairshare.scheduler import SchedulerConfig
from fairshare.settle import KueueModel
from tests.builders import WorkloadBuilder
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


def _preempted(name: str, times: int, reason: str = "InCohortFairSharing") -> Workload:
    wl = WorkloadBuilder("cq", name).request("cpu", 1).build()
    stats = (("Preempted", "", times),) if times else ()
    words = "Preempted to accommodate a workload"
    cond = (Condition("Preempted", True, reason, words, 0.0),) if times else ()
    return dataclasses.replace(wl, eviction_stats=stats, conditions=cond)


def _observe(samples: list[tuple[float, list[Workload]]]) -> list[tuple[PreemptionLoop, ...]]:
    history = PreemptionHistory()
    out = []
    for now, wls in samples:
        history, loops = observe_preemptions(history, wls, now)
        out.append(loops)
    return out


def test_a_workload_preempted_four_times_within_a_minute_is_a_loop_with_its_reasons() -> None:
    got = _observe(
        [
            (0.0, [_preempted("a", 0), _preempted("b", 0)]),
            (10.0, [_preempted("a", 2), _preempted("b", 1)]),
            (20.0, [_preempted("a", 4, "InCohortReclamation"), _preempted("b", 1)]),
        ]
    )
    assert got == [
        (),
        (),
        (PreemptionLoop("cq/a", 4, 60.0, ("InCohortFairSharing", "InCohortReclamation")),),
    ]


def test_the_loop_message_names_the_workload_count_window_and_reasons() -> None:
    loop = PreemptionLoop("cq/a", 4, 60.0, ("InCohortFairSharing",))
    assert loop.message() == (
        "preemption livelock: Kueue preempted cq/a 4 times in 60 s (InCohortFairSharing) "
        "and keeps re-admitting it"
    )


def test_preemptions_spread_over_more_than_the_window_are_not_a_loop() -> None:
    got = _observe([(0.0, [_preempted("a", 0)])] + [(t, [_preempted("a", i + 1)]) for i, t in
                                                   enumerate((30.0, 61.0, 92.0, 123.0, 154.0))])
    assert got == [()] * 6


def test_preemptions_before_the_first_observation_are_a_baseline_not_a_loop() -> None:
    got = _observe([(0.0, [_preempted("a", 10)]), (5.0, [_preempted("a", 11)])])
    assert got == [(), ()]


def test_a_workload_no_longer_observed_is_forgotten() -> None:
    history, _ = observe_preemptions(PreemptionHistory(), [_preempted("a", 0)], 0.0)
    history, _ = observe_preemptions(history, [_preempted("a", 3)], 1.0)
    history, loops = observe_preemptions(history, [], 2.0)
    assert (history, loops) == (PreemptionHistory({}, {}), ())
