from __future__ import annotations

import pytest

from fairshare.errors import InputError
from fairshare.models import FlavorResource
from fairshare.planners.quota_shift import (
    Curve,
    LastApplied,
    QuotaKey,
    TransitionSpec,
    last_applied_from_dict,
    last_applied_to_dict,
    make_plan,
    next_action,
    plan_from_dict,
    plan_to_dict,
)

H = 3600.0
GPU = FlavorResource("a100", "nvidia.com/gpu")
FRONTIER = QuotaKey("ai-frontier-research", GPU)
SERVING = QuotaKey("biz-model-serving", GPU)
WHOLE_GPUS = (("nvidia.com/gpu", 1000),)


def schedule(current: int, target: int, **spec: object) -> list[tuple[float, int]]:
    s = TransitionSpec(**{"duration": 3 * H, "step_interval": H, "granularity": WHOLE_GPUS, **spec})  # type: ignore[arg-type]
    plan = make_plan({FRONTIER: current}, {FRONTIER: target}, s, start=0.0)
    return [(step.at, dict(step.quotas)[FRONTIER]) for step in plan.steps]


@pytest.mark.parametrize(
    ("current", "target", "spec", "expected"),
    [
        (4000, 1000, {}, [(0, 4000), (H, 3000), (2 * H, 2000), (3 * H, 1000)]),
        (8000, 1000, {"curve": Curve.GEOMETRIC}, [(0, 8000), (H, 4000), (2 * H, 2000), (3 * H, 1000)]),
        (4000, 1000, {"curve": Curve.IMMEDIATE}, [(0, 1000)]),
        (4000, 0, {"duration": 2 * H}, [(0, 4000), (H, 2000), (2 * H, 0)]),
        (4000, 1000, {"duration": 2.5 * H}, [(0, 4000), (1.25 * H, 3000), (2.5 * H, 1000)]),
        (5000, 0, {"duration": 2 * H}, [(0, 5000), (H, 3000), (2 * H, 0)]),
        (1000, 4000, {}, [(0, 4000), (H, 4000), (2 * H, 4000), (3 * H, 4000)]),
        (1000, 4000, {"ramp_growth": True}, [(0, 1000), (H, 2000), (2 * H, 3000), (3 * H, 4000)]),
        (4000, 2000, {"floor": (("nvidia.com/gpu", 2000),), "duration": H}, [(0, 4000), (H, 2000)]),
    ],
    ids=["linear-shrink", "geometric-shrink", "immediate", "to-zero", "steps-spread-over-the-duration",
         "rounds-toward-current", "growth-at-once", "growth-ramped", "floor"],
)
def test_the_schedule_steps_from_current_to_target(current: int, target: int, spec: dict[str, object],
                                                   expected: list[tuple[float, int]]) -> None:
    assert schedule(current, target, **spec) == expected


def spec(**kw: object) -> TransitionSpec:
    base: dict[str, object] = {"duration": 3 * H, "step_interval": H, "granularity": WHOLE_GPUS,
                               "deadline": 5 * H, "max_victims_per_hour": 2}
    base.update(kw)
    return TransitionSpec(**base)  # type: ignore[arg-type]


def test_a_cut_waits_for_running_work_to_drain_before_the_deadline() -> None:
    plan = make_plan({FRONTIER: 4000}, {FRONTIER: 1000}, spec(), start=0.0)
    a1 = next_action(plan, None, H, {FRONTIER: 4000})
    assert (dict(a1.quotas), a1.changed, a1.to_free, a1.preemptions_allowed) == ({FRONTIER: 4000}, (), (), 0)
    assert a1.reasons == ("ai-frontier-research/a100/nvidia.com/gpu: hold at 4 GPUs, not 3 GPUs: 4 GPUs in "
                          "use drains first",)
    a2 = next_action(plan, a1.last_applied, 2 * H, {FRONTIER: 2500})
    assert (dict(a2.quotas), a2.changed) == ({FRONTIER: 2500}, (FRONTIER,))
    assert a2.last_applied == LastApplied(2, ((FRONTIER, 2500),), 2 * H)
    a3 = next_action(plan, a2.last_applied, 3 * H, {FRONTIER: 0})
    assert (dict(a3.quotas), a3.done) == ({FRONTIER: 1000}, True)


def test_after_the_deadline_the_cut_applies_and_a_bounded_number_of_victims_may_be_preempted() -> None:
    plan = make_plan({FRONTIER: 4000}, {FRONTIER: 1000}, spec(), start=0.0)
    last = LastApplied(3, ((FRONTIER, 3000),), 3 * H)
    action = next_action(plan, last, 5 * H, {FRONTIER: 3000}, past_preemptions=[4.5 * H, 1.0 * H])
    assert dict(action.quotas) == {FRONTIER: 1000}
    assert action.to_free == ((FRONTIER, 2000),)
    assert action.preemptions_allowed == 1
    assert action.reasons[-1] == ("past the deadline (5h after start): 1 preemption(s) allowed now (1 in the "
                                  "last hour, budget 2 per 1h)")


def test_at_most_one_change_happens_per_step_interval() -> None:
    plan = make_plan({FRONTIER: 4000}, {FRONTIER: 1000}, spec(), start=0.0)
    first = next_action(plan, None, H, {FRONTIER: 3500})
    assert dict(first.quotas) == {FRONTIER: 3500}
    soon = next_action(plan, first.last_applied, H + 60, {FRONTIER: 0})
    assert (dict(soon.quotas), soon.changed) == ({FRONTIER: 3500}, ())
    assert soon.reasons == ("one change per step interval: last change at 3600s, next allowed at 7200s",)


def test_keys_move_independently_growth_at_once_and_shrink_in_steps() -> None:
    plan = make_plan({FRONTIER: 4000, SERVING: 2000}, {FRONTIER: 1000, SERVING: 5000}, spec(), start=0.0)
    start = next_action(plan, None, 0.0, {})
    assert dict(start.quotas) == {FRONTIER: 4000, SERVING: 5000}
    assert start.changed == (SERVING,)


def test_before_the_start_nothing_changes() -> None:
    plan = make_plan({FRONTIER: 4000}, {FRONTIER: 1000}, spec(), start=100.0)
    action = next_action(plan, None, 50.0, {})
    assert (action.step, dict(action.quotas), action.changed) == (-1, {FRONTIER: 4000}, ())


def test_the_plan_and_its_progress_round_trip_through_json() -> None:
    plan = make_plan({FRONTIER: 4000, SERVING: 0}, {FRONTIER: 1000, SERVING: 3000},
                     spec(curve=Curve.GEOMETRIC, ramp_growth=True), start=123.0)
    assert plan_from_dict(plan_to_dict(plan)) == plan
    last = LastApplied(2, ((FRONTIER, 2000), (SERVING, 1000)), 7000.0)
    assert last_applied_from_dict(last_applied_to_dict(last)) == last


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"duration": -1.0}, "field duration: must be >= 0 and finite (got -1.0)"),
        ({"duration": float("inf")}, "field duration: must be >= 0 and finite (got inf)"),
        ({"step_interval": 0.0}, "field stepInterval: must be > 0 (got 0.0)"),
        ({"duration": 3600.0 * 10_001, "step_interval": 3600.0},
         "field stepInterval: makes more than 10000 steps over the duration; use a longer stepInterval "
         "(got 3600.0)"),
        ({"deadline": -5.0},
         "field deadline: must be >= 0 (counted from the start of the transition) (got -5.0)"),
        ({"max_victims_per_hour": -1}, "field maxVictimsPerHour: must be >= 0 (got -1)"),
        ({"granularity": (("nvidia.com/gpu", 0),)}, "field granularity[nvidia.com/gpu]: must be > 0 (got 0)"),
    ],
    ids=["duration", "an-infinite-duration", "step-interval", "too-many-steps", "deadline", "victims",
         "granularity"],
)
def test_an_invalid_spec_is_refused_naming_the_field(kw: dict[str, object], message: str) -> None:
    with pytest.raises(InputError) as err:
        make_plan({FRONTIER: 4000}, {FRONTIER: 1000}, spec(**kw), start=0.0)
    assert err.value.one_line() == message


def test_a_target_below_the_floor_is_refused() -> None:
    with pytest.raises(InputError, match="below the transition floor 2 GPUs"):
        make_plan({FRONTIER: 4000}, {FRONTIER: 1000}, spec(floor=(("nvidia.com/gpu", 2000),)), start=0.0)
