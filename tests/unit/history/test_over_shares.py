"""OverShares (FastPaths.lazy_over_shares) against the Fair Tree it stands in for: every node's over-share
is the one `fair_tree` computes, as the same exact Fraction (or None), on random trees, weights (zero
included), usage (closed and still open intervals, several resources) and billing configurations."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from fairshare.history import FairTreeConfig, NodeKind, NodePath, UsageHistoryGraph, fair_tree
from fairshare.history.fair_tree import OverShares
from fairshare.history.serialization import from_dict, to_dict
from fairshare.models import FlavorResource
from fairshare.planners.experiments import _queue_index

from .helpers import CPU, GPU, HOUR, graph, path, tree

MEM = FlavorResource("default", "memory")
A1, A2, B1 = "/cohort:a/cq:a1", "/cohort:a/cq:a2", "/cohort:b/cq:b1"


def random_graph(rng: random.Random) -> tuple[UsageHistoryGraph, float]:
    """Cohorts (some nested), ClusterQueues under them or the root, LocalQueues under some; random weights
    (zero among them), usage recorded on any node, some intervals still open at the read time."""
    g = graph(half_life_hours=rng.choice([0.5, 1.0, 24.0]))
    parents = [NodePath.root()]
    for i in range(rng.randint(1, 4)):
        parent = rng.choice(parents)
        parents.append(parent.child(NodeKind.COHORT, f"c{i}"))
    queues: list[NodePath] = []
    for i in range(rng.randint(1, 8)):
        q = rng.choice(parents).child(NodeKind.CLUSTER_QUEUE, f"q{i}")
        queues.append(q)
        if rng.random() < 0.5:
            queues.append(q.child(NodeKind.LOCAL_QUEUE, f"ns{i}/lq{i}"))
    for p in parents + queues:
        g.add_node(p, weight=rng.choice([0, 500, 1000, 1000, 2000, 3000]))
    resources = [GPU, CPU, MEM][: rng.randint(1, 3)]
    t = 0.0
    for _ in range(rng.randint(0, 30)):
        node = rng.choice(parents + queues)
        fr = rng.choice(resources)
        start = t + rng.uniform(0, 2 * HOUR)
        end = start + rng.uniform(1, 3 * HOUR)
        g.record_interval(node, fr, rng.randint(1, 8) * 1000, start, end)
        t = end
    for i in range(rng.randint(0, 5)):
        t += rng.uniform(0, HOUR)
        g.start(f"open-{i}", rng.choice(queues), {rng.choice(resources): rng.randint(1, 4) * 1000}, t)
    return g, t + rng.uniform(0, 5 * HOUR)


def configs(rng: random.Random) -> list[FairTreeConfig | None]:
    weights = tuple(sorted({(fr.resource, rng.choice([0, 1000, 250])) for fr in (GPU, CPU)}))
    return [None, FairTreeConfig(billing_weights=weights)]


@pytest.mark.parametrize("seed", range(60))
def test_every_node_has_the_over_share_the_fair_tree_computes(seed: int) -> None:
    rng = random.Random(seed)
    g, at = random_graph(rng)
    for cfg in configs(rng):
        full = fair_tree(g, at, cfg)
        lazy = OverShares(g, at, cfg)
        nodes = g.nodes()
        rng.shuffle(nodes)  # asked in any order, each computed when first asked
        for p in nodes:
            got = lazy.of(p)
            assert got == full.nodes[p].over_share, (seed, cfg, str(p))
            assert type(got) is type(full.nodes[p].over_share)
            assert lazy.of(p) is got  # asked again: the same value


def test_a_queue_whose_ancestor_weighs_nothing_has_no_over_share() -> None:
    g = tree(A1, A2, B1, weights={"/cohort:a": 0})
    g.record_interval(path(A1), GPU, 1000, 0.0, HOUR)
    g.record_interval(path(B1), GPU, 1000, 0.0, HOUR)
    lazy, full = OverShares(g, HOUR), fair_tree(g, HOUR)
    assert lazy.of(path(A1)) is None and full.nodes[path(A1)].over_share is None
    # b holds half of the usage and, a weighing nothing, all of the share.
    assert lazy.of(path(B1)) == full.nodes[path(B1)].over_share == Fraction(1, 2)


def test_without_usage_every_over_share_is_zero() -> None:
    g = tree(A1, A2, B1)
    lazy = OverShares(g, 0.0)
    assert [lazy.of(path(p)) for p in (A1, A2, B1)] == [0, 0, 0]
    assert [fair_tree(g, 0.0).nodes[path(p)].over_share for p in (A1, A2, B1)] == [0, 0, 0]


def test_a_read_before_the_history_watermark_is_refused_as_by_the_fair_tree() -> None:
    g = tree(A1)
    g.record_interval(path(A1), GPU, 1000, 0.0, HOUR)
    with pytest.raises(ValueError, match="cannot read usage"):
        fair_tree(g, HOUR / 2)
    with pytest.raises(ValueError, match="cannot read usage"):
        OverShares(g, HOUR / 2)


@pytest.mark.parametrize("seed", range(20))
def test_the_graphs_queue_names_are_the_planners_index_and_follow_added_nodes(seed: int) -> None:
    # UsageHistoryGraph.first_by_name, what the planner finds candidates' queues by with lazy over-shares:
    # the first path of each name (a name may sit under several parents), kept until a node is added.
    rng = random.Random(seed)
    g, _ = random_graph(rng)
    for step in range(4):
        lqs, cqs = _queue_index(g.nodes())
        assert g.first_by_name(NodeKind.LOCAL_QUEUE) == lqs
        assert g.first_by_name(NodeKind.CLUSTER_QUEUE) == cqs
        assert g.first_by_name(NodeKind.PROJECT) == {}
        nodes = g.nodes()
        cohorts = [p for p in nodes if p.kind in (None, NodeKind.COHORT)]
        queues = [p for p in nodes if p.kind is NodeKind.CLUSTER_QUEUE]
        names = [p.name for p in queues] + [f"new{step}", "a"]
        g.add_node(rng.choice(cohorts).child(NodeKind.CLUSTER_QUEUE, rng.choice(names)))
        lq_names = [p.name for p in nodes if p.kind is NodeKind.LOCAL_QUEUE] + ["ns/a"]
        g.add_node(rng.choice(queues).child(NodeKind.LOCAL_QUEUE, rng.choice(lq_names)))


@pytest.mark.parametrize("seed", range(20))
def test_the_whole_trees_usage_is_the_roots_of_every_nodes_usage(seed: int) -> None:
    # UsageHistoryGraph.total_at, the root's usage OverShares bills, without every node's subtree.
    rng = random.Random(seed)
    g, at = random_graph(rng)
    for t in (at, at + rng.uniform(0, 10 * HOUR)):
        assert g.total_at(t) == g.usage_all(t)[NodePath.root()]
        assert list(g.total_at(t)) == list(g.usage_all(t)[NodePath.root()])  # in the same order



# A start (node and usage given) or a stop (None, None) of workload `key` at `t`.
_Op = tuple[str, NodePath | None, dict[FlavorResource, int] | None, float]


def _replayed(ops: list[_Op], half_life_hours: float) -> UsageHistoryGraph:
    """A fresh graph with the same starts and stops and no read between them (nothing kept from one)."""
    g = graph(half_life_hours=half_life_hours)
    for key, node, usage, t in ops:
        if node is not None and usage is not None:
            g.start(key, node, usage, t)
        else:
            g.stop(key, t)
    return g


@pytest.mark.parametrize("seed", range(20))
def test_reads_between_starts_and_stops_see_the_open_intervals_as_a_fresh_graph_does(seed: int) -> None:
    # The graph keeps each node's open intervals in key order between reads (until one of them opens or
    # closes): every read after a start or a stop on the same node or another equals a graph built from the
    # same starts and stops with no read in between. Many intervals per node, one or several resources.
    rng = random.Random(seed)
    half_life = rng.choice([0.5, 1.0, 24.0])
    g = graph(half_life_hours=half_life)
    queues = [NodePath.root().child(NodeKind.CLUSTER_QUEUE, f"q{i}") for i in range(3)]
    resources = [GPU, CPU][: rng.randint(1, 2)]
    ops: list[_Op] = []
    open_keys: list[str] = []
    t = 0.0
    for i in range(60):
        t += rng.uniform(0, 600)
        if open_keys and rng.random() < 0.4:
            key = open_keys.pop(rng.randrange(len(open_keys)))
            ops.append((key, None, None, t))
            g.stop(key, t)
        else:
            key = f"ns/w-{rng.randrange(10_000):04d}-{i}"
            usage = {fr: rng.randint(1, 8) * 1000 + rng.randint(0, 999) for fr in rng.sample(resources, 1)}
            if rng.random() < 0.3:
                usage = {fr: rng.randint(1, 4) * 1000 + 7 for fr in resources}
            node = rng.choice(queues)
            ops.append((key, node, usage, t))
            g.start(key, node, usage, t)
            open_keys.append(key)
        at = t + rng.choice([0.0, 0.001, rng.uniform(0, 2 * HOUR)])
        fresh = _replayed(ops, half_life)
        assert g.total_at(at) == fresh.total_at(at), (seed, i)
        node = rng.choice(queues)
        assert g.usage_at(node, at) == fresh.usage_at(node, at), (seed, i)


def _sign(x: Fraction | None, y: Fraction | None) -> tuple[bool, bool, int]:
    """How two over-shares (or stand-ins) compare: which is None, and -1/0/1 between values."""
    if x is None or y is None:
        return (x is None, y is None, 0)
    return (False, False, (x > y) - (x < y))


@pytest.mark.parametrize("seed", range(60))
def test_the_order_key_orders_and_ties_nodes_as_their_over_shares_when_it_may_stand_in(seed: int) -> None:
    # OverShares.order_key, what rule 2 orders candidates by without the root's usage: on random trees,
    # usage and billing configurations where it may stand in (billing weights, or one resource ever
    # charged), every pair of nodes compares as their over-shares do, and None exactly where they are.
    rng = random.Random(seed)
    g, at = random_graph(rng)
    stood_in = 0
    for cfg in configs(rng):
        shares = OverShares(g, at, cfg)
        if not shares.orders_without_root:
            # Normalized billing over several resources reads the root's total of each.
            assert cfg is None and g.resource_count > 1
            continue
        stood_in += 1
        nodes = [p for p in g.nodes() if not p.is_root]
        rng.shuffle(nodes)
        keys = {p: shares.order_key(p) for p in nodes}
        values = {p: OverShares(g, at, cfg).of(p) for p in nodes}
        for p in nodes:
            assert (keys[p] is None) == (values[p] is None), (seed, cfg, str(p))
            for q in nodes:
                assert _sign(keys[p], keys[q]) == _sign(values[p], values[q]), (seed, cfg, str(p), str(q))
    assert stood_in >= 1  # the billing-weights configuration always may


def test_with_one_resource_charged_normalized_billing_orders_without_the_root() -> None:
    g = tree(A1, A2, B1, weights={"/cohort:a": 3000})
    g.record_interval(path(A1), GPU, 4000, 0.0, HOUR)
    g.record_interval(path(B1), GPU, 1000, 0.0, HOUR)
    g.start("ns/open", path(A2), {GPU: 2000}, HOUR)
    shares = OverShares(g, 2 * HOUR)
    assert g.resource_count == 1 and shares.orders_without_root
    order = sorted((A1, A2, B1), key=lambda p: shares.order_key(path(p)) or 0, reverse=True)
    assert order == sorted((A1, A2, B1), key=lambda p: shares.of(path(p)) or 0, reverse=True)
    g.start("ns/cpu", path(B1), {CPU: 1000}, 2 * HOUR)  # a second resource: the root's totals now weigh
    assert g.resource_count == 2 and not OverShares(g, 2 * HOUR).orders_without_root


def test_the_resources_charged_are_kept_through_serialization() -> None:
    g = tree(A1, B1)
    g.record_interval(path(A1), GPU, 1000, 0.0, HOUR)
    g.start("ns/open", path(B1), {CPU: 1000}, HOUR)
    restored = from_dict(to_dict(g))
    assert restored.resource_count == g.resource_count == 2
