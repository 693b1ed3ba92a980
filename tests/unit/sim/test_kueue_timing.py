"""The simulator's Kueue timing, as the differential harness measured the real Kueue v0.19.2 (issue 10).

- Kueue keeps cycling while its queues have heads: a BestEffortFIFO head that does not fit is parked
  and the next cycle pops the workload behind it (pkg/scheduler/scheduler.go ``schedule`` under
  ``wait.UntilWithBackoff``), so a cycle that admits nothing does not end the instant.
- An eviction completes when the victim's Job has stopped and Kueue clears its reservation, tenths of a
  second later on a cluster (the fidelity harness measures it): with ``scheduler.evictionRelease`` the
  victim keeps its quota meanwhile, its work stops at once, and its preemptor is admitted when it completes
  (pkg/scheduler/preemption/preemption.go IssuePreemptions skips a target already evicted; the preemptor is
  requeued with RequeueReasonPendingPreemption).
- After a quota release, Kueue requeues the workloads it parked as inadmissible only after a
  one-second batch (pkg/cache/queue/inadmissible_workloads.go ``requeueBatchPeriod``,
  ``AddAfter``); a workload that arrives within that second is tried at once and can take the
  freed quota first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simulations.jobs import JobSpec
from simulations.model import simulate_run
from simulations.record import RunResult
from simulations.scenario import Scenario

GPU = "nvidia.com/gpu"


def _cq(name: str, gpus: int, reclaim: str = "Never") -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohortName": "pool",
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "preemption": {"withinClusterQueue": "Never", "reclaimWithinCohort": reclaim},
            "resourceGroups": [
                {
                    "coveredResources": [GPU],
                    "flavors": [{"name": "gpu", "resources": [{"name": GPU, "nominalQuota": gpus}]}],
                }
            ],
        },
    }


def _lq(namespace: str, cq: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "q", "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def _run(cqs: dict[str, int], jobs: list[tuple[str, str, float, float, int]], *, reclaim: str = "Never",
         release: float = 0.0) -> RunResult:
    """``jobs``: (name, namespace, arrival, duration, gpus); namespace ``a`` queues to CQ ``a``. ``release``:
    the scheduler's evictionRelease."""
    objects = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "gpu"}}
    ]
    objects += [_cq(name, gpus, reclaim) for name, gpus in cqs.items()] + [_lq(name, name) for name in cqs]
    scenario = Scenario.model_validate(
        {
            "name": "kueue-timing",
            "seed": 1,
            "horizon": "1h",
            "cluster": {"objects": objects},
            "scheduler": {"evictionRelease": release},
            # Sources are only needed for validation: the jobs below are given explicitly.
            "workloads": [
                {
                    "name": "unused",
                    "localQueue": f"{next(iter(cqs))}/q",
                    "generator": {
                        "arrivals": {"kind": "poisson", "ratePerHour": 1},
                        "durations": {"kind": "constant", "value": "1s"},
                        "requests": [{"resources": {GPU: 1}}],
                    },
                }
            ],
        }
    )
    specs = [
        JobSpec(name, ns, "q", arrival, duration, 1, ((GPU, gpus * 1000),), None, "trace")
        for name, ns, arrival, duration, gpus in jobs
    ]
    return simulate_run(scenario, specs, base_dir=Path("."), variant="v", replication=0)


def _admitted(result: RunResult, name: str) -> float:
    return result.admitted_at[[j.name for j in result.jobs].index(name)]


def test_a_workload_behind_a_parked_head_is_admitted_in_the_next_cycle_of_the_same_instant() -> None:
    # 4 GPUs: "running" holds 3; "big" (2) does not fit and is parked; "small" (1), behind it in
    # the same BestEffortFIFO queue, fits: Kueue admits it in its next cycle, at t=10. "big" gets in one
    # requeue batch after "running" releases its GPUs at t=1000.
    result = _run(
        {"a": 4},
        [("running", "a", 0.0, 1000.0, 3), ("big", "a", 10.0, 100.0, 2), ("small", "a", 10.0, 100.0, 1)],
    )
    assert (_admitted(result, "small"), _admitted(result, "big")) == (10.0, 1001.0)


def test_a_freed_gpu_goes_to_a_workload_arriving_within_the_requeue_batch_before_a_parked_one() -> None:
    # Cohort "pool": a (1 GPU) and b (0 GPUs, borrows). "holder" runs in a until t=100. "parked"
    # (b, 1 GPU) arrived at t=10 and was parked. At t=100.5 "newcomer" (a, 1 GPU) arrives: Kueue
    # requeues "parked" only at t=101 (the batch after the release at t=100), so "newcomer" is
    # tried first, at t=100.5, and takes the GPU; "parked" waits for it, and gets in one batch after
    # "newcomer" releases the GPU at t=150.5.
    result = _run(
        {"a": 1, "b": 0},
        [
            ("holder", "a", 0.0, 100.0, 1),
            ("parked", "b", 10.0, 50.0, 1),
            ("newcomer", "a", 100.5, 50.0, 1),
        ],
    )
    assert (_admitted(result, "newcomer"), _admitted(result, "parked")) == (100.5, 151.5)


# Cohort "pool": a (2 GPUs) and b (0 GPUs). "borrower" (b, 2 GPUs) borrows a's quota from t=0; "owner" (a,
# 2 GPUs) arrives at t=100 and Kueue reclaims (reclaimWithinCohort: Any).
RECLAIM = (("borrower", "b", 0.0, 1000.0, 2), ("owner", "a", 100.0, 50.0, 2))


def test_a_reclaimed_quota_goes_to_its_owner_at_the_same_instant_when_evictions_complete_at_once() -> None:
    result = _run({"a": 2, "b": 0}, list(RECLAIM), reclaim="Any")
    assert _admitted(result, "owner") == 100.0
    assert result.evictions[0] == 1


def test_the_owner_waits_for_the_victims_release_and_the_victim_holds_its_quota_until_then() -> None:
    result = _run({"a": 2, "b": 0}, list(RECLAIM), reclaim="Any", release=0.5)
    assert _admitted(result, "owner") == 100.5
    assert result.evictions[0] == 1  # one eviction, although the owner's cycles target it until it completes
    # The borrower held its quota from 0 to the release at 100.5, then from its re-admission (the owner
    # finished at 150.5, plus the requeue batch) for the default restartCost (300 s) and its 1,000 s of work.
    assert result.held_seconds[0] == 100.5 + (300.0 + 1000.0)


def test_a_victims_work_stops_when_its_eviction_begins_so_its_finish_does_not_fall_due_meanwhile() -> None:
    # The borrower's work would end at t=100.2, inside its eviction (100 -> 100.5): it does not finish then;
    # it starts again from zero (no checkpoint) when it is admitted again. Lost: the 100 s it ran before its
    # pods stopped (not the 0.5 s of the eviction) and the default restartCost of 300 s.
    result = _run({"a": 2, "b": 0}, [("borrower", "b", 0.0, 100.2, 2), ("owner", "a", 100.0, 50.0, 2)],
                  reclaim="Any", release=0.5)
    assert _admitted(result, "owner") == 100.5
    assert result.evictions[0] == 1
    assert result.lost_seconds[0] == 100.0 + 300.0
    assert result.finished_at[0] == 151.5 + 300.0 + 100.2
