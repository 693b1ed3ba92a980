"""`qm explain --kubeconfig` on the real control plane reads which Kueue it explains (qm/kueue_setup.py): the
version and Configuration the local control plane publishes in ConfigMap kueue-system/kueue-manager-config,
for each Kueue configuration the differential runs (default, and fair sharing with the default strategies)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from devcluster import ControlPlane
from qm.live import KUEUE_GROUP, KUEUE_KINDS, KUEUE_VERSION

ROOT = Path(__file__).resolve().parents[2]
WHERE = ("(annotation queuemanager.dev/kueue-version of ConfigMap kueue-system/kueue-manager-config)")
VERIFIED = ("(ConfigMap kueue-system/kueue-manager-config): verified (the differential runs Kueue v0.19.2 "
            "with these settings)")


@pytest.mark.parametrize(
    ("kueue_control_plane", "settings"),
    [
        ("default", "fair sharing off; feature gates: Kueue's defaults"),
        ("fair-sharing", "fair sharing on (LessThanOrEqualToFinalShare, LessThanInitialShare); feature "
                         "gates: Kueue's defaults"),
    ],
    indirect=["kueue_control_plane"],
)
def test_qm_explain_names_the_live_kueue_and_its_verified_settings(
    kueue_control_plane: ControlPlane, settings: str, wait_until: Callable[..., Any]
) -> None:
    # A control plane just started may answer 429 "storage is (re)initializing" for a CRD's first lists.
    api = k8s_config.new_client_from_config(config_file=str(kueue_control_plane.kubeconfig))
    try:
        wait_until(lambda: _lists(api), timeout=30, what="Kueue's kinds listed without 429")
    finally:
        api.close()
    out = subprocess.run(
        [sys.executable, "-m", "qm", "explain", "--kubeconfig", str(kueue_control_plane.kubeconfig)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr == ""  # verified: no warning
    assert f"# Kueue v0.19.2 {WHERE}; {settings} {VERIFIED}" in out.stdout.splitlines(), out.stdout


def _lists(api: k8s.ApiClient) -> bool:
    custom = k8s.CustomObjectsApi(api)
    try:
        for kind in KUEUE_KINDS:
            custom.list_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, kind.plural)
    except ApiException as err:
        if err.status == 429:
            return False
        raise
    return True
