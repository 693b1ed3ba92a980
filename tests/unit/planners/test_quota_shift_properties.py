"""Hypothesis invariants of the quota-shift planner (issue 4 item 4)."""

from __future__ import annotations

import itertools
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from fairshare.models import FlavorResource
from fairshare.planners.quota_shift import (
    Curve,
    LastApplied,
    QuotaAction,
    QuotaKey,
    QuotaShiftPlan,
    TransitionSpec,
    last_applied_from_dict,
    last_applied_to_dict,
    make_plan,
    next_action,
    plan_from_dict,
    plan_to_dict,
)

KEYS = [QuotaKey("frontier", FlavorResource("a100", "nvidia.com/gpu")),
        QuotaKey("frontier", FlavorResource("default", "cpu")),
        QuotaKey("serving", FlavorResource("a100", "nvidia.com/gpu"))]

quota = st.integers(0, 16).map(lambda n: n * 1000)
specs = st.builds(
    TransitionSpec,
    duration=st.integers(0, 8).map(lambda n: n * 900.0),
    step_interval=st.sampled_from([300.0, 900.0, 1800.0]),
    curve=st.sampled_from(list(Curve)),
    drain=st.booleans(),
    deadline=st.one_of(st.none(), st.integers(0, 12).map(lambda n: n * 900.0)),
    max_victims_per_hour=st.integers(0, 3),
    ramp_growth=st.booleans(),
    granularity=st.sampled_from([(), (("nvidia.com/gpu", 1000),)]),
)
observations = st.lists(st.tuples(st.integers(0, 2400), st.lists(quota, min_size=3, max_size=3)),
                        min_size=1, max_size=30)

Log = list[tuple[float, QuotaAction, dict[QuotaKey, int]]]


Obs = list[tuple[int, list[int]]]


def run(plan: QuotaShiftPlan, obs: Obs, restarts: frozenset[int] = frozenset()) -> Log:
    """An operator loop: observe usage, act, persist progress; optionally reload everything from JSON."""
    last: LastApplied | None = None
    past: list[float] = []
    now = plan.start - 600
    log: Log = []
    for i, (dt, used) in enumerate(obs):
        now += dt
        if i in restarts:
            plan = plan_from_dict(json.loads(json.dumps(plan_to_dict(plan))))
            if last is not None:
                last = last_applied_from_dict(json.loads(json.dumps(last_applied_to_dict(last))))
        usage = dict(zip(KEYS, used, strict=True))
        action = next_action(plan, last, now, usage, past)
        assert next_action(plan, last, now, usage, past) == action  # idempotent
        if action.last_applied is not None:
            again = next_action(plan, action.last_applied, now, usage, past)
            assert again.changed == () and again.quotas == action.quotas  # applying twice changes nothing
        past.extend([now] * action.preemptions_allowed)
        log.append((now, action, usage))
        last = action.last_applied
    return log


def keys_plans() -> st.SearchStrategy[QuotaShiftPlan]:
    return st.builds(
        lambda cur, tgt, spec: make_plan(dict(zip(KEYS, cur, strict=True)), dict(zip(KEYS, tgt, strict=True)),
                                         spec, start=1000.0),
        st.lists(quota, min_size=3, max_size=3), st.lists(quota, min_size=3, max_size=3), specs)


@settings(max_examples=150, deadline=None)
@given(keys_plans(), observations)
def test_applied_quotas_move_monotonically_toward_the_target_and_never_past_it(
        plan: QuotaShiftPlan, obs: Obs) -> None:
    cur, tgt = dict(plan.current), dict(plan.target)
    prev = dict(cur)
    for _, action, _ in run(plan, obs):
        for key, value in action.quotas:
            lo, hi = min(cur[key], tgt[key]), max(cur[key], tgt[key])
            assert lo <= value <= hi
            if tgt[key] < cur[key]:
                assert value <= prev[key]
            else:
                assert value >= prev[key]
            prev[key] = value


@settings(max_examples=150, deadline=None)
@given(keys_plans(), observations)
def test_at_most_one_change_happens_per_step_interval(plan: QuotaShiftPlan, obs: Obs
                                                      ) -> None:
    times = [now for now, action, _ in run(plan, obs) if action.changed]
    assert all(b - a >= plan.spec.step_interval for a, b in itertools.pairwise(times))


@settings(max_examples=150, deadline=None)
@given(keys_plans(), observations)
def test_while_draining_before_the_deadline_a_cut_never_goes_below_usage(
        plan: QuotaShiftPlan, obs: Obs) -> None:
    cur, tgt = dict(plan.current), dict(plan.target)
    prev = dict(cur)
    deadline = plan.deadline_at
    for now, action, usage in run(plan, obs):
        draining = plan.spec.drain and (deadline is None or now < deadline)
        for key, value in action.quotas:
            if draining and tgt[key] < cur[key] and key in action.changed:
                assert value >= min(prev[key], usage[key])
            prev[key] = value
        if deadline is None or now < deadline:
            assert action.preemptions_allowed == 0 and action.to_free == ()


@settings(max_examples=150, deadline=None)
@given(keys_plans(), observations)
def test_the_transition_ends_exactly_at_the_target(plan: QuotaShiftPlan, obs: Obs) -> None:
    log = run(plan, obs)
    now, last_action, _ = log[-1]
    last = last_action.last_applied
    for earlier in reversed(log):
        if last is None:
            last = earlier[1].last_applied
    end = max(now, plan.end, plan.deadline_at or 0.0) + plan.spec.step_interval
    final = next_action(plan, last, end, {})
    assert dict(final.quotas) == dict(plan.target)
    assert final.done
    assert plan.steps[-1].quotas == plan.target


@settings(max_examples=100, deadline=None)
@given(keys_plans(), observations, st.frozensets(st.integers(0, 29)))
def test_a_restarted_operator_continues_exactly_as_if_it_never_stopped(
        plan: QuotaShiftPlan, obs: Obs, restarts: frozenset[int]) -> None:
    assert run(plan, obs, restarts) == run(plan, obs)


@settings(max_examples=100, deadline=None)
@given(keys_plans(), observations)
def test_preemptions_never_exceed_the_hourly_budget(plan: QuotaShiftPlan, obs: Obs) -> None:
    times = sorted(t for now, action, _ in run(plan, obs) for t in [now] * action.preemptions_allowed)
    for t in times:
        assert sum(1 for u in times if t - 3600 < u <= t) <= plan.spec.max_victims_per_hour


@settings(max_examples=100, deadline=None)
@given(keys_plans())
def test_scheduled_steps_are_one_interval_apart_at_least_and_end_at_the_target(plan: QuotaShiftPlan) -> None:
    ats = [s.at for s in plan.steps]
    assert all(b - a >= plan.spec.step_interval - 1e-9 for a, b in itertools.pairwise(ats))
    assert plan.steps[-1].quotas == plan.target
    assert ats[-1] == plan.start + (0 if len(ats) == 1 else plan.spec.duration)
