"""Ownership of rendered Kueue objects and drift detection (pure).

Owned objects carry two labels; the operator applies them with server-side apply under
one field manager, remembers the spec the API server returned (defaults included), and
treats any later difference in `spec` as a hand edit to revert (DESIGN.md: drift from
hand edits is detected on watch and corrected, with an Event and a log line).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from fairshare.errors import InputError
from fairshare.policy import MANAGED_BY_LABEL, MANAGED_BY_VALUE, POLICY_LABEL
from fairshare.quantity import parse_quantity

FIELD_MANAGER = "queue-manager"
# The digest of the content last applied, on the object (as kubectl keeps last-applied-configuration): a
# field the policy no longer sets (e.g. a borrowingLimit lifted) is then an apply too, although the live
# object, which still has it, lacks nothing the desired one sets.
CONTENT_ANNOTATION = "queuemanager.dev/applied-content"


def owning_policy(obj: Mapping[str, Any]) -> str | None:
    """The policy that owns `obj`, or None when we do not manage it."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels.get(MANAGED_BY_LABEL) != MANAGED_BY_VALUE:
        return None
    owner = labels.get(POLICY_LABEL)
    return str(owner) if owner else None


def _same_scalar(a: object, b: object) -> bool:
    if a == b:
        return True
    # "4" and "4000m" are the same quota: the API server keeps CRD quantities as written.
    if isinstance(a, str | int) and isinstance(b, str | int) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        try:
            return parse_quantity(a) == parse_quantity(b)
        except InputError:
            return False
    return False


def spec_drift(applied: Any, live: Any, path: str = "spec") -> list[str]:
    """Dotted paths where `live` differs from what we applied (sorted, deterministic)."""
    if isinstance(applied, Mapping) and isinstance(live, Mapping):
        out: list[str] = []
        for key in sorted(set(applied) | set(live)):
            sub = f"{path}.{key}"
            if key not in live or key not in applied:
                out.append(sub)
            else:
                out.extend(spec_drift(applied[key], live[key], sub))
        return out
    if isinstance(applied, list) and isinstance(live, list):
        if len(applied) != len(live):
            return [path]
        out = []
        for i, (a, b) in enumerate(zip(applied, live, strict=True)):
            out.extend(spec_drift(a, b, f"{path}[{i}]"))
        return out
    return [] if _same_scalar(applied, live) else [path]


def restore_patch(applied: Mapping[str, Any], live: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386) that turns `live` back into `applied`: changed keys
    get the applied value, keys added by hand get null, lists are replaced whole."""
    patch: dict[str, Any] = {}
    for key in sorted(set(applied) | set(live)):
        if key not in applied:
            patch[key] = None
        elif key not in live:
            patch[key] = applied[key]
        else:
            a, b = applied[key], live[key]
            if isinstance(a, Mapping) and isinstance(b, Mapping):
                sub = restore_patch(a, b)
                if sub:
                    patch[key] = sub
            elif spec_drift(a, b):
                patch[key] = a
    return patch


_NOT_CONTENT = frozenset({"apiVersion", "kind", "metadata", "status"})


def managed_content(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What the operator owns in a Kueue object: everything but apiVersion, kind,
    metadata and status (`spec` for most kinds; `value`/`description` for a
    WorkloadPriorityClass, which has no spec)."""
    return {k: v for k, v in obj.items() if k not in _NOT_CONTENT}


def differs_from_desired(desired: Any, live: Any) -> bool:
    """True if `live` lacks or changes a value `desired` sets (extra keys in `live`, e.g.
    API-server defaults, do not count): the test for "needs an apply"."""
    if isinstance(desired, Mapping):
        if not isinstance(live, Mapping):
            return True
        return any(k not in live or differs_from_desired(v, live[k]) for k, v in desired.items())
    if isinstance(desired, list):
        if not isinstance(live, list) or len(desired) != len(live):
            return True
        return any(differs_from_desired(a, b) for a, b in zip(desired, live, strict=True))
    return not _same_scalar(desired, live)


def content_digest(obj: Mapping[str, Any]) -> str:
    """A digest of what the operator owns in `obj` (managed_content)."""
    text = json.dumps(managed_content(obj), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def stamped(desired: Mapping[str, Any]) -> dict[str, Any]:
    """`desired` with its content digest annotated (what `needs_apply` compares)."""
    out = copy.deepcopy(dict(desired))
    meta = out.setdefault("metadata", {})
    meta["annotations"] = {**(meta.get("annotations") or {}), CONTENT_ANNOTATION: content_digest(desired)}
    return out


def needs_apply(desired: Mapping[str, Any], live: Mapping[str, Any] | None) -> bool:
    """True unless `live` is ours as last applied from this very content: it sets every value `desired`
    sets, and its annotated digest says no field was dropped from the content since (an object applied
    before the annotation existed gets one apply)."""
    if live is None:
        return True
    annotations = (live.get("metadata") or {}).get("annotations") or {}
    if annotations.get(CONTENT_ANNOTATION) != content_digest(desired):
        return True
    return differs_from_desired(managed_content(desired), managed_content(live))
