"""Read a QuotaPolicy from a dict (API server, in-memory) or YAML (file, string) into the validated model.

Every entry point runs the pydantic schema and then the cross-field rules (`semantics.check_spec`), and turns
any failure into one InputError naming file, document, field path and value: never a traceback.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml
from pydantic import ValidationError

from fairshare.errors import InputError, Location

from .model import API_VERSION, KIND, QuotaPolicy
from .semantics import check_spec

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_GOT_SUFFIX = re.compile(r" \(got .*\)$")


def field_path(loc: Sequence[int | str]) -> str:
    """A pydantic error location as a dotted Kubernetes-style path: spec.teams[0].quotas[1].flavor."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENT.match(part):
            out += f".{part}" if out else part
        else:  # a map key such as nvidia.com/gpu
            out += f"[{part!r}]"
    return out


def _from_validation_error(err: ValidationError) -> InputError:
    first = err.errors(include_url=False)[0]
    loc = [p for p in first["loc"] if p != "[key]"]  # pydantic marks a bad map key with a "[key]" step
    message = first["msg"].removeprefix("Value error, ")
    path = field_path(loc)
    if first["type"] == "missing":
        return InputError("required field is missing", location=Location(field=path))
    if first["type"] == "extra_forbidden":
        return InputError("unknown field (check its spelling and camelCase)", location=Location(field=path))
    # The validators quote the value themselves; InputError quotes it once in one_line().
    message = _GOT_SUFFIX.sub("", message)
    return InputError(message, location=Location(field=path), value=first.get("input"), has_value=True)


def _describe(obj: Mapping[str, object]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return f"{obj.get('kind', 'object')} {name}" if name else str(obj.get("kind", "object"))


def parse_policy(obj: object, *, file: str | None = None, document: str | None = None) -> QuotaPolicy:
    """Validate one QuotaPolicy object (a dict as the API server or YAML gives it)."""
    if not isinstance(obj, Mapping):
        raise InputError("a QuotaPolicy must be a mapping", location=Location(file=file, document=document),
                         value=type(obj).__name__)
    document = document or _describe(obj)
    try:
        if obj.get("apiVersion") != API_VERSION or obj.get("kind") != KIND:
            raise InputError(f"expected apiVersion {API_VERSION} and kind {KIND}",
                             location=Location(field="apiVersion/kind"),
                             value=f"{obj.get('apiVersion')}/{obj.get('kind')}")
        try:
            policy = QuotaPolicy.model_validate(dict(obj))
        except ValidationError as err:
            raise _from_validation_error(err) from None
        check_spec(policy.spec)
    except InputError as err:
        raise err.at(file=file, document=document) from None
    return policy


def load_policies_yaml(text: str, *, file: str | None = None) -> list[QuotaPolicy]:
    """Every QuotaPolicy in a (multi-document) YAML text; other kinds are ignored, empty documents skipped."""
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else None
        raise InputError(f"not valid YAML: {getattr(err, 'problem', None) or err}",
                         location=Location(file=file, document=where)) from None
    policies = []
    for index, doc in enumerate(documents, start=1):
        if doc is None:
            continue
        if isinstance(doc, Mapping) and doc.get("kind") not in (KIND, None):
            continue
        policies.append(parse_policy(doc, file=file,
                                     document=f"document {index}" + (f" ({_describe(doc)})"
                                                                     if isinstance(doc, Mapping) else "")))
    return policies


def load_policy_yaml(text: str, *, file: str | None = None) -> QuotaPolicy:
    """Exactly one QuotaPolicy from a YAML text."""
    policies = load_policies_yaml(text, file=file)
    if len(policies) != 1:
        raise InputError(f"expected exactly one {KIND}", location=Location(file=file), value=len(policies))
    return policies[0]


def load_policy_file(path: str | Path) -> QuotaPolicy:
    """Exactly one QuotaPolicy from a YAML file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise InputError(f"cannot read file: {err.strerror}", location=Location(file=str(path))) from None
    return load_policy_yaml(text, file=str(path))
