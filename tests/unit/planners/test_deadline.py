"""Victims of a transition past its deadline: one rule for the operator and the simulator."""

from __future__ import annotations

import pytest

from fairshare.planners.deadline import DeadlineVictim, Holder, deadline_victims

NOW = 10_000.0
WHAT = "transition of research gpu/nvidia.com/gpu"
GPU = "nvidia.com/gpu"


def keys(victims: list[DeadlineVictim]) -> list[str]:
    return [v.key for v in victims]


@pytest.mark.parametrize(
    ("holders", "excess", "allowed", "expected"),
    [
        pytest.param([Holder("r/old", 100, 1_000.0, 1000), Holder("r/new", 100, 9_000.0, 1000)],
                     1000, 5, ["r/new"], id="the most recently admitted of equal priority goes first"),
        pytest.param([Holder("r/low", 50, 1_000.0, 1000), Holder("r/high", 100, 9_000.0, 1000)],
                     1000, 5, ["r/low"], id="lower priority goes before less work lost"),
        pytest.param([Holder("r/a", 100, 5_000.0, 1000), Holder("r/b", 100, 5_000.0, 1000)],
                     1000, 5, ["r/a"], id="a tie is broken by key"),
        pytest.param([Holder(f"r/w{i}", 100, float(i), 1000) for i in range(4)],
                     3000, 2, ["r/w3", "r/w2"], id="never more victims than the allowance"),
        pytest.param([Holder("r/big", 100, 9_000.0, 4000), Holder("r/small", 100, 1_000.0, 1000)],
                     1000, 5, ["r/big"], id="victims stop as soon as the excess is freed"),
        pytest.param([Holder("r/cpu-only", 0, 9_000.0, 0), Holder("r/gpu", 100, 1_000.0, 1000)],
                     1000, 5, ["r/gpu"], id="a workload holding none of the resource is never a victim"),
        pytest.param([Holder("r/a", 100, 1_000.0, 1000)], 0, 5, [], id="nothing in excess means no victim"),
        pytest.param([Holder("r/small", 100, 9_000.0, 1000), Holder("r/big", 100, 1_000.0, 4000)],
                     4000, 5, ["r/big"],
                     id="a victim taken first whose return still leaves the excess freed is filled back"),
    ],
)
def test_deadline_victims_follow_priority_then_least_work_lost(
    holders: list[Holder], excess: int, allowed: int, expected: list[str]
) -> None:
    assert keys(deadline_victims(holders, excess=excess, allowed=allowed, now=NOW, what=WHAT,
                                 resource=GPU)) == expected


def test_every_victim_carries_a_one_line_reason() -> None:
    holders = [Holder("r/w", 100, 9_400.0, 2000)]
    [victim] = deadline_victims(holders, excess=1000, allowed=1, now=NOW, what=WHAT, resource=GPU)
    # Human units (issue 13, "kubectl tells the story"): GPUs and a duration, not 1000m and 600s.
    assert victim == DeadlineVictim(
        "r/w", 2000,
        "preempt r/w: transition of research gpu/nvidia.com/gpu is past its deadline with 1 GPU in use above "
        "what its team may hold; priority 100, running 10m; frees 2 GPUs",
    )
