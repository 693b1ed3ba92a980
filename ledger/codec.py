"""JSON forms of the ledger's records: the spool's lines and the JSON columns. Decimals travel as strings
(exact); every reader checks types and names the bad field (a spool line written by a newer version, or
damaged, is refused in one line rather than half-applied)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

from fairshare.resource_units import GIB, MIN_BYTE_PRICE, is_byte_resource

from .activity import ActivityRecord
from .facts import Cond, Held, Identity, PodSetFacts, WorkloadFacts
from .records import DEFAULT_CURRENCY, AuditEntry, QuotaChange, WorkloadGone

SpoolItem = WorkloadFacts | QuotaChange | AuditEntry | WorkloadGone | ActivityRecord
FORMAT = 2  # the version of a spool line (1: before prices had units and currencies; still read)
_READ = (1, FORMAT)
T = TypeVar("T")


class CodecError(ValueError):
    """A JSON record that does not have the expected shape."""


def _get(raw: Mapping[str, Any], key: str, kind: type[T] | tuple[type, ...], *,
         optional: bool = False) -> Any:
    value = raw.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise CodecError(f"field {key!r} must be {getattr(kind, '__name__', kind)} (got {value!r:.60})")
    return value


def _dec(text: Any, key: str) -> Decimal | None:
    if text is None:
        return None
    try:
        return Decimal(str(text))
    except InvalidOperation:
        raise CodecError(f"field {key!r} must be a decimal string (got {text!r:.60})") from None


# --- JSON columns ----------------------------------------------------------------------------------------


def held_json(held: tuple[Held, ...]) -> list[list[Any]]:
    return [[h.flavor, h.resource, h.quantity, None if h.price is None else str(h.price), h.currency]
            for h in held]


def held_from(raw: Any, *, version: int = FORMAT) -> tuple[Held, ...]:
    """``version`` 1: written before prices had units and currencies (see `v1_price`)."""
    if not isinstance(raw, list):
        raise CodecError("held must be a list")
    out = []
    for item in raw:
        if not (isinstance(item, list) and len(item) in (4, 5) and isinstance(item[2], int)):
            raise CodecError(f"held item must be [flavor, resource, milli, price, currency] "
                             f"(got {item!r:.60})")
        flavor, resource, price = str(item[0]), str(item[1]), _dec(item[3], "held.price")
        if len(item) == 5 and version > 1:
            currency = str(item[4])
        else:
            price, currency = v1_price(resource, price), v1_currency(flavor)
        out.append(Held(flavor, resource, item[2], price, currency))
    return tuple(out)


def v1_price(resource: str, price: Decimal | None) -> Decimal | None:
    """A price recorded before prices had units (spool format 1, schema before 0003), per unit-hour of the
    resource's unit now. It was applied per Kubernetes base unit (a byte of memory); the number a policy
    wrote is kept (the sample's memory 0.004 was meant, and is now read, per GiB-hour), except a byte
    resource's price that can only have been meant per byte-hour, which is converted (x 2^30: the same
    cost). Migration 0003 applies the same rule to the database."""
    if price is not None and is_byte_resource(resource) and 0 < price < MIN_BYTE_PRICE:
        return price * GIB
    return price


def v1_currency(flavor: str) -> str:
    """The currency of a price recorded before prices had one: the default (USD); none for the unknown
    flavor of inferred, unpriced usage."""
    return DEFAULT_CURRENCY if flavor else ""


def pod_sets_json(pod_sets: tuple[PodSetFacts, ...]) -> list[dict[str, Any]]:
    return [{"name": p.name, "count": p.count, "requests": dict(p.requests), "flavors": dict(p.flavors)}
            for p in pod_sets]


def pod_sets_from(raw: Any) -> tuple[PodSetFacts, ...]:
    if not isinstance(raw, list):
        raise CodecError("pod_sets must be a list")
    out = []
    for item in raw:
        if not isinstance(item, dict):
            raise CodecError("a pod set must be an object")
        requests = _get(item, "requests", dict)
        flavors = _get(item, "flavors", dict)
        out.append(PodSetFacts(
            _get(item, "name", str), _get(item, "count", int),
            tuple(sorted((str(k), int(v)) for k, v in requests.items())),
            tuple(sorted((str(k), str(v)) for k, v in flavors.items())),
        ))
    return tuple(out)


def stats_from(raw: Any) -> tuple[tuple[str, str, int], ...]:
    if not isinstance(raw, list):
        raise CodecError("eviction stats must be a list")
    out = []
    for item in raw:
        if not (isinstance(item, list) and len(item) == 3 and isinstance(item[2], int)):
            raise CodecError(f"an eviction stat must be [reason, cause, count] (got {item!r:.60})")
        out.append((str(item[0]), str(item[1]), item[2]))
    return tuple(sorted(out))


# --- spool lines -----------------------------------------------------------------------------------------


def _cond_json(c: Cond | None) -> list[Any] | None:
    return None if c is None else [c.status, c.reason, c.message, c.at_ms]


def _cond_from(raw: Any, key: str) -> Cond | None:
    if raw is None:
        return None
    if not (isinstance(raw, list) and len(raw) == 4 and isinstance(raw[0], bool) and isinstance(raw[3], int)):
        raise CodecError(f"field {key!r} must be [status, reason, message, at_ms]")
    return Cond(raw[0], str(raw[1]), str(raw[2]), raw[3])


_IDENTITY_STR = ("namespace", "name", "local_queue")
_IDENTITY_OPT = ("team", "owner_kind", "owner_name", "user", "priority_class", "project", "team_label",
                 "cost_center")
_CONDS = ("quota_reserved", "admitted", "evicted", "preempted", "finished")


def encode(item: SpoolItem) -> dict[str, Any]:
    """The JSON object of one spool record."""
    if isinstance(item, WorkloadFacts):
        ident = item.identity
        return {
            "v": FORMAT, "type": "workload", "uid": item.uid,
            "identity": {**{k: getattr(ident, k) for k in _IDENTITY_STR + _IDENTITY_OPT},
                         "priority": ident.priority, "labels": dict(ident.labels)},
            "pod_sets": pod_sets_json(item.pod_sets), "submitted_ms": item.submitted_ms,
            "observed_ms": item.observed_ms, "held": held_json(item.held),
            "reserved": held_json(item.reserved),
            **{k: _cond_json(getattr(item, k)) for k in _CONDS},
            "deleted_ms": item.deleted_ms, "accumulated_s": item.accumulated_s,
            "evictions": [list(e) for e in item.evictions],
        }
    if isinstance(item, QuotaChange):
        return {"v": FORMAT, "type": "quota", "team": item.team, "flavor": item.flavor,
                "resource": item.resource, "nominal": item.nominal, "borrowing_limit": item.borrowing_limit,
                "lending_limit": item.lending_limit, "at": item.at, "policy": item.policy,
                "generation": item.generation}
    if isinstance(item, WorkloadGone):
        return {"v": FORMAT, "type": "gone", "uid": item.uid, "at": item.at}
    if isinstance(item, ActivityRecord):
        return {"v": FORMAT, "type": "activity", "uid": item.uid, "resource": item.resource,
                "parts": [list(m) for m in item.parts]}
    return {"v": FORMAT, "type": "audit", "at": item.at, "action": item.action,
            "target_kind": item.target_kind, "target_namespace": item.target_namespace,
            "target_name": item.target_name, "what": item.what, "why": item.why, "policy": item.policy,
            "policy_generation": item.policy_generation, "editor": item.editor, "team": item.team,
            "fact": item.fact, "local_queue": item.local_queue, "project": item.project, "user": item.user}


def decode(raw: Any) -> SpoolItem:
    """The record of one spool JSON object (CodecError if it is not one this version wrote)."""
    if not isinstance(raw, dict):
        raise CodecError("a spool record must be a JSON object")
    version = raw.get("v")
    if version not in _READ or isinstance(version, bool):
        raise CodecError(f"spool record format {version!r} is not {FORMAT} (written by another version)")
    kind = raw.get("type")
    if kind == "workload":
        ident = _get(raw, "identity", dict)
        labels = _get(ident, "labels", dict)
        identity = Identity(
            **{k: _get(ident, k, str) for k in _IDENTITY_STR},
            **{k: _get(ident, k, str, optional=True) for k in _IDENTITY_OPT},
            priority=_get(ident, "priority", int),
            labels=tuple(sorted((str(k), str(v)) for k, v in labels.items())),
        )
        return WorkloadFacts(
            uid=_get(raw, "uid", str), identity=identity, pod_sets=pod_sets_from(raw.get("pod_sets")),
            submitted_ms=_get(raw, "submitted_ms", int), observed_ms=_get(raw, "observed_ms", int),
            held=held_from(raw.get("held"), version=version),
            reserved=held_from(raw.get("reserved", []), version=version),
            **{k: _cond_from(raw.get(k), k) for k in _CONDS},
            deleted_ms=_get(raw, "deleted_ms", int, optional=True),
            accumulated_s=_get(raw, "accumulated_s", int, optional=True),
            evictions=stats_from(raw.get("evictions")),
        )
    if kind == "quota":
        return QuotaChange(
            team=_get(raw, "team", str), flavor=_get(raw, "flavor", str),
            resource=_get(raw, "resource", str), nominal=_get(raw, "nominal", int),
            borrowing_limit=_get(raw, "borrowing_limit", int, optional=True),
            lending_limit=_get(raw, "lending_limit", int, optional=True),
            at=float(_get(raw, "at", (int, float))), policy=_get(raw, "policy", str, optional=True),
            generation=_get(raw, "generation", int, optional=True),
        )
    if kind == "audit":
        return AuditEntry(
            at=float(_get(raw, "at", (int, float))), action=_get(raw, "action", str),
            target_kind=_get(raw, "target_kind", str), target_name=_get(raw, "target_name", str),
            what=_get(raw, "what", str), why=_get(raw, "why", str), policy=_get(raw, "policy", str),
            target_namespace=_get(raw, "target_namespace", str, optional=True),
            policy_generation=_get(raw, "policy_generation", int, optional=True),
            editor=_get(raw, "editor", str, optional=True), team=_get(raw, "team", str, optional=True),
            fact=_get(raw, "fact", str, optional=True),
            local_queue=_get(raw, "local_queue", str, optional=True),
            project=_get(raw, "project", str, optional=True), user=_get(raw, "user", str, optional=True),
        )
    if kind == "gone":
        return WorkloadGone(uid=_get(raw, "uid", str), at=float(_get(raw, "at", (int, float))))
    if kind == "activity":
        parts = _get(raw, "parts", list)
        if not all(isinstance(m, list) and len(m) == 4 and all(isinstance(x, int) and not isinstance(x, bool)
                                                                for x in m) for m in parts):
            raise CodecError("field parts: expected [[start_ms, end_ms, measured_ms, active_ms], ...] of "
                             "integers")
        return ActivityRecord(uid=_get(raw, "uid", str), resource=_get(raw, "resource", str),
                              parts=tuple((m[0], m[1], m[2], m[3]) for m in parts))
    raise CodecError(f"unknown spool record type {kind!r}")
