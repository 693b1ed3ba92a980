"""Small builders for the history tests."""

from __future__ import annotations

from fairshare.history import HalfLife, NodeKind, NodePath, UsageHistoryGraph
from fairshare.models import FlavorResource

GPU = FlavorResource("a100", "nvidia.com/gpu")
CPU = FlavorResource("default", "cpu")
HOUR = 3600.0


def path(text: str) -> NodePath:
    return NodePath.parse(text)


def cq(cohort: str, name: str) -> NodePath:
    return NodePath.of((NodeKind.COHORT, cohort), (NodeKind.CLUSTER_QUEUE, name))


def graph(half_life_hours: float = 1.0, created_at: float = 0.0, **kw: int) -> UsageHistoryGraph:
    return UsageHistoryGraph(HalfLife.of_seconds(half_life_hours * HOUR), created_at=created_at, **kw)


def tree(*paths: str, weights: dict[str, int] | None = None) -> UsageHistoryGraph:
    """A graph with the given node paths (text form) and weights (milli)."""
    g = graph()
    for p in paths:
        g.add_node(path(p))
    for p, w in (weights or {}).items():
        g.add_node(path(p), weight=w)
    return g


def close(a: int, b: int, rel: float = 1e-12) -> bool:
    """Equal up to the documented tolerance: relative 1e-12 plus 1 milli-resource-second of rounding."""
    return abs(a - b) <= 1 + rel * max(abs(a), abs(b))
