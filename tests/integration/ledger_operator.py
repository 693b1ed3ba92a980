"""Helpers of the ledger's operator tests (test_ledger_operator*.py): the real control plane with KWOK GPU
nodes (Jobs whose pods run for given durations), the shipped CRD and RBAC, `qm run` writing a real ledger
(a SQLite file or a PostgreSQL database), and what the tests read back from the API and the ledger."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from devcluster import ControlPlane
from tests.integration.controlplanes import POOL, binaries_or_skip
from tests.integration.jobs import gpu_job
from tests.integration.test_operator_harness import (
    OPERATOR_GROUPS,
    OPERATOR_USER,
    OperatorProcess,
    install_operator,
)

GPU = "nvidia.com/gpu"
KUEUE = ("kueue.x-k8s.io", "v1beta2")
QP = ("queuemanager.dev", "v1alpha1", "quotapolicies")
ROOT = Path(__file__).resolve().parents[2]


# The workload labels the ledger accounts reach the Workload only if Kueue copies them from the Job
# (Configuration integrations.labelKeysToCopy, apis/config/v1beta2/configuration_types.go): the
# deployment docs ask for it, and the ledger's control plane runs with it (with the shipped sample's
# fairShare.projectLabel, queuemanager.dev/project).
LABELS_TO_COPY = ["project", "team", "cost-center", "queuemanager.dev/user", "queuemanager.dev/project"]


@pytest.fixture(scope="module")
def ledger_plane() -> ControlPlane:
    """The control plane with KWOK GPU nodes (Jobs run) and Kueue copying the accounted labels."""
    binaries = binaries_or_skip()
    if not binaries.has_nodes_support:
        pytest.fail("kube-controller-manager, kube-scheduler and KWOK are not built (`make controlplane`)",
                    pytrace=False)
    return POOL.get("ledger-nodes", binaries, {"integrations": {"labelKeysToCopy": LABELS_TO_COPY}},
                    fake_nodes=2)


@pytest.fixture(scope="module")
def ledger_admin(ledger_plane: ControlPlane) -> Iterator[tuple[k8s.ApiClient, Path]]:
    """An admin client of the ledger's control plane (CRD and shipped RBAC installed) and a kubeconfig of
    the operator's ServiceAccount identity, bound only by the shipped ClusterRoleBinding."""
    client = k8s_config.new_client_from_config(config_file=str(ledger_plane.kubeconfig))
    try:
        install_operator(client)
        kubeconfig = ledger_plane.mint_kubeconfig(OPERATOR_USER, list(OPERATOR_GROUPS))
        yield client, kubeconfig
    finally:
        client.close()


def policy(s: str, ns: str, *, gpus: int = 4, budgets: list[dict[str, Any]] | None = None,
           transition: dict[str, Any] | None = None) -> dict[str, Any]:
    """One team on KWOK GPUs at 2.5 per GPU-hour, in a cohort of its own (so borrowing limits apply)."""
    flavor = f"kwok-{s}"
    never = {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"}

    def team(name: str, namespace: str, n: int) -> dict[str, Any]:
        return {"name": name, "namespaces": [namespace], "cohort": f"org-{s}", "preemption": never,
                "quotas": [{"flavor": flavor, "resources": [{"name": GPU, "nominal": n},
                                                            {"name": "cpu", "nominal": 64}]}]}

    return {
        "apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy", "metadata": {"name": f"ledger-{s}"},
        "spec": {
            "flavors": [{"name": flavor, "nodeLabels": {"type": "kwok"},
                         "pricePerUnitHour": {GPU: "2.5", "cpu": "0"}}],
            "priorityClasses": [{"name": f"batch-{s}", "value": 100}],
            "teams": [team(f"research-{s}", ns, gpus)],
            "transitions": {"defaults": transition or {"duration": "40s", "stepInterval": "10s",
                                                       "curve": "linear", "drain": False,
                                                       "floor": {GPU: 1}}},
            "ledger": {"retention": "30d", "labels": ["queuemanager.dev/user"]},
            "budgets": budgets or [],
        },
    }


def create_job(api: k8s.ApiClient, ns: str, queue: str, name: str, gpus: int, seconds: float,
               labels: dict[str, str] | None = None) -> None:
    body = gpu_job(name, ns, queue, gpus=gpus, seconds=seconds, labels=labels or {})
    k8s.BatchV1Api(api).create_namespaced_job(ns, body)


def workload_of(api: k8s.ApiClient, ns: str, job: str) -> dict[str, Any] | None:
    items = k8s.CustomObjectsApi(api).list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"]
    for w in items:
        owners = w["metadata"].get("ownerReferences") or []
        if any(o.get("kind") == "Job" and o.get("name") == job for o in owners):
            return dict(w)
    return None


def cond(w: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    for c in ((w or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def true(w: dict[str, Any] | None, kind: str) -> bool:
    c = cond(w, kind)
    return c is not None and c.get("status") == "True"


def at(c: dict[str, Any] | None) -> float:
    """A condition's lastTransitionTime, epoch seconds."""
    if c is None:
        raise AssertionError("no such condition")
    return datetime.fromisoformat(str(c["lastTransitionTime"]).replace("Z", "+00:00")).timestamp()


def set_active(api: k8s.ApiClient, w: dict[str, Any], active: bool) -> None:
    meta = w["metadata"]
    k8s.CustomObjectsApi(api).patch_namespaced_custom_object(
        *KUEUE, meta["namespace"], "workloads", meta["name"], {"spec": {"active": active}},
        _content_type="application/merge-patch+json")


def patch_policy(api: k8s.ApiClient, name: str, patch: dict[str, Any], *, manager: str) -> None:
    """A user's edit (JSON merge patch) under a field manager of its own (the ledger's `editor`)."""
    k8s.CustomObjectsApi(api).patch_cluster_custom_object(
        *QP[:2], QP[2], name, patch, field_manager=manager, _content_type="application/merge-patch+json")


def get_policy(api: k8s.ApiClient, name: str) -> dict[str, Any]:
    return dict(k8s.CustomObjectsApi(api).get_cluster_custom_object(*QP[:2], QP[2], name))


def delete_policy(api: k8s.ApiClient, name: str) -> None:
    try:
        k8s.CustomObjectsApi(api).delete_cluster_custom_object(*QP[:2], QP[2], name)
    except ApiException as err:
        if err.status != 404:
            raise


def namespaces(api: k8s.ApiClient, *names: str) -> Callable[[], None]:
    core = k8s.CoreV1Api(api)
    for name in names:
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))

    def cleanup() -> None:
        for name in names:
            try:
                core.delete_namespace(name)
            except ApiException as err:
                if err.status != 404:
                    raise
    return cleanup


def ready(api: k8s.ApiClient, name: str) -> bool:
    body = get_policy(api, name)
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (body.get("status") or {}).get("conditions") or [])


def operator(kubeconfig: Path, logdir: Path, url: str, *extra: str) -> OperatorProcess:
    return OperatorProcess(kubeconfig, logdir, ("--ledger", url, "--ledger-spool", str(logdir / "spool"),
                                                *extra))


def qm_json(*args: str) -> dict[str, Any]:
    """`qm ARGS -o json` as a user runs it (a separate process), parsed."""
    out = subprocess.run([sys.executable, "-m", "qm", *args, "-o", "json"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert isinstance(doc, dict)
    return doc


def audit_lines(op: OperatorProcess) -> list[dict[str, Any]]:
    """The operator's audit log lines (one per audit record)."""
    return [r for r in op.log_records() if r.get("audit")]
