from __future__ import annotations

import math

import pytest

from fairshare.afs import alpha, decayed_consumed, entry_penalty, local_queue_usage


def test_alpha_is_half_after_one_half_life_and_zero_without_a_half_life() -> None:
    assert (alpha(60, 60), alpha(120, 60), alpha(10, 0)) == (0.5, 0.75, 0.0)


def test_consumed_usage_decays_toward_the_current_usage() -> None:
    # half of the old 8 cpu remains, half of the current 2 cpu (2000m) is added
    assert decayed_consumed({"cpu": 8.0}, {"cpu": 2000}, 60, 60) == pytest.approx({"cpu": 5.0})


def test_an_admission_adds_a_penalty_of_one_sampling_interval() -> None:
    assert entry_penalty({"cpu": 4000}, 60, 60) == pytest.approx({"cpu": 2.0})


def test_local_queue_usage_weights_resources_and_divides_by_the_queue_weight() -> None:
    assert local_queue_usage(
        {"cpu": 4.0, "memory": 2.0}, {"cpu": 1.0}, {"memory": 0.5}, 2.0
    ) == pytest.approx(3.0)
    assert math.isinf(local_queue_usage({"cpu": 1.0}, {}, {}, 0.0))
