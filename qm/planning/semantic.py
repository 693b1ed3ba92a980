"""A semantic diff of two versions of one Kubernetes object: what changes, field by field, and nothing else.

`kubectl diff` prints a textual diff of two YAML renderings; `qm plan` compares the objects themselves:

- **Defaults**: both sides get the CRD schema's defaults first (`defaulted`, the API server's structural
  defaulting: a property with a `default` that is absent is set, recursively through `properties`, `items`
  and `additionalProperties`; apiextensions-apiserver pkg/apiserver/schema/defaulting/algorithm.go). A
  field the server defaulted and the file leaves out is not a change; neither is a default written out.
- **Order**: mappings compare by key. A list the schema declares `x-kubernetes-list-type: map` matches
  its items by their map keys wherever they stand (the API server's own identity of such items; without a
  schema, a list of mappings with a unique `name` each is matched by name), a `set` compares as a set, any
  other list item by item.
- **Values**: a quantity compares by value ("4" = 4 = "4000m", queue_manager.ownership's rule).

Each change is one line with its path, lists of named items by their names:
`~ spec.teams[research].quotas[gpu].resources[nvidia.com/gpu].nominal: 4 -> 1`, `+ PATH: VALUE` (added),
`- PATH: VALUE` (removed).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from queue_manager.ownership import differs_from_desired

Op = Literal["~", "+", "-"]
Schema = Mapping[str, Any]
_ABSENT = object()


@dataclass(frozen=True)
class Change:
    op: Op  # ~ changed, + added, - removed
    path: str
    before: Any = None  # None for an added field
    after: Any = None  # None for a removed one

    def line(self) -> str:
        if self.op == "~":
            return f"~ {self.path}: {show(self.before)} -> {show(self.after)}"
        return f"{self.op} {self.path}: {show(self.after if self.op == '+' else self.before)}"

    def document(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": {"~": "change", "+": "add", "-": "remove"}[self.op], "path": self.path}
        if self.op != "+":
            out["before"] = self.before
        if self.op != "-":
            out["after"] = self.after
        return out


def show(value: Any) -> str:
    """A value on one line, as YAML writes it (flow style: strings that look like numbers keep quotes)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**9, sort_keys=False).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


@functools.cache
def policy_spec_schema() -> dict[str, Any]:
    """The QuotaPolicy CRD's schema of `spec` (generated from the model, as manifests/crd is)."""
    from fairshare.policy.crd import openapi_schema

    props = openapi_schema().get("properties")
    spec = props.get("spec") if isinstance(props, Mapping) else None
    return dict(spec) if isinstance(spec, Mapping) else {}


def defaulted(value: Any, schema: Schema | None) -> Any:
    """`value` with the schema's defaults set where absent (a copy; the API server's algorithm)."""
    if schema is None:
        return copy.deepcopy(value)
    if isinstance(value, Mapping):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        out: dict[str, Any] = {}
        for key, sub in value.items():
            sub_schema = props.get(key) if isinstance(props, Mapping) else None
            if sub_schema is None and isinstance(extra, Mapping):
                sub_schema = extra
            out[key] = defaulted(sub, sub_schema)
        if isinstance(props, Mapping):
            for key, sub_schema in props.items():
                if key not in out and isinstance(sub_schema, Mapping) and "default" in sub_schema:
                    out[key] = defaulted(copy.deepcopy(sub_schema["default"]), sub_schema)
        return out
    if isinstance(value, list):
        items = schema.get("items")
        return [defaulted(v, items if isinstance(items, Mapping) else None) for v in value]
    return value


def changes(before: Any, after: Any, schema: Schema | None = None, path: str = "") -> list[Change]:
    """What turns `before` into `after` (module docstring), in the order of `after`'s fields."""
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        props = schema.get("properties") if schema is not None else None
        extra = schema.get("additionalProperties") if schema is not None else None
        out: list[Change] = []
        keys = [*after, *(k for k in before if k not in after)]
        for key in keys:
            sub_schema = props.get(key) if isinstance(props, Mapping) else None
            if sub_schema is None and isinstance(extra, Mapping):
                sub_schema = extra
            sub = f"{path}.{key}" if path else str(key)
            out += changes(before.get(key, _ABSENT), after.get(key, _ABSENT), sub_schema, sub)
        return out
    if before is _ABSENT:
        return [] if after is _ABSENT else [Change("+", p, None, v) for p, v in leaves(after, schema, path)]
    if after is _ABSENT:
        return [Change("-", p, v, None) for p, v in leaves(before, schema, path)]
    if isinstance(before, list) and isinstance(after, list):
        return _list_changes(before, after, schema, path)
    if isinstance(before, Mapping | list) or isinstance(after, Mapping | list):
        return [] if before == after else [Change("~", path, before, after)]
    return [] if not differs_from_desired(after, before) else [Change("~", path, before, after)]


def leaves(value: Any, schema: Schema | None = None, path: str = "") -> list[tuple[str, Any]]:
    """(path, value) of every field of `value` that is not itself a mapping (an added or removed object, one
    line a field); a list of named items goes item by item, any other list is one value."""
    if isinstance(value, Mapping) and value:
        props = schema.get("properties") if schema is not None else None
        extra = schema.get("additionalProperties") if schema is not None else None
        out: list[tuple[str, Any]] = []
        for key, sub in value.items():
            sub_schema = props.get(key) if isinstance(props, Mapping) else None
            if sub_schema is None and isinstance(extra, Mapping):
                sub_schema = extra
            out += leaves(sub, sub_schema, f"{path}.{key}" if path else str(key))
        return out
    if isinstance(value, list) and value:
        keys = _map_keys(schema, value, value)
        if keys is not None:
            items = schema.get("items") if schema is not None else None
            items = items if isinstance(items, Mapping) else None
            out = []
            for item in value:
                out += leaves(_unnamed(item, keys), items, f"{path}[{_label(_identity(item, keys), keys)}]")
            return out
    return [(path, value)]


def _list_changes(before: list[Any], after: list[Any], schema: Schema | None, path: str) -> list[Change]:
    items = schema.get("items") if schema is not None else None
    items = items if isinstance(items, Mapping) else None
    kind = schema.get("x-kubernetes-list-type") if schema is not None else None
    if kind == "set":
        if _same_set(before, after):
            return []
        return [Change("~", path, before, after)]
    keys = _map_keys(schema, before, after)
    if keys is None:
        scalars = not any(isinstance(x, Mapping | list) for x in (*before, *after))
        if scalars or len(before) != len(after):
            return [Change("~", path, before, after)] if before != after else []
        out: list[Change] = []
        for i, (a, b) in enumerate(zip(before, after, strict=True)):
            out += changes(a, b, items, f"{path}[{i}]")
        return out
    old = {_identity(item, keys): item for item in before}
    new = {_identity(item, keys): item for item in after}
    out = []
    for ident, item in new.items():
        sub = f"{path}[{_label(ident, keys)}]"
        out += changes(old[ident], item, items, sub) if ident in old else \
            changes(_ABSENT, _unnamed(item, keys), items, sub)
    for ident, item in old.items():
        if ident not in new:
            out += changes(_unnamed(item, keys), _ABSENT, items, f"{path}[{_label(ident, keys)}]")
    return out


def _unnamed(item: Mapping[str, Any], keys: tuple[str, ...]) -> Mapping[str, Any]:
    """An item without the keys its path already names (unless that is all it has)."""
    return {k: v for k, v in item.items() if k not in keys} or item


def _map_keys(schema: Schema | None, before: Sequence[Any], after: Sequence[Any]) -> tuple[str, ...] | None:
    """The keys that identify an item: the schema's list-map keys, else `name` when every item is a mapping
    with a distinct one; None: compare by position."""
    if schema is not None and schema.get("x-kubernetes-list-type") == "map":
        declared = schema.get("x-kubernetes-list-map-keys")
        if isinstance(declared, list) and declared:
            keys = tuple(str(k) for k in declared)
            if all(_keyed(side, keys) for side in (before, after)):
                return keys
        return None
    if schema is None and all(_keyed(side, ("name",)) for side in (before, after)) and (before or after):
        return ("name",)
    return None


def _keyed(items: Sequence[Any], keys: tuple[str, ...]) -> bool:
    if not all(isinstance(i, Mapping) and all(k in i for k in keys) for i in items):
        return False
    idents = [_identity(i, keys) for i in items]
    return len(set(idents)) == len(idents)


def _identity(item: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(show(item.get(k)) for k in keys)


def _label(ident: tuple[str, ...], keys: tuple[str, ...]) -> str:
    if len(keys) == 1:
        return ident[0]
    return ",".join(f"{k}={v}" for k, v in zip(keys, ident, strict=True))


def _same_set(a: list[Any], b: list[Any]) -> bool:
    return sorted(show(x) for x in a) == sorted(show(x) for x in b)
