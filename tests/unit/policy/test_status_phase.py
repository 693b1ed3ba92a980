"""The Phase and Next Step printer columns of `kubectl get qp`: one word for the most pressing state of a
policy, and the earliest step still to come (fairshare.policy.status.policy_phase / next_step_at)."""

from __future__ import annotations

import pytest

from fairshare.policy.status import PolicyPhase, TransitionPhase, TransitionStatus, next_step_at, policy_phase


def _t(phase: TransitionPhase, next_at: str | None = None, team: str = "a") -> TransitionStatus:
    return TransitionStatus(team=team, flavor="gpu", resource="nvidia.com/gpu", phase=phase,
                            next_step_at=next_at)


R, D, P, C, B, W = (TransitionPhase.RUNNING, TransitionPhase.DRAINING, TransitionPhase.PREEMPTING,
                    TransitionPhase.COMPLETE, TransitionPhase.BLOCKED, TransitionPhase.BORROWING)


@pytest.mark.parametrize(
    ("phases", "degraded", "expected"),
    [
        ([], False, PolicyPhase.READY),
        ([C, C], False, PolicyPhase.READY),
        ([C, R], False, PolicyPhase.TRANSITIONING),
        ([R, D], False, PolicyPhase.DRAINING),
        ([D, P, R], False, PolicyPhase.PREEMPTING),
        ([C], True, PolicyPhase.DEGRADED),
        ([R, B], False, PolicyPhase.DEGRADED),
        ([P], True, PolicyPhase.DEGRADED),
        ([C, W], False, PolicyPhase.BORROWING),
        ([W, R], False, PolicyPhase.TRANSITIONING),
        ([W, P], False, PolicyPhase.PREEMPTING),
    ],
    ids=[
        "no transition: Ready",
        "every transition complete: Ready",
        "a transition on schedule: Transitioning",
        "a step waiting for running work shows over one on schedule: Draining",
        "past a deadline shows over draining: Preempting",
        "the Degraded condition shows over everything: Degraded",
        "a blocked transition is Degraded",
        "degraded while preempting: Degraded",
        "past a deadline, borrowing what nobody needs: Borrowing",
        "a transition on schedule shows over one that borrows: Transitioning",
        "evicting past a deadline shows over borrowing: Preempting",
    ],
)
def test_the_phase_column_shows_the_most_pressing_state(
    phases: list[TransitionPhase], degraded: bool, expected: PolicyPhase
) -> None:
    assert policy_phase([_t(p, team=f"t{i}") for i, p in enumerate(phases)], degraded=degraded) == expected


def test_next_step_is_the_earliest_step_of_the_transitions_still_in_progress() -> None:
    transitions = [
        _t(R, "2026-01-02T00:00:00Z", "a"),
        _t(D, "2026-01-01T12:00:00Z", "b"),
        _t(C, "2026-01-01T00:00:00Z", "c"),  # complete: its old nextStepAt is not shown
        _t(B, "2026-01-01T01:00:00Z", "d"),  # blocked: no step is coming
    ]
    assert (next_step_at(transitions), next_step_at(transitions[2:]), next_step_at([])) == (
        "2026-01-01T12:00:00Z", None, None)
