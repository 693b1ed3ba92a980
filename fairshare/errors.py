"""Domain errors of the policy core.

Every error caused by user input names where the bad value is (file, document,
field) and what the value was, so that the CLI and the operator can print it in one
line and nothing is applied partially.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def field_path(loc: Sequence[int | str], *, skip: Collection[str] = ()) -> str:
    """A pydantic error location as a dotted Kubernetes-style path: spec.teams[0].quotas[1].flavor.
    Indices become [i], map keys that are not identifiers become ['nvidia.com/gpu'], and the steps in
    `skip` (tags of discriminated unions, which are not field names) are dropped."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in skip or part == "[key]":
            continue
        elif _IDENT.match(part):
            out += f".{part}" if out else part
        else:  # a map key such as nvidia.com/gpu
            out += f"[{part!r}]"
    return out


class QueueManagerError(Exception):
    """Base class of every error this project reports to a user (never a traceback)."""


@dataclass(frozen=True)
class Location:
    """Where a bad value sits: a file, a document inside it and a dotted field path."""

    file: str | None = None
    document: str | None = None  # e.g. "document 3 (ClusterQueue team-a)"
    field: str | None = None  # e.g. "spec.resourceGroups[0].flavors[1].resources[0].nominalQuota"

    def describe(self) -> str:
        parts = [p for p in (self.file, self.document) if p]
        if self.field:
            parts.append(f"field {self.field}")
        return ": ".join(parts) if parts else "input"


class InputError(QueueManagerError):
    """Invalid user input (YAML, manifest, CRD, CLI flag, trace, scenario)."""

    def __init__(self, message: str, *, location: Location | None = None, value: object = None,
                 has_value: bool = False) -> None:
        self.message = message
        self.location = location or Location()
        self.value = value
        self.has_value = has_value or value is not None
        super().__init__(self.one_line())

    def one_line(self) -> str:
        text = f"{self.location.describe()}: {self.message}"
        if self.has_value:
            text += f" (got {_shown(self.value)})"
        return " ".join(text.split())

    def at(self, *, file: str | None = None, document: str | None = None,
           field_prefix: str | None = None) -> InputError:
        """The same error with more context filled in (outer layers know the file)."""
        loc = self.location
        field = loc.field
        if field_prefix:
            field = f"{field_prefix}.{field}" if field else field_prefix
        new = Location(file=loc.file or file, document=loc.document or document, field=field)
        return InputError(self.message, location=new, value=self.value, has_value=self.has_value)


# A value is quoted so the user can find it, not reprinted: 5,000 digits would bury the message.
_MAX_SHOWN = 100


def _shown(value: object) -> str:
    text = repr(value)
    if len(text) <= _MAX_SHOWN:
        return text
    return f"{text[:_MAX_SHOWN]}... ({len(text)} characters)"


class UnsupportedError(InputError):
    """A field that changes admission but that the model does not implement."""
