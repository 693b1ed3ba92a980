from __future__ import annotations

import math

import networkx as nx
import pytest

from fairshare.history import UsageHistoryGraph

from .helpers import CPU, GPU, HOUR, close, graph, path

LQ_A = path("/cohort:eng/cq:a/lq:ns-a/default")
LQ_B = path("/cohort:eng/cq:b/lq:ns-b/default")


def test_holding_one_gpu_for_one_half_life_accrues_half_of_h_over_ln2() -> None:
    g = graph(half_life_hours=1)
    g.record_interval(LQ_A, GPU, 1000, 0, HOUR)
    # ∫_0^H 2^(-(H-τ)/H) dτ = (H/ln 2)·(1 - 1/2), in milli-GPU-seconds.
    assert g.usage_at(LQ_A, HOUR) == {GPU: round(1000 * HOUR / math.log(2) / 2)}


def test_usage_halves_every_half_life_after_the_workload_finished() -> None:
    g = graph(half_life_hours=2)
    g.record_interval(LQ_A, GPU, 4000, 0, 600)
    at_end = g.usage_at(LQ_A, 600)[GPU]
    assert close(g.usage_at(LQ_A, 600 + 2 * HOUR)[GPU] * 2, at_end)
    assert close(g.usage_at(LQ_A, 600 + 4 * HOUR)[GPU] * 4, at_end)


def test_a_parent_usage_is_its_own_plus_its_children_exactly() -> None:
    g = graph()
    g.record_interval(LQ_A, GPU, 1000, 0, 100)
    g.record_interval(LQ_B, GPU, 3000, 50, 170)
    g.record_interval(LQ_B, CPU, 8000, 10, 20)
    g.record_interval(path("/cohort:eng/cq:b"), GPU, 500, 0, 30)  # charged to the ClusterQueue itself
    usage = g.usage_all(200)
    for node in g.nodes():
        expected = dict(g.own_usage_at(node, 200))
        for child in g.children(node):
            for fr, v in usage[child].items():
                expected[fr] = expected.get(fr, 0) + v
        assert usage[node] == expected, node
    assert usage[path("/cohort:eng/cq:b")] == g.usage_at(path("/cohort:eng/cq:b"), 200)


def test_a_subtree_usage_sums_the_node_and_every_descendant_in_sorted_order_bit_for_bit() -> None:
    """usage_at walks the subtree from the children lists; the reference is networkx's descendants of the
    graph's structure, summed in the same sorted order (floating-point sums depend on the order)."""
    g = graph()
    leaves = [path(f"/cohort:{c}/cohort:{c}{d}/cq:{c}{d}{q}/lq:ns/default") for c in "xy" for d in "12"
              for q in "ab"]
    for i, leaf in enumerate(leaves):
        g.record_interval(leaf, GPU, 1000 + 7 * i, 3 * i, 100 + 11 * i)
        g.record_interval(leaf.parent, CPU, 300 + i, i, 50 + i)  # charged to a ClusterQueue itself
    g.start("ns/run", leaves[2], {GPU: 3000}, at=120)
    t = 400.0
    tree = g.structure
    for node in g.nodes():
        expected: dict[object, float] = {}
        for n in [node, *sorted(nx.descendants(tree, node))]:
            for fr, v in g.own_usage_at(n, t).items():
                expected[fr] = expected.get(fr, 0) + v
        assert g.usage_at(node, t) == dict(sorted(expected.items())), node  # type: ignore[arg-type]


def test_a_running_workload_counts_only_its_past_part_at_the_read_time() -> None:
    running = graph()
    running.start("ns-a/train-1", LQ_A, {GPU: 2000}, at=100)
    finished = graph()
    finished.record_interval(LQ_A, GPU, 2000, 100, 700)
    assert close(running.usage_at(LQ_A, 700)[GPU], finished.usage_at(LQ_A, 700)[GPU])
    running.stop("ns-a/train-1", at=700)
    assert running.usage_at(LQ_A, 900) == finished.usage_at(LQ_A, 900)


def test_reading_before_the_latest_accrual_is_refused() -> None:
    g = graph()
    g.record_interval(LQ_A, GPU, 1000, 0, 500)
    with pytest.raises(ValueError, match="already has accruals up to 500"):
        g.usage_at(LQ_A, 499)


@pytest.mark.parametrize(
    ("action", "message"),
    [
        (lambda g: g.record_interval(LQ_A, GPU, 1000, 10, 5), "invalid"),
        (lambda g: g.record_interval(LQ_A, GPU, -1, 0, 5), "invalid"),
        (lambda g: g.stop("ns/unknown", 5), "does not hold quota"),
        (lambda g: (g.start("ns/w", LQ_A, {GPU: 1}, 0), g.start("ns/w", LQ_A, {GPU: 1}, 1)), "already holds"),
        (lambda g: g.add_node(LQ_A, weight=-1), "must be >= 0"),
    ],
    ids=["end-before-start", "negative-quantity", "stop-unknown", "start-twice", "negative-weight"],
)
def test_invalid_accruals_are_refused_with_a_clear_message(action: object, message: str) -> None:
    g = graph()
    with pytest.raises(ValueError, match=message):
        action(g)  # type: ignore[operator]


def test_adding_a_deep_node_adds_its_ancestors_with_default_weight() -> None:
    g = graph()
    g.add_node(path("/cohort:eng/cq:a/lq:ns/q/project:llm"), weight=3000)
    assert [str(p) for p in g.nodes()] == [
        "/", "/cohort:eng", "/cohort:eng/cq:a", "/cohort:eng/cq:a/lq:ns/q",
        "/cohort:eng/cq:a/lq:ns/q/project:llm"]
    assert [g.weight(p) for p in g.nodes()] == [1000, 1000, 1000, 1000, 3000]
    assert sorted(g.structure.edges) == sorted(zip(g.nodes()[:-1], g.nodes()[1:], strict=True))


def test_nodes_without_usage_read_as_empty_vectors() -> None:
    g: UsageHistoryGraph = graph()
    g.add_node(LQ_A)
    assert g.usage_all(10) == {p: {} for p in g.nodes()}


def test_real_unix_timestamps_over_a_year_of_hourly_half_lives_stay_exact_and_finite() -> None:
    t0 = 1_764_000_000.0  # 2025-11-24
    g = graph(half_life_hours=1, created_at=t0)
    for day in range(365):
        g.record_interval(LQ_A, GPU, 1000, t0 + day * 86400, t0 + day * 86400 + 3600)
    end = t0 + 364 * 86400 + 3600
    # Only the last hour matters after 24 half-lives a day: one GPU for one half-life, read at its end.
    assert close(g.usage_at(LQ_A, end)[GPU], round(1000 * HOUR / math.log(2) / 2), rel=1e-6)
    assert g.frame.epoch_tick > round(t0 * 1000)  # the epoch moved (8,760 half-lives) without overflow
