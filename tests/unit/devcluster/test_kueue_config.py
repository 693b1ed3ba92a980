"""A user's Kueue Configuration for the launcher: checked, merged over the loopback settings."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from devcluster import kueue
from devcluster.kueue_config import KueueConfigError, describe, load_kueue_config, validate_kueue_config
from qm.cli import main

FAIR = {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}


def _endpoints() -> kueue.KueueEndpoints:
    return kueue.KueueEndpoints(webhook_port=1, health_port=2)


def test_fair_sharing_and_requeuing_fields_reach_kueue_and_loopback_settings_stay(tmp_path: Path) -> None:
    user = {
        "fairSharing": FAIR,
        "admissionFairSharing": {"usageHalfLifeTime": "168h", "usageSamplingInterval": "5m"},
        "waitForPodsReady": {"timeout": "5m", "requeuingStrategy": {"timestamp": "Creation"}},
        "featureGates": {"PartialAdmission": False},
    }
    cfg = kueue.configuration(_endpoints(), tmp_path, ["batch/job"], user)
    assert {k: cfg[k] for k in (*user, "webhook", "leaderElection")} == {
        "fairSharing": FAIR,
        "admissionFairSharing": {"usageHalfLifeTime": "168h", "usageSamplingInterval": "5m"},
        "waitForPodsReady": {"timeout": "5m", "requeuingStrategy": {"timestamp": "Creation"}},
        # merged key by key: the launcher's VisibilityOnDemand=false stays
        "featureGates": {"VisibilityOnDemand": False, "PartialAdmission": False},
        "webhook": {"host": "127.0.0.1", "port": 1, "certDir": str(tmp_path)},
        "leaderElection": {"leaderElect": False},
    }


def test_without_a_user_configuration_kueue_runs_with_its_defaults(tmp_path: Path) -> None:
    cfg = kueue.configuration(_endpoints(), tmp_path, ["batch/job"])
    assert ("fairSharing" in cfg, "admissionFairSharing" in cfg, "waitForPodsReady" in cfg) == (
        False,
        False,
        False,
    )


def test_a_configuration_file_loses_its_type_header_and_keeps_its_fields(tmp_path: Path) -> None:
    path = tmp_path / "fs.yaml"
    path.write_text(
        yaml.safe_dump(
            {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "fairSharing": FAIR}
        )
    )
    assert load_kueue_config(path) == {"fairSharing": FAIR}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"webhook": {"port": 9443}}, "x.yaml: webhook: set by the launcher"),
        ({"fairSharnig": {}}, "x.yaml: fairSharnig: unknown Configuration field"),
        (
            {"apiVersion": "config.kueue.x-k8s.io/v1beta1"},
            "x.yaml: apiVersion: must be config.kueue.x-k8s.io/v1beta2",
        ),
        ({"kind": "ClusterQueue"}, "x.yaml: kind: must be Configuration"),
        ({"featureGates": {"X": "yes"}}, "x.yaml: featureGates: must map gate names to true/false"),
        (["fairSharing"], "x.yaml: must be a Kueue Configuration (a mapping)"),
        ({"fairSharing": {}}, "x.yaml: fairSharing.preemptionStrategies: must list the strategies (Kueue "
                              "v0.19.2 does not start without them"),
    ],
    ids=[
        "launcher-field",
        "misspelt-field",
        "wrong-api-version",
        "wrong-kind",
        "gate-not-bool",
        "not-a-mapping",
        "fair-sharing-without-strategies",
    ],
)
def test_a_configuration_the_launcher_cannot_use_is_refused_in_one_line(doc: object, message: str) -> None:
    with pytest.raises(KueueConfigError) as err:
        validate_kueue_config(doc, file="x.yaml")
    assert (str(err.value).startswith(message), "\n" in str(err.value)) == (True, False)


def test_describe_names_what_is_on() -> None:
    assert (describe({}), describe({"fairSharing": FAIR, "waitForPodsReady": {"timeout": "5m"}})) == (
        "Kueue defaults",
        "fairSharing ['LessThanOrEqualToFinalShare', 'LessThanInitialShare']; waitForPodsReady",
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("fairSharing: [\n", "not valid YAML"),
        ("metrics: {bindAddress: ':8080'}\n", "metrics: set by the launcher"),
        ("fairSharing: {}\n---\nfairSharing: {}\n", "exactly one YAML document (found 2)"),
    ],
    ids=["bad-yaml", "launcher-field", "two-documents"],
)
def test_dev_cluster_up_names_the_file_and_field_of_a_bad_kueue_config(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    text: str,
    needle: str,
) -> None:
    monkeypatch.setenv("QM_CACHE_DIR", str(tmp_path / "empty-cache"))
    path = tmp_path / "kueue.yaml"
    path.write_text(text)
    rc = main(["dev-cluster", "--state-dir", str(tmp_path / "state"), "up", "--kueue-config", str(path)])
    err = capsys.readouterr().err
    assert (rc, f"{path}:" in err, needle in err, len(err.strip().splitlines())) == (2, True, True, 1)
