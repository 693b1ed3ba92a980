"""The order in which the cycle processes its entries (Kueue pkg/scheduler/scheduler.go
makeClassicalIterator; fair_sharing_iterator.go: the DRS tournament, re-run after every pop)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

from fairshare.models import FlavorResource, WorkloadKey
from fairshare.quota_tree import QuotaNode

from .entry import Entry
from .types import SchedulerConfig

FsKey = tuple[bool, bool, float, int, float]


def classical_order(entries: list[Entry], config: SchedulerConfig) -> list[Entry]:
    """makeClassicalIterator: lower borrowing level, higher priority (PrioritySortingWithinCohort),
    older queue-order time; a stable sort keeps the heads' order for ties."""
    by_priority = config.priority_sorting_within_cohort
    return sorted(
        entries,
        key=lambda e: (
            e.assignment.borrowing,
            -e.info.priority if by_priority else 0,
            e.info.queue_order_time,
        ),
    )


class FairSharingOrder:
    """fairSharingIterator, for one cycle: its DRS keys are cached by the usage versions of each entry's
    path."""

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        self._drs_cache: dict[WorkloadKey, tuple[tuple[int, ...], dict[str, FsKey]]] = {}

    def iterate(self, entries: list[Entry]) -> Iterable[Entry]:
        """fairSharingIterator: each pop runs the DRS tournament on the current snapshot.

        Entries of different root cohorts never compete, so each tree is handled apart
        (Kueue picks a tree per pop in map order; the outcome is the same)."""
        by_root: dict[str, dict[str, Entry]] = {}
        roots: dict[str, QuotaNode] = {}
        for e in entries:
            node = e.cq.node
            if node.parent is None:
                by_root.setdefault("", {})[e.cq.name] = e
            else:
                root = node.root()
                roots[root.name] = root
                by_root.setdefault(root.name, {})[e.cq.name] = e
        order = [e.cq.name for e in entries]
        root_of = {
            e.cq.name: (e.cq.node.root().name if e.cq.node.parent is not None else "") for e in entries
        }
        for name in order:
            rname = root_of[name]
            remaining = by_root.get(rname)
            if not remaining or name not in remaining:
                continue
            if rname == "":
                yield remaining.pop(name)
                continue
            while remaining:
                winner = self._tournament(roots[rname], remaining)
                del remaining[winner.cq.name]
                yield winner

    def _tournament(self, root: QuotaNode, remaining: Mapping[str, Entry]) -> Entry:
        """computeDRS + runTournament for one pop."""
        keys = {name: self._entry_keys(e) for name, e in remaining.items()}
        winner = run_tournament(root, remaining, keys)
        if winner is None:  # pragma: no cover - remaining entries are in this tree
            return next(iter(remaining.values()))
        return winner

    def _entry_keys(self, e: Entry) -> dict[str, FsKey]:
        """For each ancestor cohort P of the entry's CQ: the comparison key of the entry at P,
        from the DRS of P's child on the path with the entry's usage added (computeDRS,
        entryComparer.less). Computed without touching the snapshot; cached per cycle by
        the usage versions of the path's nodes."""
        path = [e.cq.node, *e.cq.node.ancestors()]
        # The DRS at each level depends on the usage of the nodes below that level's parent
        # (and on quotas, fixed during a cycle), not on the root's.
        versions = tuple(n.version for n in path[:-1])
        cached = self._drs_cache.get(e.info.key)
        if cached is not None and cached[0] == versions:
            return cached[1]
        usage = e.assignment.usage
        extra: Mapping[FlavorResource, int] = usage
        out: dict[str, FsKey] = {}
        prio = -e.info.priority if self.config.priority_sorting_within_cohort else 0
        for node, parent in itertools.pairwise(path):
            drs = node.dominant_resource_share(extra)
            borrowing = self.config.fair_sharing_prioritize_non_borrowing and drs.is_borrowing_on(usage)
            zero_weight = drs.zero_weight_borrows
            share = drs.unweighted_ratio if zero_weight else drs.weighted_share
            out[parent.name] = (borrowing, zero_weight, share, prio, e.info.queue_order_time)
            # addUsage: what exceeds the node's local availability flows to the parent.
            nxt: dict[FlavorResource, int] = {}
            for fr, val in extra.items():
                la = node.local_available(fr)
                if val > la:
                    nxt[fr] = val - la
            extra = nxt
        self._drs_cache[e.info.key] = (versions, out)
        return out

    # -- process -------------------------------------------------------------------------------


def run_tournament(
    cohort: QuotaNode, remaining: Mapping[str, Entry], keys: Mapping[str, Mapping[str, FsKey]]
) -> Entry | None:
    """runTournament: the best candidate of every child bubbles up; compared at each cohort by
    entryComparer.less (not borrowing on its flavor-resources first, lower DRS — zero-weight
    borrowers last —, higher priority, older queue-order time). Ties keep the first."""
    candidates: list[Entry] = []
    for child in cohort.child_cohorts:
        c = run_tournament(child, remaining, keys)
        if c is not None:
            candidates.append(c)
    for cq in cohort.child_cqs:
        e = remaining.get(cq.name)
        if e is not None:
            candidates.append(e)
    if not candidates:
        return None
    name = cohort.name
    return min(candidates, key=lambda c: keys[c.cq.name][name])
