"""The located field readers every kind's parser uses: each reads one field of a manifest and raises an
`InputError` naming the file, the document (index, kind, name), the field path and the value, or an
`UnsupportedError` ("unsupported: <field>") for a field that changes admission but is not modelled."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar, cast

from fairshare.errors import InputError, Location, UnsupportedError
from fairshare.models import (
    AdmissionMode,
    BorrowWithinCohortPolicy,
    FungibilityPolicy,
    FungibilityPreference,
    QueueingStrategy,
    ReclaimWithinCohort,
    StopPolicy,
    WithinClusterQueue,
)
from fairshare.quantity import parse_quantity

_INT32_MIN = -(2**31)
_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Ctx:
    file: str | None
    document: str

    def err(self, message: str, path: str, value: object = None, *, has_value: bool = False) -> InputError:
        return InputError(
            message,
            location=Location(self.file, self.document, path or None),
            value=value,
            has_value=has_value,
        )

    def unsupported(self, path: str) -> UnsupportedError:
        return UnsupportedError(f"unsupported: {path}", location=Location(self.file, self.document, path))


def join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def field_map(
    ctx: Ctx, parent: Mapping[str, object], key: str, prefix: str = "", *, required: bool = False
) -> dict[str, object]:
    value = parent.get(key)
    if value is None:
        if required:
            raise ctx.err("required field is missing", join(prefix, key))
        return {}
    if not isinstance(value, dict):
        raise ctx.err("must be a mapping", join(prefix, key), value)
    return cast(dict[str, object], value)


def field_list(
    ctx: Ctx, parent: Mapping[str, object], key: str, prefix: str = "", *, required: bool = False
) -> list[object]:
    value = parent.get(key)
    if value is None:
        if required:
            raise ctx.err("required field is missing", join(prefix, key))
        return []
    if not isinstance(value, list):
        raise ctx.err("must be a list", join(prefix, key), value)
    return cast(list[object], value)


def item_map(ctx: Ctx, item: object, path: str) -> dict[str, object]:
    if not isinstance(item, dict):
        raise ctx.err("must be a mapping", path, item)
    return cast(dict[str, object], item)


def field_str(
    ctx: Ctx,
    parent: Mapping[str, object],
    key: str,
    prefix: str = "",
    *,
    default: str | None = None,
    required: bool = False,
) -> str | None:
    value = parent.get(key)
    if value is None:
        if required:
            raise ctx.err("required field is missing", join(prefix, key))
        return default
    if not isinstance(value, str) or (required and not value):
        raise ctx.err(
            "must be a non-empty string" if required else "must be a string", join(prefix, key), value
        )
    return value


def field_name(ctx: Ctx, meta: Mapping[str, object], prefix: str) -> str:
    value = field_str(ctx, meta, "name", prefix, required=True)
    if value is None:  # pragma: no cover - required
        raise ctx.err("required field is missing", join(prefix, "name"))
    return value


def field_int(
    ctx: Ctx, parent: Mapping[str, object], key: str, prefix: str = "", *, default: int | None = None
) -> int | None:
    value = parent.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ctx.err("must be an integer", join(prefix, key), value)
    if not _INT32_MIN <= value <= _INT32_MAX:
        # Every integer field Kueue reads here (priority, count, minCount, value, thresholds) is an int32.
        raise ctx.err("must be a 32-bit integer (-2147483648 to 2147483647)", join(prefix, key), value)
    return value


def field_qty(
    ctx: Ctx, parent: Mapping[str, object], key: str, prefix: str = "", *, nonnegative: bool = True
) -> int | None:
    value = parent.get(key)
    if value is None:
        return None
    path = join(prefix, key)
    try:
        q = parse_quantity(cast(str, value))
    except InputError as err:
        raise ctx.err(err.message, path, value) from None
    if nonnegative and q < 0:
        raise ctx.err("must not be negative", path, value)
    return q


E = TypeVar(
    "E",
    QueueingStrategy,
    WithinClusterQueue,
    ReclaimWithinCohort,
    BorrowWithinCohortPolicy,
    FungibilityPolicy,
    FungibilityPreference,
    StopPolicy,
    AdmissionMode,
)


def field_enum(ctx: Ctx, parent: Mapping[str, object], key: str, prefix: str, enum: type[E], default: E) -> E:
    value = parent.get(key)
    if value is None:
        return default
    try:
        return enum(str(value))
    except ValueError:
        allowed = ", ".join(e.value for e in enum)
        raise ctx.err(f"must be one of {allowed}", join(prefix, key), value) from None


def field_str_map(ctx: Ctx, parent: Mapping[str, object], key: str, prefix: str = "") -> dict[str, str]:
    raw = field_map(ctx, parent, key, prefix)
    out: dict[str, str] = {}
    for k, v in raw.items():
        if not isinstance(v, str):
            raise ctx.err("must be a string", join(join(prefix, key), str(k)), v)
        out[str(k)] = v
    return out


def field_time(ctx: Ctx, parent: Mapping[str, object], key: str, prefix: str = "") -> float | None:
    value = parent.get(key)
    if value is None:
        return None
    return parse_time(value, ctx=ctx, path=join(prefix, key))


def parse_time(value: object, *, ctx: Ctx | None = None, path: str = "") -> float:
    """RFC 3339 text (or a YAML timestamp) as float seconds since the epoch."""
    if isinstance(value, _dt.datetime):
        moment = value
    elif isinstance(value, _dt.date):  # YAML reads `2026-01-01` as a date: RFC 3339 needs a time of day
        shown = value.isoformat()
        if ctx is None:
            raise InputError("not an RFC 3339 time (a date without a time of day)", value=shown)
        raise ctx.err("not an RFC 3339 time (a date without a time of day)", path, shown)
    elif isinstance(value, str):
        try:
            moment = _dt.datetime.fromisoformat(value.strip().replace("z", "Z"))
        except ValueError:
            if ctx is None:
                raise InputError("not an RFC 3339 time", value=value) from None
            raise ctx.err("not an RFC 3339 time", path, value) from None
    else:
        if ctx is None:
            raise InputError("not an RFC 3339 time", value=value)
        raise ctx.err("not an RFC 3339 time", path, value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.UTC)
    return moment.timestamp()


def field_weight(ctx: Ctx, spec: Mapping[str, object], prefix: str) -> int:
    fs = field_map(ctx, spec, "fairSharing", prefix)
    w = field_qty(ctx, fs, "weight", join(prefix, "fairSharing"))
    return 1000 if w is None else w
