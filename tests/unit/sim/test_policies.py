"""Quota shifts and experiment preemption go through fairshare's planners; the model applies them."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from fairshare.errors import InputError
from simulations.model import simulate_run
from simulations.record import RunResult
from simulations.runner import build_jobs
from simulations.scenario import Scenario

DAY = 86400.0
GPU = "nvidia.com/gpu"


def _cq(name: str, gpus: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohortName": "pool",
            "namespaceSelector": {},
            "preemption": {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"},
            "resourceGroups": [
                {
                    "coveredResources": [GPU],
                    "flavors": [{"name": "gpu", "resources": [{"name": GPU, "nominalQuota": gpus}]}],
                }
            ],
        },
    }


def _doc(exp_rate: float = 1.0, **extra: Any) -> dict[str, Any]:
    objects = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "gpu"}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "biz"},
            "value": 1000000,
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "exp"},
            "value": 100,
        },
        _cq("research", 4),
        _cq("serving", 4),
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": "r"},
            "spec": {"clusterQueue": "research"},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": "s"},
            "spec": {"clusterQueue": "serving"},
        },
    ]

    def source(name: str, lq: str, rate: float, mean: str, pc: str) -> dict[str, Any]:
        return {
            "name": name,
            "localQueue": lq,
            "generator": {
                "arrivals": {"kind": "poisson", "ratePerHour": rate},
                "durations": {"kind": "exponential", "mean": mean},
                "requests": [{"resources": {GPU: 1}}],
                "priorityClasses": [{"priorityClass": pc}],
            },
        }

    return {
        "name": "p",
        "seed": 3,
        "horizon": "20d",
        "sampleInterval": "1h",
        "cluster": {"objects": objects},
        "workloads": [source("exp", "r/q", exp_rate, "6h", "exp"), source("biz", "s/q", 1.5, "2h", "biz")],
        **extra,
    }


def _run(doc: dict[str, Any]) -> RunResult:
    sc = Scenario.model_validate(doc)
    return simulate_run(sc, build_jobs(sc, Path("."), 0), base_dir=Path("."), variant="v", replication=0)


SHRINK = {"at": "2d", "clusterQueue": "research", "flavor": "gpu", "resource": GPU, "nominalQuota": 1}


def test_an_immediate_cut_applies_the_target_at_once() -> None:
    run = _run(_doc(events=[{**SHRINK, "transition": {"curve": "immediate"}}]))
    assert [(q.time, q.cluster_queue, q.nominal_milli) for q in run.quota_changes] == [
        (2 * DAY, "research", 1000)
    ]


def test_a_gradual_shrink_with_drain_steps_down_daily_never_below_usage_and_ends_at_the_target() -> None:
    run = _run(
        _doc(
            exp_rate=0.4,
            events=[
                {
                    **SHRINK,
                    "transition": {"curve": "linear", "duration": "6d", "stepInterval": "1d", "drain": True},
                }
            ],
        )
    )
    steps = [(q.time, q.nominal_milli) for q in run.quota_changes]
    values = [v for _, v in steps]
    assert values == sorted(values, reverse=True) and values[-1] == 1000 and values[0] < 4000
    assert all(b - a >= DAY - 1e-6 for (a, _), (b, _) in itertools.pairwise(steps))
    assert sum(run.evictions) == 0  # drain: nothing is killed


def test_experiment_preemption_evicts_experiments_for_waiting_business_work() -> None:
    policy = {
        "experimentPriorityThreshold": 1000,
        "protectedPriority": 1000000,
        "maxVictims": 50,
        "window": "1h",
        "waitThreshold": "10m",
        "checkInterval": "5m",
    }
    base = _run(_doc())
    run = _run(_doc(experimentPreemption=policy))
    assert run.preemptions and {p.by for p in run.preemptions} == {"planner"}
    assert all(p.victim.startswith("r/") and p.preemptor.startswith("s/") for p in run.preemptions)
    assert all(p.reason.startswith(f"preempt {p.victim}: priority 100 < 1000000") for p in run.preemptions)

    def mean_biz_wait(r: RunResult) -> float:
        waits = [
            r.admitted_at[i] - j.arrival
            for i, j in enumerate(r.jobs)
            if j.source == "biz" and r.admitted_at[i] == r.admitted_at[i]
        ]
        return sum(waits) / len(waits)

    assert mean_biz_wait(run) < mean_biz_wait(base)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            {"events": [{**SHRINK, "clusterQueue": "nope"}]},
            "field events[0].clusterQueue: no such ClusterQueue",
        ),
        (
            {"events": [{**SHRINK, "transition": {"curve": "linear", "duration": "2d", "floor": 2}}]},
            "field events[0]: target quota of research/gpu/nvidia.com/gpu is below the transition",
        ),
        (
            {
                "experimentPreemption": {
                    "experimentPriorityThreshold": 10,
                    "protectedPriority": 100,
                    "protectedClasses": ["gold"],
                }
            },
            "field experimentPreemption.protectedClasses: no such WorkloadPriorityClass",
        ),
    ],
    ids=["unknown ClusterQueue", "target below the floor", "unknown protected class"],
)
def test_bad_policy_settings_are_one_line_errors_naming_the_field(
    extra: dict[str, Any], message: str
) -> None:
    with pytest.raises(InputError) as err:
        _run(_doc(**extra))
    assert message in str(err.value)


def test_the_cluster_can_be_given_as_a_quota_policy_rendered_by_fairshare_policy() -> None:
    sample = Path(__file__).resolve().parents[3] / "manifests" / "samples" / "quotapolicy.yaml"
    doc = _doc()
    doc["cluster"] = {"quotaPolicy": str(sample)}
    doc["horizon"] = "2d"
    for source, team, pc in (
        (doc["workloads"][0], "ai-frontier-research", "low-priority-experiment"),
        (doc["workloads"][1], "biz-model-serving", "high-priority-business"),
    ):
        source["localQueue"] = f"{team}/{team}"
        source["generator"]["priorityClasses"] = [{"priorityClass": pc}]
    run = _run(doc)
    assert set(run.quota_seconds) == {"ai-frontier-research", "biz-model-serving"}
    assert run.capacity_milli == 20000
    assert sum(a == a for a in run.admitted_at) > 0
