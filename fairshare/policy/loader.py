"""Read a QuotaPolicy from a dict (API server, in-memory) or YAML (file, string) into the validated model.

Every entry point runs the pydantic schema and then the cross-field rules (`semantics.check_spec`), and turns
any failure into one InputError naming file, document, field path and value: never a traceback.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from fairshare.errors import InputError, Location, field_path
from fairshare.yamlfile import load_yaml_text, read_text_file

from .idle_spec import PROMETHEUS_URL
from .model import API_VERSION, COHORT_PATH, FORECAST_METRIC_PATTERN, FORECAST_METRICS, KIND, QuotaPolicy
from .names import DNS_LABEL, DNS_SUBDOMAIN, LABEL_KEY, LABEL_VALUE, RESOURCE_NAME
from .semantics import check_spec

_GOT_SUFFIX = re.compile(r" \(got .*\)$")
_PLAIN_MESSAGES = {
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "dict_type": "must be a mapping",
    "list_type": "must be a list",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
}

# A regular expression is no answer to a person: say what the name must look like.
_PATTERN_MESSAGES = {
    DNS_LABEL: "must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or "
               "digit",
    DNS_SUBDOMAIN: "must be a DNS subdomain: DNS labels joined by '.'",
    RESOURCE_NAME: "must be a resource name such as cpu, memory or nvidia.com/gpu",
    COHORT_PATH: "must be a cohort path: DNS labels joined by '/', root first (e.g. org/gpu)",
    LABEL_KEY: "must be a label key: an optional DNS-subdomain prefix and '/', then at most 63 letters, "
               "digits, '-', '_' or '.' (e.g. cost-center, example.com/project)",
    LABEL_VALUE: "must be a label value: at most 63 letters, digits, '-', '_' or '.', starting and ending "
                 "with a letter or digit",
    FORECAST_METRIC_PATTERN: f"must be one of {', '.join(FORECAST_METRICS)}, optionally with [NAME]",
    PROMETHEUS_URL: "must be an http(s) URL of a Prometheus, e.g. http://prometheus.monitoring:9090",
}


def _from_validation_error(err: ValidationError) -> InputError:
    first = err.errors(include_url=False)[0]
    message = first["msg"].removeprefix("Value error, ")
    path = field_path(first["loc"])  # pydantic marks a bad map key with a "[key]" step: dropped
    if first["type"] == "missing":
        return InputError("required field is missing", location=Location(field=path))
    if first["type"] == "extra_forbidden":
        return InputError("unknown field (check its spelling and camelCase)", location=Location(field=path))
    # The validators quote the value themselves; InputError quotes it once in one_line().
    message = _GOT_SUFFIX.sub("", message)
    # pydantic's wording names Python types ("instance of QuotaPolicySpec"); say it in YAML terms.
    message = _PLAIN_MESSAGES.get(first["type"], message)
    if first["type"] == "string_pattern_mismatch":
        message = _PATTERN_MESSAGES.get(str((first.get("ctx") or {}).get("pattern")), message)
    ctx = first.get("ctx") or {}
    if first["type"] == "string_too_long" and path == "metadata.name":
        message = (f"must be at most {ctx.get('max_length')} characters (it is the value of the "
                   "queuemanager.dev/policy label on every object it renders)")
    if first["type"] in ("too_long", "too_short"):  # a list or a mapping
        longest = first["type"] == "too_long"
        bound = ctx.get("max_length" if longest else "min_length")
        message = f"must have at {'most' if longest else 'least'} {bound} entr{'y' if bound == 1 else 'ies'}"
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
    documents = load_yaml_text(text, file=file)
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
    if len(policies) == 1:
        return policies[0]
    if policies:
        raise InputError(f"expected exactly one {KIND}, found {len(policies)}", location=Location(file=file))
    kinds = _kinds(text)
    found = f"found only {', '.join(kinds)}" if kinds else "the file has no documents"
    raise InputError(f"expected exactly one {KIND} (apiVersion {API_VERSION}); {found}",
                     location=Location(file=file))


def _kinds(text: str) -> list[str]:
    """The distinct kinds of a YAML text's documents, in order (the text already parsed once)."""
    kinds: list[str] = []
    for doc in load_yaml_text(text):
        if doc is None:
            continue
        kind = doc.get("kind") if isinstance(doc, Mapping) else None
        shown = f"kind {kind}" if isinstance(kind, str) else "a document without a kind"
        if shown not in kinds:
            kinds.append(shown)
    return kinds


def load_policy_file(path: str | Path) -> QuotaPolicy:
    """Exactly one QuotaPolicy from a YAML file."""
    return load_policy_yaml(read_text_file(path), file=str(path))
