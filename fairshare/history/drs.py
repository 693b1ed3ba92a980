"""Kueue's dominant resource share (DRS), computed over decayed usage instead of current usage.

Kueue (pkg/cache/scheduler/fair_sharing.go, notes §2.6), per node with a parent:
``borrowed_fr = usage_fr - subtreeQuota_fr`` (if > 0), summed per resource;
``lendable_r = Σ_flavors potentialAvailable(parent, fr)``; ``ratio_r = borrowed_r·1000 / lendable_r``;
DRS = max over resources (ties: alphabetical resource); weighted share = DRS / weight, infinite for weight 0.

History version: usage is decayed resource-seconds, so quotas become *decayed entitlements*: holding the
quota ``q`` continuously since the graph was created accrues ``q·(H/ln 2)·(1 - 2^(-(t-t0)/H))`` decayed
resource-seconds, the most a node can "use" without borrowing. Quotas come from the caller per node (a
ClusterQueue's nominal quota); a cohort without one gets the sum of its children (Kueue's SubtreeQuota);
a node below a ClusterQueue (LocalQueue, project) gets its parent's quota split by sibling weights. The
lendable pool of a node is its parent's entitlement (potentialAvailable without lending/borrowing limits).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import NamedTuple

from fairshare.history.decay import LN2, TICKS_PER_SECOND, to_ticks
from fairshare.history.graph import UsageHistoryGraph, UsageVector
from fairshare.history.paths import NodePath
from fairshare.models import FlavorResource, Milli, ResourceName, Seconds

QuotaVector = Mapping[FlavorResource, Milli]
_ZERO = Fraction(0)  # immutable
_Row = tuple[NodePath, Milli, UsageVector, dict[FlavorResource, Fraction], dict[FlavorResource, int],
             dict[ResourceName, int], dict[ResourceName, int], ResourceName | None, Fraction, Fraction | None,
             tuple[NodePath, ...]]


class HistoryDrsNode(NamedTuple):
    """History DRS of one node (immutable; a NamedTuple because one is built per node per pass)."""

    path: NodePath
    weight: Milli
    usage: UsageVector  # decayed milli-resource-seconds (subtree)
    quota: dict[FlavorResource, Fraction]  # explicit, summed or split (milli-units)
    entitlement: dict[FlavorResource, int]  # decayed milli-resource-seconds of holding `quota`
    borrowed: dict[ResourceName, int]
    lendable: dict[ResourceName, int]
    dominant_resource: ResourceName | None
    share: Fraction  # unweighted DRS, per-mille of the lendable pool
    weighted_share: Fraction | None  # share / weight; None = infinite (weight 0 while borrowing)
    siblings: tuple[NodePath, ...] = ()  # this node and its siblings, for the explanation
    position: int = 1  # among siblings by CompareDRS, lowest share first (ties share a position)
    factor: Fraction = Fraction(1)  # (siblings - position + 1) / siblings: 1 = served first

    @property
    def _standing(self) -> str:
        count = len(self.siblings) or 1
        return (f"{_ordinal(self.position)} lowest of {count} sibling(s) -> factor "
                f"{float(self.factor):.3g}")

    @property
    def compared_with(self) -> tuple[NodePath, ...]:
        return tuple(p for p in self.siblings if p != self.path)

    @property
    def explanation(self) -> str:
        if self.dominant_resource is None:
            return (f"{self.path}: within its decayed entitlement on every resource -> share 0 "
                    f"(not borrowing from {self.path.parent or 'nothing'}); {self._standing}")
        r = self.dominant_resource
        ws = "inf (weight 0)" if self.weighted_share is None else f"{float(self.weighted_share):.4g}"
        hours = 1000 * 3600  # milli-resource-seconds per resource-hour
        lendable = self.lendable.get(r, 0) / hours
        text = (f"{self.path}: borrowed {self.borrowed[r] / hours:.3g} of {lendable:.3g} "
                f"lendable {r}-hours (decayed) -> {float(self.share):.4g} per mille on {r}, weight "
                f"{self.weight / 1000:g} -> weighted share {ws}")
        if self.compared_with:
            text += "; compared with " + ", ".join(p.name for p in self.compared_with[:5])
            if len(self.compared_with) > 5:
                text += f" and {len(self.compared_with) - 5} more"
        return f"{text}; {self._standing}"


def entitlement_seconds(graph: UsageHistoryGraph, at: Seconds) -> float:
    """∫ 2^(-(at-τ)/H) dτ from the graph's creation to ``at``: decayed seconds of holding 1 unit."""
    elapsed = to_ticks(at) - graph.created_tick
    if elapsed <= 0:
        return 0.0
    h = graph.half_life.ticks
    return (h / TICKS_PER_SECOND / LN2) * -math.expm1(-elapsed * LN2 / h)


def effective_quotas(graph: UsageHistoryGraph, quotas: Mapping[NodePath, QuotaVector]
                     ) -> dict[NodePath, dict[FlavorResource, Fraction]]:
    """Explicit quotas; cohorts/root without one sum their children; nodes below get a weighted split."""
    children = graph.children_map()
    weights = graph.weights()
    out: dict[NodePath, dict[FlavorResource, Fraction]] = {
        p: {fr: Fraction(q) for fr, q in v.items()} for p, v in quotas.items() if p in graph}
    for node in sorted(children, key=len, reverse=True):
        if node in out:
            continue
        present = [k for k in children[node] if k in out]
        if present:
            acc: dict[FlavorResource, Fraction] = {}
            for k in present:
                for fr, q in out[k].items():
                    acc[fr] = acc.get(fr, Fraction(0)) + q
            out[node] = acc
    for parent in sorted(children, key=len):
        kids = children[parent]
        if parent not in out or not kids:
            continue
        total = sum(weights[k] for k in kids)
        for k in kids:
            if k not in out:
                w = weights[k]
                out[k] = {fr: Fraction(q.numerator * w, q.denominator * total) if total else _ZERO
                          for fr, q in out[parent].items()}
    return out


def history_drs(graph: UsageHistoryGraph, at: Seconds, quotas: Mapping[NodePath, QuotaVector],
                *, usage: Mapping[NodePath, UsageVector] | None = None) -> dict[NodePath, HistoryDrsNode]:
    """History DRS of every node (the root's share is 0, as in Kueue)."""
    usage_all = usage if usage is not None else graph.usage_all(at)
    eff = effective_quotas(graph, quotas)
    per_unit = entitlement_seconds(graph, at)
    ent = {p: {fr: round(q.numerator / q.denominator * per_unit) for fr, q in v.items()}
           for p, v in eff.items()}
    kids_of = graph.children_map()
    weights = graph.weights()
    pools: dict[NodePath, dict[ResourceName, int]] = {}
    rows: dict[NodePath, _Row] = {}
    keys: dict[NodePath, tuple[int, Fraction]] = {}
    for node in graph.nodes():
        u = usage_all.get(node, {})
        parent = node.parent
        mine = ent.get(node, {})
        borrowed: dict[ResourceName, int] = {}
        lendable: dict[ResourceName, int] = {}
        if parent is not None:
            for fr in sorted(set(u) | set(mine)):
                over = u.get(fr, 0) - mine.get(fr, 0)
                if over > 0:
                    borrowed[fr.resource] = borrowed.get(fr.resource, 0) + over
            pool_of_parent = pools.get(parent)
            if pool_of_parent is None:
                pool_of_parent = {}
                for fr, v in ent.get(parent, {}).items():
                    pool_of_parent[fr.resource] = pool_of_parent.get(fr.resource, 0) + v
                pools[parent] = pool_of_parent
            lendable = pool_of_parent
        best: tuple[Fraction, ResourceName] | None = None
        for r in sorted(borrowed):
            pool = lendable.get(r, 0)
            # Nothing lendable for a borrowed resource: Kueue's ratio would divide by zero; count it as
            # the whole pool (1000 per mille) per unit of entitlement missing, i.e. maximally borrowing.
            ratio = Fraction(borrowed[r] * 1000, pool) if pool else Fraction(borrowed[r] * 1000)
            if best is None or ratio > best[0]:
                best = (ratio, r)
        weight = weights[node]
        share = best[0] if best else _ZERO
        weighted: Fraction | None
        if share == 0:
            weighted = _ZERO
        elif weight == 0:
            weighted = None
        else:
            weighted = Fraction(share.numerator * 1000, share.denominator * weight)
        siblings = kids_of[parent] if parent is not None else ()
        rows[node] = (node, weight, u, eff.get(node, {}), mine, borrowed, lendable, best[1] if best else None,
                      share, weighted, siblings)
        keys[node] = (1, share) if weighted is None else (0, weighted)
    # Standing among siblings (Kueue's CompareDRS order, lowest first); equal shares share a position.
    standing: dict[NodePath, tuple[int, Fraction]] = {NodePath.root(): (1, Fraction(1))}
    for kids in kids_of.values():
        if not kids:
            continue
        ranked = sorted(kids, key=lambda k: (keys[k], k))
        count = len(ranked)
        position = 0
        previous: tuple[int, Fraction] | None = None
        for i, k in enumerate(ranked):
            if keys[k] != previous:
                position = i + 1
                previous = keys[k]
            standing[k] = (position, Fraction(count - position + 1, count))
    return {node: HistoryDrsNode(*row, *standing[node]) for node, row in rows.items()}


def _drs_key(node: HistoryDrsNode) -> tuple[int, Fraction]:
    # CompareDRS: zero-weight borrowers (infinite share) above everyone, by their unweighted share.
    return (1, node.share) if node.weighted_share is None else (0, node.weighted_share)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def compare_drs(a: HistoryDrsNode, b: HistoryDrsNode) -> int:
    """Kueue's CompareDRS: zero-weight borrowers above everyone (by unweighted share among themselves),
    otherwise by weighted share. Returns -1, 0 or 1 (a below, equal, above b)."""
    ka, kb = _drs_key(a), _drs_key(b)
    return (ka > kb) - (ka < kb)
