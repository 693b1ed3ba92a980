"""Typed paths of the usage history graph: root / cohort... / ClusterQueue / LocalQueue / project.

A path is a tuple of (kind, name) segments. Its text form is ``/`` for the root and otherwise
``/cohort:eng/cq:frontier/lq:ai-ns/default/project:llm``: Kubernetes names and label values never
contain ``:`` or ``/`` (DNS-1123 / label-value grammar), so the only ``/`` inside a segment is the one
between a LocalQueue's namespace and name, and parsing is unambiguous.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple


class NodeKind(StrEnum):
    COHORT = "cohort"
    CLUSTER_QUEUE = "cq"
    LOCAL_QUEUE = "lq"
    PROJECT = "project"


class Segment(NamedTuple):
    """One (kind, name) step of a path. ``kind`` is a NodeKind value kept as a plain str, so that hashing
    and comparing paths stays in C (the graph hashes paths on every accrual)."""

    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}:{self.name}"


# Which kind may follow which (None = directly under the root). Cohorts nest (hierarchical cohorts);
# a ClusterQueue without a cohort hangs off the root.
_ALLOWED_PARENT: dict[NodeKind, frozenset[NodeKind | None]] = {
    NodeKind.COHORT: frozenset({None, NodeKind.COHORT}),
    NodeKind.CLUSTER_QUEUE: frozenset({None, NodeKind.COHORT}),
    NodeKind.LOCAL_QUEUE: frozenset({NodeKind.CLUSTER_QUEUE}),
    NodeKind.PROJECT: frozenset({NodeKind.LOCAL_QUEUE}),
}


class NodePath(tuple[Segment, ...]):
    """Identity of a node in the history graph: an immutable, hashable, totally ordered tuple of segments
    (a tuple subclass so that hashing and ordering are native; build it with ``root()``/``child``/``of``)."""

    __slots__ = ()

    @property
    def segments(self) -> tuple[Segment, ...]:
        return tuple(self)

    @staticmethod
    def root() -> NodePath:
        return _ROOT

    @staticmethod
    def of(*segments: tuple[NodeKind, str]) -> NodePath:
        """Build a path from (kind, name) pairs, checking the nesting rules."""
        path = _ROOT
        for kind, name in segments:
            path = path.child(kind, name)
        return path

    def child(self, kind: NodeKind, name: str) -> NodePath:
        """The child path; ValueError if that kind may not sit here or the name is malformed."""
        parent_kind = NodeKind(self[-1].kind) if self else None
        if parent_kind not in _ALLOWED_PARENT[kind]:
            where = parent_kind.value if parent_kind else "the root"
            raise ValueError(f"a {kind.value} node cannot be a child of {where} (path {self})")
        _check_name(kind, name)
        return NodePath((*self, Segment(kind.value, name)))

    @property
    def is_root(self) -> bool:
        return not self

    @property
    def parent(self) -> NodePath | None:
        return NodePath(self[:-1]) if self else None

    @property
    def kind(self) -> NodeKind | None:
        """Kind of the last segment (None for the root)."""
        return NodeKind(self[-1].kind) if self else None

    @property
    def name(self) -> str:
        return self[-1].name if self else "/"

    @property
    def depth(self) -> int:
        return len(self)

    def ancestors(self) -> tuple[NodePath, ...]:
        """Proper ancestors, root first."""
        return tuple(NodePath(self[:i]) for i in range(len(self)))

    def __str__(self) -> str:
        return "/" + "/".join(str(s) for s in self)

    def __repr__(self) -> str:
        return f"NodePath({str(self)!r})"

    @staticmethod
    def parse(text: str) -> NodePath:
        """Inverse of ``str()``; ValueError on malformed text."""
        if text == "/":
            return _ROOT
        if not text.startswith("/"):
            raise ValueError(f"a history path starts with '/': {text!r}")
        path = _ROOT
        tokens = text[1:].split("/")
        i = 0
        while i < len(tokens):
            kind_text, sep, name = tokens[i].partition(":")
            if not sep:
                raise ValueError(f"segment {tokens[i]!r} of {text!r} is not kind:name")
            try:
                kind = NodeKind(kind_text)
            except ValueError:
                raise ValueError(f"unknown node kind {kind_text!r} in {text!r}") from None
            if kind is NodeKind.LOCAL_QUEUE:
                if i + 1 >= len(tokens):
                    raise ValueError(f"a LocalQueue segment is lq:namespace/name in {text!r}")
                name = f"{name}/{tokens[i + 1]}"
                i += 1
            path = path.child(kind, name)
            i += 1
        return path


_ROOT = NodePath(())


def _check_name(kind: NodeKind, name: str) -> None:
    parts = name.split("/")
    expected = 2 if kind is NodeKind.LOCAL_QUEUE else 1
    if len(parts) != expected or not all(parts) or ":" in name:
        shape = "namespace/name" if expected == 2 else "a name without '/' or ':'"
        raise ValueError(f"{kind.value} name must be {shape}, got {name!r}")
