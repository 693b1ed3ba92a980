"""Slurm's Fair Tree over the usage history graph.

Reference: Slurm's fair_tree documentation (slurm.schedmd.com/fair_tree.html) and
src/plugins/priority/multifactor/fair_tree.c. Per node, among its siblings:

- ``S = weight / Σ sibling weights`` (normalized shares),
- ``U = usage / parent usage`` (normalized usage; 0 when the parent has no usage),
- level fair share ``LF = S / U``; ``S = 0`` gives ``LF = 0`` and otherwise ``U = 0`` gives ``LF = ∞``.

Siblings are visited by descending LF, depth first; each leaf ("user" in Slurm) visited gets
``rank = leaves left to rank`` and ``factor = rank / leaf count`` in (0, 1]. Slurm's documented tie rules:
(1) sibling leaves with equal LF get the same rank; (2) sibling inner nodes with equal LF have their
children merged before sorting; (3) a leaf with the same LF as a sibling inner node gets the same rank as
that node's highest-ranked leaf (leaves sort before inner nodes on equal LF). Remaining order among exact
ties is by path, so the result is deterministic. Usage across flavor-resources is reduced to one number
(``FairTreeConfig``): by default each resource counts by its share of the tree's total usage of it; with
billing weights, as Slurm does with TRESBillingWeights. LF values are exact fractions, so ties
are exact.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

from fairshare.history.graph import UsageHistoryGraph, UsageVector
from fairshare.history.paths import NodePath
from fairshare.models import FlavorResource, Milli, ResourceName, Seconds


@dataclass(frozen=True, slots=True)
class FairTreeConfig:
    """How usage of several resources becomes one number.

    ``billing_weights`` (milli-units, 1000 = 1) set: Slurm's TRESBillingWeights, usage = Σ w_r·u_r and
    resources not listed weigh 0. Empty (the default): each resource counts by its share of the whole
    tree's usage of that resource, usage = Σ_r u_r / root_r, so that no resource dominates because of its
    unit (CPU milli-seconds would otherwise swamp GPU milli-seconds). Both are exact (ints).
    """

    billing_weights: tuple[tuple[ResourceName, Milli], ...] = ()

    def billed_all(self, usage: Mapping[NodePath, UsageVector]) -> dict[NodePath, int]:
        """The single usage number of every node (exact ints; only ratios between nodes matter)."""
        if not self.billing_weights:
            return _normalized(usage)
        weights = dict(self.billing_weights)
        per_fr: dict[FlavorResource, int] = {}
        out: dict[NodePath, int] = {}
        for p, u in usage.items():
            total = 0
            for fr, v in u.items():
                w = per_fr.get(fr)
                if w is None:
                    w = per_fr[fr] = weights.get(fr.resource, 0)
                total += w * v
            out[p] = total
        return out


def _normalized(usage: Mapping[NodePath, UsageVector]) -> dict[NodePath, int]:
    # Σ_r u_r / root_r, scaled by Π_s root_s to stay an exact int: Σ_r u_r · Π_{s≠r} root_s.
    root_totals: dict[ResourceName, int] = {}
    for fr, v in usage.get(NodePath.root(), {}).items():
        root_totals[fr.resource] = root_totals.get(fr.resource, 0) + v
    resources = sorted(r for r, v in root_totals.items() if v > 0)
    factor = {r: math.prod(root_totals[s] for s in resources if s != r) for r in resources}
    per_fr: dict[FlavorResource, int] = {}
    out: dict[NodePath, int] = {}
    for p, u in usage.items():
        total = 0
        for fr, v in u.items():
            f = per_fr.get(fr)
            if f is None:
                f = per_fr[fr] = factor.get(fr.resource, 0)
            total += f * v
        out[p] = total
    return out


class FairTreeNode(NamedTuple):
    """The Fair Tree figures of one node (immutable). Stored as exact ints; the fractions are properties.

    A NamedTuple rather than a frozen dataclass: one is built per node per pass, and a frozen dataclass's
    ``__init__`` (one ``object.__setattr__`` per field) would dominate the all-shares budget.
    """

    path: NodePath
    weight: Milli
    siblings_weight: Milli  # Σ weights of this node and its siblings
    usage: int  # billing-weighted decayed usage of the subtree
    parent_usage: int
    root_usage: int
    global_share_num: int  # Π weight along the path ...
    global_share_den: int  # ... over Π sibling-weight totals
    is_leaf: bool
    rank: int  # leaves: Slurm rank; inner nodes: rank of their best leaf (0 if no leaf below)
    leaf_count: int
    sibling_position: int  # 1-based position among siblings by descending LF
    sibling_count: int
    ahead_of: NodePath | None  # the next sibling in LF order (ranked below this one)
    behind: NodePath | None  # the previous sibling in LF order (ranked above this one)
    tie_group: tuple[NodePath, ...]  # siblings with exactly the same LF, this node included

    @property
    def share(self) -> Fraction:
        """S: normalized shares among siblings (the root: 1)."""
        return Fraction(self.weight, self.siblings_weight) if self.siblings_weight else Fraction(0)

    @property
    def usage_share(self) -> Fraction:
        """U: usage / parent usage (0 when the parent has none)."""
        return Fraction(self.usage, self.parent_usage) if self.parent_usage else Fraction(0)

    @property
    def level_fs(self) -> Fraction | None:
        """LF = S/U; None means infinite (no usage and S > 0). S = 0 gives 0."""
        s = self.share
        if s == 0:
            return Fraction(0)
        u = self.usage_share
        return None if u == 0 else s / u

    @property
    def global_share(self) -> Fraction:
        """This node's fair share of the whole tree: the product of S from the root."""
        if not self.global_share_den:
            return Fraction(0)
        return Fraction(self.global_share_num, self.global_share_den)

    @property
    def global_usage(self) -> Fraction:
        return Fraction(self.usage, self.root_usage) if self.root_usage else Fraction(0)

    @property
    def factor(self) -> Fraction:
        """rank / leaf count: in (0, 1] for leaves; for an inner node, the factor of its best leaf."""
        return Fraction(self.rank, self.leaf_count) if self.leaf_count else Fraction(0)

    @property
    def tied_with(self) -> tuple[NodePath, ...]:
        return tuple(p for p in self.tie_group if p != self.path)

    @property
    def over_share(self) -> Fraction | None:
        """Global usage / global share: 2 means twice its fair share of history (None if share is 0)."""
        g = self.global_share
        return self.global_usage / g if g else None

    @property
    def explanation(self) -> str:
        lf = _fmt_lf(self.level_fs)
        text = (f"{self.path}: share {_fmt(self.share)} of its siblings' weight, usage "
                f"{_fmt(self.usage_share)} of its parent's -> level fair share {lf}; "
                f"{_ordinal(self.sibling_position)} of {self.sibling_count} siblings")
        if self.behind is not None:
            text += f", below {self.behind.name}"
        if self.ahead_of is not None:
            text += f", above {self.ahead_of.name}"
        if self.tied_with:
            others = self.tied_with
            names = ", ".join(p.name for p in others[:5])
            if len(others) > 5:
                names += f" and {len(others) - 5} more"
            rule = "same rank" if self.is_leaf else "children merged before sorting"
            text += f"; tied with {names} ({rule})"
        if self.is_leaf:
            text += f"; rank {self.rank}/{self.leaf_count} -> factor {_fmt(self.factor)}"
        elif self.rank:
            text += f"; its best leaf has rank {self.rank}/{self.leaf_count} (factor {_fmt(self.factor)})"
        return text


@dataclass(frozen=True)
class FairTreeResult:
    at: Seconds
    nodes: Mapping[NodePath, FairTreeNode]
    ranking: tuple[NodePath, ...]  # leaves, highest priority first (ties keep path order)

    def factor(self, path: NodePath) -> Fraction:
        return self.nodes[path].factor


def _fmt(x: Fraction) -> str:
    return f"{float(x):.3g}"


def _fmt_lf(x: Fraction | None) -> str:
    return "inf" if x is None else _fmt(x)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


_ExactKey = tuple[int, Fraction]
_Level = tuple[int, int, NodePath | None, NodePath | None, tuple[NodePath, ...], int, int, int, int]


def _exact_lf_key(weight: int, usage: int, parent_usage: int) -> _ExactKey:
    # Among siblings S/U = (w/W)/(u/P) orders like w/u (W, P shared). Class 2 = infinite, 0 = zero.
    if weight == 0:
        return (0, Fraction(0))
    if usage == 0 or parent_usage == 0:
        return (2, Fraction(0))
    return (1, Fraction(weight, usage))


def _rank_siblings(kids: tuple[NodePath, ...], weights: Mapping[NodePath, int],
                   billed: Mapping[NodePath, int], parent_usage: int,
                   children: Mapping[NodePath, tuple[NodePath, ...]]
                   ) -> tuple[list[NodePath], list[tuple[NodePath, ...]]]:
    """Siblings by descending LF, leaves before inner nodes on equal LF, then path; and the tie groups.

    Sorting uses the correctly rounded float w/u (monotone in the exact value); runs of equal floats are
    re-sorted and grouped with exact fractions, so order and ties are exact.
    """
    keyed: list[tuple[float, int, NodePath]] = []
    for k in kids:
        w, u = weights[k], billed[k]
        if w == 0:
            f = 0.0
        elif u == 0 or parent_usage == 0:
            f = math.inf
        else:
            f = w / u
        keyed.append((-f, 1 if children[k] else 0, k))
    keyed.sort()
    ranked: list[NodePath] = []
    groups: list[tuple[NodePath, ...]] = []
    i, n = 0, len(keyed)
    while i < n:
        j = i + 1
        while j < n and keyed[j][0] == keyed[i][0]:
            j += 1
        if j == i + 1:
            k = keyed[i][2]
            ranked.append(k)
            groups.append((k,))
        else:
            run = [e[2] for e in keyed[i:j]]
            exact = {k: _exact_lf_key(weights[k], billed[k], parent_usage) for k in run}
            run.sort(key=lambda k: (-exact[k][0], -exact[k][1], 1 if children[k] else 0, k))
            ranked.extend(run)
            groups.extend(tuple(g) for _, g in itertools.groupby(run, key=lambda k: exact[k]))
        i = j
    return ranked, groups


def fair_tree(graph: UsageHistoryGraph, at: Seconds, config: FairTreeConfig | None = None,
              *, usage: Mapping[NodePath, UsageVector] | None = None) -> FairTreeResult:
    """Fair Tree figures for every node of ``graph`` at time ``at`` (``usage``: a precomputed usage_all)."""
    cfg = config or FairTreeConfig()
    usage_all = usage if usage is not None else graph.usage_all(at)
    children = graph.children_map()
    weights = graph.weights()
    billed = cfg.billed_all(usage_all)
    root = NodePath.root()
    leaf_count = sum(1 for p, kids in children.items() if not kids and p != root)
    root_usage = billed[root]

    # Per node: (position, count, ahead, behind, tie group, siblings' weight total, global share num/den).
    level: dict[NodePath, _Level] = {root: (1, 1, None, None, (root,), weights[root], 1, 1, root_usage)}
    ranked_children: dict[NodePath, list[NodePath]] = {}
    group_of: dict[NodePath, tuple[NodePath, ...]] = {}
    by_depth = sorted(children, key=len)
    for parent in by_depth:
        kids = children[parent]
        if not kids:
            continue
        total_w = sum(weights[k] for k in kids)
        parent_usage = billed[parent]
        ranked, groups = _rank_siblings(kids, weights, billed, parent_usage, children)
        ranked_children[parent] = ranked
        gnum, gden = level[parent][6], level[parent][7]
        for group in groups:
            for k in group:
                group_of[k] = group
        n = len(ranked)
        behind: NodePath | None = None
        for i, k in enumerate(ranked):
            level[k] = (i + 1, n, ranked[i + 1] if i + 1 < n else None, behind, group_of[k], total_w,
                        gnum * weights[k], gden * total_w, parent_usage)
            behind = k

    rank_of: dict[NodePath, int] = {}
    ranking: list[NodePath] = []
    counters = [leaf_count, leaf_count]  # [rank, rank-no-ties] as in fair_tree.c

    def visit(ranked: list[NodePath], account_tied: bool) -> None:
        i = 0
        while i < len(ranked):
            node = ranked[i]
            tied = account_tied if i == 0 else group_of[node] is group_of[ranked[i - 1]]
            if not children[node]:
                if not tied:
                    counters[0] = counters[1]
                rank_of[node] = counters[0]
                ranking.append(node)
                counters[1] -= 1
                i += 1
                continue
            j = i + 1
            while j < len(ranked) and children[ranked[j]] and group_of[ranked[j]] is group_of[node]:
                j += 1
            if j == i + 1:
                visit(ranked_children[node], tied)
            else:
                # Rule 2: tied inner siblings have their children merged, then sorted together.
                merged = tuple(c for acct in ranked[i:j] for c in children[acct])
                merged_ranked = _merge_rank(merged, weights, billed, children, group_of)
                visit(merged_ranked, tied)
            i = j

    visit(ranked_children.get(root, []), False)

    best = dict(rank_of)
    for node in reversed(by_depth):
        kids = children[node]
        if kids:
            best[node] = max(best[c] for c in kids)
    best.setdefault(root, 0)

    nodes: dict[NodePath, FairTreeNode] = {}
    for p in graph.nodes():
        pos, count, ahead, up, ties, total_w, gnum, gden, parent_usage = level[p]
        nodes[p] = FairTreeNode(p, weights[p], total_w, billed[p], parent_usage, root_usage, gnum, gden,
                                p in rank_of, best[p], leaf_count, pos, count, ahead, up, ties)
    return FairTreeResult(at=at, nodes=nodes, ranking=tuple(ranking))


class OverShares:
    """Nodes' over-shares (`FairTreeNode.over_share`: global usage / global share) at ``at``, each computed
    when first asked, without ranking the tree: what the experiment planner orders candidates by, and all
    it reads of the Fair Tree (FastPaths.lazy_over_shares).

    The same values as ``fair_tree(graph, at, config).nodes[path].over_share``: the same billed usage of
    the node and of the root (``billed_all`` of the subtree's usage, ``usage_at``, and of the whole tree's,
    ``total_at``: the ints of ``usage_all``, which fair_tree bills, read for those two nodes alone), and the
    global share as the same exact product of each ancestor's weight over its siblings' total along the
    path (``fair_tree``'s ``gnum``/``gden``: products of ints, in any order the same ints); the same
    Fractions from them (tests/unit/history/test_over_shares.py). The root's usage is read when a value
    is first asked (`of`), not for an order (`order_key`)."""

    __slots__ = ("_cfg", "_graph", "_keys", "_root", "_root_usage", "_shares", "_totals", "_weights", "at")

    def __init__(self, graph: UsageHistoryGraph, at: Seconds, config: FairTreeConfig | None = None) -> None:
        graph.check_read(at)  # refused here, as by fair_tree, not at the first node asked
        self._cfg = config or FairTreeConfig()
        self._keys: dict[NodePath, Fraction | None] = {}
        self.at = at
        self._root: UsageVector | None = None  # the whole tree's usage, read when first needed
        self._root_usage = 0
        self._weights = graph.weights()
        self._graph = graph  # its children, read while asked (within one plan: the graph does not change)
        self._totals: dict[NodePath, int] = {}  # Σ weights of a node's children
        self._shares: dict[NodePath, Fraction | None] = {}

    def _root_read(self) -> UsageVector:
        root = self._root
        if root is None:
            root = self._root = self._graph.total_at(self.at)
            self._root_usage = self._cfg.billed_all({NodePath.root(): root})[NodePath.root()]
        return root

    def _sibling_total(self, parent: NodePath) -> int:
        total = self._totals.get(parent)
        if total is None:
            weights = self._weights
            total = self._totals[parent] = sum(weights[k] for k in self._graph.children(parent))
        return total

    def _global_share(self, path: NodePath) -> tuple[int, int]:
        """``fair_tree``'s gnum, gden of ``path``: the products of its and each ancestor's weight, and of
        their siblings' totals."""
        gnum, gden = 1, 1
        node: NodePath | None = path
        while node is not None:
            parent = node.parent
            if parent is None:
                break
            gnum *= self._weights[node]
            gden *= self._sibling_total(parent)
            node = parent
        return gnum, gden

    def of(self, path: NodePath) -> Fraction | None:
        """The over-share of ``path`` (None when its global share is 0), as FairTreeNode.over_share."""
        if path in self._shares:
            return self._shares[path]
        gnum, gden = self._global_share(path)
        root = self._root_read()
        root_usage = self._root_usage
        if path.is_root:
            usage = root_usage
        elif path in self._graph:
            subtree = self._graph.usage_at(path, self.at)
            usage = self._cfg.billed_all({NodePath.root(): root, path: subtree})[path]
        else:
            raise KeyError(path)
        global_usage = Fraction(usage, root_usage) if root_usage else Fraction(0)
        g = Fraction(gnum, gden) if gden else Fraction(0)
        share = global_usage / g if g else None
        self._shares[path] = share
        return share

    @property
    def orders_without_root(self) -> bool:
        """Whether `order_key` may stand in for `of` in an order: a node's billed usage does not read the
        root's. With billing weights (not negative) it never does; normalized, it does only through the
        root's total of each resource, which with at most one resource ever charged is a factor of 1 (or
        every usage is 0)."""
        cfg = self._cfg
        if cfg.billing_weights:
            return all(w >= 0 for _, w in cfg.billing_weights)
        return self._graph.resource_count <= 1

    def order_key(self, path: NodePath) -> Fraction | None:
        """A value that orders (and ties) non-root nodes as their over-shares do, None exactly when the
        over-share is, without the root's usage (`orders_without_root` must hold): billed usage x gden /
        gnum. The over-share is that over the root's billed usage (a positive constant), or 0 for every
        node when the root's usage is 0, and then every node's usage is 0 too (a subtree's usage is a part
        of the root's, every part at least 0)."""
        if path in self._keys:
            return self._keys[path]
        if path.is_root or path not in self._graph:
            raise KeyError(path)
        gnum, gden = self._global_share(path)
        key: Fraction | None = None
        if gnum and gden:
            subtree = self._graph.usage_at(path, self.at)
            cfg = self._cfg
            # (normalized with one resource, orders_without_root: its factor is 1)
            usage = cfg.billed_all({path: subtree})[path] if cfg.billing_weights else sum(subtree.values())
            key = Fraction(usage * gden, gnum)
        self._keys[path] = key
        return key


def _merge_rank(merged: tuple[NodePath, ...], weights: Mapping[NodePath, int], billed: Mapping[NodePath, int],
                children: Mapping[NodePath, tuple[NodePath, ...]],
                group_of: dict[NodePath, tuple[NodePath, ...]]) -> list[NodePath]:
    """Sort children of several parents together by their own LF (each relative to its own parent), exactly.

    Merging does not change any child's LF (fair_tree.c: "the necessary information is stored on each
    assoc"); tie groups are recomputed across the merged list so equal LFs from different parents tie.
    """
    def exact(k: NodePath) -> tuple[int, Fraction]:
        parent = k.parent
        pu = billed[parent] if parent is not None else 0
        total_w = sum(weights[s] for s in children[parent]) if parent is not None else weights[k]
        if weights[k] == 0:
            return (0, Fraction(0))
        if billed[k] == 0 or pu == 0:
            return (2, Fraction(0))
        return (1, Fraction(weights[k] * pu, total_w * billed[k]))

    keys = {k: exact(k) for k in merged}
    ranked = sorted(merged, key=lambda k: (-keys[k][0], -keys[k][1], 1 if children[k] else 0, k))
    for _, g in itertools.groupby(ranked, key=lambda k: keys[k]):
        group = tuple(g)
        for k in group:
            group_of[k] = group
    return ranked
