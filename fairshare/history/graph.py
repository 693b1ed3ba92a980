"""The usage history graph: decayed resource-seconds per node and flavor-resource, with weights.

Structure is a ``networkx.DiGraph`` (root -> cohorts -> ClusterQueues -> LocalQueues -> projects), nodes
keyed by :class:`NodePath`, each with a ``weight`` attribute (fair-share weight, milli-units, default 1000 =
weight 1). Usage is charged where a workload runs (usually a LocalQueue or project node); a node's usage is
its own plus its descendants', summed on read so that parent = own + Σ children holds exactly on the ints.

Accrual follows the time a workload *holds quota*: from admission to finish or eviction. A finished holding
is one ``record_interval``; a running one is ``start`` ... ``stop``, and reads integrate it up to the read
time (an interval that straddles the read time counts only its past part). Time only moves forward: a read
at a time before the latest recorded end (the watermark) is refused, because it would count the future.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

import networkx as nx

from fairshare.history.decay import LN2, TICKS_PER_SECOND, DecayFrame, HalfLife, rescale, to_ticks
from fairshare.history.paths import NodeKind, NodePath
from fairshare.models import FlavorResource, Milli, ResourceName, Seconds

DEFAULT_WEIGHT: Milli = 1000
# Move the epoch once the newest time is this many half-lives past it: floats stay far from overflow
# (2^256 << 1.8e308) and the move is an exact power-of-two scaling (see decay.py).
DEFAULT_REBASE_AFTER = 256
MAX_REBASE_AFTER = 900  # 2^900 times any realistic mass stays below 1.8e308
_NO_NAMES: Mapping[str, NodePath] = MappingProxyType({})

UsageVector = dict[FlavorResource, int]  # decayed milli-resource-seconds


@dataclass(frozen=True, slots=True, init=False)
class OpenInterval:
    """A workload holding quota right now: charged to ``path`` since ``start_tick``."""

    key: str
    path: NodePath
    usage: tuple[tuple[FlavorResource, Milli], ...]
    start_tick: int

    def __init__(self, key: str, path: NodePath, usage: tuple[tuple[FlavorResource, Milli], ...],
                 start_tick: int) -> None:
        # (init=False: a dataclass-generated __init__ runs interpreted even compiled; scheduler/types.py)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "usage", usage)
        object.__setattr__(self, "start_tick", start_tick)


# A node's open usage in key order as (flavor-resource, quantity, start tick), with the one flavor-resource
# all of it holds (None: several).
_Entries = tuple[FlavorResource | None, list[tuple[FlavorResource, Milli, int]]]


class UsageHistoryGraph:
    """Decayed usage history over a tree of typed paths. Deterministic; never reads the clock."""

    def __init__(self, half_life: HalfLife, *, created_at: Seconds,
                 rebase_after: int = DEFAULT_REBASE_AFTER) -> None:
        if not 1 <= rebase_after <= MAX_REBASE_AFTER:
            raise ValueError(f"rebase_after must be 1..{MAX_REBASE_AFTER} half-lives (float range)")
        self._half_life = half_life
        created = to_ticks(created_at)
        self._created_tick = created
        self._frame = DecayFrame(half_life, created)
        self._rebase_after = rebase_after
        self._watermark = created
        self._g: nx.DiGraph[NodePath] = nx.DiGraph()
        self._g.add_node(NodePath.root(), weight=DEFAULT_WEIGHT)
        # Mirrors of the DiGraph kept for the hot paths (networkx attribute views cost ~1 us per access).
        self._weights: dict[NodePath, Milli] = {NodePath.root(): DEFAULT_WEIGHT}
        self._children: dict[NodePath, list[NodePath]] = {NodePath.root(): []}
        self._closed: dict[NodePath, dict[FlavorResource, float]] = {NodePath.root(): {}}
        self._open: dict[str, OpenInterval] = {}
        self._bottom_up: list[NodePath] | None = None  # nodes deepest first, cached until a node is added
        self._sorted: list[NodePath] | None = None  # nodes in path order, same caching
        self._by_name: dict[NodeKind, dict[str, NodePath]] | None = None  # first_by_name, same caching
        self._open_by_node: dict[NodePath, set[str]] = {}
        # Each node's open usage in key order (the order its held values are added in), kept until an
        # interval of the node opens or closes.
        self._open_entries: dict[NodePath, _Entries] = {}
        # Every resource a flavor-resource of which was ever charged (closed mass or open interval): only
        # grows (OverShares.order_key reads whether it has more than one).
        self._resources: set[ResourceName] = set()

    # --- structure -----------------------------------------------------------------------------------

    @property
    def half_life(self) -> HalfLife:
        return self._half_life

    @property
    def frame(self) -> DecayFrame:
        return self._frame

    @property
    def created_tick(self) -> int:
        return self._created_tick

    @property
    def watermark_tick(self) -> int:
        """The latest time (ms) any accrual was recorded at; reads must not be earlier."""
        return self._watermark

    @property
    def structure(self) -> nx.DiGraph[NodePath]:
        """A read-only view of the tree (edges parent -> child, node attribute ``weight``)."""
        view: nx.DiGraph[NodePath] = self._g.copy(as_view=True)
        return view

    def add_node(self, path: NodePath, *, weight: Milli | None = None) -> None:
        """Add ``path`` and any missing ancestors (default weight 1). Sets the weight if given."""
        if weight is not None and weight < 0:
            raise ValueError(f"weight of {path} must be >= 0, got {weight}")
        if path not in self._closed:
            parent = path.parent
            if parent is not None and parent not in self._closed:
                self.add_node(parent)
            self._g.add_node(path, weight=DEFAULT_WEIGHT)
            self._bottom_up = None
            self._sorted = None
            self._by_name = None
            self._weights[path] = DEFAULT_WEIGHT
            self._children[path] = []
            if parent is not None:
                self._g.add_edge(parent, path)
                bisect.insort(self._children[parent], path)
            self._closed[path] = {}
        if weight is not None:
            self._g.nodes[path]["weight"] = weight
            self._weights[path] = weight

    def __contains__(self, path: object) -> bool:
        return path in self._closed

    def __len__(self) -> int:
        return len(self._closed)

    def weight(self, path: NodePath) -> Milli:
        return self._weights[path]

    def weights(self) -> dict[NodePath, Milli]:
        """Weight of every node (a copy)."""
        return dict(self._weights)

    def nodes(self) -> list[NodePath]:
        """All nodes, sorted (root first, then lexicographic by segments)."""
        if self._sorted is None:
            self._sorted = sorted(self._closed)
        return list(self._sorted)

    def first_by_name(self, kind: NodeKind) -> Mapping[str, NodePath]:
        """The first node (in path order) of each name among the nodes of ``kind`` (read-only; cached until
        a node is added, like ``nodes``)."""
        if self._by_name is None:
            by_name: dict[NodeKind, dict[str, NodePath]] = {}
            for path in self.nodes():
                if path:
                    by_name.setdefault(NodeKind(path[-1].kind), {}).setdefault(path[-1].name, path)
            self._by_name = by_name
        return self._by_name.get(kind, _NO_NAMES)

    def children(self, path: NodePath) -> list[NodePath]:
        """Children of ``path``, sorted."""
        return list(self._children[path])

    def children_map(self) -> dict[NodePath, tuple[NodePath, ...]]:
        """Sorted children of every node."""
        return {p: tuple(kids) for p, kids in self._children.items()}

    def is_leaf(self, path: NodePath) -> bool:
        return not self._children[path]

    # --- accrual -------------------------------------------------------------------------------------

    def record_interval(self, path: NodePath, fr: FlavorResource, quantity_milli: Milli,
                        start: Seconds, end: Seconds) -> None:
        """Charge ``quantity_milli`` of ``fr`` held from ``start`` to ``end`` (seconds) to ``path``."""
        s = round(start * 1000)
        e = round(end * 1000)
        if e < s or quantity_milli < 0:
            raise ValueError(f"interval [{start}, {end}] holding {quantity_milli} for {path} is invalid")
        bucket = self._closed.get(path)
        if bucket is None:
            self.add_node(path)
            bucket = self._closed[path]
        self._resources.add(fr.resource)
        if e > self._watermark:
            self._advance(e)
        mass = self._frame.interval_mass(quantity_milli, s, e)
        if mass:
            bucket[fr] = bucket.get(fr, 0.0) + mass

    def start(self, key: str, path: NodePath, usage: Mapping[FlavorResource, Milli], at: Seconds) -> None:
        """A workload ``key`` starts holding ``usage`` (its admission) at ``at``."""
        if key in self._open:
            raise ValueError(f"workload {key} already holds quota since {self._open[key].start_tick / 1000}s")
        tick = to_ticks(at)
        if path not in self._closed:
            self.add_node(path)
        if tick > self._watermark:
            self._advance(tick)
        items = tuple(sorted((fr, q) for fr, q in usage.items() if q != 0))
        if any(q < 0 for _, q in items):
            raise ValueError(f"negative usage for workload {key}")
        for fr, _ in items:
            self._resources.add(fr.resource)
        self._open[key] = OpenInterval(key, path, items, tick)
        self._open_by_node.setdefault(path, set()).add(key)
        self._open_entries.pop(path, None)

    def stop(self, key: str, at: Seconds) -> None:
        """The workload ``key`` stops holding quota (finished or evicted) at ``at``."""
        interval = self._open.pop(key, None)
        if interval is None:
            raise ValueError(f"workload {key} does not hold quota")
        tick = to_ticks(at)
        if tick < interval.start_tick:
            self._open[key] = interval
            raise ValueError(f"workload {key} cannot stop at {at}s, before its start")
        if tick > self._watermark:
            self._advance(tick)
        keys = self._open_by_node[interval.path]
        keys.discard(key)
        self._open_entries.pop(interval.path, None)
        if not keys:
            del self._open_by_node[interval.path]
        bucket = self._closed[interval.path]
        for fr, q in interval.usage:
            mass = self._frame.interval_mass(q, interval.start_tick, tick)
            if mass:
                bucket[fr] = bucket.get(fr, 0.0) + mass

    @property
    def resource_count(self) -> int:
        """How many resources were ever charged to the graph (at least those of every usage it reads)."""
        return len(self._resources)

    def is_open(self, key: str) -> bool:
        """Whether workload ``key`` holds quota (has an open interval)."""
        return key in self._open

    def running(self) -> list[OpenInterval]:
        """Open intervals, sorted by workload key."""
        return [self._open[k] for k in sorted(self._open)]

    def _advance(self, tick: int) -> None:
        self._watermark = tick
        k = self._frame.half_lives_since_epoch(tick)
        if k > self._rebase_after:
            self._rebase(k)

    def _rebase(self, half_lives: int) -> None:
        # Exact: every stored value scales by 2^-k and the decomposition t-E = n·H + r keeps r (decay.py).
        self._frame = self._frame.shifted(half_lives)
        for bucket in self._closed.values():
            for fr in bucket:
                bucket[fr] = rescale(bucket[fr], half_lives)

    # --- reads ---------------------------------------------------------------------------------------

    def check_read(self, t: Seconds) -> None:
        """Refuse (ValueError) a read at ``t`` before the accruals already recorded, as every read does."""
        self._check_read(to_ticks(t))

    def _check_read(self, tick: int) -> None:
        if tick < self._watermark:
            raise ValueError(
                f"cannot read usage at {tick / 1000}s: the history already has accruals up to "
                f"{self._watermark / 1000}s"
            )

    def own_usage_at(self, path: NodePath, t: Seconds) -> UsageVector:
        """Decayed usage charged to ``path`` itself (not its descendants) at ``t``."""
        tick = to_ticks(t)
        self._check_read(tick)
        return self._own(path, tick)

    def _entries_in_order(self, path: NodePath, keys: set[str]) -> _Entries:
        """The usage of ``path``'s open intervals (``keys``: its open workloads) in key order, each
        interval's in its own order, as (flavor-resource, quantity, start tick); and the flavor-resource they
        all hold (None: several)."""
        out = self._open_entries.get(path)
        if out is None:
            intervals = [self._open[key] for key in sorted(keys)]
            entries = [(fr, q, i.start_tick) for i in intervals for fr, q in i.usage]
            frs = {fr for fr, _, _ in entries}
            out = self._open_entries[path] = (next(iter(frs)) if len(frs) == 1 else None, entries)
        return out

    def _own(self, path: NodePath, tick: int) -> UsageVector:
        frame = self._frame
        closed = self._closed.get(path)
        if closed is None:  # a node never seen has no usage
            return {}
        open_keys = self._open_by_node.get(path)
        if not closed and not open_keys:
            return {}
        n, r = divmod(tick - frame.epoch_tick, frame.half_life.ticks)
        shrink = 2.0 ** (-r / frame.half_life.ticks)
        # The stored epoch-frame mass decayed to `tick`: m·2^(-r/H)·2^(-n) for n whole half-lives and r ticks.
        values = {fr: math.ldexp(m * shrink, -n) for fr, m in closed.items()}
        for fr, q, start in self._entries_in_order(path, open_keys)[1] if open_keys else ():
            values[fr] = values.get(fr, 0.0) + frame.held_value(q, start, tick)
        out: UsageVector = {}
        for fr in sorted(values):
            value = round(values[fr])
            if value:
                out[fr] = value
        return out

    def total_at(self, t: Seconds) -> UsageVector:
        """Usage of the whole tree at ``t``: ``usage_all(t)``'s root (every node's usage, rounded per node
        as there, summed), without building every node's subtree."""
        tick = to_ticks(t)
        self._check_read(tick)
        frame = self._frame
        n, r = divmod(tick - frame.epoch_tick, frame.half_life.ticks)
        shrink = 2.0 ** (-r / frame.half_life.ticks)
        ldexp, expm1 = math.ldexp, math.expm1
        h = frame.half_life.ticks
        scale = h / TICKS_PER_SECOND / LN2  # DecayFrame.held_value's factor
        open_nodes = self._open_by_node
        total: dict[FlavorResource, int] = {}
        for node, closed in self._closed.items():
            keys = open_nodes.get(node)
            if keys:
                # _own (the same operations: bit-identical): the closed masses, each open interval's held
                # value (DecayFrame.held_value, inlined) added in key order, rounded per flavor-resource.
                values = {fr: ldexp(m * shrink, -n) for fr, m in closed.items()}
                one, entries = self._entries_in_order(node, keys)
                if one is not None:
                    # One flavor-resource: the same additions in the same order, in a local.
                    acc = values.get(one, 0.0)
                    for _, q, start in entries:
                        held = 0.0
                        if tick > start and q != 0:
                            held = q * scale * -expm1(-(tick - start) * LN2 / h)
                        acc = acc + held
                    values[one] = acc
                else:
                    for fr, q, start in entries:
                        held = 0.0
                        if tick > start and q != 0:
                            held = q * scale * -expm1(-(tick - start) * LN2 / h)
                        values[fr] = values.get(fr, 0.0) + held
                for fr, v in values.items():
                    value = round(v)
                    if value:
                        total[fr] = total.get(fr, 0) + value
            else:
                for fr, m in closed.items():  # usage_all's closed-only case (same operations)
                    value = round(ldexp(m * shrink, -n))
                    if value:
                        total[fr] = total.get(fr, 0) + value
        return total if len(total) < 2 else dict(sorted(total.items()))

    def usage_at(self, path: NodePath, t: Seconds) -> UsageVector:
        """Decayed usage of ``path``'s whole subtree at ``t`` (milli-resource-seconds per flavor-resource)."""
        tick = to_ticks(t)
        self._check_read(tick)
        total: UsageVector = {}
        if path not in self._closed:
            return total
        # The subtree from the children lists (the graph's edges, kept beside it), not nx.descendants: the
        # same nodes in the same sorted order, without networkx's interpreted traversal.
        children = self._children
        below: list[NodePath] = []
        stack = list(children[path])
        while stack:
            node = stack.pop()
            below.append(node)
            stack.extend(children[node])
        below.sort()
        for node in [path, *below]:
            for fr, v in self._own(node, tick).items():
                total[fr] = total.get(fr, 0) + v
        return dict(sorted(total.items()))

    def usage_all(self, t: Seconds) -> dict[NodePath, UsageVector]:
        """Subtree usage of every node at ``t``, in one bottom-up pass."""
        tick = to_ticks(t)
        self._check_read(tick)
        frame = self._frame
        n, r = divmod(tick - frame.epoch_tick, frame.half_life.ticks)
        shrink = 2.0 ** (-r / frame.half_life.ticks)
        ldexp = math.ldexp
        open_nodes = self._open_by_node
        children = self._children
        totals: dict[NodePath, UsageVector] = {}
        if self._bottom_up is None:
            self._bottom_up = sorted(self._closed, key=len, reverse=True)
        for node in self._bottom_up:
            if node in open_nodes:
                acc = self._own(node, tick)
            else:
                # The closed-only case of _own, inlined (same operations, bit-identical): one call per node
                # is most of the cost of a full pass.
                acc = {}
                for fr, m in self._closed[node].items():
                    value = round(ldexp(m * shrink, -n))
                    if value:
                        acc[fr] = value
            for child in children[node]:
                for fr, v in totals[child].items():
                    acc[fr] = acc.get(fr, 0) + v
            totals[node] = acc if len(acc) < 2 else dict(sorted(acc.items()))
        return totals

    # --- serialization support -----------------------------------------------------------------------

    def stored_state(self) -> Iterable[tuple[NodePath, Milli, dict[FlavorResource, float]]]:
        """(path, weight, epoch-frame masses) for every node, sorted: what serialization writes."""
        for path in self.nodes():
            yield path, self.weight(path), dict(sorted(self._closed[path].items()))

    def restore_state(self, *, epoch_tick: int, watermark_tick: int,
                      nodes: Iterable[tuple[NodePath, Milli, Mapping[FlavorResource, float]]],
                      open_intervals: Iterable[OpenInterval]) -> None:
        """Load what ``stored_state`` produced (used by serialization; the graph must be empty)."""
        if len(self._closed) != 1 or self._open:
            raise ValueError("restore_state needs an empty graph")
        self._frame = DecayFrame(self._half_life, epoch_tick)
        self._watermark = watermark_tick
        for path, weight, masses in nodes:
            self.add_node(path, weight=weight)
            self._closed[path].update(masses)
            self._resources.update(fr.resource for fr in masses)
        for interval in open_intervals:
            if interval.path not in self._closed:
                self.add_node(interval.path)
            self._resources.update(fr.resource for fr, _ in interval.usage)
            self._open[interval.key] = interval
            self._open_by_node.setdefault(interval.path, set()).add(interval.key)
            self._open_entries.pop(interval.path, None)
