"""Which Kueue a forecast is for (qm/kueue_setup.py): the version and Configuration read from Kueue's
Deployment and ConfigMap against the matrix the differential verifies, and `status.effectiveQuota` (Kueue
v0.20) as the quota in force."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from fairshare.manifests import parse_manifests
from fairshare.models import FlavorResource
from fairshare.scheduler import SchedulerConfig
from fairshare.snapshot import Snapshot
from qm.kueue_setup import (
    KueueSetup,
    effective_quota_lines,
    setup_from,
    unverified,
    verdict,
)

ROOT = Path(__file__).resolve().parents[3]
GPU = "nvidia.com/gpu"


def _deployment(image: str) -> dict[str, Any]:
    return {"metadata": {"name": "kueue-controller-manager", "namespace": "kueue-system"},
            "spec": {"template": {"spec": {"containers": [
                {"name": "kube-rbac-proxy", "image": "quay.io/brancz/kube-rbac-proxy:v0.18.0"},
                {"name": "manager", "image": image}]}}}}


def _configmap(config: dict[str, Any] | str | None, version: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "kueue-manager-config", "namespace": "kueue-system"}
    if version is not None:
        meta["annotations"] = {"queuemanager.dev/kueue-version": version}
    data = {} if config is None else {
        "controller_manager_config.yaml": config if isinstance(config, str) else yaml.safe_dump(config)}
    return {"metadata": meta, "data": data}


DEFAULT = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
           "integrations": {"frameworks": ["batch/job"]}, "featureGates": {"VisibilityOnDemand": False}}
FAIR = {**DEFAULT, "fairSharing": {}}
V0192 = "registry.k8s.io/kueue/kueue:v0.19.2"


def _setup(image: str | None, config: dict[str, Any] | str | None, version: str | None = None) -> KueueSetup:
    return setup_from(None if image is None else _deployment(image),
                      None if config is None and version is None else _configmap(config, version))


@pytest.mark.parametrize(
    ("setup", "outside"),
    [
        pytest.param(_setup("registry.k8s.io/kueue/kueue:v0.19.2", DEFAULT), [],
                     id="the released v0.19.2 image with its default Configuration is verified"),
        pytest.param(_setup("registry.k8s.io/kueue/kueue:v0.19.2@sha256:" + "a" * 64, FAIR), [],
                     id="a digest after the tag is read past; fair sharing, default strategies, is verified"),
        pytest.param(_setup(None, DEFAULT, version="v0.19.2"), [],
                     id="the local control plane's ConfigMap names its binary's version"),
        pytest.param(_setup("registry.k8s.io/kueue/kueue:v0.19.3", DEFAULT), ["Kueue v0.19.3"],
                     id="another patch version is outside the matrix"),
        pytest.param(_setup("registry.k8s.io/kueue/kueue:v0.19.2",
                            {**DEFAULT, "fairSharing": {"preemptionStrategies": ["LessThanInitialShare"]}}),
                     ["fairSharing.preemptionStrategies ['LessThanInitialShare']"],
                     id="fair sharing with other strategies is outside the matrix"),
        pytest.param(_setup(V0192, {**DEFAULT, "featureGates": {"VisibilityOnDemand": False,
                                                                "TopologyAwareScheduling": True}}),
                     ["feature gates TopologyAwareScheduling=true"],
                     id="a feature gate set is outside the matrix; VisibilityOnDemand decides nothing"),
        pytest.param(_setup(V0192, {**DEFAULT, "waitForPodsReady": {"timeout": "5m"}}),
                     ["waitForPodsReady"], id="waitForPodsReady is outside the matrix"),
        pytest.param(_setup(None, None),
                     ["Kueue's version is unknown (no Deployment)",
                      "its Configuration is unknown (no ConfigMap)"],
                     id="nothing readable: both unknown"),
        pytest.param(_setup("registry.k8s.io/kueue/kueue:v0.19.2", "[not, a, mapping]"),
                     ["its Configuration is unknown (ConfigMap kueue-system/kueue-manager-config: "
                      "controller_manager_config.yaml is not a YAML mapping)"],
                     id="a Configuration that is not a mapping is unknown, not a crash"),
    ],
)
def test_what_is_outside_the_verified_matrix(setup: KueueSetup, outside: list[str]) -> None:
    assert unverified(setup) == outside


def test_a_verified_kueue_gives_one_line_and_no_warning() -> None:
    found = verdict(_setup("registry.k8s.io/kueue/kueue:v0.19.2", DEFAULT), allow_unverified=False)
    assert (found.warning, found.refuse) == (None, None)
    assert found.line == (
        "Kueue v0.19.2 (image of Deployment kueue-system/kueue-controller-manager); fair sharing off; "
        "feature gates: Kueue's defaults (ConfigMap kueue-system/kueue-manager-config): verified (the "
        "differential runs Kueue v0.19.2 with these settings)")


def test_another_minor_version_is_refused_in_one_line_unless_allowed() -> None:
    setup = _setup("registry.k8s.io/kueue/kueue:v0.20.1", DEFAULT)
    refused = verdict(setup, allow_unverified=False)
    assert refused.refuse == (
        "the forecast is verified for Kueue v0.19.2 only, and this cluster runs Kueue v0.20.1: its "
        "scheduling rules may differ; run with --allow-unverified-kueue to forecast anyway")
    allowed = verdict(setup, allow_unverified=True)
    assert allowed.refuse is None and allowed.warning is not None and "Kueue v0.20.1" in allowed.warning


def test_a_patch_version_or_unknown_version_warns_and_goes_on() -> None:
    for setup in (_setup("registry.k8s.io/kueue/kueue:v0.19.3", DEFAULT), _setup(None, None)):
        found = verdict(setup, allow_unverified=False)
        assert found.refuse is None and found.warning is not None
        assert found.warning.startswith("warning: not verified: ") and "\n" not in found.warning


def test_fair_sharing_with_the_default_strategies_is_verified_and_modelled() -> None:
    setup = _setup("registry.k8s.io/kueue/kueue:v0.19.2", FAIR)
    assert setup.fair_sharing and verdict(setup, allow_unverified=False).warning is None
    assert setup.scheduler_config() == SchedulerConfig(fair_sharing=True)
    assert _setup(V0192, DEFAULT).scheduler_config() == SchedulerConfig()


def test_the_strategies_kueue_runs_are_modelled() -> None:
    setup = _setup(V0192, {**DEFAULT, "fairSharing": {"preemptionStrategies": ["LessThanInitialShare"]}})
    assert setup.scheduler_config() == SchedulerConfig(fair_sharing=True,
                                                       fair_sharing_strategies=("LessThanInitialShare",))


def test_a_v1beta1_configuration_with_fair_sharing_disabled_is_off() -> None:
    """Kueue's conversion drops it (apis/config/v1beta1/configuration_conversion.go)."""
    off = {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration",
           "fairSharing": {"enable": False}}
    assert not _setup("registry.k8s.io/kueue/kueue:v0.19.2", off).fair_sharing


# ------------------------------------------------------------------------------------------ effective quota


def _cluster(effective: Any) -> list[dict[str, Any]]:
    def groups(gpus: int) -> list[dict[str, Any]]:
        return [{"coveredResources": [GPU], "flavors": [{"name": "a100", "resources": [
            {"name": GPU, "nominalQuota": gpus}]}]}]

    cq: dict[str, Any] = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                          "metadata": {"name": "team"},
                          "spec": {"namespaceSelector": {}, "resourceGroups": groups(8)}}
    if effective is not None:
        cq["status"] = {"effectiveQuota": groups(effective) if isinstance(effective, int) else effective}
    return [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "a100"}},
        cq,
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
         "metadata": {"name": "q", "namespace": "ns"}, "spec": {"clusterQueue": "team"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload",
         "metadata": {"name": "w6", "namespace": "ns", "creationTimestamp": "2026-12-01T00:00:00Z"},
         "spec": {"queueName": "q", "podSets": [{"name": "main", "count": 6, "template": {"spec": {
             "containers": [{"name": "c", "resources": {"requests": {GPU: "1"}}}]}}}]}},
    ]


def test_the_effective_quota_is_the_quota_in_force_and_the_spec_is_kept_for_showing() -> None:
    state = parse_manifests(_cluster(4))
    cq = state.cluster_queues["team"]
    fr = FlavorResource("a100", GPU)
    assert (cq.quotas()[fr].nominal, cq.spec_quotas()[fr].nominal) == (4000, 8000)
    assert Snapshot.from_state(state).cluster_queue("team").node.quotas[fr].nominal == 4000
    assert effective_quota_lines(state) == [
        "ClusterQueue team: effective quota (status.effectiveQuota) in force: a100/nvidia.com/gpu 4 (spec 8)"]


@pytest.mark.parametrize("effective", [None, [], 8], ids=["absent", "empty", "equal to the spec"])
def test_no_line_when_the_effective_quota_is_absent_or_the_same(effective: Any) -> None:
    assert effective_quota_lines(parse_manifests(_cluster(effective))) == []


def test_qm_explain_schedules_with_the_effective_quota_and_says_so(tmp_path: Path) -> None:
    """A 6-GPU workload fits the spec's 8 GPUs but not the effective 4: Kueue leaves it pending."""
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(_cluster(4)))
    out = subprocess.run([sys.executable, "-m", "qm", "explain", str(path)], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == (
        "# ClusterQueue team: effective quota (status.effectiveQuota) in force: "
        "a100/nvidia.com/gpu 4 (spec 8)")
    assert "request 6 > maximum capacity 4" in _row(out.stdout, "ns/w6") and "pending (NoFit)" in _row(
        out.stdout, "ns/w6")
    fits = tmp_path / "spec.yaml"
    fits.write_text(yaml.safe_dump_all(_cluster(None)))
    spec = subprocess.run([sys.executable, "-m", "qm", "explain", str(fits)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert "admitted on a100" in _row(spec.stdout, "ns/w6"), spec.stdout


def _row(text: str, workload: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(workload))


def test_a_bad_effective_quota_is_one_line_naming_the_field() -> None:
    from fairshare.errors import InputError

    bad = _cluster([{"coveredResources": [GPU], "flavors": [{"name": "a100", "resources": [{"name": GPU}]}]}])
    with pytest.raises(InputError) as err:
        parse_manifests(bad)
    assert "status.effectiveQuota[0].flavors[0].resources[0].nominalQuota" in err.value.one_line()
