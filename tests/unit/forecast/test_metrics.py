"""The window metrics both sides of a forecast compute (qm/forecaster.py), the prediction interval and the
error ratio: their definitions, on workloads whose answers are worked out by hand."""

from __future__ import annotations

import math

import pytest

from qm.forecaster import NO_CLASS, Submission, prediction, window_metrics
from queue_manager.forecast import error_ratio

H = 3600.0
START, END = 100_000.0, 100_000.0 + 10 * H
TEAMS = ("research", "business")


def metrics(names: list[str], subs: list[Submission], gpu: dict[str, float] | None = None,
            lost: dict[str, float] | None = None) -> dict[str, float | None]:
    return window_metrics(names, start=START, end=END, submissions=subs, gpu_seconds=gpu or {},
                          lost_gpu_seconds=lost or {}, teams=TEAMS, classes=("hi", "lo"))


SUBS = [
    Submission("research", "lo", START + 0 * H, START + 1 * H),  # waited 1 h
    Submission("research", "lo", START + 1 * H, START + 4 * H),  # 3 h
    Submission("business", "hi", START + 2 * H, START + 2 * H),  # 0 h
    Submission("business", "hi", START + 8 * H, None),  # never admitted: 2 h at the end (censored)
    Submission("research", "lo", START - 1 * H, START + 1 * H),  # submitted before the window: not counted
    Submission("research", "lo", END, END + H),  # at the end: not in [start, end)
    Submission("elsewhere", "lo", START + H, START + 5 * H),  # another policy's team
    Submission("research", None, START + 3 * H, END + 5 * H),  # admitted after the end: censored (7 h)
]


def test_waits_count_the_workloads_submitted_in_the_window_never_admitted_ones_at_the_end() -> None:
    got = metrics(["wait_mean", "wait_p50", "wait_p95", "never_admitted"], SUBS)
    waits = sorted([1.0, 3.0, 0.0, 2.0, 7.0])
    assert got["wait_mean"] == pytest.approx(sum(waits) / 5)
    assert got["wait_p50"] == pytest.approx(2.0)
    assert got["wait_p95"] == pytest.approx(3.0 + (7.0 - 3.0) * 0.8)  # linear interpolation at 0.95·4
    assert got["never_admitted"] == pytest.approx(40.0)


def test_a_class_argument_restricts_the_waits_and_none_names_the_workloads_without_one() -> None:
    got = metrics(["wait_mean[hi]", "never_admitted[lo]", f"wait_mean[{NO_CLASS}]"], SUBS)
    assert got == {"wait_mean[hi]": pytest.approx(1.0), "never_admitted[lo]": 0.0,
                   f"wait_mean[{NO_CLASS}]": pytest.approx(7.0)}


def test_a_class_without_workloads_in_the_window_has_no_value() -> None:
    assert metrics(["wait_p95[hi]"], SUBS[:2]) == {"wait_p95[hi]": None}


def test_gpu_hours_are_per_team_or_summed_over_the_policys_teams() -> None:
    gpu = {"research": 7200.0, "business": 3600.0, "elsewhere": 99 * H}
    got = metrics(["gpu_hours", "gpu_hours[research]", "lost_gpu_hours", "lost_gpu_hours[business]"], [],
                  gpu, {"research": 1800.0})
    assert got == {"gpu_hours": 3.0, "gpu_hours[research]": 2.0, "lost_gpu_hours": 0.5,
                   "lost_gpu_hours[business]": 0.0}


@pytest.mark.parametrize(("metric", "message"), [
    ("gpu_hours[ghost]", "gpu_hours[ghost]: no team 'ghost' in the policy (teams: research, business)"),
    ("wait_p95[ghost]", "wait_p95[ghost]: no priority class 'ghost' in the policy (classes: hi, lo, (none))"),
])
def test_a_team_or_class_the_policy_does_not_have_is_an_error_naming_the_metric(metric: str,
                                                                                message: str) -> None:
    with pytest.raises(ValueError) as err:
        metrics([metric], SUBS)
    assert str(err.value) == message


def test_the_prediction_interval_is_wider_than_the_ci_of_the_mean_by_the_square_root_of_n_plus_one() -> None:
    p = prediction("wait_p95", [1.0, 2.0, 3.0, 4.0, 5.0])
    s = math.sqrt(2.5)
    assert (p.mean, p.unit) == (3.0, "h")
    assert p.ci95 == pytest.approx(2.776 * s / math.sqrt(5))
    assert p.high == pytest.approx(3.0 + 2.776 * s * math.sqrt(1.2))
    assert p.low == pytest.approx(max(0.0, 3.0 - 2.776 * s * math.sqrt(1.2)))


def test_replications_without_a_value_are_left_out_and_one_value_has_no_interval() -> None:
    assert prediction("gpu_hours", [None, 2.0, None]) == prediction("gpu_hours", [2.0])
    p = prediction("gpu_hours", [2.0])
    assert (p.mean, p.ci95, p.low, p.high, p.unit) == (2.0, None, None, None, "GPU-h")
    assert prediction("never_admitted", [None]).mean is None


@pytest.mark.parametrize(("predicted", "ci", "observed", "ratio"), [
    (2.0, 0.5, 3.0, 0.5),  # relative to the prediction
    (0.0, 0.25, 0.05, 0.2),  # a prediction near zero: relative to the CI's half-width
    (0.0, 0.0, 0.0, 0.0),
    (0.0, None, 1.0, math.inf),
    (None, 1.0, 1.0, None),
    (1.0, 1.0, None, None),
])
def test_the_error_ratio(predicted: float | None, ci: float | None, observed: float | None,
                         ratio: float | None) -> None:
    assert error_ratio(predicted, ci, observed) == ratio
