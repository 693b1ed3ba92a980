"""Quota transitions planned from the policy and the status (pure glue over the core planner)."""

from __future__ import annotations

from typing import Any

import pytest

from fairshare.policy import QuotaKey, QuotaPolicy, parse_policy
from queue_manager.transitions import COMPLETE, DRAINING, plan_transitions

T0 = 1_800_000_000.0
GPU = QuotaKey("research", "gpu", "nvidia.com/gpu")


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
