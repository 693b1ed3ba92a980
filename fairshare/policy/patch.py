"""Edits of a QuotaPolicy as patches: what a scenario's `policyPatch` (and `qm plan`) applies.

A patch is a JSON merge patch (RFC 7386: objects merge recursively, `null` deletes a key, any other value
replaces), except that the lists the CRD declares as maps (`x-kubernetes-list-type: map`: teams and
flavors and priority classes by `name`, a team's quotas by `flavor`, a flavor's resources by `name`) merge
item by item by their key, as `kubectl apply --server-side` merges them. So cutting one team's GPUs is

    {spec: {teams: [{name: ai-frontier-research, quotas: [{flavor: gpu, resources:
                     [{name: nvidia.com/gpu, nominal: 1}]}]}]}}

and the other teams, flavors and resources stay as they are. An item `{name: x, $patch: delete}` removes
that entry; a new key appends a new entry.
"""

from __future__ import annotations

import copy
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any

from pydantic import BaseModel

from fairshare.errors import InputError, Location

from .model import QuotaPolicySpec

DELETE = "$patch"


@cache
def list_map_keys() -> dict[tuple[str, ...], str]:
    """Path of field names (camelCase, from `spec`) -> the key of each list-map the CRD declares."""
    out: dict[tuple[str, ...], str] = {}

    def walk(model: type[BaseModel], path: tuple[str, ...]) -> None:
        for name, info in model.model_fields.items():
            alias = info.alias or name
            sub = (*path, alias)
            extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
            keys = extra.get("x-kubernetes-list-map-keys")
            if isinstance(keys, list) and len(keys) == 1:
                out[sub] = str(keys[0])
            for arg in _models_in(info.annotation):
                walk(arg, sub)

    walk(QuotaPolicySpec, ("spec",))
    return out


def _models_in(annotation: object) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found.extend(_models_in(arg))
    return found


def patch_policy(doc: Mapping[str, Any], patch: Mapping[str, Any], *,
                 where: str = "policyPatch") -> dict[str, Any]:
    """`doc` (a QuotaPolicy as a dict) with `patch` applied; `where` names the patch in errors."""
    if not isinstance(patch, Mapping):
        raise InputError("a policy patch is an object (a partial QuotaPolicy)",
                         location=Location(field=where), value=type(patch).__name__)
    result = _merge(dict(doc), patch, (), where)
    return result if isinstance(result, dict) else {}


def _merge(target: object, patch: object, path: tuple[str, ...], where: str) -> object:
    if isinstance(patch, Mapping):
        out: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
        for key, value in patch.items():
            if value is None:
                out.pop(key, None)
                continue
            sub = (*path, str(key))
            map_key = list_map_keys().get(sub)
            if map_key is not None and isinstance(value, list):
                out[key] = _merge_list_map(out.get(key), value, sub, map_key, f"{where}.{'.'.join(sub)}")
            else:
                out[key] = _merge(out.get(key), value, sub, where)
        return out
    return copy.deepcopy(patch)


def _merge_list_map(target: object, items: list[Any], path: tuple[str, ...], key: str,
                    where: str) -> list[Any]:
    current: list[Any] = [copy.deepcopy(x) for x in target] if isinstance(target, list) else []
    for i, item in enumerate(items):
        if not isinstance(item, Mapping) or key not in item:
            raise InputError(f"each entry names its {key} (this list merges by {key})",
                             location=Location(field=f"{where}[{i}]"), value=item)
        at = next((j for j, old in enumerate(current)
                   if isinstance(old, Mapping) and old.get(key) == item[key]), None)
        if item.get(DELETE) == "delete":
            if at is None:
                raise InputError(f"no entry with {key} {item[key]!r} to delete",
                                 location=Location(field=f"{where}[{i}]"), value=item[key])
            del current[at]
            continue
        body = {k: v for k, v in item.items() if k != DELETE}
        if at is None:
            current.append(_merge({}, body, path, where))
        else:
            current[at] = _merge(current[at], body, path, where)
    return current
