from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairshare.history import FairTreeConfig, NodePath, UsageHistoryGraph, fair_tree
from fairshare.history.graph import UsageVector

from .helpers import CPU, GPU, path, tree

A, B = "/cohort:a", "/cohort:b"
A1, A2, B1 = "/cohort:a/cq:a1", "/cohort:a/cq:a2", "/cohort:b/cq:b1"


def usage_of(g: UsageHistoryGraph, leaf_usage: dict[str, int]) -> dict[NodePath, UsageVector]:
    """Subtree usage from GPU usage given per leaf (text paths), summed up the tree exactly."""
    out: dict[NodePath, UsageVector] = {p: {} for p in g.nodes()}
    for text, v in leaf_usage.items():
        leaf = path(text)
        for node in (*leaf.ancestors(), leaf):
            out[node][GPU] = out[node].get(GPU, 0) + v
    return out


def ranks(g: UsageHistoryGraph, leaf_usage: dict[str, int]) -> dict[str, int]:
    result = fair_tree(g, 0.0, usage=usage_of(g, leaf_usage))
    return {str(p): n.rank for p, n in result.nodes.items() if n.is_leaf}


@pytest.mark.parametrize(
    ("leaf_usage", "expected"),
    [
        # A: S=1/2, U=40/100 -> LF 5/4; B: LF 5/6. In A: a2 (LF 2) before a1 (LF 2/3). Then B's b1.
        ({A1: 30, A2: 10, B1: 60}, {A2: 3, A1: 2, B1: 1}),
        # Rule 1: sibling leaves with equal LF share a rank; the next leaf gets the rank it would have had.
        ({A1: 20, A2: 20, B1: 60}, {A1: 3, A2: 3, B1: 1}),
        # Rule 2: A and B tie (LF 1), so their children are merged: a2 (5/2), b1 (1), a1 (5/8).
        ({A1: 40, A2: 10, B1: 50}, {A2: 3, B1: 2, A1: 1}),
        # Zero usage everywhere: every LF is infinite, everyone ties at the top.
        ({}, {A1: 3, A2: 3, B1: 3}),
        # A leaf without usage (U = 0) has an infinite LF and ranks first among its siblings.
        ({A1: 50, B1: 50}, {A2: 3, A1: 1, B1: 2}),
    ],
    ids=["plain-order", "tied-leaves-share-a-rank", "tied-accounts-merge-children", "no-usage-at-all",
         "zero-usage-is-infinite"],
)
def test_fair_tree_ranks_leaves_as_slurm_does(leaf_usage: dict[str, int], expected: dict[str, int]) -> None:
    g = tree(A1, A2, B1)
    assert ranks(g, leaf_usage) == expected


def test_a_leaf_tied_with_an_inner_sibling_ranks_like_its_best_leaf() -> None:
    # Rule 3: u (leaf) and A (inner) both have LF 1; u sorts first and A's best leaf gets u's rank.
    g = tree("/cq:u", A1, A2)
    assert ranks(g, {"/cq:u": 50, A1: 50}) == {"/cq:u": 3, A2: 3, A1: 1}


def test_a_zero_weight_node_ranks_last_whatever_its_usage() -> None:
    g = tree(A1, A2, B1, weights={A2: 0})
    assert ranks(g, {A1: 90, B1: 10}) == {A1: 2, A2: 1, B1: 3}


def test_each_node_reports_share_usage_level_fair_share_and_factor_exactly() -> None:
    g = tree(A1, A2, B1, weights={A: 3000})
    result = fair_tree(g, 0.0, usage=usage_of(g, {A1: 30, A2: 10, B1: 60}))
    a, b, a1 = result.nodes[path(A)], result.nodes[path(B)], result.nodes[path(A1)]
    assert (a.share, a.usage_share, a.level_fs) == (Fraction(3, 4), Fraction(2, 5), Fraction(15, 8))
    assert (b.share, b.usage_share, b.level_fs) == (Fraction(1, 4), Fraction(3, 5), Fraction(5, 12))
    assert (a1.global_share, a1.global_usage) == (Fraction(3, 8), Fraction(3, 10))
    assert a1.over_share == Fraction(4, 5)
    assert [str(p) for p in result.ranking] == [A2, A1, B1]
    assert [result.nodes[p].factor for p in result.ranking] == [Fraction(1), Fraction(2, 3), Fraction(1, 3)]
    assert result.nodes[path("/")].factor == Fraction(1)
    assert a1.explanation == (
        "/cohort:a/cq:a1: share 0.5 of its siblings' weight, usage 0.75 of its parent's -> level fair share "
        "0.667; 2nd of 2 siblings, below a2; rank 2/3 -> factor 0.667")
    assert b.explanation == (
        "/cohort:b: share 0.25 of its siblings' weight, usage 0.6 of its parent's -> level fair share 0.417; "
        "2nd of 2 siblings, below a; its best leaf has rank 1/3 (factor 0.333)")


def test_billing_weights_turn_several_resources_into_one_usage() -> None:
    g = tree(A1, B1)
    usage: dict[NodePath, UsageVector] = {p: {} for p in g.nodes()}
    for text, vec in {A1: {GPU: 10, CPU: 1000}, B1: {GPU: 20, CPU: 0}}.items():
        for node in (*path(text).ancestors(), path(text)):
            for fr, v in vec.items():
                usage[node][fr] = usage[node].get(fr, 0) + v
    gpu_only = fair_tree(g, 0.0, FairTreeConfig(billing_weights=(("nvidia.com/gpu", 1000),)), usage=usage)
    everything = fair_tree(g, 0.0, usage=usage)
    assert [str(p) for p in gpu_only.ranking] == [A1, B1]
    assert [str(p) for p in everything.ranking] == [B1, A1]


# --- invariants -----------------------------------------------------------------------------------------

LEAVES = [A1, A2, B1, "/cohort:b/cq:b2", "/cohort:b/cq:b3/lq:ns/q", "/cq:solo"]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=len(LEAVES), max_size=len(LEAVES)),
       st.lists(st.integers(0, 3000), min_size=len(LEAVES), max_size=len(LEAVES)))
def test_a_sibling_with_higher_level_fair_share_outranks_all_of_the_other_siblings_leaves(
        usages: list[int], weights: list[int]) -> None:
    g = tree(*LEAVES, weights={leaf: w for leaf, w in zip(LEAVES, weights, strict=True)})
    result = fair_tree(g, 0.0, usage=usage_of(g, dict(zip(LEAVES, usages, strict=True))))
    leaves_under = {p: [q for q in result.ranking if q[:len(p)] == p] for p in result.nodes}
    for p, node in result.nodes.items():
        if node.is_leaf:
            assert 0 < node.factor <= 1
        for q in result.nodes[p].tie_group:
            assert result.nodes[q].level_fs == node.level_fs
            if node.is_leaf and result.nodes[q].is_leaf:
                assert result.nodes[q].rank == node.rank  # rule 1: tied sibling leaves share a rank
        parent = p.parent
        if parent is None:
            continue
        for sibling in g.children(parent):
            lf_p, lf_s = node.level_fs, result.nodes[sibling].level_fs
            higher = lf_s is not None and (lf_p is None or lf_p > lf_s)
            if higher:
                assert min(result.nodes[x].rank for x in leaves_under[p]) > max(
                    result.nodes[y].rank for y in leaves_under[sibling])
    assert sorted(result.ranking) == sorted(p for p, n in result.nodes.items() if n.is_leaf)
    ranks = [result.nodes[p].rank for p in result.ranking]
    assert ranks == sorted(ranks, reverse=True) and ranks[0] == len(ranks)
