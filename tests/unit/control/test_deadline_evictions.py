"""A transition past its deadline evicts only when it frees quota for someone (issue 31, item 4): what the
team may not hold at all (above its nominal + borrowingLimit) must fall, and Kueue cannot re-admit a victim
by borrowing; what it borrows within that is evicted only for another team's pending work that the model of
Kueue shows takes the freed quota, and the victim is held meanwhile. The seed's shift (research 4 -> 1 GPU,
business 16 -> 19 in one cohort) with a short transition, decided by the controller and applied by the
simulator's shell to its Kueue, as in a simulation."""

from __future__ import annotations

import re

import pytest

from fairshare.policy.status import TransitionPhase
from fairshare.workload import WorkloadInfo
from simulations.record import ActionRecord
from tests.builders import SeedShiftBuilder
from tests.futile import futile_evictions
from tests.unit.control.cut_world import DEADLINE, T0, Cut
from tests.unit.operator.kube_objects import workload


def _beneficiary(a: ActionRecord) -> str | None:
    found = re.search(r" that (\S+) \(priority", a.detail)
    return found.group(1) if found else None


@pytest.mark.parametrize(
    ("spec", "demand", "victims", "beneficiaries", "phase"),
    [
        pytest.param(SeedShiftBuilder().transition(**DEADLINE), [], 0, [], TransitionPhase.BORROWING,
                     id="past the deadline a team that borrows what nobody needs keeps it and loses no work"),
        pytest.param(SeedShiftBuilder().transition(**DEADLINE), [("serve", 14)], 0, [],
                     TransitionPhase.BORROWING,
                     id="another team's work that fits in the idle quota needs no eviction"),
        pytest.param(SeedShiftBuilder().transition(**DEADLINE), [("fill", 14), ("serve", 2)], 2,
                     ["business/serve"], TransitionPhase.BORROWING,
                     id="work of another team Kueue cannot admit gets the borrowed quota: fewest victims"),
        pytest.param(SeedShiftBuilder().transition(**DEADLINE).reclaim("business", "LowerPriority"),
                     [("fill", 14), ("serve", 2)], 0, [], TransitionPhase.BORROWING,
                     id="work Kueue admits by reclaiming the borrowed quota itself needs no eviction"),
        pytest.param(SeedShiftBuilder().transition(**DEADLINE).research_limit(0), [], 2, [None],
                     TransitionPhase.PREEMPTING,
                     id="with a borrowing limit of 0 the usage must fall: evicted within the hourly budget"),
        pytest.param(SeedShiftBuilder().transition(**DEADLINE).research_limit(3), [], 2, [None],
                     TransitionPhase.BORROWING,
                     id="with a borrowing limit of 3 what is above quota + limit is evicted, the rest kept"),
    ],
)
def test_a_deadline_evicts_only_what_frees_quota_for_someone(
    spec: SeedShiftBuilder, demand: list[tuple[str, int]], victims: int, beneficiaries: list[str | None],
    phase: TransitionPhase,
) -> None:
    cut = Cut(spec)
    cut.run_until(T0 + 29)  # the steps are applied; 6 GPUs in use drain nothing before the deadline
    assert cut.evictions() == [] and cut.research_usage() == 6000
    for name, gpus in demand:
        cut.business(name, gpus)
    cut.run_until(T0 + 100)  # past the deadline (T0 + 30) and the business work's starvation grace
    evicted = cut.evictions()
    assert len(evicted) == victims, [a.detail for a in evicted]
    assert sorted({_beneficiary(a) for a in evicted}, key=str) == sorted(set(beneficiaries), key=str)
    # The newest experiments go first (least work lost); none comes back while research is above quota.
    assert sorted(a.target for a in evicted) == [f"research/exp-{i}" for i in range(6 - victims, 6)]
    assert futile_evictions(cut.readmissions(), within=3600) == []
    assert cut.phase() == phase


def test_an_eviction_for_another_teams_work_holds_its_victims_until_the_hold_passes() -> None:
    cut = Cut(SeedShiftBuilder().transition(**DEADLINE))
    cut.business("fill", 14)
    cut.run_until(T0 + 29)
    cut.business("serve", 2)
    cut.run_until(T0 + 62)  # serve starves 30 s; evicted for it at T0 + 60
    [first, second] = cut.evictions()
    assert (first.time, second.time) == (60.0 + 3600, 60.0 + 3600)  # seconds since the shell's start
    held = [a for a in cut.shell.log if a.kind == "reactivate"]
    assert held == [] and cut.lives.admitted_at("business/serve") != []
    cut.run_until(T0 + 125)  # victimHold 60 s after the request: Kueue requeues them; research stays at 4
    released = [a for a in cut.shell.log if a.kind == "reactivate"]
    assert sorted(a.target for a in released) == ["research/exp-4", "research/exp-5"] and all(
        "victimHold" in a.detail for a in released)
    assert cut.research_usage() == 4000 and len(cut.lives.admitted_at("research/exp-5")) == 0


def test_a_team_without_a_cohort_cannot_borrow_so_its_excess_past_the_deadline_must_fall() -> None:
    cut = Cut(SeedShiftBuilder().transition(**DEADLINE).without_cohort(), running=4)
    cut.run_until(T0 + 40)
    assert [a.target for a in cut.evictions()] == ["research/exp-3", "research/exp-2"]
    assert cut.phase() == TransitionPhase.PREEMPTING and cut.readmissions() == []


def test_a_completed_transition_stays_complete_when_its_team_borrows_again() -> None:
    cut = Cut(SeedShiftBuilder().transition(**DEADLINE), running=1)
    cut.run_until(T0 + 25)
    assert cut.phase() == TransitionPhase.COMPLETE
    for i in range(3):  # research borrows business's idle GPUs again
        w = workload("research", f"late-{i}", queue="research", gpus=1, priority=100, priority_class="exp",
                     created=cut.t)
        cut.kueue.submit(WorkloadInfo.pending(w, "research"), cut.t)
    cut.run_until(T0 + 100)
    assert (cut.research_usage(), cut.phase(), cut.evictions()) == (4000, TransitionPhase.COMPLETE, [])


@pytest.mark.parametrize(
    ("worn", "victims"),
    [
        pytest.param((4, 5), ["research/exp-2", "research/exp-3"],
                     id="the newest experiments, evicted maxEvictionsPerWorkload times already, are spared"),
        pytest.param(tuple(range(6)), [],
                     id="with every borrowing experiment worn out nothing is evicted: the quota stays lent"),
    ],
)
def test_borrowed_quota_past_the_deadline_spares_a_workload_evicted_max_evictions_times(
    worn: tuple[int, ...], victims: list[str]
) -> None:
    cut = Cut(SeedShiftBuilder().transition(**DEADLINE), worn=worn)
    cut.run_until(T0 + 29)
    cut.business("fill", 14)
    cut.business("serve", 2)
    cut.run_until(T0 + 100)
    assert sorted(a.target for a in cut.evictions()) == victims
    assert cut.phase() == TransitionPhase.BORROWING
