"""The cohort tree's quota accounting, exactly as Kueue computes it.

Source: Kueue pkg/cache/scheduler/resource_node.go (localQuota, LocalAvailable,
available, potentialAvailable, addUsage, removeUsage, accumulateFromChild,
QuantitiesFitInQuota, IsWithinNominalInResources) and fair_sharing.go (DRS).

A node is a ClusterQueue or a Cohort. Per flavor-resource ``fr``:

- ``subtree_quota[fr]``: a CQ's nominal quota; a cohort's own nominal plus, for every
  child, ``child.subtree_quota - child.local_quota``.
- ``local_quota(fr) = max(0, subtree_quota - lendingLimit)`` (0 without a lendingLimit):
  the part of the subtree's quota that is not lent to the parent.
- ``usage[fr]``: a CQ's admitted usage; a cohort's sum of ``max(0, child.usage -
  child.local_quota)``: what the children take from the shared pool.

Mutation goes through :class:`UsageLog`-aware setters so that a snapshot can undo any
sequence of changes in O(changes).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from .models import FlavorResource, ResourceName, ResourceQuota

_NO_QUOTA = ResourceQuota()


class QuotaNode:
    """One ClusterQueue or Cohort in the quota tree (mutable; owned by a Snapshot)."""

    __slots__ = (
        "cached_drs",
        "cached_height",
        "cached_lendable",
        "child_cohorts",
        "child_cqs",
        "is_cluster_queue",
        "local_quota",
        "name",
        "parent",
        "quotas",
        "subtree_quota",
        "usage",
        "version",
        "weight",
    )

    def __init__(
        self,
        name: str,
        *,
        is_cluster_queue: bool,
        quotas: Mapping[FlavorResource, ResourceQuota],
        weight: int = 1000,
    ) -> None:
        self.name = name
        self.is_cluster_queue = is_cluster_queue
        self.parent: QuotaNode | None = None
        self.child_cohorts: list[QuotaNode] = []
        self.child_cqs: list[QuotaNode] = []
        self.quotas: dict[FlavorResource, ResourceQuota] = dict(quotas)
        self.subtree_quota: dict[FlavorResource, int] = {}
        self.usage: dict[FlavorResource, int] = {}
        # Cached localQuota for the frs that have a lendingLimit (others are 0).
        self.local_quota: dict[FlavorResource, int] = {}
        self.weight = weight  # fairSharing.weight in milli-units
        # Caches of values that depend only on the tree's shape and quotas (not on usage);
        # the Snapshot clears them when a quota changes.
        self.cached_height: int | None = None
        self.cached_lendable: dict[ResourceName, int] | None = None
        # Bumped whenever this node's usage changes (also by undo): lets a cycle cache values
        # that depend on the usage of a few nodes (the fair-sharing tournament's DRS).
        self.version = 0
        self.cached_drs: tuple[int, DRS] | None = None  # (version, DRS without extra usage)

    def __repr__(self) -> str:
        kind = "ClusterQueue" if self.is_cluster_queue else "Cohort"
        return f"<{kind} {self.name}>"

    @property
    def has_parent(self) -> bool:
        return self.parent is not None

    def quota(self, fr: FlavorResource) -> ResourceQuota:
        return self.quotas.get(fr, _NO_QUOTA)

    def ancestors(self) -> Iterator[QuotaNode]:
        """Parent, grandparent, ... up to the root (PathParentToRoot)."""
        node = self.parent
        while node is not None:
            yield node
            node = node.parent

    def root(self) -> QuotaNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def subtree(self) -> list[QuotaNode]:
        """This node and every node below it, breadth first (each node's cohorts, then its ClusterQueues)."""
        out = [self]
        i = 0
        while i < len(out):
            n = out[i]
            out.extend(n.child_cohorts)
            out.extend(n.child_cqs)
            i += 1
        return out

    def subtree_cluster_queues(self) -> list[QuotaNode]:
        out = list(self.child_cqs)
        for c in self.child_cohorts:
            out.extend(c.subtree_cluster_queues())
        return out

    def height(self) -> int:
        """getNodeHeight (classical/hierarchical_preemption.go): 1 for a cohort of CQs, +1 per level."""
        if self.cached_height is None:
            h = min(len(self.child_cqs) + len(self.child_cohorts), 1)
            for c in self.child_cohorts:
                h = max(h, c.height() + 1)
            self.cached_height = h
        return self.cached_height

    def lendable(self) -> dict[ResourceName, int]:
        """calculateLendable(node): per resource, potentialAvailable(node, fr) summed over the
        flavors of the root's subtree quota. Depends on quotas only, so it is cached."""
        if self.cached_lendable is None:
            out: dict[ResourceName, int] = {}
            for fr in self.root().subtree_quota:
                out[fr.resource] = out.get(fr.resource, 0) + self.potential_available(fr)
            self.cached_lendable = out
        return self.cached_lendable

    # -- read-only formulas (resource_node.go) --------------------------------------

    def local_available(self, fr: FlavorResource) -> int:
        lq = self.local_quota.get(fr, 0)
        if not lq:
            return 0
        return max(0, lq - self.usage.get(fr, 0))

    def available(self, fr: FlavorResource) -> int:
        """Raw ``available`` (may be negative after a quota cut); callers clamp where Kueue does.

        Kueue's recursion, unrolled from the root down: at each level the parent's
        availability is capped by the node's borrowingLimit, then its own local
        availability is added.
        """
        parent = self.parent
        if parent is None:
            return self.subtree_quota.get(fr, 0) - self.usage.get(fr, 0)
        if parent.parent is None:  # a CQ directly under a root cohort: the common case
            avail = parent.subtree_quota.get(fr, 0) - parent.usage.get(fr, 0)
            u = self.usage.get(fr, 0)
            lq = self.local_quota.get(fr, 0)
            quota = self.quotas.get(fr)
            if quota is not None and quota.borrowing_limit is not None:
                cap = self.subtree_quota.get(fr, 0) - lq - (u - lq if u > lq else 0) + quota.borrowing_limit
                if cap < avail:
                    avail = cap
            if lq > u:
                avail += lq - u
            return avail
        chain: list[QuotaNode] = []
        node = self
        while node.parent is not None:
            chain.append(node)
            node = node.parent
        avail = node.subtree_quota.get(fr, 0) - node.usage.get(fr, 0)
        for node in reversed(chain):
            u = node.usage.get(fr, 0)
            lq = node.local_quota.get(fr, 0)
            quota = node.quotas.get(fr)
            if quota is not None and quota.borrowing_limit is not None:
                cap = node.subtree_quota.get(fr, 0) - lq - (u - lq if u > lq else 0) + quota.borrowing_limit
                if cap < avail:
                    avail = cap
            if lq > u:
                avail += lq - u
        return avail

    def potential_available(self, fr: FlavorResource) -> int:
        parent = self.parent
        if parent is None:
            return self.subtree_quota.get(fr, 0)
        avail = self.local_quota.get(fr, 0) + parent.potential_available(fr)
        quota = self.quotas.get(fr)
        if quota is not None and quota.borrowing_limit is not None:
            avail = min(self.subtree_quota.get(fr, 0) + quota.borrowing_limit, avail)
        return avail

    def borrowing_with(self, fr: FlavorResource, value: int) -> bool:
        """CQ: nominal < usage + value; cohort: subtreeQuota < usage + value (BorrowingWith)."""
        if self.is_cluster_queue:
            return self.quota(fr).nominal < self.usage.get(fr, 0) + value
        return self.subtree_quota.get(fr, 0) < self.usage.get(fr, 0) + value

    def borrowing(self, fr: FlavorResource) -> bool:
        return self.borrowing_with(fr, 0)

    def within_nominal_in(self, frs: Iterable[FlavorResource]) -> bool:
        """IsWithinNominalInResources: usage <= subtreeQuota on every fr."""
        sq = self.subtree_quota
        u = self.usage
        return all(u.get(fr, 0) <= sq.get(fr, 0) for fr in frs)

    def quantities_fit_in_quota(
        self, requests: Mapping[FlavorResource, int]
    ) -> tuple[bool, dict[FlavorResource, int]]:
        """QuantitiesFitInQuota: does usage+request fit subtreeQuota, and what is left for the parent."""
        fits = True
        remaining: dict[FlavorResource, int] = {}
        for fr, v in requests.items():
            if self.subtree_quota.get(fr, 0) < self.usage.get(fr, 0) + v:
                fits = False
            remaining[fr] = max(0, v - self.local_available(fr))
        return fits, remaining

    # -- Dominant Resource Share (fair_sharing.go) ---------------------------------------

    def dominant_resource_share(self, extra: Mapping[FlavorResource, int] | None = None) -> DRS:
        """DRS of this node with ``extra`` usage added (dominantResourceShare)."""
        if not extra:
            cached = self.cached_drs
            if cached is not None and cached[0] == self.version:
                return cached[1]
            drs = self._drs(None)
            self.cached_drs = (self.version, drs)
            return drs
        return self._drs(extra)

    def _drs(self, extra: Mapping[FlavorResource, int] | None) -> DRS:
        parent = self.parent
        if parent is None:
            return DRS(self.weight, 0.0, "", ())
        borrowing: dict[ResourceName, int] = {}
        borrowed: list[FlavorResource] = []
        usage = self.usage
        for fr, quota in self.subtree_quota.items():
            amount = usage.get(fr, 0) - quota
            if extra:
                amount += extra.get(fr, 0)
            if amount > 0:
                borrowing[fr.resource] = borrowing.get(fr.resource, 0) + amount
                borrowed.append(fr)
        if not borrowing:
            return DRS(self.weight, 0.0, "", ())
        lendable = parent.lendable()
        ratio = 0.0
        dominant = ""
        for resource in sorted(borrowing):
            lr = lendable.get(resource, 0)
            if lr > 0:
                r = borrowing[resource] * 1000.0 / lr
                if r > ratio:  # ties keep the alphabetically first resource
                    ratio, dominant = r, resource
        return DRS(self.weight, ratio, dominant, tuple(borrowed))


@dataclass(frozen=True, slots=True)
class DRS:
    """A dominant resource share (Kueue pkg/cache/scheduler/fair_sharing.go DRS)."""

    weight: int  # milli
    unweighted_ratio: float  # per-mille of the lendable quota of the dominant resource
    dominant_resource: str
    borrowed: tuple[FlavorResource, ...]

    @property
    def is_zero(self) -> bool:
        return self.unweighted_ratio == 0

    @property
    def is_borrowing(self) -> bool:
        return bool(self.borrowed)

    def is_borrowing_on(self, requested: Mapping[FlavorResource, int]) -> bool:
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed)

    @property
    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and not self.is_zero

    @property
    def weighted_share(self) -> float:
        """PreciseWeightedShare: ratio / weight; +inf for a zero weight that borrows."""
        if self.is_zero:
            return 0.0
        if self.weight == 0:
            return math.inf
        return self.unweighted_ratio / (self.weight / 1000.0)

    @property
    def rounded_weighted_share(self) -> int:
        """status.fairSharing.weightedShare: ceil of the precise share (MaxInt64 when infinite)."""
        if self.zero_weight_borrows:
            return 2**63 - 1
        return math.ceil(self.weighted_share)


def compare_drs(a: DRS, b: DRS) -> int:
    """CompareDRS: zero-weight borrowers above everyone else; otherwise by weighted share."""
    az, bz = a.zero_weight_borrows, b.zero_weight_borrows
    if az and bz:
        return (a.unweighted_ratio > b.unweighted_ratio) - (a.unweighted_ratio < b.unweighted_ratio)
    if az:
        return 1
    if bz:
        return -1
    x, y = a.weighted_share, b.weighted_share
    return (x > y) - (x < y)


NEGATIVE_DRS = DRS(1000, -1.0, "", ())
