"""Quota transitions planned from the policy and the status (pure glue over the core planner)."""

from __future__ import annotations

from typing import Any

import pytest

from fairshare.models import QuotaKey
from fairshare.policy import QuotaPolicy, parse_policy
from queue_manager.transitions import COMPLETE, DRAINING, deadline_victims, plan_transitions

from .kube_objects import workload

T0 = 1_800_000_000.0
GPU = QuotaKey.of("research", "gpu", "nvidia.com/gpu")


def _policy(research_gpus: int, *, generation: int = 1,
            transition: dict[str, Any] | None = None) -> QuotaPolicy:
    return parse_policy({
        "apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy",
        "metadata": {"name": "p", "generation": generation},
        "spec": {
            "flavors": [{"name": "gpu"}],
            "teams": [{"name": "research", "namespaces": ["r"], "cohort": "org",
                       "quotas": [{"flavor": "gpu", "resources": [
                           {"name": "nvidia.com/gpu", "nominal": research_gpus}]}]}],
            "transitions": {"defaults": transition or {"duration": "30s", "stepInterval": "10s",
                                                       "curve": "linear", "drain": True}},
        }})


def _run(policy: QuotaPolicy, times: list[float], usage: dict[float, int] | None = None,
         live: int = 4000) -> list[int]:
    """Tick at each time, feeding the status back as the operator does; the applied GPU quota per tick."""
    status: list[dict[str, Any]] = []
    applied = live
    out = []
    for t in times:
        res = plan_transitions(policy, 2, status, {"research": {("gpu", "nvidia.com/gpu"): applied}},
                               {GPU: (usage or {}).get(t, 0)}, t)
        status = res.status
        applied = res.quotas[GPU].nominal
        out.append(applied)
    return out


def test_a_cut_from_4_to_1_gpus_goes_one_gpu_per_step() -> None:
    times = [T0 + s for s in (0, 5, 10, 15, 20, 25, 30, 40)]
    assert _run(_policy(1), times) == [4000, 4000, 3000, 3000, 2000, 2000, 1000, 1000]


def test_a_cut_waits_for_running_work_to_drain() -> None:
    times = [T0 + s for s in (0, 10, 20, 30, 40, 50)]
    usage = {T0 + 20: 3000, T0 + 30: 3000, T0 + 40: 1000, T0 + 50: 1000}
    assert _run(_policy(1), times, usage) == [4000, 3000, 3000, 3000, 1000, 1000]


def test_growth_applies_at_once() -> None:
    assert _run(_policy(8), [T0, T0 + 1], live=4000) == [8000, 8000]


def test_a_new_cluster_queue_gets_its_target_without_a_transition() -> None:
    res = plan_transitions(_policy(1), 1, [], {}, {}, T0)
    assert (res.quotas[GPU].nominal, res.status, res.started) == (1000, [], [])


def test_the_plan_and_progress_in_status_are_all_a_restart_needs() -> None:
    policy = _policy(1)
    live = {"research": {("gpu", "nvidia.com/gpu"): 4000}}
    first = plan_transitions(policy, 2, [], live, {}, T0)
    step = plan_transitions(policy, 2, first.status, live, {}, T0 + 10)
    # A restarted operator sees only the status (and a live quota that may lag behind it).
    again = plan_transitions(policy, 2, step.status, {"research": {("gpu", "nvidia.com/gpu"): 4000}}, {},
                             T0 + 12)
    later = plan_transitions(policy, 2, again.status, live, {}, T0 + 20)
    assert ([s.after for s in step.steps], again.steps, again.quotas[GPU].nominal,
            [s.after for s in later.steps]) == ([3000], [], 3000, [2000])


def test_a_finished_transition_stays_complete_and_quiet() -> None:
    policy = _policy(1)
    status: list[dict[str, Any]] = []
    live = {"research": {("gpu", "nvidia.com/gpu"): 4000}}
    for t in (0, 10, 20, 30):
        res = plan_transitions(policy, 2, status, live, {}, T0 + t)
        status = res.status
    done = plan_transitions(policy, 2, status, live, {}, T0 + 100)
    assert ([e["phase"] for e in done.status], done.steps, done.finished, done.active) == \
        ([COMPLETE], [], [], 0)


def test_a_draining_step_is_reported_with_its_reason() -> None:
    policy = _policy(1)
    live = {"research": {("gpu", "nvidia.com/gpu"): 4000}}
    first = plan_transitions(policy, 2, [], live, {}, T0)
    res = plan_transitions(policy, 2, first.status, live, {GPU: 4000}, T0 + 10)
    assert (res.status[0]["phase"], "drains first" in res.waiting_reasons[GPU]) == (DRAINING, True)


@pytest.mark.parametrize(("new_target", "expected"), [(2, [3000, 2000]), (4, [4000, 4000])],
                         ids=["deeper-cut-replanned", "cut-cancelled"])
def test_a_target_changed_mid_transition_replans_from_the_applied_value(new_target: int,
                                                                       expected: list[int]) -> None:
    live = {"research": {("gpu", "nvidia.com/gpu"): 4000}}
    a = plan_transitions(_policy(1), 2, [], live, {}, T0)
    b = plan_transitions(_policy(1), 2, a.status, live, {}, T0 + 10)  # applied 3
    c = plan_transitions(_policy(new_target, generation=3), 3, b.status, live, {}, T0 + 11)
    d = plan_transitions(_policy(new_target, generation=3), 3, c.status, live, {}, T0 + 41)
    assert [c.quotas[GPU].nominal, d.quotas[GPU].nominal] == expected


def test_past_the_deadline_the_excess_may_be_preempted_within_the_hourly_budget() -> None:
    policy = _policy(1, transition={"duration": "30s", "stepInterval": "10s", "curve": "linear",
                                    "drain": True, "deadline": "20s", "maxVictimsPerHour": 1})
    live = {"research": {("gpu", "nvidia.com/gpu"): 4000}}
    status: list[dict[str, Any]] = []
    outcomes = []
    for t in (0, 10, 20, 30):
        res = plan_transitions(policy, 2, status, live, {GPU: 3000}, T0 + t)
        status = res.status
        outcomes.append((res.quotas[GPU].nominal, [(k, ex, n) for k, ex, n, _ in res.to_free]))
    budget_spent = plan_transitions(policy, 2, status, live, {GPU: 3000}, T0 + 40, past_preemptions=[T0 + 30])
    assert (outcomes, budget_spent.to_free) == (
        [(4000, []), (3000, []), (2000, [(GPU, 1000, 1)]), (1000, [(GPU, 2000, 1)])], [])


def test_deadline_victims_are_the_lowest_priority_then_the_most_recently_admitted() -> None:
    wls = {
        "r/old-low": workload("r", "old-low", queue="research", gpus=1, priority=100, admitted_to="research",
                              flavor="gpu", reserved_at=T0),
        "r/new-low": workload("r", "new-low", queue="research", gpus=1, priority=100, admitted_to="research",
                              flavor="gpu", reserved_at=T0 + 50),
        "r/high": workload("r", "high", queue="research", gpus=2, priority=1000, admitted_to="research",
                           flavor="gpu", reserved_at=T0 + 60),
        "b/other": workload("b", "other", queue="business", gpus=1, priority=0, admitted_to="business",
                            flavor="gpu", reserved_at=T0),
    }
    picked = deadline_victims(wls, GPU, excess=2000, allowed=5, now=T0 + 100)
    assert [k for k, _ in picked] == ["r/new-low", "r/old-low"]
    assert picked[0][1].startswith("preempt r/new-low: transition of research gpu/nvidia.com/gpu is past its "
                                   "deadline")
    assert [k for k, _ in deadline_victims(wls, GPU, excess=2000, allowed=1, now=T0 + 100)] == ["r/new-low"]
