"""Durations in scenario files: the project's one grammar (fairshare.durations: "90s", "1h30m", "14d",
"2w"), or a bare number of seconds."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, WithJsonSchema

from fairshare import durations


def parse_duration(value: object) -> float:
    return durations.seconds_of(value, allow_number=True)


Duration = Annotated[float, BeforeValidator(parse_duration), WithJsonSchema({
    "anyOf": [{"type": "number", "minimum": 0},
              {"type": "string", "pattern": durations.DURATION_PATTERN, "maxLength": durations.MAX_LENGTH}],
    "description": f"A duration: {durations.EXAMPLES}, or a number of seconds"})]
