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
from fairshare.policy import parse_policy
from fairshare.policy.status import TransitionStatus

from .test_transitions import BIZ, FR, GPU, T0, _both, _pair_policy, _policy, live


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


def _kept_quiet() -> tuple[PolicyRules, TransitionMemo, TransitionsOutcome]:
    """A cut 4 -> 1 GPU (generation 2) started at T0; at T0 + 1 its quiet outcome is kept by the memo."""
    rules = _policy(1)
    memo = TransitionMemo()
    first = step_transitions(rules, 2, [], live(4000), {}, T0, memo=memo)
    quiet = step_transitions(rules, 2, first.records, live(4000), {}, T0 + 1, memo=memo)
    assert memo.outcome is not None
    return rules, memo, quiet


def test_a_changed_live_quota_or_a_new_generation_is_computed_again() -> None:
    rules, memo, quiet = _kept_quiet()
    for generation, quotas in ((2, live(3000)), (3, live(4000))):
        again = step_transitions(rules, generation, quiet.records, quotas, {}, T0 + 2, memo=memo)
        assert _seen(again) == _seen(step_transitions(rules, generation, quiet.records, quotas, {}, T0 + 2))
    assert memo.hits == 0


def test_a_stored_record_read_back_as_an_equal_copy_is_computed_again() -> None:
    # The memo holds only while the stored records are the very objects its outcome kept: a status read back
    # from the API server is a new list of new records, equal or not.
    rules, memo, quiet = _kept_quiet()
    again = step_transitions(rules, 2, quiet.records, live(4000), {}, T0 + 2, memo=memo)
    assert memo.hits == 1 and _seen(again) == _seen(quiet)
    copies = [r.model_copy() for r in quiet.records]
    read_back = step_transitions(rules, 2, copies, live(4000), {}, T0 + 3, memo=memo)
    assert memo.hits == 1
    assert _seen(read_back) == _seen(step_transitions(rules, 2, copies, live(4000), {}, T0 + 3))


VISION = QuotaKey.of("vision", "gpu", "nvidia.com/gpu")


def _two_cuts(**transition: Any) -> PolicyRules:
    """research 4 -> 1 and vision 4 -> 2 GPUs in two cohort trees (not paired), business kept at 16."""
    def team(name: str, n: int, cohort: str) -> dict[str, Any]:
        return {"name": name, "namespaces": [name[0]], "cohort": cohort,
                "quotas": [{"flavor": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominal": n}]}]}

    return PolicyRules.of(parse_policy({
        "apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy", "metadata": {"name": "p"},
        "spec": {"flavors": [{"name": "gpu"}],
                 "teams": [team("research", 1, "org"), team("vision", 2, "lab"), team("business", 16, "org")],
                 "transitions": {"defaults": {"duration": "30s", "stepInterval": "10s", "curve": "linear",
                                              "drain": True, **transition}}}}))


def test_a_cut_whose_inputs_are_unchanged_keeps_its_part_when_another_cuts_usage_moves() -> None:
    # From 10 s research is held above its step while it drains: its usage is read, and moves at every
    # tick; vision (idle) is quiet until its step at 21. No tick returns the whole outcome again.
    quotas = {"research": {FR: ResourceQuota(4000)}, "vision": {FR: ResourceQuota(4000)},
              "business": {FR: ResourceQuota(16000)}}
    used = ((0, 3900), (10, 3900), (11, 3800), (12, 3700), (13, 3600), (14, 3500), (21, 3400), (22, 3300))
    ticks: list[Tick] = [(t, {GPU: u, VISION: 0}) for t, u in used]
    fresh, memoized, memo = _both_ways(_two_cuts(), ticks, quotas)
    assert memoized == fresh
    assert [x[1][0]["message"] for x in fresh[2:4]] == ["3800m GPUs in use drains first",
                                                        "3700m GPUs in use drains first"]
    assert [x[1][1]["current"] for x in fresh] == ["4"] * 6 + ["3"] * 2
    assert memo.hits == 0
    assert memo.step_hits == 3  # vision's part at 12, 13 and 14


# Per key moved at random: its usage at the start, the chance it changes at a tick, the values it takes.
_Moves = tuple[tuple[QuotaKey, int, float, tuple[int, ...]], ...]


def _paired(transition: dict[str, Any]) -> tuple[PolicyRules, dict[str, dict[FlavorResource, ResourceQuota]],
                                                 _Moves]:
    """research's cut paired with business's grant: one giver, one receiver."""
    return _pair_policy(1, 19, **transition), _both(4000, 16000), (
        (GPU, 4000, 0.3, (0, 1000, 2500, 3000, 4000, 5000)), (BIZ, 1000, 0.3, (0, 1000, 8000, 17000)))


def _cuts(transition: dict[str, Any]) -> tuple[PolicyRules, dict[str, dict[FlavorResource, ResourceQuota]],
                                               _Moves]:
    """Two cuts in two trees, each its own quota's part."""
    quotas = {"research": {FR: ResourceQuota(4000)}, "vision": {FR: ResourceQuota(4000)},
              "business": {FR: ResourceQuota(16000)}}
    return _two_cuts(**transition), quotas, (
        (GPU, 4000, 0.4, (0, 1000, 2500, 3000, 4000, 5000)), (VISION, 4000, 0.2, (0, 1000, 2000, 3500, 4000)))


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize(
    "transition",
    [{}, {"deadline": "25s", "maxVictimsPerHour": 1}, {"drain": False}, {"curve": "geometric"}],
    ids=["drain", "deadline", "no-drain", "geometric"],
)
@pytest.mark.parametrize("shape", ["paired", "two-cuts"])
def test_random_ticks_say_the_same_with_the_memo_as_without(seed: int, transition: dict[str, Any],
                                                            shape: str) -> None:
    rules, quotas, moves = (_paired if shape == "paired" else _cuts)(transition)
    rng = random.Random(seed)
    t = 0.0
    ticks: list[Tick] = []
    usage = {key: start for key, start, _, _ in moves}
    for _ in range(60):
        t += rng.choice((0.0, 0.5, 1.0, 2.5, 5.0, 10.0))
        for key, _, chance, values in moves:
            if rng.random() < chance:
                usage[key] = rng.choice(values)
        ticks.append((t, dict(usage)))
    fresh, memoized, memo = _both_ways(rules, ticks, quotas)
    assert memoized == fresh
    if shape == "paired" or transition.get("drain") is False:
        assert memo.hits > 0  # (without drain no usage is read: the whole outcome is kept)
    else:
        assert memo.step_hits > 0


def test_stranded_capacity_is_kept_while_its_plans_start_where_they_did_and_computed_again_after() -> None:
    # research's cut that nobody receives strands 3 GPUs of the tree through the whole transition; a new
    # policy (other rules) strands less, and is computed again.
    rules = _pair_policy(1, 16)
    ticks: list[Tick] = [(t, {GPU: 4000}) for t in (0, 5, 10, 20, 30, 40)]
    plain, memoized, memo = _both_ways(rules, ticks, _both(4000, 16000))
    assert memoized == plain
    assert all([(s.root, s.amount) for s in seen[6]] == [("org", 3000)] for seen in plain)
    assert memo.stranded is not None and memo.stranded[0] is rules
    kept = memo.stranded
    res = step_transitions(rules, 2, [], _both(4000, 16000), {GPU: 4000}, T0 + 50, memo=memo)
    assert memo.stranded is kept and [(s.root, s.amount) for s in res.stranded] == [("org", 3000)]
    # The same rules, a plan that starts from 3 GPUs: computed again.
    res = step_transitions(rules, 2, [], _both(3000, 16000), {GPU: 3000}, T0 + 55, memo=memo)
    assert memo.stranded is not kept and [(s.root, s.amount) for s in res.stranded] == [("org", 2000)]
    kept = memo.stranded
    other = _pair_policy(2, 16)
    res = step_transitions(other, 3, [], _both(4000, 16000), {GPU: 4000}, T0 + 60, memo=memo)
    assert memo.stranded is not kept and memo.stranded[0] is other
    assert [(s.root, s.amount) for s in res.stranded] == [("org", 2000)]
    assert res.stranded == step_transitions(other, 3, [], _both(4000, 16000), {GPU: 4000}, T0 + 60).stranded
