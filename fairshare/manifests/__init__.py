"""Parse real ``kueue.x-k8s.io/v1beta2`` manifests into a :class:`~fairshare.models.ClusterState`.

Accepts YAML files (multi-document, or documents that are lists / ``kind: List``) and plain dicts (the
operator and the simulator render manifests in memory). Any bad value raises
:class:`~fairshare.errors.InputError` naming the file, the document (index, kind, name), the field path
and the value; a field that changes admission but is not modelled raises
:class:`~fairshare.errors.UnsupportedError` ("unsupported: <field>").

- `fields.py`: the errors: located readers of one field each (`Ctx`), RFC 3339 times;
- `kinds.py`, `workloads.py`: parsing, one object at a time (`parse_object`);
- `state.py`: loading files and validating the state as a whole (`StateBuilder`: duplicates, references,
  priority classes, cohort parent cycles).
"""

from .fields import parse_time
from .kinds import KUEUE_API, KUEUE_KINDS, KueueObject, NamespaceObject, parse_object
from .state import (
    StateBuilder,
    flatten_documents,
    load_manifests,
    load_yaml_documents,
    parse_manifests,
    parse_yaml_text,
)
from .workloads import PRIORITY_BOOST_ANNOTATION, pod_requests

__all__ = [
    "KUEUE_API",
    "KUEUE_KINDS",
    "PRIORITY_BOOST_ANNOTATION",
    "KueueObject",
    "NamespaceObject",
    "StateBuilder",
    "flatten_documents",
    "load_manifests",
    "load_yaml_documents",
    "parse_manifests",
    "parse_object",
    "parse_time",
    "parse_yaml_text",
    "pod_requests",
]
