"""Quota transitions planned from the policy and the stored records (fairshare.control.transitions)."""

from __future__ import annotations

from typing import Any

import pytest

from fairshare.control.actions import (
    AdvanceTransition,
    AuditAction,
    BlockTransition,
    CancelTransition,
    RecordAudit,
    Target,
    WaitForDrain,
)
from fairshare.control.rules import PolicyRules
from fairshare.control.transitions import _parsed_of, _value, step_transitions
from fairshare.errors import InputError
from fairshare.models import FlavorResource, QuotaKey, ResourceQuota
from fairshare.policy import QuotaPolicy, parse_policy
from fairshare.policy.status import TransitionPhase, TransitionStatus

T0 = 1_800_000_000.0
GPU = QuotaKey.of("research", "gpu", "nvidia.com/gpu")
FR = FlavorResource("gpu", "nvidia.com/gpu")


def live(milli: int) -> dict[str, dict[FlavorResource, ResourceQuota]]:
    return {"research": {FR: ResourceQuota(milli)}}


def _policy(research_gpus: int, *, generation: int = 1, transition: dict[str, Any] | None = None,
            borrowing_limit: int | None = None, cohort: bool = True) -> PolicyRules:
    gpu: dict[str, Any] = {"name": "nvidia.com/gpu", "nominal": research_gpus}
    if borrowing_limit is not None:
        gpu["borrowingLimit"] = borrowing_limit
    return PolicyRules.of(parse_policy({
        "apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy",
        "metadata": {"name": "p", "generation": generation},
        "spec": {
            "flavors": [{"name": "gpu"}],
            "teams": [{"name": "research", "namespaces": ["r"], **({"cohort": "org"} if cohort else {}),
                       "quotas": [{"flavor": "gpu", "resources": [gpu]}]}],
            "transitions": {"defaults": transition or {"duration": "30s", "stepInterval": "10s",
                                                       "curve": "linear", "drain": True}},
        }}))


def _run(policy: PolicyRules, times: list[float], usage: dict[float, int] | None = None,
         initial: int = 4000) -> list[int]:
    """Tick at each time, feeding the status back as the operator does; the applied GPU quota per tick."""
    status: list[TransitionStatus] = []
    applied = initial
    out = []
    for t in times:
        res = step_transitions(policy, 2, status, live(applied), {GPU: (usage or {}).get(t, 0)}, t)
        status = res.records
        applied = res.in_force[GPU].nominal
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
    assert _run(_policy(8), [T0, T0 + 1], initial=4000) == [8000, 8000]


def test_a_ramp_up_step_never_lends_more_than_its_nominal_quota() -> None:
    # Kueue's webhook refuses lendingLimit > nominalQuota: a step below the target's lendingLimit lends what
    # it has (the API server would otherwise refuse the ClusterQueue at every step of the ramp-up).
    ramp = {"duration": "30s", "stepInterval": "10s", "curve": "linear", "rampUp": True}
    doc = _policy(8, transition=ramp).policy.model_dump(mode="json", by_alias=True, exclude_none=True)
    doc["spec"]["teams"][0]["quotas"][0]["resources"][0]["lendingLimit"] = 8
    rules = PolicyRules.of(parse_policy(doc))
    status: list[TransitionStatus] = []
    applied, seen = 4000, []
    for t in (T0, T0 + 10, T0 + 20, T0 + 30):
        res = step_transitions(rules, 2, status, live(applied), {}, t)
        status, applied = res.records, res.in_force[GPU].nominal
        seen.append((res.in_force[GPU].nominal, res.in_force[GPU].lending_limit))
    assert seen[0][0] < 8000 and all(lend is not None and lend <= nominal for nominal, lend in seen)
    assert seen[-1] == (8000, 8000)


def test_a_new_cluster_queue_gets_its_target_without_a_transition() -> None:
    res = step_transitions(_policy(1), 1, [], {}, {}, T0)
    assert (res.in_force[GPU].nominal, res.records, res.actions) == (1000, [], [])


def test_the_plan_and_progress_in_status_are_all_a_restart_needs() -> None:
    policy = _policy(1)
    first = step_transitions(policy, 2, [], live(4000), {}, T0)
    step = step_transitions(policy, 2, first.records, live(4000), {}, T0 + 10)
    # A restarted operator sees only the status (and a live quota that may lag behind it).
    stored = [TransitionStatus.model_validate(r.model_dump(mode="json", by_alias=True)) for r in step.records]
    again = step_transitions(policy, 2, stored, live(4000), {}, T0 + 12)
    later = step_transitions(policy, 2, again.records, live(4000), {}, T0 + 20)
    assert (steps(step), steps(again), again.in_force[GPU].nominal, steps(later)) == \
        ([3000], [], 3000, [2000])


def test_a_finished_transition_stays_complete_and_quiet() -> None:
    policy = _policy(1)
    status: list[TransitionStatus] = []
    for t in (0, 10, 20, 30):
        res = step_transitions(policy, 2, status, live(4000), {}, T0 + t)
        status = res.records
    done = step_transitions(policy, 2, status, live(4000), {}, T0 + 100)
    assert ([e.phase for e in done.records], done.actions, done.active) == ([TransitionPhase.COMPLETE], [], 0)


def test_a_draining_step_is_reported_with_its_reason() -> None:
    policy = _policy(1)
    first = step_transitions(policy, 2, [], live(4000), {}, T0)
    res = step_transitions(policy, 2, first.records, live(4000), {GPU: 4000}, T0 + 10)
    wait = [a for a in res.actions if isinstance(a, WaitForDrain)]
    assert (res.records[0].phase, [a.why for a in wait]) == (TransitionPhase.DRAINING, [
        "research/gpu/nvidia.com/gpu: hold at 4 GPUs, not 3 GPUs: 4 GPUs in use drains first"])
    again = step_transitions(policy, 2, res.records, live(4000), {GPU: 4000}, T0 + 11)
    assert [a for a in again.actions if isinstance(a, WaitForDrain)] == []  # reported once


@pytest.mark.parametrize(("new_target", "expected"), [(2, [3000, 2000]), (4, [4000, 4000])],
                         ids=["deeper-cut-replanned", "cut-cancelled"])
def test_a_target_changed_mid_transition_replans_from_the_applied_value(new_target: int,
                                                                       expected: list[int]) -> None:
    a = step_transitions(_policy(1), 2, [], live(4000), {}, T0)
    b = step_transitions(_policy(1), 2, a.records, live(4000), {}, T0 + 10)  # applied 3
    c = step_transitions(_policy(new_target, generation=3), 3, b.records, live(3000), {}, T0 + 11)
    d = step_transitions(_policy(new_target, generation=3), 3, c.records, live(3000), {}, T0 + 41)
    cancelled = [a for a in c.actions if isinstance(a, CancelTransition)]
    assert ([c.in_force[GPU].nominal, d.in_force[GPU].nominal], cancelled) == (
        expected, [CancelTransition(GPU, 3000, 1000, new_target * 1000)])


DEADLINE = {"duration": "30s", "stepInterval": "10s", "curve": "linear", "drain": True, "deadline": "20s",
            "maxVictimsPerHour": 1}


def test_past_the_deadline_what_the_team_may_not_borrow_is_preempted_within_the_hourly_budget() -> None:
    policy = _policy(1, transition=DEADLINE, borrowing_limit=0)
    status: list[TransitionStatus] = []
    outcomes = []
    for t in (0, 10, 20, 30):
        res = step_transitions(policy, 2, status, live(4000), {GPU: 3000}, T0 + t)
        status = res.records
        outcomes.append((res.in_force[GPU].nominal, [(f.key, f.excess, f.allowed) for f in res.to_free],
                         res.records[0].phase))
    budget_spent = step_transitions(policy, 2, status, live(4000), {GPU: 3000}, T0 + 40,
                                    past_evictions=[T0 + 30])
    assert (outcomes, budget_spent.to_free, budget_spent.wake) == (
        [(4000, [], TransitionPhase.RUNNING), (3000, [], TransitionPhase.RUNNING),
         (2000, [(GPU, 1000, 1)], TransitionPhase.PREEMPTING),
         (1000, [(GPU, 2000, 1)], TransitionPhase.PREEMPTING)],
        [], T0 + 30 + 3600)


def test_passing_the_deadline_is_reported_once_on_the_policy_in_human_units() -> None:
    policy = _policy(1, transition=DEADLINE, borrowing_limit=0)
    status: list[TransitionStatus] = []
    reported = []
    for t in (0, 10, 20, 30):
        res = step_transitions(policy, 2, status, live(4000), {GPU: 3000}, T0 + t)
        status = res.records
        reported.append([a for a in res.actions if isinstance(a, RecordAudit)])
    assert reported[:2] == [[], []] and reported[3] == []  # once, when the phase becomes Preempting
    assert reported[2] == [RecordAudit(
        AuditAction.TRANSITION_DEADLINE, Target.policy("p"),
        "transition of research gpu/nvidia.com/gpu is past its deadline with 1 GPU in use above the quota in "
        "force (2 GPUs); it may not borrow", "past the deadline (20s after start): 1 preemption(s) allowed "
        "now (0 in the last hour, budget 1 per 1h)", also_on=Target.cluster_queue("research"))]


def test_a_target_below_the_floor_is_blocked_at_the_quota_in_force_and_reported_once() -> None:
    doc = {"apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy", "metadata": {"name": "p"},
           "spec": {"flavors": [{"name": "gpu"}],
                    "teams": [{"name": "research", "namespaces": ["r"], "cohort": "org",
                               "quotas": [{"flavor": "gpu",
                                           "resources": [{"name": "nvidia.com/gpu", "nominal": 1}]}]}],
                    "transitions": {"defaults": {"duration": "30s", "stepInterval": "10s",
                                                 "floor": {"nvidia.com/gpu": 2}}}}}
    # The policy rules reject such a policy (fairshare.policy.semantics, CEL): it reaches the controller only
    # if it got past them (stored under an older CRD); even then the quota never goes below the floor.
    with pytest.raises(InputError, match="nominal is below the transition floor"):
        parse_policy(doc)
    policy = PolicyRules.of(QuotaPolicy.model_validate(doc))
    first = step_transitions(policy, 2, [], live(4000), {}, T0)
    again = step_transitions(policy, 2, first.records, live(4000), {}, T0 + 1)
    blocked = [a for a in first.actions if isinstance(a, BlockTransition)]
    assert (first.in_force[GPU].nominal, first.records[0].phase, len(blocked), again.actions) == (
        4000, TransitionPhase.BLOCKED, 1, [])
    assert blocked[0].why.endswith(
        "target quota of research/gpu/nvidia.com/gpu is below the transition floor 2 GPUs (got 1000)")


def test_the_next_wake_up_is_the_next_step() -> None:
    res = step_transitions(_policy(1), 2, [], live(4000), {}, T0)
    assert res.wake == T0 + 10


def steps(res: object) -> list[int]:
    return [a.after for a in res.actions if isinstance(a, AdvanceTransition)]


def _pair_policy(research: int, business: int, **transition: Any) -> PolicyRules:
    def team(name: str, n: int) -> dict[str, Any]:
        return {"name": name, "namespaces": [name[0]], "cohort": "org",
                "quotas": [{"flavor": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominal": n}]}]}

    return PolicyRules.of(parse_policy({
        "apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy", "metadata": {"name": "p"},
        "spec": {"flavors": [{"name": "gpu"}],
                 "teams": [team("research", research), team("business", business)],
                 "transitions": {"defaults": {"duration": "30s", "stepInterval": "10s", "curve": "linear",
                                              "drain": True, **transition}}}}))


BIZ = QuotaKey.of("business", "gpu", "nvidia.com/gpu")


def _both(milli_r: int, milli_b: int) -> dict[str, dict[FlavorResource, ResourceQuota]]:
    return {"research": {FR: ResourceQuota(milli_r)}, "business": {FR: ResourceQuota(milli_b)}}


def test_a_paired_move_hands_the_receiver_each_gpu_as_the_giver_frees_it_so_the_cohort_total_never_drops(
) -> None:
    rules = _pair_policy(1, 19)
    records: list[TransitionStatus] = []
    seen = []
    live = _both(4000, 16000)
    # Research drains slowly: 4 GPUs in use until 15 s, then 2, then 1.
    for t, used in ((0, 4000), (10, 4000), (15, 2000), (20, 2000), (30, 1000), (40, 1000)):
        res = step_transitions(rules, 2, records, live, {GPU: used}, T0 + t)
        records = res.records
        live = {k.team: {FR: v} for k, v in res.in_force.items()}
        seen.append((res.in_force[GPU].nominal, res.in_force[BIZ].nominal))
        assert res.stranded == []
    # The giver's own schedule (one change per 10 s, never below what runs); the receiver moves with it.
    assert seen == [(4000, 16000), (4000, 16000), (3000, 17000), (3000, 17000), (1000, 19000), (1000, 19000)]
    assert all(r + b == 20000 for r, b in seen)
    assert {r.pair_group for r in records} == {"org/gpu/nvidia.com/gpu@2"}


def test_a_receivers_step_says_what_it_receives_and_a_givers_its_step_count() -> None:
    res = step_transitions(_pair_policy(1, 19), 2, [], _both(4000, 16000), {GPU: 4000}, T0)
    later = step_transitions(_pair_policy(1, 19), 2, res.records, _both(4000, 16000), {GPU: 0}, T0 + 30)
    shown = {a.key.team: a.progress() for a in later.actions if isinstance(a, AdvanceTransition)}
    # Not "step 0/0": a receiver has no schedule of its own, it gets what its giver frees.
    assert shown == {"research": "step 3/3", "business": "+3 GPUs at once"}


def test_a_cut_that_no_team_receives_is_reported_as_stranded_capacity() -> None:
    res = step_transitions(_pair_policy(1, 16), 2, [], _both(4000, 16000), {}, T0)
    assert [(s.root, str(s.flavor_resource), s.amount) for s in res.stranded] == \
        [("org", "gpu/nvidia.com/gpu", 3000)]


def test_grants_larger_than_the_cuts_apply_the_difference_at_once() -> None:
    res = step_transitions(_pair_policy(2, 20), 2, [], _both(4000, 16000), {GPU: 4000}, T0)
    # research gives 2 over time; business grows by 4: 2 of them need no giver and apply at once.
    assert (res.in_force[GPU].nominal, res.in_force[BIZ].nominal, res.stranded) == (4000, 18000, [])


def test_a_record_the_controller_made_carries_its_reading_and_a_stored_one_is_read_again() -> None:
    first = step_transitions(_policy(1), 2, [], live(4000), {}, T0)
    [made] = first.records
    stored = TransitionStatus.model_validate(made.model_dump(mode="json", by_alias=True))
    assert (_parsed_of(made) is made._parsed, _parsed_of(made) is not None) == (True, True)
    assert (_parsed_of(stored), stored._parsed) == (None, None)


def test_a_plans_value_is_the_one_of_the_key_asked_among_several_and_a_missing_key_raises() -> None:
    keys = [QuotaKey.of(team, "gpu", "nvidia.com/gpu") for team in ("a", "b", "c")]
    values = tuple(zip(keys, (1000, 2000, 3000), strict=True))
    assert [_value(values, k) for k in keys] == [1000, 2000, 3000]
    # An equal key made elsewhere (read back from status) finds the same value.
    assert _value(values, QuotaKey.of("b", "gpu", "nvidia.com/gpu")) == 2000
    with pytest.raises(KeyError):
        _value(values, QuotaKey.of("d", "gpu", "nvidia.com/gpu"))
