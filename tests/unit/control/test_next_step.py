"""PHASE and NEXT STEP say what a transition waits for, and when (issue 31, item 4): `kubectl get qp` showed
PHASE Preempting for 10 minutes with an empty NEXT STEP. The seed's shift with a short transition, decided
second by second (tests/unit/control/cut_world.py); the text is fairshare.control.next_step."""

from __future__ import annotations

import pytest

from fairshare.control import next_step
from fairshare.policy.status import PolicyPhase, policy_phase
from fairshare.timestamps import rfc3339
from tests.builders import SeedShiftBuilder
from tests.unit.control.cut_world import DEADLINE, T0, Cut

KEY = "research gpu/nvidia.com/gpu"
HELD = "research/exp-0, research/exp-1, research/exp-2 and 3 more"


@pytest.mark.parametrize(
    ("spec", "at", "phase", "text"),
    [
        pytest.param(SeedShiftBuilder().transition(**DEADLINE), T0 + 5, PolicyPhase.TRANSITIONING,
                     f"{KEY}: step 1/2 to 3 GPUs at {rfc3339(T0 + 10)}; deadline {rfc3339(T0 + 30)} "
                     "(+1 more in progress)",
                     id="a transition on schedule shows its next step, its time and its deadline"),
        pytest.param(SeedShiftBuilder().transition(**DEADLINE), T0 + 15, PolicyPhase.DRAINING,
                     f"{KEY}: the step to 3 GPUs waits for 3 GPUs of the 6 GPUs held by {HELD} to drain; "
                     f"deadline {rfc3339(T0 + 30)}: then it is cut (+1 more in progress)",
                     id="a draining step names what must drain, who holds it, and the deadline"),
        pytest.param(SeedShiftBuilder().transition(duration="20s", stepInterval="10s"), T0 + 15,
                     PolicyPhase.DRAINING,
                     f"{KEY}: the step to 3 GPUs waits for 3 GPUs of the 6 GPUs held by {HELD} to drain; "
                     "no deadline: it waits for them (+1 more in progress)",
                     id="a draining step without a deadline says it waits for the work to finish"),
        pytest.param(SeedShiftBuilder().transition(**DEADLINE), T0 + 40, PolicyPhase.BORROWING,
                     f"{KEY}: 5 GPUs borrowed above the quota in force (1 GPU): evicted only when another "
                     f"team's pending work needs it; deadline passed at {rfc3339(T0 + 30)}",
                     id="past the deadline borrowed quota is kept until another team needs it"),
        pytest.param(SeedShiftBuilder().transition(**DEADLINE).research_limit(0), T0 + 40,
                     PolicyPhase.PREEMPTING,
                     f"{KEY}: 3 GPUs in use above what research may hold (1 GPU quota): evicted within "
                     f"maxVictimsPerHour; deadline passed at {rfc3339(T0 + 30)}",
                     id="past the deadline what the team may not hold is evicted, and the text says so"),
    ],
)
def test_phase_and_next_step_say_what_the_transition_waits_for_and_when(
    spec: SeedShiftBuilder, at: float, phase: PolicyPhase, text: str
) -> None:
    cut = Cut(spec)
    cut.run_until(at)
    assert cut.shell.status is not None
    transitions = cut.shell.status.transitions
    assert (policy_phase(transitions, degraded=False), next_step(transitions, cut.kueue.snapshot, at)) == (
        phase, text)


def test_no_phase_but_ready_ever_shows_an_empty_next_step() -> None:
    for spec in (SeedShiftBuilder().transition(**DEADLINE), SeedShiftBuilder().transition(**DEADLINE)
                 .research_limit(0)):
        cut = Cut(spec)
        seen = set()
        for second in range(0, 120, 3):
            cut.run_until(T0 + second)
            assert cut.shell.status is not None
            transitions = cut.shell.status.transitions
            shown = policy_phase(transitions, degraded=False)
            text = next_step(transitions, cut.kueue.snapshot, T0 + second)
            seen.add(shown)
            assert (text is None) == (shown == PolicyPhase.READY), (second, shown, text)
            if shown in (PolicyPhase.PREEMPTING, PolicyPhase.BORROWING):
                assert f"deadline passed at {rfc3339(T0 + 30)}" in (text or "")
        assert {PolicyPhase.TRANSITIONING, PolicyPhase.DRAINING} < seen
