"""Durations in scenario files: the project's one grammar (fairshare.durations: "90s", "1h30m", "14d",
"2w"), or a bare number of seconds."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, WithJsonSchema

from fairshare import durations

# A run time longer than any horizon (a scenario's is at most 3650d, simulations/scenario.py MAX_HORIZON): a
# workload given it never finishes within a run. The calibration gives it where nothing recorded says when
# such work ends (the Kaplan-Meier estimate's mass past the longest life when no life finished, simulations/
# calibrate.py), and the initial state to a running workload that has outlived every recorded run time of
# its kind (simulations/initial.py `draw_work`): as `qm plan`'s transition plan assumes, it runs on.
RUNS_ON = 2 * 3650 * 86400.0


def parse_duration(value: object) -> float:
    return durations.seconds_of(value, allow_number=True)


Duration = Annotated[float, BeforeValidator(parse_duration), WithJsonSchema({
    "anyOf": [{"type": "number", "minimum": 0},
              {"type": "string", "pattern": durations.DURATION_PATTERN, "maxLength": durations.MAX_LENGTH}],
    "description": f"A duration: {durations.EXAMPLES}, or a number of seconds"})]
