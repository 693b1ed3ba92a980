"""The simulator's Kueue stops a preemption livelock at one instant and notes it, instead of cycling to its
cap: the state is the one the real Kueue v0.19.2 spun on (a fair-sharing random state of the differential
harness, vendored in tests/conformance/differential/)."""

from __future__ import annotations

from pathlib import Path

from fairshare.conformance import load_case
from fairshare.snapshot import Snapshot
from fairshare.workload import WorkloadInfo
from simulations.kueue import MAX_CYCLES_PER_INSTANT, KueueModel

CASE = (
    Path(__file__).parents[2]
    / "conformance/differential"
    / (
        "a-reclaimed-victim-is-admitted-again-before-its-preemptor-and-preempted-again-for-ever-"
        "fair-sharing-seed-30.yaml"
    )
)


class _Log:
    def __init__(self) -> None:
        self.evictions: list[tuple[str, str]] = []

    def admitted(self, info: WorkloadInfo, t: float) -> None:
        pass

    def evicted(self, info: WorkloadInfo, t: float, *, by: str, preemptor: str, reason: str) -> None:
        self.evictions.append((info.key, reason))


def test_a_victim_preempted_and_readmitted_for_ever_is_noted_as_a_livelock_and_the_instant_ends() -> None:
    case = load_case(CASE)
    log = _Log()
    model = KueueModel(case.state, case.config, log)
    for info in sorted(Snapshot.from_state(case.state).pending.values(), key=lambda i: i.key):
        model.submit(info, case.now)
    model.settle(case.now)
    assert model.cycles < 50 < MAX_CYCLES_PER_INSTANT
    assert len(model.notes) == 1
    note = model.notes[0]
    assert "preemption livelock" in note and "df30-ns/w09" in note and "InCohortReclamation" in note
    # The loop it cut: w09 evicted again and again for the same reason.
    assert log.evictions.count(("df30-ns/w09", "InCohortReclamation")) >= 3
