"""The transitions' memo (fairshare.control.transitions.TransitionMemo): a quiet outcome is returned again
only while everything it read is the same, and then it is what a fresh computation gives."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest

from fairshare.control.rules import PolicyRules
from fairshare.control.transitions import TransitionMemo, TransitionsOutcome, step_transitions
from fairshare.models import FlavorResource, QuotaKey, ResourceQuota
from fairshare.policy.status import TransitionStatus

from .test_transitions import BIZ, GPU, T0, _both, _pair_policy, _policy, live


def _seen(res: TransitionsOutcome) -> tuple[Any, ...]:
    """Everything an outcome says, by value."""
    return (
        sorted(res.in_force.items()),
        [r.model_dump(mode="json", by_alias=True) for r in res.records],
        res.actions,
        res.progress,
        res.to_free,
        res.blocked,
        res.stranded,
        res.wake,
    )


Tick = tuple[float, dict[QuotaKey, int]]  # (seconds after T0, usage)


def _both_ways(
    rules: PolicyRules, ticks: Sequence[Tick], start: dict[str, dict[FlavorResource, ResourceQuota]]
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], TransitionMemo]:
    """The ticks run twice, each feeding its status and quotas back as the shell does: without a memo and
    with one. Returns what each tick said both ways, and the memo."""
    memo = TransitionMemo()
    runs: list[list[tuple[Any, ...]]] = []
    for m in (None, memo):
        records: list[TransitionStatus] = []
        quotas = start
        seen = []
        for t, usage in ticks:
            res = step_transitions(rules, 2, records, quotas, usage, T0 + t, memo=m)
            seen.append(_seen(res))
            records = res.records
            quotas = {team: dict(q) for team, q in quotas.items()}
            for key, quota in res.in_force.items():
                quotas.setdefault(key.team, {})[key.flavor_resource] = quota
        runs.append(seen)
    return runs[0], runs[1], memo


def test_a_quiet_transition_is_returned_again_until_its_next_step_falls_due() -> None:
    # A cut 4 -> 1 GPU, a step every 10 s: started at 0, quiet at 1 (kept), the same at 2..9, due at 10.
    ticks = [(t, {GPU: 0}) for t in (0, 1, 2, 5, 9.999, 10, 11)]
    fresh, memoized, memo = _both_ways(_policy(1), ticks, live(4000))
    assert memoized == fresh
    assert memo.hits == 3  # 2, 5 and 9.999; 10 is the next step: computed again


def test_a_draining_cut_reads_its_usage_and_a_change_of_it_is_computed_again() -> None:
    # At 10 the step to 3 GPUs is due with 3.5 in use: held at 3.5 (drain); while held its record says how
    # much is in use, so a new usage is a new answer.
    ticks: list[Tick] = [
        (0, {GPU: 3500}), (10, {GPU: 3500}), (11, {GPU: 3500}), (12, {GPU: 3500}), (13, {GPU: 3500}),
        (14, {GPU: 3200}), (15, {GPU: 3200}), (16, {GPU: 3200}),
    ]
    fresh, memoized, memo = _both_ways(_policy(1), ticks, live(4000))
    assert memoized == fresh
    assert [x[1][0]["message"] for x in fresh[4:6]] == [
        "3500m GPUs in use drains first", "3200m GPUs in use drains first"
    ]
    # 12 kept what 11 wrote, 13 is the same; 14 writes a new record, 15 keeps it, 16 is the same.
    assert memo.hits == 2


def test_the_usage_of_a_team_whose_result_does_not_read_it_changes_nothing() -> None:
    # Business grows with the cut (paired); its usage is never read, research's is at 0 throughout.
    ticks: list[Tick] = [(t, {GPU: 0, BIZ: 1000 * t}) for t in (0, 1, 2, 3, 4)]
    fresh, memoized, memo = _both_ways(_pair_policy(1, 19), ticks, _both(4000, 16000))
    assert memoized == fresh
    assert memo.hits == 3


def test_a_changed_live_quota_or_a_new_generation_is_computed_again() -> None:
    rules = _policy(1)
    memo = TransitionMemo()
    first = step_transitions(rules, 2, [], live(4000), {}, T0, memo=memo)
    quiet = step_transitions(rules, 2, first.records, live(4000), {}, T0 + 1, memo=memo)
    assert memo.outcome is not None
    for generation, quotas in ((2, live(3000)), (3, live(4000))):
        again = step_transitions(rules, generation, quiet.records, quotas, {}, T0 + 2, memo=memo)
        assert _seen(again) == _seen(step_transitions(rules, generation, quiet.records, quotas, {}, T0 + 2))
    assert memo.hits == 0


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize(
    "transition",
    [{}, {"deadline": "25s", "maxVictimsPerHour": 1}, {"drain": False}, {"curve": "geometric"}],
    ids=["drain", "deadline", "no-drain", "geometric"],
)
def test_random_ticks_say_the_same_with_the_memo_as_without(seed: int, transition: dict[str, Any]) -> None:
    rng = random.Random(seed)
    t = 0.0
    ticks: list[Tick] = []
    research, business = 4000, 1000
    for _ in range(60):
        t += rng.choice((0.0, 0.5, 1.0, 2.5, 5.0, 10.0))
        if rng.random() < 0.3:
            research = rng.choice((0, 1000, 2500, 3000, 4000, 5000))
        if rng.random() < 0.3:
            business = rng.choice((0, 1000, 8000, 17000))
        ticks.append((t, {GPU: research, BIZ: business}))
    fresh, memoized, memo = _both_ways(_pair_policy(1, 19, **transition), ticks, _both(4000, 16000))
    assert memoized == fresh
    assert memo.hits > 0
