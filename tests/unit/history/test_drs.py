from __future__ import annotations

import math
from fractions import Fraction

from fairshare.history.drs import compare_drs, effective_quotas, entitlement_seconds, history_drs

from .helpers import GPU, HOUR, graph, path

CQ_A, CQ_B = path("/cohort:eng/cq:a"), path("/cohort:eng/cq:b")
LQ_A1, LQ_A2 = path("/cohort:eng/cq:a/lq:ns/one"), path("/cohort:eng/cq:a/lq:ns/two")


def test_the_decayed_entitlement_of_one_unit_tends_to_h_over_ln2() -> None:
    g = graph(half_life_hours=1, created_at=0)
    assert entitlement_seconds(g, HOUR) == HOUR / math.log(2) / 2
    assert abs(entitlement_seconds(g, 100 * HOUR) - HOUR / math.log(2)) < 1e-6
    assert entitlement_seconds(g, 0) == 0.0


def test_quotas_sum_up_to_cohorts_and_split_down_to_local_queues_by_weight() -> None:
    g = graph()
    for p in (LQ_A1, LQ_A2, CQ_B):
        g.add_node(p)
    g.add_node(LQ_A2, weight=3000)
    eff = effective_quotas(g, {CQ_A: {GPU: 4000}, CQ_B: {GPU: 2000}})
    assert eff[path("/cohort:eng")] == {GPU: Fraction(6000)}
    assert eff[path("/")] == {GPU: Fraction(6000)}
    assert (eff[LQ_A1], eff[LQ_A2]) == ({GPU: Fraction(1000)}, {GPU: Fraction(3000)})


def test_a_queue_that_used_more_than_its_quota_over_history_has_a_positive_share() -> None:
    g = graph(half_life_hours=1, created_at=0)
    g.add_node(CQ_B, weight=2000)
    # a held 3 GPUs for 10 half-lives on a 1-GPU quota; b held its 1 GPU: a borrowed ~2 GPUs of decayed time.
    g.record_interval(CQ_A, GPU, 3000, 0, 10 * HOUR)
    g.record_interval(CQ_B, GPU, 1000, 0, 10 * HOUR)
    drs = history_drs(g, 10 * HOUR, {CQ_A: {GPU: 1000}, CQ_B: {GPU: 1000}})
    a, b = drs[CQ_A], drs[CQ_B]
    assert b.share == 0 and b.dominant_resource is None
    assert a.dominant_resource == "nvidia.com/gpu"
    # borrowed / lendable = (3 - 1) / 2 GPUs of the cohort -> 1000 per mille, up to float rounding.
    assert abs(a.share - 1000) < Fraction(1, 1000)  # usage leaves the graph rounded to milli-GPU-seconds
    assert a.weighted_share == a.share
    assert compare_drs(a, b) == 1
    assert a.explanation == (
        "/cohort:eng/cq:a: borrowed 2.88 of 2.88 lendable nvidia.com/gpu-hours (decayed) -> 1000 per mille "
        "on nvidia.com/gpu, weight 1 -> weighted share 1000; compared with b; 2nd lowest of 2 sibling(s) -> "
        "factor 0.5")
    assert b.explanation == ("/cohort:eng/cq:b: within its decayed entitlement on every resource -> share 0 "
                             "(not borrowing from /cohort:eng); 1st lowest of 2 sibling(s) -> factor 1")
    assert (a.position, a.factor, b.position, b.factor) == (2, Fraction(1, 2), 1, Fraction(1))
    assert drs[path("/")].share == 0


def test_weight_divides_the_share_and_zero_weight_is_infinite() -> None:
    g = graph(half_life_hours=1, created_at=0)
    g.add_node(CQ_A, weight=4000)
    g.add_node(CQ_B, weight=0)
    g.record_interval(CQ_A, GPU, 2000, 0, HOUR)
    g.record_interval(CQ_B, GPU, 2000, 0, HOUR)
    drs = history_drs(g, HOUR, {CQ_A: {GPU: 1000}, CQ_B: {GPU: 1000}})
    assert drs[CQ_A].weighted_share == drs[CQ_A].share / 4
    assert drs[CQ_B].weighted_share is None
    assert compare_drs(drs[CQ_B], drs[CQ_A]) == 1
