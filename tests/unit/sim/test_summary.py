from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from simulations.jobs import JobSpec
from simulations.outputs import write_run_files, write_summary
from simulations.record import NEVER, PreemptionRecord, RunResult, Sample
from simulations.report import write_report
from simulations.stats import batch_means, mean_ci95, percentile, t975
from simulations.summary import Summary, summarize
from simulations.whatif import compare, comparison_table

GPU = (("nvidia.com/gpu", 1000),)


def _job(i: int, arrival: float, pc: str | None, ns: str = "a") -> JobSpec:
    return JobSpec(f"j{i}", ns, "q", arrival, 100.0, 1, GPU, pc, "src")


def _run(variant: str = "base", shift: float = 0.0) -> RunResult:
    jobs = [_job(0, 0.0, "hi"), _job(1, 10.0, "lo"), _job(2, 20.0, "lo", "b"), _job(3, 30.0, None, "b")]
    return RunResult(
        variant=variant,
        replication=0,
        horizon=1000.0,
        warmup=5.0,
        primary_resource="nvidia.com/gpu",
        jobs=jobs,
        cluster_queue=["cq-a", "cq-a", "cq-b", "cq-b"],
        priority=[10, 1, 1, 0],
        admitted_at=[0.0, 40.0 + shift, 20.0, NEVER],
        finished_at=[100.0, NEVER, 120.0, NEVER],
        evictions=[0, 1, 0, 0],
        lost_seconds=[0.0, 30.0, 0.0, 0.0],
        held_seconds=[100.0, 60.0 - shift, 100.0, 0.0],
        running_at_end=[False, True, False, False],
        usage_seconds={"cq-a": 160.0, "cq-b": 100.0},
        quota_seconds={"cq-a": 2000.0, "cq-b": 1000.0},
        capacity_milli=3000,
        preemptions=[
            PreemptionRecord(70.0, "a/j1", "cq-a", "kueue", "b/j9", "InCohortReclamation", 30.0, 1000)
        ],
        samples=[Sample(0.0, "cq-a", 1000, 2000, 1, 1)],
        events=12,
        cycles=5,
        wall_seconds=0.5,
    )


def test_a_run_summary_counts_every_workload_once_per_group() -> None:
    s = summarize(_run())
    a = s.queues["cq-a"]
    got = (a.submitted, a.admitted, a.finished, a.running_at_horizon, a.pending_at_horizon, a.preempted)
    assert got == (2, 2, 1, 1, 0, 1)
    b = s.queues["cq-b"]
    assert (b.submitted, b.finished, b.pending_at_horizon) == (2, 1, 1)
    # j0 arrived before the warm-up: only j1 (30 s) counts for cq-a. cq-b: j2 (0 s) and j3, never admitted,
    # counted with the 970 s it waited until the horizon (censored); admitted-only, cq-b's mean is 0.
    assert (a.wait.count, a.wait.censored, a.wait.mean) == (1, 0, 30.0)
    assert (b.wait.count, b.wait.censored, b.wait.mean, b.wait_admitted.mean) == (2, 1, 485.0, 0.0)
    # Kaplan-Meier: one of two admitted at 0 s, the other censored at 970 s: the median is 0, p95 unknown.
    assert (b.wait.km_p50, b.wait.km_p95) == (0.0, None)
    assert a.gpu_hours == pytest.approx(160.0 / 3600.0)
    assert a.useful_gpu_hours == pytest.approx(130.0 / 3600.0)  # held 160 GPU-s, of which 30 lost
    assert a.goodput_gpu_hours == pytest.approx(100.0 / 3600.0)  # only j0 finished
    assert a.demand_gpu_hours == pytest.approx(200.0 / 3600.0)
    assert a.evictions.model_dump() == {"evicted_workloads": 1, "max": 1, "p95": 1.0, "evicted_3plus": 0}
    assert a.utilization_of_quota == pytest.approx(160.0 / 2000.0)
    assert s.cluster.utilization_of_cluster == pytest.approx(260.0 / 3000.0)
    assert sorted(s.priority_classes) == ["(none)", "hi", "lo"]
    assert s.lost_work.model_dump() == {
        "preemptions": 1,
        "gpu_hours": pytest.approx(30.0 / 3600.0),
        "by": {"kueue": 1},
        "policy_max": 0,  # Kueue's own preemption is not the policy's
        "kueue_max": 1,
        "kueue_max_workload": "a/j1",
        "kueue_max_team": "cq-a",
        "kueue_max_reasons": {"InCohortReclamation": 1},
        "restart_gpu_hours": 0.0,
    }
    assert s.fairness.demand_met == {"cq-a": pytest.approx(0.65), "cq-b": pytest.approx(0.5)}
    assert s.fairness.max_min_demand_met == pytest.approx(0.5)
    assert s.fairness.jain_demand_met == pytest.approx(1.15**2 / (2 * (0.65**2 + 0.5**2)))
    x = [160.0 / 2000.0, 100.0 / 1000.0]
    assert s.fairness.jain_entitlement == pytest.approx(sum(x) ** 2 / (2 * sum(v * v for v in x)))
    assert s.planner.evictions == 0 and s.planner.share_within_window is None
    assert s.run.workloads_per_second == pytest.approx(8.0)


def test_deltas_are_paired_by_replication_against_the_baseline() -> None:
    base = [summarize(_run("base")), summarize(_run("base"))]
    slow = [summarize(_run("slow", shift=10.0)), summarize(_run("slow", shift=10.0))]
    variants = compare([("base", "", True, base), ("slow", "", False, slow)])
    delta = variants[1].deltas["wait_mean[lo]"]
    assert delta.mean == pytest.approx(5.0 / 3600.0)  # j1 waits 10 s longer; the class mean of two moves 5 s
    assert delta.ci95 == pytest.approx(0.0)
    table = comparison_table(variants)
    assert "base (baseline)" in table.splitlines()[0] and "slow" in table.splitlines()[0]
    # Identical in both replications: the CI is 0, so the difference is significant, and a longer wait is
    # worse: marked "!".
    row = next(line for line in table.splitlines() if line.startswith("wait mean [lo] (h)"))
    assert row.endswith("(+0.0014±0.00)!")  # 5 s = 0.0014 h: small figures keep two significant digits


def test_outputs_and_report_are_written_and_the_summary_validates_against_its_model(tmp_path: Path) -> None:
    run = _run()
    summary = Summary(
        scenario="s",
        description="d",
        replications=1,
        horizon_seconds=1000.0,
        variants=compare([("base", "", True, [summarize(run)])]),
    )
    write_summary(tmp_path, summary)
    Summary.model_validate(json.loads((tmp_path / "summary.json").read_text()))
    assert json.loads((tmp_path / "summary.schema.json").read_text())["title"] == "Summary"
    write_run_files(tmp_path, [run])
    rows = list(csv.DictReader((tmp_path / "base" / "workloads.csv").open()))
    assert [r["workload"] for r in rows] == ["a/j0", "a/j1", "b/j2", "b/j3"]
    assert (rows[1]["wait"], rows[3]["first_admitted"]) == ("30.000", "")
    preemptions = list(csv.DictReader((tmp_path / "base" / "preemptions.csv").open()))
    assert preemptions[0]["beneficiary_admitted"] == ""  # a Kueue preemption has no planner beneficiary
    html = write_report(tmp_path, summary, [run]).read_text()
    for png in ("usage.png", "pending.png", "wait-cdf.png", "evictions.png"):
        assert (tmp_path / png).stat().st_size > 0
        assert png in html


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [([1.0], 50, 1.0), ([1.0, 2.0, 3.0, 4.0], 50, 2.5), ([0.0, 10.0], 95, 9.5)],
    ids=["one value", "median of four", "interpolated p95"],
)
def test_percentiles_interpolate_linearly(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == pytest.approx(expected)


def test_t_intervals_and_batch_means() -> None:
    assert t975(1) == 12.706 and t975(35) == 2.042 and t975(500) == 1.96
    mean, ci = mean_ci95([1.0, 2.0, 3.0])
    assert mean == 2.0 and ci == pytest.approx(4.303 * 1.0 / math.sqrt(3))
    assert mean_ci95([5.0]) == (5.0, None)
    grand, se = batch_means([1.0, 1.0, 3.0, 3.0], 2)
    assert (grand, se) == (2.0, pytest.approx(1.0))
