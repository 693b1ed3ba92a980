"""The metric vocabulary, waits with censoring (Kaplan-Meier), and the planner's beneficiary figures."""

from __future__ import annotations

import math
import random

import pytest

from simulations.jobs import JobSpec
from simulations.metrics import parse_ref
from simulations.record import NEVER, PreemptionRecord, RunResult
from simulations.stats import percentile
from simulations.summary import summarize
from simulations.waits import Observation, censored_waits, kaplan_meier_quantiles

GPU = (("nvidia.com/gpu", 1000),)


@pytest.mark.parametrize(
    ("observations", "q", "expected"),
    [
        ([(1.0, True), (2.0, True), (3.0, True), (4.0, True)], 0.5, 2.0),
        # S(1) = 3/4; 2 censored; S(3) = 3/4 * 1/2 = 3/8 -> 1 - S = 0.625 >= 0.5 at t = 3
        ([(1.0, True), (2.0, False), (3.0, True), (4.0, True)], 0.5, 3.0),
        ([(1.0, True), (2.0, False), (3.0, True), (4.0, True)], 0.95, 4.0),
        ([(1.0, True), (5.0, False), (5.0, False), (5.0, False)], 0.5, None),
        # an admission and a censoring at the same time: the admission counts first (at risk: 2)
        ([(2.0, False), (2.0, True)], 0.5, 2.0),
        ([], 0.5, None),
    ],
    ids=["no censoring", "one censored", "p95 one censored", "never reached", "tie", "empty"],
)
def test_kaplan_meier_quantiles_follow_the_product_limit_estimate(
    observations: list[tuple[float, bool]], q: float, expected: float | None
) -> None:
    ordered = sorted(Observation(t, a) for t, a in observations)
    assert kaplan_meier_quantiles(ordered, (q,)) == [expected]


def _product_limit_quantile(observations: list[Observation], q: float) -> float | None:
    """The definition, distinct time by distinct time: S(t) = prod over admission times t_i <= t of
    (1 - d_i / n_i), n_i the workloads whose wait is at least t_i; the first t_i with 1 - S >= q."""
    survival = 1.0
    for t in sorted({o.seconds for o in observations if o.admitted}):
        d = sum(1 for o in observations if o.admitted and o.seconds == t)
        n = sum(1 for o in observations if o.seconds >= t)
        survival *= 1.0 - d / n
        if 1.0 - survival >= q - 1e-12:
            return t
    return None


@pytest.mark.parametrize("seed", range(40))
def test_the_quantiles_of_one_pass_are_the_product_limit_definitions_in_any_order(seed: int) -> None:
    rng = random.Random(seed)
    # few distinct times: ties of admissions and censorings are the rule, not the exception
    size = rng.randrange(1, 60)
    observations = [Observation(float(rng.randrange(12)), rng.random() < 0.7) for _ in range(size)]
    qs = (0.5, 0.95, 0.25)
    ordered = sorted(observations, key=lambda o: (o.seconds, rng.random()))  # a tie's order is arbitrary
    expected = [_product_limit_quantile(observations, q) for q in qs]
    assert kaplan_meier_quantiles(ordered, qs) == expected
    assert [kaplan_meier_quantiles(ordered, (q,))[0] for q in qs] == expected
    w = censored_waits(observations)
    values = sorted(o.seconds for o in observations)
    assert (w.km_p50, w.km_p95) == (expected[0], expected[1])
    assert (w.p50, w.p95, w.p99) == tuple(percentile(values, p) for p in (50.0, 95.0, 99.0))


def test_a_never_admitted_workload_counts_with_its_wait_so_far() -> None:
    w = censored_waits([Observation(10.0, True), Observation(30.0, True), Observation(500.0, False)])
    assert (w.n, w.censored, w.mean, w.p50) == (3, 1, 180.0, 30.0)
    assert (w.km_p50, w.km_p95) == (30.0, None)


@pytest.mark.parametrize(
    ("text", "key", "label"),
    [
        (
            "wait_p95[high-priority-business]",
            "wait_p95[high-priority-business]",
            "wait p95 [high-priority-business] (h)",
        ),
        ("goodput", "goodput", "goodput (GPU-h finished)"),
        (" goodput[research] ", "goodput[research]", "goodput [research] (GPU-h finished)"),
        ("lost_gpu_hours", "lost_gpu_hours", "lost GPU-h"),
        ("wait_mean", "wait_mean", "wait mean (h)"),  # every workload, whatever its class
    ],
)
def test_a_metric_reference_names_a_kind_and_its_argument(text: str, key: str, label: str) -> None:
    ref = parse_ref(text)
    assert (ref.key, ref.label()) == (key, label)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("wait_p99[x]", "unknown metric 'wait_p99'; known: "),
        ("demand_met", "demand_met needs a team in brackets, e.g. demand_met[NAME]"),
        ("utilization[a]", "utilization is cluster-wide: write it without brackets"),
        ("__import__('os')", "must be NAME or NAME[ARGUMENT], e.g. wait_p95[high-priority-business]"),
        ("goodput[a][b]", "must be NAME or NAME[ARGUMENT]"),
    ],
)
def test_a_metric_reference_outside_the_vocabulary_is_refused_with_the_reason(
    text: str, message: str
) -> None:
    with pytest.raises(
        ValueError, match="^" + message.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")
    ):
        parse_ref(text)


def _planner_run(admitted: list[float]) -> RunResult:
    """Business workloads b0.. are each the beneficiary of one planner eviction at t=100 s."""
    n = len(admitted)
    jobs = [JobSpec(f"b{i}", "biz", "q", 0.0, 50.0, 1, GPU, None, "src") for i in range(n)]
    return RunResult(
        variant="v",
        replication=0,
        horizon=10_000.0,
        warmup=0.0,
        primary_resource="nvidia.com/gpu",
        jobs=jobs,
        cluster_queue=["biz"] * n,
        priority=[0] * n,
        admitted_at=list(admitted),
        finished_at=[NEVER] * n,
        evictions=[0] * n,
        lost_seconds=[0.0] * n,
        held_seconds=[0.0] * n,
        running_at_end=[False] * n,
        usage_seconds={"biz": 0.0},
        quota_seconds={"biz": 1000.0},
        capacity_milli=1000,
        preemptions=[
            PreemptionRecord(100.0, f"res/r{i}", "res", "planner", f"biz/b{i}", "starved", 10.0, 1000)
            for i in range(n)
        ],
        beneficiary_admitted_at=list(admitted),
    )


def test_planner_evictions_count_a_beneficiary_admitted_within_the_window_and_the_median_delay() -> None:
    # Delays 0, 0.5, 30, 1800 s and never: 2 of 5 within 1 s; the median (never = infinite) is 30 s.
    s = summarize(_planner_run([100.0, 100.5, 130.0, 1900.0, math.nan]))
    p = s.planner
    assert (p.evictions, p.beneficiary_admitted_within_window, p.beneficiary_never_admitted) == (5, 2, 1)
    assert p.share_within_window == pytest.approx(0.4)
    assert p.median_delay_seconds == pytest.approx(30.0)
    wider = summarize(_planner_run([100.0, 100.5, 130.0, 1900.0, math.nan]), beneficiary_window=60.0)
    assert wider.planner.share_within_window == pytest.approx(0.6)


def test_the_median_delay_is_unknown_when_most_beneficiaries_are_never_admitted() -> None:
    p = summarize(_planner_run([100.0, math.nan, math.nan])).planner
    assert (p.median_delay_seconds, p.beneficiary_never_admitted) == (None, 2)
