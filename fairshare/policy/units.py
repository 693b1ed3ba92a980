"""Quantity and duration fields of a QuotaPolicy: one grammar for pydantic, the CRD schema and the renderer.

A quantity keeps the text the user wrote (Kueue takes quantities as strings, so the renderer passes them on
unchanged) and is checked against the Kubernetes quantity grammar; `to_milli` (fairshare.quantity) gives the
exact integer in milli-units for comparisons. Durations use Go's time.ParseDuration grammar (h, m, s, ms),
because the CRD's CEL rules compare them with CEL's duration(): "14 days" is "336h".
"""

from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction
from types import MappingProxyType
from typing import Annotated

from pydantic import BeforeValidator, WithJsonSchema

from fairshare.errors import InputError
from fairshare.quantity import parse_quantity

# The grammar of k8s.io/apimachinery/pkg/api/resource.Quantity, as kubebuilder writes it into CRD schemas
# (signs dropped: no quota, limit, weight or price in a policy may be negative).
QUANTITY_PATTERN = (
    r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_QUANTITY_RE = re.compile(QUANTITY_PATTERN)
# Go's time.ParseDuration units (ns/us/µs are pointless for policies); no sign.
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"
_DURATION_RE = re.compile(DURATION_PATTERN)
_DURATION_PART_RE = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_DURATION_UNIT = MappingProxyType(
    {"ms": Fraction(1, 1000), "s": Fraction(1), "m": Fraction(60), "h": Fraction(3600)})


def is_quantity(text: str) -> bool:
    """True if `text` is a non-negative Kubernetes quantity."""
    return bool(_QUANTITY_RE.match(text))


def to_milli(text: str) -> int:
    """Exact milli-units of a quantity (fairshare.quantity: rounded up below 1m, as MilliValue)."""
    return parse_quantity(text)


def duration_seconds(text: str) -> Fraction:
    """Exact seconds of a duration such as "168h", "1h30m", "90s" (ValueError if malformed)."""
    if not _DURATION_RE.match(text):
        raise ValueError(f"not a duration: {text!r}")
    return sum((Fraction(Decimal(n)) * _DURATION_UNIT[u] for n, u in _DURATION_PART_RE.findall(text)),
               Fraction(0))


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
    if not isinstance(value, str) or not _DURATION_RE.match(value):
        raise ValueError(f"must be a duration such as 90s, 30m or 168h (got {value!r})")
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
DURATION_SCHEMA: dict[str, object] = {"type": "string", "pattern": DURATION_PATTERN, "maxLength": 32}

Quantity = Annotated[str, BeforeValidator(_coerce_quantity), WithJsonSchema(QUANTITY_SCHEMA)]
"""A non-negative Kubernetes quantity, kept as the text the user wrote ("4", "500m", "16Gi")."""

Duration = Annotated[str, BeforeValidator(_check_duration), WithJsonSchema(DURATION_SCHEMA)]
"""A duration string ("90s", "1h30m", "168h")."""
