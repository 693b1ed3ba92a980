"""The model against queueing theory, and conservation laws.

Tolerance: waits of successive workloads are correlated, so the standard error of the
mean wait comes from batch means (20 contiguous batches after the warm-up; Law &
Kelton §9.5.3). The analytic value must lie within K = 4 standard errors of the
simulated mean: for a normal estimator that fails with probability 6e-5, and the
standard error shrinks as 1/sqrt(run length), so the check tightens with longer runs.
Seeds are fixed, so the tests are deterministic.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from simulations.model import simulate_run
from simulations.record import RunResult
from simulations.runner import build_jobs
from simulations.scenario import Scenario
from simulations.stats import batch_means

K = 4.0
BATCHES = 20
HOUR = 3600.0


def erlang_c_wait(arrival_rate: float, service_rate: float, servers: int) -> float:
    """Mean wait in queue of M/M/c (Erlang C): P(wait) / (c·mu - lambda)."""
    a = arrival_rate / service_rate
    rho = a / servers
    top = a**servers / math.factorial(servers) / (1.0 - rho)
    p_wait = top / (sum(a**k / math.factorial(k) for k in range(servers)) + top)
    return p_wait / (servers * service_rate - arrival_rate)


def cobham_waits(rates: list[float], service_rate: float) -> list[float]:
    """Non-preemptive priority M/M/1, class 0 highest (Cobham 1954):
    W_k = W0 / ((1 - s_{k-1})(1 - s_k)), s_k = Σ_{i<=k} rho_i, W0 = Σ lambda_i E[S^2] / 2, E[S^2] = 2/mu^2."""
    w0 = sum(lam * 2.0 / service_rate**2 for lam in rates) / 2.0
    out, sigma = [], 0.0
    for lam in rates:
        prev = sigma
        sigma += lam / service_rate
        out.append(w0 / ((1.0 - prev) * (1.0 - sigma)))
    return out


def _cluster(gpus: int, classes: dict[str, int]) -> dict[str, Any]:
    objects: list[dict[str, Any]] = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "gpu"}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "queueingStrategy": "BestEffortFIFO",
                "preemption": {"withinClusterQueue": "Never"},
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [
                            {"name": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]}
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": "ns"},
            "spec": {"clusterQueue": "cq"},
        },
    ]
    for name, value in classes.items():
        objects.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
        )
    return {"objects": objects}


def _source(name: str, rate_per_hour: float, priority_class: str | None) -> dict[str, Any]:
    return {
        "name": name,
        "localQueue": "ns/q",
        "generator": {
            "arrivals": {"kind": "poisson", "ratePerHour": rate_per_hour},
            "durations": {"kind": "exponential", "mean": "1h"},
            "requests": [{"resources": {"nvidia.com/gpu": 1}}],
            "priorityClasses": [{"priorityClass": priority_class}],
        },
    }


def _run(doc: dict[str, Any]) -> RunResult:
    scenario = Scenario.model_validate(doc)
    return simulate_run(
        scenario, build_jobs(scenario, Path("."), 0), base_dir=Path("."), variant="v", replication=0
    )


def _waits(run: RunResult, priority_class: str | None = None) -> list[float]:
    return [
        run.admitted_at[i] - j.arrival
        for i, j in enumerate(run.jobs)
        if j.arrival >= run.warmup
        and not math.isnan(run.admitted_at[i])
        and (priority_class is None or j.priority_class == priority_class)
    ]


def test_a_single_queue_m_m_c_matches_the_erlang_c_mean_wait() -> None:
    lam, mu, c = 3.0, 1.0, 4  # per hour; rho = 0.75
    run = _run(
        {
            "name": "mmc",
            "seed": 11,
            "horizon": "200d",
            "warmup": "10d",
            "cluster": _cluster(c, {}),
            "workloads": [_source("w", lam, None)],
        }
    )
    mean, se = batch_means(_waits(run), BATCHES)
    expected = erlang_c_wait(lam, mu, c) * HOUR
    assert abs(mean - expected) <= K * se, (mean, expected, se)


def test_two_class_non_preemptive_priority_m_m_1_matches_cobham() -> None:
    rates = [0.3, 0.4]  # per hour; rho = 0.7
    run = _run(
        {
            "name": "cobham",
            "seed": 12,
            "horizon": "800d",
            "warmup": "20d",
            "cluster": _cluster(1, {"high": 1000, "low": 10}),
            "workloads": [_source("hi", rates[0], "high"), _source("lo", rates[1], "low")],
        }
    )
    for pc, expected_h in zip(["high", "low"], cobham_waits(rates, 1.0), strict=True):
        mean, se = batch_means(_waits(run, pc), BATCHES)
        assert abs(mean - expected_h * HOUR) <= K * se, (pc, mean, expected_h * HOUR, se)


def _frontier_like(checkpoint: str | None, restart: str | int = 0) -> dict[str, Any]:
    cluster = _cluster(4, {"biz": 1000, "exp": 10})
    cq = cluster["objects"][1]
    cq["spec"]["cohortName"] = "pool"
    cq["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    other = {
        **cq,
        "metadata": {"name": "cq2"},
        "spec": {
            **cq["spec"],
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {"name": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 4}]}
                    ],
                }
            ],
        },
    }
    cluster["objects"] += [
        other,
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "LocalQueue",
            "metadata": {"name": "q", "namespace": "ns2"},
            "spec": {"clusterQueue": "cq2"},
        },
    ]
    exp = _source("exp", 3.0, "exp")
    exp["generator"]["durations"] = {"kind": "exponential", "mean": "3h"}
    biz = {**_source("biz", 2.0, "biz"), "localQueue": "ns2/q"}
    biz["generator"]["requests"] = [{"resources": {"nvidia.com/gpu": 2}}]
    return {
        "name": "conservation",
        "seed": 5,
        "horizon": "20d",
        "cluster": cluster,
        "workloads": [exp, biz],
        "checkpointInterval": checkpoint,
        "restartCost": restart,
    }


@pytest.mark.parametrize(
    ("checkpoint", "restart"),
    [(None, 0), ("20m", 0), (None, "5m"), ("20m", "5m")],
    ids=["no checkpoints", "checkpoint every 20m", "restart cost 5m", "checkpoints and restart cost"],
)
def test_every_workload_is_accounted_for_and_gpu_seconds_add_up(
    checkpoint: str | None, restart: str | int
) -> None:
    run = _run(_frontier_like(checkpoint, restart))
    assert sum(run.evictions) > 0  # the scenario does exercise preemption
    n = len(run.jobs)
    finished = [not math.isnan(t) for t in run.finished_at]
    states = [finished[i] + run.running_at_end[i] for i in range(n)]
    assert max(states) == 1  # never both finished and running
    pending = states.count(0)
    assert sum(finished) + sum(run.running_at_end) + pending == n
    # GPU-seconds held per workload add up to the ClusterQueues' usage integrals.
    held = sum(run.held_seconds[i] * j.total("nvidia.com/gpu") / 1000.0 for i, j in enumerate(run.jobs))
    assert held == pytest.approx(sum(run.usage_seconds.values()), rel=1e-9)
    # Work is conserved: a finished workload held quota for its duration plus exactly the work it lost.
    for i, j in enumerate(run.jobs):
        if finished[i]:
            assert run.held_seconds[i] - run.lost_seconds[i] == pytest.approx(j.duration, abs=1e-6)
    units = [j.total("nvidia.com/gpu") / 1000.0 for j in run.jobs]
    evicted = sum(p.lost_seconds * p.gpus_milli / 1000.0 for p in run.preemptions)
    lost = sum(s * u for s, u in zip(run.lost_seconds, units, strict=True))
    if restart == 0:
        assert run.restart_seconds == 0.0
        if checkpoint is None:  # every eviction loses the whole attempt
            assert lost == pytest.approx(evicted)
    else:
        # Lost = what the evictions threw away (their attempts' restart cost included) + the restart cost of
        # the attempts that finished; at most 5 minutes per eviction is restart cost.
        assert 0 < run.restart_seconds <= 300.0 * sum(p.gpus_milli / 1000.0 for p in run.preemptions) + 1e-6
        assert lost >= evicted
        assert lost <= evicted + run.restart_seconds + 1e-6
    # The cohort never holds more than its 8 GPUs (samples of usage).
    by_time: dict[float, int] = {}
    for s in run.samples:
        by_time[s.time] = by_time.get(s.time, 0) + s.usage_milli
    assert max(by_time.values()) <= 8000


def test_erlang_c_and_cobham_formulas_reproduce_textbook_values() -> None:
    # M/M/1 is Erlang C with c=1: Wq = rho / (mu - lambda).
    assert erlang_c_wait(0.5, 1.0, 1) == pytest.approx(1.0)
    # Cobham with one class is M/M/1.
    assert cobham_waits([0.5], 1.0) == pytest.approx([1.0])


def test_simultaneous_arrivals_share_cycles_one_head_per_queue_per_cycle_repeated_while_it_admits() -> None:
    source = _source("burst", 1000.0, None)
    source["generator"]["count"] = 6
    source["generator"]["durations"] = {"kind": "constant", "value": "10h"}
    run = _run(
        {
            "name": "burst",
            "seed": 1,
            "horizon": "2h",
            "timeQuantum": "1h",
            "cluster": _cluster(4, {}),
            "workloads": [source],
        }
    )
    # All six arrive in the first seconds and are rounded up to t=3600: one instant. Kueue pops one head per
    # ClusterQueue per cycle and cycles while it admits: 4 admitting cycles, then one that parks the 5th.
    assert [a for a in run.admitted_at if a == a] == [3600.0] * 4
    assert run.cycles == 5
    assert run.events >= 6
