"""The CRD is generated from the pydantic model: committed file == generated, every field documented."""

from __future__ import annotations

import typing
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, WithJsonSchema

from fairshare.policy.crd import crd, crd_yaml
from fairshare.policy.model import QuotaPolicySpec
from fairshare.policy.status import QuotaPolicyStatus

from .helpers import REPO

CRD_FILE = REPO / "manifests" / "crd" / "quotapolicies.yaml"


def _schema() -> dict[str, Any]:
    versions: Any = crd()["spec"]
    return versions["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


def test_the_committed_crd_is_exactly_the_one_generated_from_the_model() -> None:
    # Regenerate with: .venv/bin/python -m fairshare.policy.crd > manifests/crd/quotapolicies.yaml
    assert CRD_FILE.read_text() == crd_yaml()


def _walk(node: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, sub in node.get("properties", {}).items():
        yield from _walk(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(node["additionalProperties"], f"{path}{{}}")


def test_every_field_has_a_description_so_kubectl_explain_documents_it() -> None:
    schema = _schema()
    undocumented = [path for root in ("spec", "status")
                    for path, node in _walk(schema["properties"][root], root)
                    if not path.endswith(("[]", "{}")) and not node.get("description")]
    assert undocumented == []


def test_every_node_is_structural() -> None:
    # Structural schema: every node has a type, unless it is int-or-string or preserves unknown fields.
    untyped = [path for path, node in _walk(_schema(), "")
               if "type" not in node and not node.get("x-kubernetes-int-or-string")
               and not node.get("x-kubernetes-preserve-unknown-fields")]
    assert untyped == []


def _model_paths(model: type[BaseModel], path: str) -> Iterator[str]:
    for name, info in model.model_fields.items():
        alias = info.alias or name
        sub = f"{path}.{alias}"
        yield sub
        if any(isinstance(m, WithJsonSchema) for m in info.metadata):
            continue  # typed in Python, opaque in the CRD (x-kubernetes-preserve-unknown-fields)
        for arg in _leaf_models(info.annotation):
            yield from _model_paths(arg, sub + ("[]" if _is_list(info.annotation) else ""))


def _is_list(annotation: object) -> bool:
    if typing.get_origin(annotation) is list:
        return True
    return any(typing.get_origin(a) is list for a in typing.get_args(annotation))


def _leaf_models(annotation: object) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
        return
    for arg in typing.get_args(annotation):
        yield from _leaf_models(arg)


@pytest.mark.parametrize(("root", "model"), [("spec", QuotaPolicySpec), ("status", QuotaPolicyStatus)],
                         ids=["spec", "status"])
def test_the_schema_and_the_model_have_exactly_the_same_fields(root: str, model: type[BaseModel]) -> None:
    schema_paths = {p for p, _ in _walk(_schema()["properties"][root], root)
                    if p != root and not p.endswith(("[]", "{}"))}
    assert schema_paths == set(_model_paths(model, root))


def test_every_cel_rule_names_its_field_in_a_message() -> None:
    rules = [(path, rule) for path, node in _walk(_schema(), "")
             for rule in node.get("x-kubernetes-validations", [])]
    assert len(rules) >= 8
    assert [(p, r) for p, r in rules if not r.get("message")] == []


def test_the_printer_columns_read_status_fields_the_model_declares() -> None:
    version: Any = crd()["spec"]
    columns = version["versions"][0]["additionalPrinterColumns"]
    assert [c["name"] for c in columns] == ["Teams", "Transitions", "Phase", "Next Step", "Ready", "Age"]
    status = set(QuotaPolicyStatus.model_fields)
    assert {"teams", "active_transitions", "phase", "next_step_at", "conditions"} <= status
    assert next(yaml.safe_load_all(CRD_FILE.read_text()))["spec"]["names"]["shortNames"] == ["qp"]
