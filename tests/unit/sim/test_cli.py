from __future__ import annotations

import json
from pathlib import Path

import pytest

from qm.cli import main

SCENARIO = """
name: tiny
description: two teams, a cut
seed: 1
replications: 2
horizon: 3d
cluster:
  quotaPolicy:
    apiVersion: queuemanager.dev/v1alpha1
    kind: QuotaPolicy
    metadata: {name: tiny}
    spec:
      flavors: [{name: gpu}]
      priorityClasses: [{name: hi, value: 1000}]
      teams:
        - {name: a, namespaces: [a], localQueueName: q, cohort: all, preemption: {reclaimWithinCohort: Any},
           quotas: [{flavor: gpu, resources: [{name: nvidia.com/gpu, nominal: 2}]}]}
        - {name: b, namespaces: [b], localQueueName: q, cohort: all, preemption: {reclaimWithinCohort: Any},
           quotas: [{flavor: gpu, resources: [{name: nvidia.com/gpu, nominal: 2}]}]}
workloads:
  - name: a
    localQueue: a/q
    generator:
      arrivals: {kind: poisson, ratePerHour: 1}
      durations: {kind: exponential, mean: 2h}
      requests: [{resources: {nvidia.com/gpu: 1}}]
  - name: b
    localQueue: b/q
    generator:
      arrivals: {kind: diurnal, meanRatePerHour: 1}
      durations: {kind: exponential, mean: 1h}
      requests: [{resources: {nvidia.com/gpu: 1}}]
      priorityClasses: [{priorityClass: hi}]
variants:
  - name: keep
  - name: abrupt cut
    overrides:
      events:
        - at: 1d
          policyPatch:
            spec:
              transitions: {defaults: {curve: immediate, drain: false}}
              teams:
                - {name: a, quotas: [{flavor: gpu, resources: [{name: nvidia.com/gpu, nominal: 1}]}]}
"""


def test_qm_simulate_prints_the_comparison_and_writes_every_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "out"
    assert main(["simulate", str(scenario), "--out", str(out), "--quiet", "--no-progress"]) == 0
    text = capsys.readouterr().out
    header = text.splitlines()[1:4]  # the variants head the columns (a name may wrap over two lines)
    assert any("keep (baseline)" in line for line in header) and any("abrupt cut" in line for line in header)
    assert "Recommended: " in text
    assert "Against default objectives (the scenario declares none) it has" in text
    assert f"report: {out / 'report.html'}" in text
    summary = json.loads((out / "summary.json").read_text())
    assert [v["name"] for v in summary["variants"]] == ["keep", "abrupt cut"]
    assert all(len(v["replications"]) == 2 for v in summary["variants"])
    cut = summary["variants"][1]["replications"][0]
    assert set(cut["queues"]) == {"a", "b"} and cut["run"]["events"] > 0
    for name in (
        "report.html",
        "summary.schema.json",
        "usage.png",
        "pending.png",
        "wait-cdf.png",
        "evictions.png",
        "keep/capacity.csv",
        "keep/workloads.csv",
        "abrupt-cut/timeseries.csv",
        "abrupt-cut/quota.csv",
        "abrupt-cut/preemptions.csv",
        "abrupt-cut/actions.csv",
    ):
        assert (out / name).is_file(), name
    assert "1.0" in (out / "abrupt-cut" / "quota.csv").read_text()
    actions = (out / "abrupt-cut" / "actions.csv").read_text().splitlines()
    assert actions[0] == "time,action,target,detail"
    assert any(",transition-start,a/gpu/nvidia.com/gpu,2 GPUs -> 1 GPU in 0 step(s)" in a for a in actions)


def test_a_replication_is_reproducible(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO)
    outputs = []
    for k in range(2):
        out = tmp_path / f"o{k}"
        assert (
            main(
                [
                    "simulate",
                    str(scenario),
                    "--out",
                    str(out),
                    "--quiet",
                    "--no-report",
                    "--variant",
                    "abrupt cut",
                    "--replications",
                    "1",
                ]
            )
            == 0
        )
        outputs.append((out / "abrupt-cut" / "workloads.csv").read_text())
    capsys.readouterr()
    assert outputs[0] == outputs[1]


def test_an_unknown_variant_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO)
    assert main(["simulate", str(scenario), "--variant", "nope", "--quiet"]) == 2
    assert "no variant named nope; known: keep, abrupt cut" in capsys.readouterr().err


def test_the_progress_bar_counts_every_run_of_every_variant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO)
    assert main(["simulate", str(scenario), "--quiet", "--progress", "--replications", "2"]) == 0
    err = capsys.readouterr().err
    assert "simulating" in err and "4/4" in err  # 2 variants x 2 replications, one bar over all of them


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "localQueue: a/q",
            "localQueue: a/nope",
            "field workloads[0].localQueue: no such LocalQueue in the cluster",
        ),
        (
            "priorityClass: hi}",
            "priorityClass: gold}",
            "field workloads[1].priorityClass: no such WorkloadPriority",
        ),
        ("- {name: a, quotas", "- {name: zz, quotas",
         "QuotaPolicy tiny: field variants[1] (abrupt cut).events[0].policyPatch.spec.teams[2].namespaces: "
         "required field is missing"),
        ("nominal: 2}]}]}\n        - {name: b", "nominal: lots}]}]}\n        - {name: b",
         "field cluster.quotaPolicy.spec.teams[0].quotas[0].resources[0].nominal: must be a non-negative "
         "Kubernetes quantity"),
    ],
    ids=[
        "unknown LocalQueue",
        "unknown priority class",
        "unknown team in a policy edit",
        "bad quantity in the policy",
    ],
)
def test_a_scenario_that_does_not_match_its_cluster_is_a_one_line_error_naming_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, message: str
) -> None:
    scenario = tmp_path / "tiny.yaml"
    assert old in SCENARIO
    scenario.write_text(SCENARIO.replace(old, new, 1))
    assert main(["simulate", str(scenario), "--quiet", "--replications", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"qm simulate: error: {scenario}") and message in err and "\n" not in err
