"""Quantity and duration fields of a QuotaPolicy: one grammar for pydantic, the CRD schema and the renderer.

A quantity keeps the text the user wrote (Kueue takes quantities as strings, so the renderer passes them on
unchanged) and is checked against the Kubernetes quantity grammar; `to_milli` (fairshare.quantity) gives the
exact integer in milli-units for comparisons. Durations follow the project's one grammar
(`fairshare.durations`: Go's units after whole weeks and days, "336h" or "14d"); the CRD's CEL rules turn
them into CEL durations with `fairshare.durations.cel_duration`.
"""

from __future__ import annotations

import functools
import re
from fractions import Fraction
from typing import Annotated

from pydantic import BeforeValidator, WithJsonSchema

from fairshare import durations
from fairshare.errors import InputError
from fairshare.quantity import parse_quantity

# The grammar of k8s.io/apimachinery/pkg/api/resource.Quantity, as kubebuilder writes it into CRD schemas
# (signs dropped: no quota, limit, weight or price in a policy may be negative).
QUANTITY_PATTERN = (
    r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_QUANTITY_RE = re.compile(QUANTITY_PATTERN)
DURATION_PATTERN = durations.DURATION_PATTERN


def is_quantity(text: str) -> bool:
    """True if `text` is a non-negative Kubernetes quantity."""
    return bool(_QUANTITY_RE.fullmatch(text))  # not "4\n", which the API server refuses


def to_milli(text: str) -> int:
    """Exact milli-units of a quantity (fairshare.quantity: rounded up below 1m, as MilliValue)."""
    return parse_quantity(text)


@functools.lru_cache(maxsize=1024)
def duration_seconds(text: str) -> Fraction:
    """Exact seconds of a duration such as "168h", "14d", "1h30m" (ValueError if malformed). Remembered per
    text: the controller reads the policy's durations on every decision (the storm cool-down)."""
    return durations.parse_duration(text)


def _coerce_quantity(value: object) -> object:
    # YAML and the API server hand us ints for "4"; bools are ints in Python but never quantities.
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if isinstance(value, float):
        value = repr(value)
    if isinstance(value, str) and len(value) > QUANTITY_MAX_LENGTH:
        raise ValueError(f"must be at most {QUANTITY_MAX_LENGTH} characters (got {value!r})")
    if isinstance(value, str) and not is_quantity(value):
        raise ValueError(f"must be a non-negative Kubernetes quantity such as 4, 500m, 16Gi (got {value!r})")
    if not isinstance(value, str):
        raise ValueError(f"must be a Kubernetes quantity (got {value!r})")
    try:  # the grammar admits "1e99999": the exact value must also fit what Kueue can count
        parse_quantity(value)
    except InputError as err:
        raise ValueError(f"{err.message} (got {value!r})") from None
    return value


def _check_duration(value: object) -> object:
    if not isinstance(value, str) or not durations.is_duration(value):
        raise ValueError(f"must be a duration such as {durations.EXAMPLES} (got {value!r})")
    if durations.parse_duration(value) > MAX_DURATION_SECONDS:
        raise ValueError(f"must be at most {MAX_DURATION} (ten years) (got {value!r})")
    return value


def _integral(value: object) -> object:
    """An integer field takes what the API server takes: a whole number, also written 5.0 (kube-openapi's
    type check admits a float with an integral value for `type: integer`), never a string or a boolean."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# maxLength bounds the cost of CEL rules that parse quantities (the API server rejects rules whose worst case
# over unbounded strings is too costly); no real quantity is longer than 40 characters.
QUANTITY_MAX_LENGTH = 40
QUANTITY_SCHEMA: dict[str, object] = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "pattern": QUANTITY_PATTERN,
    "maxLength": QUANTITY_MAX_LENGTH,
    "x-kubernetes-int-or-string": True,
}
# Every duration of a policy is at most ten years (the simulator's longest horizon too): past it, a date
# computed from now (a step, a rolling budget's start, the ledger's retention) may fall outside the years
# 1-9999 that RFC 3339 and the date types can write (issue 33: `rolling: 800000d` stopped the controller).
MAX_DURATION = "3650d"
MAX_DURATION_SECONDS = durations.parse_duration(MAX_DURATION)
# The API server checks the bound on the forms CEL's duration() reads (Go's units); a form with weeks or
# days is checked by parse_policy alone (fairshare/durations.py cel_is_go: CEL cannot convert it cheaply).
# A Go form too large for CEL's duration (over ~292 years) fails to evaluate, which refuses it too.
MAX_DURATION_RULE = {
    "rule": f"self.matches('[wd]') || duration(self) <= duration('{int(MAX_DURATION_SECONDS) // 3600}h')",
    "message": f"must be at most {MAX_DURATION} (ten years)"}
DURATION_SCHEMA: dict[str, object] = {"type": "string", "pattern": DURATION_PATTERN,
                                      "maxLength": durations.MAX_LENGTH,
                                      "x-kubernetes-validations": [MAX_DURATION_RULE]}

Quantity = Annotated[str, BeforeValidator(_coerce_quantity), WithJsonSchema(QUANTITY_SCHEMA)]
"""A non-negative Kubernetes quantity, kept as the text the user wrote ("4", "500m", "16Gi")."""

Duration = Annotated[str, BeforeValidator(_check_duration), WithJsonSchema(DURATION_SCHEMA)]
"""A duration string ("90s", "1h30m", "168h", "14d"), at most ten years."""

Integer = Annotated[int, BeforeValidator(_integral)]
"""An integer field (the spec models are strict: "5" and true are refused, as the API server does)."""
