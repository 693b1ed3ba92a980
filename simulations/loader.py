"""Read a scenario file; turn every validation problem into one InputError line.

Variants are JSON merge patches (RFC 7386) over the base document: a variant's
scenario is validated as a whole, so an error inside it names the variant.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fairshare.errors import InputError, Location, field_path
from fairshare.policy.patch import patch_policy
from fairshare.yamlfile import load_yaml_one

from .cluster import policy_document, policy_timeline
from .scenario import Scenario


@dataclass(frozen=True, slots=True)
class ResolvedVariant:
    """One arm of a what-if: its name, whether it is the baseline, its full scenario."""

    name: str
    description: str
    baseline: bool
    scenario: Scenario


@dataclass(frozen=True, slots=True)
class LoadedScenario:
    path: Path
    base: Scenario
    variants: tuple[ResolvedVariant, ...]

    @property
    def directory(self) -> Path:
        return self.path.parent


# Tags of the discriminated unions in scenario files: pydantic puts the member it tried in the location.
_UNION_TAGS = frozenset(
    {"poisson", "diurnal", "profile", "exponential", "lognormal", "empirical", "constant"})


def validation_error(err: ValidationError, *, file: str, prefix: str | None = None) -> InputError:
    first = err.errors()[0]
    path = field_path(first["loc"], skip=_UNION_TAGS)
    if prefix:
        path = f"{prefix}.{path}" if path else prefix
    msg = first["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    extra = f" (and {err.error_count() - 1} more problems)" if err.error_count() > 1 else ""
    value = first.get("input")
    show_value = first["type"] not in {"missing"} and not isinstance(value, dict | list)
    return InputError(
        msg + extra,
        location=Location(file=file, field=path or None),
        value=value if show_value else None,
        has_value=show_value,
    )


def merge_patch(target: object, patch: object) -> object:
    """RFC 7386 JSON merge patch: dicts merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def read_yaml(path: Path) -> dict[str, Any]:
    """The scenario document, read by the project's one file reader (size, binary, encoding, depth,
    duplicate keys: each a one-line error)."""
    return dict(load_yaml_one(str(path), what="a scenario (a YAML mapping)"))


def _with_policy_patch(
    raw: dict[str, Any], patch: dict[str, Any], base_dir: Path, where: str
) -> dict[str, Any]:
    """The scenario with its QuotaPolicy patched from t=0 (a variant's policyPatch)."""
    cluster = dict(raw.get("cluster") or {})
    source = cluster.get("quotaPolicy")
    if source is None:
        raise InputError("a policyPatch needs cluster.quotaPolicy", location=Location(field=where))
    doc = policy_document(source, base_dir, where="cluster.quotaPolicy")
    cluster["quotaPolicy"] = patch_policy(doc, patch, where=where)
    return {**raw, "cluster": cluster}


def _check_policy(scenario: Scenario, base_dir: Path, file: str, variant: str | None) -> None:
    """The QuotaPolicy and each of its edits parse and can be simulated: bad ones fail at load time,
    naming the variant, not in the middle of a run."""
    try:
        policy_timeline(scenario, base_dir)
    except InputError as err:
        raise err.at(file=file, field_prefix=variant) from None


def load_scenario(path: str | Path) -> LoadedScenario:
    """Parse and validate a scenario and every variant; raises InputError (one line)."""
    p = Path(path)
    return load_document(read_yaml(p), p)


def load_document(raw: dict[str, Any], p: Path) -> LoadedScenario:
    """A scenario document made in memory (qm plan) as if read from `p` (relative paths, error lines)."""
    file = str(p)
    try:
        base = Scenario.model_validate(raw)
    except ValidationError as err:
        raise validation_error(err, file=file) from None
    resolved: list[ResolvedVariant] = []
    _check_policy(base, p.parent, file, None)  # a mistake in the shared part is named once, without a variant
    if not base.variants:
        resolved.append(ResolvedVariant(base.name, base.description, True, base))
    else:
        raw_base = {k: v for k, v in raw.items() if k not in ("variants", "baseline")}
        baseline = base.baseline or base.variants[0].name
        for i, variant in enumerate(base.variants):
            merged = merge_patch(raw_base, variant.overrides)
            if variant.policy_patch is not None and isinstance(merged, dict):
                where = f"variants[{i}] ({variant.name}).policyPatch"
                try:
                    merged = _with_policy_patch(merged, variant.policy_patch, p.parent, where)
                except InputError as err:
                    raise err.at(file=file) from None
            try:
                scenario = Scenario.model_validate(merged)
            except ValidationError as err:
                raise validation_error(
                    err, file=file, prefix=f"variants[{i}] ({variant.name}) overrides"
                ) from None
            _check_policy(scenario, p.parent, file, f"variants[{i}] ({variant.name})")
            resolved.append(
                ResolvedVariant(variant.name, variant.description, variant.name == baseline, scenario)
            )
    return LoadedScenario(path=p, base=base, variants=tuple(resolved))
