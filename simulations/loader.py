"""Read a scenario file; turn every validation problem into one InputError line.

Variants are JSON merge patches (RFC 7386) over the base document: a variant's
scenario is validated as a whole, so an error inside it names the variant.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from fairshare.errors import InputError, Location

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


def field_path(loc: tuple[int | str, ...]) -> str:
    """pydantic's loc tuple as a dotted path with [i] indices (discriminator tags dropped)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in {"poisson", "diurnal", "exponential", "lognormal", "empirical", "constant"}:
            continue  # the union member pydantic tried: not a field name
        else:
            out += f".{part}" if out else str(part)
    return out


def validation_error(err: ValidationError, *, file: str, prefix: str | None = None) -> InputError:
    first = err.errors()[0]
    path = field_path(tuple(first["loc"]))
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
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(f"cannot read scenario: {err.strerror}", location=Location(file=str(path))) from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or "invalid YAML"
        raise InputError(f"{problem}{where}", location=Location(file=str(path))) from None
    if not isinstance(doc, dict):
        raise InputError("a scenario is a YAML mapping", location=Location(file=str(path)))
    return doc


def load_scenario(path: str | Path) -> LoadedScenario:
    """Parse and validate a scenario and every variant; raises InputError (one line)."""
    p = Path(path)
    raw = read_yaml(p)
    file = str(p)
    try:
        base = Scenario.model_validate(raw)
    except ValidationError as err:
        raise validation_error(err, file=file) from None
    resolved: list[ResolvedVariant] = []
    if not base.variants:
        resolved.append(ResolvedVariant(base.name, base.description, True, base))
    else:
        raw_base = {k: v for k, v in raw.items() if k not in ("variants", "baseline")}
        baseline = base.baseline or base.variants[0].name
        for i, variant in enumerate(base.variants):
            merged = merge_patch(raw_base, variant.overrides)
            try:
                scenario = Scenario.model_validate(merged)
            except ValidationError as err:
                raise validation_error(
                    err, file=file, prefix=f"variants[{i}] ({variant.name}) overrides"
                ) from None
            resolved.append(
                ResolvedVariant(variant.name, variant.description, variant.name == baseline, scenario)
            )
    return LoadedScenario(path=p, base=base, variants=tuple(resolved))
