"""simulations/guards.py: the cost of a scenario, estimated before anything is drawn, and the limits above
which `qm simulate` and `qm plan` refuse it unless --force (issue 11, item 5). The estimate is checked
against what the generators really draw and what the trace reader really reads; the refusals of each
runaway input are in tests/hostile (runaway_scenarios)."""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from fairshare.errors import InputError
from qm.cli import main
from simulations import guards
from simulations.loader import load_document, load_scenario
from simulations.runner import build_jobs
from simulations.scenario import Scenario
from simulations.traces import import_trace
from tests.unit.plan.world import scenario as plan_scenario
from tests.unit.sim.test_cli import SCENARIO

ROOT = Path(__file__).resolve().parents[3]
ITP_HEAD = ROOT / "tests" / "data" / "itp-cluster10-head.csv"  # 50 rows and a header
GPU = "nvidia.com/gpu"
KUEUE = "kueue.x-k8s.io/v1beta2"


def _generator(arrivals: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"arrivals": arrivals, "durations": {"kind": "constant", "value": "1h"},
            "requests": [{"resources": {GPU: 1}}], **extra}


def _doc(sources: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    objects = [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "gpu"}},
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "a"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": [GPU], "flavors": [
             {"name": "gpu", "resources": [{"name": GPU, "nominalQuota": 4}]}]}]}},
        {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "q", "namespace": "a"},
         "spec": {"clusterQueue": "a"}},
    ]
    return {"name": "guards", "seed": 3, "horizon": "10d", "cluster": {"objects": objects},
            "workloads": sources, **extra}


SOURCES = [
    {"name": "poisson", "localQueue": "a/q",
     "generator": _generator({"kind": "poisson", "ratePerHour": 12}, start="1d", until="8d")},
    {"name": "diurnal", "localQueue": "a/q",  # whole days: the cosine integrates to 0
     "generator": _generator({"kind": "diurnal", "meanRatePerHour": 20, "amplitude": 0.9})},
    # A weekly-shaped profile whose period does not divide the horizon, starting mid-bin.
    {"name": "profile", "localQueue": "a/q",
     "generator": _generator({"kind": "profile", "ratesPerHour": [40, 0, 5, 80, 10], "period": "29h",
                              "offset": "3h30m"}, start="7h")},
    {"name": "capped", "localQueue": "a/q",
     "generator": _generator({"kind": "poisson", "ratePerHour": 50}, count=700)},
]


@pytest.mark.parametrize("name", [s["name"] for s in SOURCES])
def test_the_expected_arrivals_of_a_generator_are_what_it_draws_on_average(name: str) -> None:
    sc = Scenario.model_validate(_doc(SOURCES))
    (source,) = [s for s in sc.workloads if s.name == name]
    assert source.generator is not None
    expected = guards.generator_arrivals(source.generator, sc.horizon)
    drawn = [sum(j.source == name for j in build_jobs(sc, Path("."), rep)) for rep in range(6)]
    # ~1,500-4,800 arrivals per replication: the mean of six is within 2% of the expectation (4 sigma)
    assert abs(statistics.mean(drawn) - expected) <= 0.02 * expected, (drawn, expected)
    if name == "capped":
        assert expected == 700 and drawn == [700] * 6


def test_a_profile_integral_over_whole_periods_is_the_periods_times_the_sum_of_the_bins() -> None:
    sc = Scenario.model_validate(_doc(SOURCES))
    profile = sc.workloads[2].generator
    assert profile is not None and profile.arrivals.kind == "profile"
    period = 29 * 3600.0
    one = sum([40, 0, 5, 80, 10]) * (29 / 5)  # per period: rate x bin width (hours)
    assert guards.profile_integral(profile.arrivals, 1000.0, 1000.0 + 3 * period) == pytest.approx(3 * one)
    assert guards.profile_integral(profile.arrivals, 0.0, 0.0) == 0.0


def test_a_trace_counts_its_rows_capped_by_its_limit_as_many_as_the_reader_reads() -> None:
    trace = {"format": "itp", "paths": [str(ITP_HEAD)], "queues": {"rule": "single", "localQueue": "a/q"}}
    sc = Scenario.model_validate(_doc([{"name": "itp", "trace": trace}]))
    assert sc.workloads[0].trace is not None
    assert guards.trace_rows(sc.workloads[0].trace, ROOT) == 50
    _, report = import_trace(sc.workloads[0], ROOT)
    assert report.rows == 50
    limited = Scenario.model_validate(_doc([{"name": "itp", "trace": {**trace, "limit": 20}}]))
    assert limited.workloads[0].trace is not None
    assert guards.trace_rows(limited.workloads[0].trace, ROOT) == 20


def test_a_trace_path_that_matches_nothing_is_the_readers_one_line_at_the_source(tmp_path: Path) -> None:
    trace = {"format": "itp", "paths": ["nowhere-*.csv"], "queues": {"rule": "single", "localQueue": "a/q"}}
    path = tmp_path / "s.yaml"
    loaded = load_document(_doc([{"name": "itp", "trace": trace}]), path)
    with pytest.raises(InputError) as err:
        guards.estimate(loaded)
    assert err.value.one_line() == (f"{path}: field workloads[0].trace.paths: no trace file matches "
                                    "(got 'nowhere-*.csv')")


def test_samples_are_the_horizon_over_the_interval_plus_one_and_every_run_counts(tmp_path: Path) -> None:
    loaded = load_document(_doc(SOURCES[:1], sampleInterval="90m", replications=3), tmp_path / "s.yaml")
    est = guards.estimate(loaded)
    (run,) = est.variants
    assert run.samples == 10 * 24 / 1.5 + 1 and run.edits == 0
    assert est.runs == 3 and est.workloads == pytest.approx(3 * 12 * 7 * 24)
    assert est.events == pytest.approx(3 * (2 * 12 * 7 * 24 + 161))
    assert guards.estimate(loaded, replications=5).runs == 5
    default = guards.estimate(load_document(_doc(SOURCES[:1]), tmp_path / "d.yaml"))
    assert default.variants[0].samples == 201  # horizon / 200, both ends


def _with_budget(rolling: str, **extra: Any) -> dict[str, Any]:
    """The guards' scenario driven by a QuotaPolicy with one rolling budget (and its edits in `extra`)."""
    policy = {"apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy", "metadata": {"name": "p"},
              "spec": {"flavors": [{"name": "gpu"}],
                       "teams": [{"name": "a", "namespaces": ["a"], "localQueueName": "q",
                                  "quotas": [{"flavor": "gpu", "resources": [{"name": GPU, "nominal": 4}]}]}],
                       "budgets": [{"name": "b", "selector": {"team": "a"}, "period": {"rolling": rolling},
                                    "limit": {"gpuHours": "1"},
                                    "thresholds": [{"percent": 50, "action": "alert"}]}]}}
    doc = _doc(SOURCES[:1], **extra)
    doc["cluster"] = {"quotaPolicy": policy}
    return doc


def test_budget_wake_ups_are_counted_per_run_and_above_their_limit_refused(tmp_path: Path) -> None:
    # Issue 33: a rolling budget is decided again every 1/60 of its window (at most once a second) while a
    # threshold is reached; the guards count that as if it were reached all along, per version of the policy.
    hourly = guards.estimate(load_document(_with_budget("1h"), tmp_path / "h.yaml")).variants[0]
    assert hourly.wakeups == 10 * 86400 / 60 + 1
    edited = _with_budget("1h", events=[{"at": "5d", "policyPatch": {"spec": {"budgets": [
        {"name": "b", "period": {"rolling": "2h"}}]}}}])
    halved = guards.estimate(load_document(edited, tmp_path / "e.yaml")).variants[0]
    assert halved.wakeups == 5 * 86400 / 60 + 1 + 5 * 86400 / 120 + 1
    minute = load_document(_with_budget("1m"), tmp_path / "m.yaml")  # 864,001 wake-ups in 10 days
    with pytest.raises(InputError) as err:
        guards.check(minute)
    assert "more than 50,000 budget wake-ups in one run (guards: 864,001; spec.budgets[].period.rolling)" \
        in err.value.one_line()


def test_a_checkpoint_interval_of_a_millisecond_adds_nothing_to_the_cost(tmp_path: Path) -> None:
    """Checkpoints are arithmetic on an eviction (floor(ran / C) C), not events: `checkpointInterval: 0.001`
    is a valid scenario, estimated and run as without it."""
    plain = load_document(_doc(SOURCES[:1]), tmp_path / "p.yaml")
    tiny = load_document(_doc(SOURCES[:1], checkpointInterval=0.001), tmp_path / "c.yaml")
    assert guards.estimate(tiny) == guards.estimate(plain)
    assert guards.check(tiny) == (guards.estimate(plain), None)


def test_the_bundled_scenarios_are_well_within_every_limit() -> None:
    for path in sorted((ROOT / "simulations" / "scenarios").glob("*.yaml")):
        est, over = guards.check(load_scenario(path))
        assert over is None and est.events < guards.MAX_EVENTS / 10, (path.name, est.line())


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0"), (999_999.4, "999,999"), (2e6, "2 million"), (6_720_001_747.2, "6.72 billion"),
     (999.96e9, "1 trillion"), (8.1984e14, "820 trillion"), (1.77e15, "1.8e+15"),
     (float("inf"), "unbounded")],
)
def test_a_count_is_said_as_an_estimate(n: float, text: str) -> None:
    assert guards.count(n) == text


def test_each_limit_is_named_with_the_run_that_breaks_it() -> None:
    def est(workloads: float = 10, samples: float = 10, reps: int = 1) -> guards.Estimate:
        return guards.Estimate(reps, (guards.VariantEstimate("a", 1, 1, 0),
                                      guards.VariantEstimate("b", workloads, samples, 1)))

    assert est().over() is None
    assert est(reps=5001).over() == "more than 10,000 runs (variants x replications)"
    assert est(workloads=3e6).over() == "more than 2 million workloads in one run (b: 3 million)"
    assert est(samples=250_001).over() == "more than 200,000 samples in one run (b: 250,001; sampleInterval)"
    woken = guards.Estimate(1, (guards.VariantEstimate("b", 1, 1, 0, 60_000),))
    assert woken.over() == ("more than 50,000 budget wake-ups in one run (b: 60,000; "
                            "spec.budgets[].period.rolling)")
    assert est(workloads=1e6, reps=11).over() == "more than 20 million events in all runs"


def test_force_runs_a_scenario_above_a_limit_and_says_so_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limit is lowered below the small test scenario (what it costs is what the test is about, not a
    scenario big enough to cross the real one)."""
    path = tmp_path / "tiny.yaml"
    path.write_text(SCENARIO)
    monkeypatch.setattr(guards, "MAX_EVENTS", 400)
    argv = ["simulate", str(path), "--quiet", "--no-report", "--replications", "1", "--jobs", "1",
            "--variant", "keep"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == (f"qm simulate: error: {path}: the scenario would simulate about 144 workloads and 489 "
                   "events in 1 run: more than 400 events in all runs (simulations/guards.py); check the "
                   "rates, the horizon, the intervals and the replications, or run it anyway with --force\n")
    assert main([*argv, "--force"]) == 0
    captured = capsys.readouterr()
    assert captured.err == (f"warning: {path}: running about 144 workloads and 489 events in 1 run although "
                            "more than 400 events in all runs (--force)\n")
    assert "keep" in captured.out


def test_qm_plan_refuses_a_forecast_above_a_limit_before_drawing_a_workload(tmp_path: Path) -> None:
    """qm plan's own path (qm/commands/plan.py: _simulate) over a scenario as the plan builds it: a
    calibrated rate gone wild (a ledger of a burst) x the horizon, refused in one line, in well under 2 s."""
    doc = plan_scenario([], horizon="14d", replications=5)
    doc["workloads"].append({"name": "fitted", "localQueue": "business/business",
                             "generator": _generator({"kind": "poisson", "ratePerHour": 5e6})})
    path = tmp_path / "scenario.json"
    built = SimpleNamespace(loaded=load_document(doc, path))
    args = argparse.Namespace(force=False, jobs=1, progress=False, executor="local", address=None)
    from qm.commands.plan import _simulate

    started = time.perf_counter()
    with pytest.raises(InputError) as err:
        _simulate(built, args)
    assert time.perf_counter() - started < 2.0
    assert err.value.one_line().startswith(  # 5e6/h x 336h = 1.68 billion a run
        f"{path}: the scenario would simulate about 8.4 billion workloads and 16.8 billion events in 5 runs: "
        "more than 2 million workloads in one run (plan-test: 1.68 billion) (simulations/guards.py)")


def test_qm_plan_refuses_a_horizon_beyond_ten_years_before_reading_the_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("{}")
    assert main(["plan", str(policy), "--horizon", "100000d", "--no-ledger"]) == 2
    assert capsys.readouterr().err == "qm plan: error: --horizon must be at most 3650d (got 8.64e+09s)\n"
