"""`qm policy check|render`: offline judgement and preview of QuotaPolicy files."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from qm.cli import main

SAMPLE = Path(__file__).resolve().parents[3] / "manifests" / "samples" / "quotapolicy.yaml"


def test_the_shipped_sample_policy_checks_clean(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "check", str(SAMPLE)]) == 0
    assert capsys.readouterr().out == f"{SAMPLE}: QuotaPolicy gpu-cluster is valid (2 teams)\n"


def test_an_invalid_policy_gets_one_line_naming_file_object_field_and_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: queuemanager.dev/v1alpha1\nkind: QuotaPolicy\nmetadata: {name: x}\n"
        "spec: {teams: [{name: a, namespaces: [a],"
        " quotas: [{flavor: f, resources: [{name: cpu, nominal: '-1'}]}]}], flavors: [{name: f}]}\n"
    )
    assert main(["policy", "check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err == (
        f"qm policy: error: {bad}: document 1 (QuotaPolicy x): "
        "field spec.teams[0].quotas[0].resources[0].nominal: "
        "must be a non-negative Kubernetes quantity such as 4, 500m, 16Gi (got '-1')\n"
    )


def test_render_prints_the_kueue_objects_the_operator_would_own(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policy", "render", str(SAMPLE)]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    kinds_and_names = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert ("ClusterQueue", "ai-frontier-research") in kinds_and_names
    assert ("ClusterQueue", "biz-model-serving") in kinds_and_names
    assert ("WorkloadPriorityClass", "high-priority-business") in kinds_and_names
    assert all(d["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "queue-manager" for d in docs)


def _edited(tmp_path: Path, name: str, research: int, business: int) -> Path:
    doc = yaml.safe_load(SAMPLE.read_text())
    doc["spec"]["teams"][0]["quotas"][0]["resources"][0]["nominal"] = research
    doc["spec"]["teams"][1]["quotas"][0]["resources"][0]["nominal"] = business
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_cut_given_to_no_team_is_warned_about_against_the_previous_policy_and_a_paired_move_is_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cut, paired = _edited(tmp_path, "cut.yaml", 1, 16), _edited(tmp_path, "paired.yaml", 1, 19)
    assert main(["policy", "check", str(cut), str(paired), "--previous", str(SAMPLE)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{cut}: QuotaPolicy gpu-cluster is valid (2 teams)",
        f"{cut}: warning: the change hands 3 GPUs (nvidia.com/gpu in flavor gpu-a100) of cohort tree "
        f"gpu-cluster to no team (compared with {SAMPLE}): that capacity stays idle unless another team's "
        "quota there grows by as much (a paired move)",
        f"{paired}: QuotaPolicy gpu-cluster is valid (2 teams)",
    ]
