"""The fidelity harness's simulator side (tests/fidelity/sim.py) on its own: it runs on whichever core is in
use (the compiled Simulation is wrapped, not subclassed), records every job's life, and gives Kueue's
tie-breaks the identities it is told (the real Workloads' UIDs and creation seconds)."""

from __future__ import annotations

from typing import Any

from tests.fidelity.sim import SimulatedRun, simulate
from tests.fidelity.workload import SMALL, edit_at, load

JOBS = 40


def _run(**kwargs: Any) -> SimulatedRun:
    jobs = load(JOBS)
    return simulate(jobs, "unit", edit_at=edit_at(jobs) + 0.5, horizon=3600.0, overhead=1.0, quotas=SMALL,
                    **kwargs)


def test_every_job_of_the_slice_is_admitted_and_finishes_with_its_admissions_recorded_in_order() -> None:
    run = _run()
    assert all(life.admitted is not None and life.finished is not None for life in run.jobs.values())
    admits = [t for t, kind, _ in run.order if kind == "admit"]
    assert admits == sorted(admits) and len({n for _, k, n in run.order if k == "admit"}) == JOBS


def test_victims_released_later_wait_their_preemptors_and_delay_the_waits() -> None:
    at_once, later = _run(), _run(release=1.0)
    evictions = sum(len(life.evictions) for life in at_once.jobs.values())
    assert evictions > 0

    def mean_wait(run: SimulatedRun) -> float:
        lives = run.jobs.values()
        return sum((life.admitted or 0.0) - life.arrival for life in lives) / len(lives)

    assert mean_wait(later) > mean_wait(at_once)


def test_the_real_uids_decide_ties_between_jobs_created_in_the_same_second() -> None:
    jobs = load(JOBS)
    # Two jobs of one team arriving in the same second, each given the other's rank by its UID.
    by_second: dict[tuple[str, int], list[str]] = {}
    for j in jobs:
        by_second.setdefault((j.team, j.at), []).append(j.name)
    a, b = next(names[:2] for names in by_second.values() if len(names) > 1)
    low, high = "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"
    first, swapped = _run(uids={a: low, b: high}), _run(uids={a: high, b: low})

    def rank(run: SimulatedRun, name: str) -> int:
        admits = [n for _, k, n in run.order if k == "admit"]
        return admits.index(name)

    assert (rank(first, a) < rank(first, b)) != (rank(swapped, a) < rank(swapped, b))


def test_a_job_evicted_and_admitted_again_at_one_instant_leaves_no_quota_idle_behind_it() -> None:
    from tests.fidelity.compare import idle_while_pending
    from tests.fidelity.sim import Lifecycle
    from tests.fidelity.workload import FidelityJob

    jobs = [FidelityJob("a", "t0", 0, 1, 10, "a"), FidelityJob("b", "t0", 0, 1, 10, "b")]
    life = {
        # a: admitted at 0, evicted and admitted again at 5 (one instant), finished at 20.
        "a": Lifecycle(arrival=0.0, admissions=[0.0, 5.0], evictions=[5.0], finished=20.0),
        # b: waits from 0 to 10 for its single GPU of a 2-GPU cohort, holding one from 10 to 20.
        "b": Lifecycle(arrival=0.0, admissions=[10.0], finished=20.0),
    }
    # One GPU idle while b waits, 0 -> 10; nothing after a's instant at 5.
    assert idle_while_pending(jobs, life, capacity=2) == 10.0
