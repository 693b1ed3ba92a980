"""Hypothesis invariants of the decay numerics (docs/history-and-planners.md, "Decay numerics")."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from fairshare.history import HalfLife, UsageHistoryGraph, from_dict, to_dict

from .helpers import CPU, GPU, close, path

LEAVES = [path("/cohort:eng/cq:a/lq:ns-a/q"), path("/cohort:eng/cq:b/lq:ns-b/q"), path("/cq:solo/lq:ns-c/q")]

# (leaf index, gpu?, quantity milli, duration s, gap before the next interval s)
interval = st.tuples(st.integers(0, 2), st.booleans(), st.integers(1, 64_000), st.integers(0, 20_000),
                     st.integers(0, 20_000))
histories = st.lists(interval, min_size=1, max_size=25)
History = list[tuple[int, bool, int, int, int]]
half_lives = st.integers(60, 86_400)


def build(history: History, half_life_s: int, rebase_after: int = 256,
          sample_every: int | None = None) -> tuple[UsageHistoryGraph, float]:
    g = UsageHistoryGraph(HalfLife.of_seconds(half_life_s), created_at=0, rebase_after=rebase_after)
    t = 0.0
    for i, (leaf, gpu, qty, dur, gap) in enumerate(history):
        g.record_interval(LEAVES[leaf], GPU if gpu else CPU, qty, t, t + dur)
        t += dur + gap
        if sample_every and i % sample_every == 0:
            g.usage_all(t)  # reads are pure: sampling must not change anything
    return g, t


@settings(max_examples=60, deadline=None)
@given(histories, half_lives, st.integers(1, 5))
def test_how_often_the_graph_is_sampled_never_changes_a_result(history: History, half_life_s: int,
                                                               every: int) -> None:
    quiet, t = build(history, half_life_s)
    sampled, _ = build(history, half_life_s, sample_every=every)
    assert sampled.usage_all(t) == quiet.usage_all(t)


@settings(max_examples=60, deadline=None)
@given(histories, st.integers(2_000, 10_000))
def test_moving_the_epoch_is_exact_bit_for_bit(history: History, half_life_s: int) -> None:
    # Histories span up to 500 half-lives: rebase_after=1 moves the epoch often, 900 never does.
    often, t = build(history, half_life_s, rebase_after=1)
    never, _ = build(history, half_life_s, rebase_after=900)
    assert never.frame.epoch_tick == 0
    assert often.usage_all(t + 1) == never.usage_all(t + 1)
    assert often.frame.epoch_tick != never.frame.epoch_tick or never.watermark_tick < 2 * half_life_s * 1000


@settings(max_examples=60, deadline=None)
@given(histories, half_lives, st.integers(1, 10**6), st.integers(1, 10**6))
def test_decaying_in_two_steps_equals_one_step(history: History, half_life_s: int, dt1: int,
                                               dt2: int) -> None:
    g, t = build(history, half_life_s)
    h = HalfLife.of_seconds(half_life_s)
    for leaf in LEAVES:  # per leaf: a parent sums its children's rounded values (1 rounding per node)
        direct = g.usage_at(leaf, t + dt1 + dt2)
        via = g.usage_at(leaf, t + dt1)
        for fr, v in via.items():
            assert close(round(v * h.factor(dt2)), direct.get(fr, 0), rel=1e-9), fr
    assert close(round(h.factor(dt1) * h.factor(dt2) * 10**12), round(h.factor(dt1 + dt2) * 10**12))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 64_000), st.integers(0, 10**6), st.integers(1, 10**6), st.data(), half_lives)
def test_splitting_an_interval_in_two_changes_nothing_beyond_rounding(
        qty: int, start: int, dur: int, data: st.DataObject, half_life_s: int) -> None:
    mid = data.draw(st.integers(start, start + dur))
    one = UsageHistoryGraph(HalfLife.of_seconds(half_life_s), created_at=0)
    two = UsageHistoryGraph(HalfLife.of_seconds(half_life_s), created_at=0)
    one.record_interval(LEAVES[0], GPU, qty, start, start + dur)
    two.record_interval(LEAVES[0], GPU, qty, start, mid)
    two.record_interval(LEAVES[0], GPU, qty, mid, start + dur)
    end = start + dur
    assert close(one.usage_at(LEAVES[0], end).get(GPU, 0), two.usage_at(LEAVES[0], end).get(GPU, 0))


@settings(max_examples=60, deadline=None)
@given(histories, half_lives, st.integers(0, 10**5), st.integers(0, 10**5))
def test_an_interval_straddling_the_read_time_counts_its_past_part(
        history: History, half_life_s: int, before: int, after: int) -> None:
    running, t = build(history, half_life_s)
    closed, _ = build(history, half_life_s)
    running.start("ns/w", LEAVES[1], {GPU: 3000}, t)
    closed.record_interval(LEAVES[1], GPU, 3000, t, t + before)
    read = running.usage_at(LEAVES[1], t + before).get(GPU, 0)
    assert close(read, closed.usage_at(LEAVES[1], t + before).get(GPU, 0))
    # Later holding only adds: reading later after stopping sees at least the decayed earlier read.
    running.stop("ns/w", t + before + after)
    later = running.usage_at(LEAVES[1], t + before + after).get(GPU, 0)
    assert later + 1 >= round(read * HalfLife.of_seconds(half_life_s).factor(after))


@settings(max_examples=40, deadline=None)
@given(histories, half_lives, st.booleans())
def test_serialization_round_trips_exactly(history: History, half_life_s: int, with_running: bool) -> None:
    g, t = build(history, half_life_s)
    if with_running:
        g.start("ns-b/train", LEAVES[1], {GPU: 2000, CPU: 16_000}, t)
    g.add_node(LEAVES[2].parent or LEAVES[2], weight=2500)
    data = to_dict(g)
    back = from_dict(data)
    assert to_dict(back) == data
    assert back.usage_all(t + 3600) == g.usage_all(t + 3600)
    assert back.weights() == g.weights()
