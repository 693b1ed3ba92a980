"""Harness for the operator's integration tests: the shipped CRD and ClusterRole installed
on the real control plane, the operator run as `qm run` subprocesses under an identity bound
ONLY to that ClusterRole, and helpers to read what it did. Other test_operator_*.py files
import the fixtures from here."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from fairshare.policy.admission import PROBE_DENIAL, probe_policy

ROOT = Path(__file__).resolve().parents[2]
CRD = ROOT / "manifests" / "crd" / "quotapolicies.yaml"
RBAC_DIR = ROOT / "manifests" / "rbac"
# The shipped ClusterRoleBinding binds ServiceAccount queue-manager/queue-manager; RBAC matches a
# ServiceAccount subject by this user name, so a client certificate for it has exactly that role.
OPERATOR_USER = "system:serviceaccount:queue-manager:queue-manager"
OPERATOR_GROUPS = ("system:serviceaccounts", "system:serviceaccounts:queue-manager", "system:authenticated")
KUEUE = ("kueue.x-k8s.io", "v1beta2")
QP = ("queuemanager.dev", "v1alpha1", "quotapolicies")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


def shipped(kind: str) -> dict[str, Any]:
    """The one object of `kind` in manifests/rbac (the operator's: qm plan's read-only role,
    planner-clusterrole.yaml, is test_plan.py's)."""
    found = [d for p in sorted(RBAC_DIR.glob("*.yaml")) if not p.name.startswith("planner-")
             for d in _docs(p) if d.get("kind") == kind]
    if len(found) != 1:
        pytest.fail(f"expected exactly one {kind} in {RBAC_DIR}, found {len(found)}", pytrace=False)
    return found[0]


def _create_or_replace_cluster_scoped(api: k8s.ApiClient, doc: dict[str, Any]) -> None:
    dyn_kind = doc["kind"]
    name = doc["metadata"]["name"]
    if dyn_kind == "CustomResourceDefinition":
        ext = k8s.ApiextensionsV1Api(api)
        try:
            old = ext.read_custom_resource_definition(name)
            doc = {**doc, "metadata": {**doc["metadata"], "resourceVersion": old.metadata.resource_version}}
            ext.replace_custom_resource_definition(name, doc)
        except ApiException as err:
            if err.status != 404:
                raise
            ext.create_custom_resource_definition(doc)
        return
    if dyn_kind in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"):
        adm = k8s.AdmissionregistrationV1Api(api)
        kind = "validating_admission_policy" + ("_binding" if dyn_kind.endswith("Binding") else "")
        try:
            old = getattr(adm, f"read_{kind}")(name)
            doc = {**doc, "metadata": {**doc["metadata"], "resourceVersion": old.metadata.resource_version}}
            getattr(adm, f"replace_{kind}")(name, doc)
        except ApiException as err:
            if err.status != 404:
                raise
            getattr(adm, f"create_{kind}")(doc)
        return
    rbac = k8s.RbacAuthorizationV1Api(api)
    if dyn_kind == "ClusterRole":
        with contextlib.suppress(ApiException):
            rbac.delete_cluster_role(name)
        rbac.create_cluster_role(doc)
    elif dyn_kind == "ClusterRoleBinding":
        with contextlib.suppress(ApiException):
            rbac.delete_cluster_role_binding(name)
        rbac.create_cluster_role_binding(doc)


@pytest.fixture(scope="session", name="operator_kubeconfig")
def operator_kubeconfig_fixture(
    api_client: k8s.ApiClient, mint_kubeconfig: Callable[..., Path], wait_until: Callable[..., Any]
) -> Path:
    """CRD installed; a kubeconfig for the operator's ServiceAccount identity, bound ONLY by the
    shipped ClusterRoleBinding to the shipped ClusterRole."""
    del wait_until
    install_crd(api_client, timeout=20)
    role, binding = shipped("ClusterRole"), shipped("ClusterRoleBinding")
    subjects = binding["subjects"]
    if [(x["kind"], x["namespace"], x["name"]) for x in subjects] != [
        ("ServiceAccount", "queue-manager", "queue-manager")
    ] or binding["roleRef"]["name"] != role["metadata"]["name"]:
        pytest.fail(f"unexpected shipped ClusterRoleBinding: {binding}", pytrace=False)
    _create_or_replace_cluster_scoped(api_client, role)
    _create_or_replace_cluster_scoped(api_client, binding)
    _install_leader_election_rbac(api_client)
    return mint_kubeconfig(OPERATOR_USER, OPERATOR_GROUPS)


def _install_leader_election_rbac(api: k8s.ApiClient) -> None:
    """The shipped Role and RoleBinding of the Lease, in their namespace (created when missing)."""
    role, binding = shipped("Role"), shipped("RoleBinding")
    namespace = role["metadata"]["namespace"]
    with contextlib.suppress(ApiException):  # 409: it exists already
        k8s.CoreV1Api(api).create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=namespace)))
    rbac = k8s.RbacAuthorizationV1Api(api)
    with contextlib.suppress(ApiException):
        rbac.delete_namespaced_role(role["metadata"]["name"], namespace)
    rbac.create_namespaced_role(namespace, role)
    with contextlib.suppress(ApiException):
        rbac.delete_namespaced_role_binding(binding["metadata"]["name"], namespace)
    rbac.create_namespaced_role_binding(namespace, binding)


def install_crd(api: k8s.ApiClient, *, timeout: float = 30.0) -> None:
    """The QuotaPolicy CRD and its ValidatingAdmissionPolicy and binding (one file) created (or replaced),
    then waited for until both are in force. The CRD until it is SERVED: Established is not enough, the API
    server's handler for a new CRD can answer 503 ("There can be a delay between when
    CustomResourceDefinitions are created and when they are available") a moment longer; a list that
    succeeds is the proof. The admission policy until it DENIES the probe policy (a shared namespace): the
    API server loads a new one asynchronously, and until then it admits what it should refuse."""
    for doc in _docs(CRD):
        _create_or_replace_cluster_scoped(api, doc)
    ext, custom = k8s.ApiextensionsV1Api(api), k8s.CustomObjectsApi(api)
    deadline = time.monotonic() + timeout
    while True:
        crd = ext.read_custom_resource_definition("quotapolicies.queuemanager.dev")
        if any(c.type == "Established" and c.status == "True" for c in crd.status.conditions or []):
            try:
                custom.list_cluster_custom_object(*QP[:2], QP[2], limit=1)
                break
            except ApiException as err:
                if err.status not in (404, 503):
                    raise
        if time.monotonic() > deadline:
            pytest.fail(f"the QuotaPolicy CRD was not served within {timeout:g} s", pytrace=False)
        time.sleep(0.2)
    while True:
        try:
            custom.create_cluster_custom_object(*QP[:2], QP[2], probe_policy(), dry_run="All")
        except ApiException as err:
            if err.status == 422 and PROBE_DENIAL in (err.body or ""):
                return
            if err.status not in (404, 503):
                raise
        if time.monotonic() > deadline:
            pytest.fail(f"the QuotaPolicy admission policy was not in force within {timeout:g} s",
                        pytrace=False)
        time.sleep(0.2)


def install_operator(api: k8s.ApiClient, *, timeout: float = 30.0) -> None:
    """What every test that runs `qm run` on a control plane installs first: the QuotaPolicy CRD (waited
    for until served), the shipped ClusterRole and ClusterRoleBinding, the leader-election RBAC."""
    install_crd(api, timeout=timeout)
    _create_or_replace_cluster_scoped(api, shipped("ClusterRole"))
    _create_or_replace_cluster_scoped(api, shipped("ClusterRoleBinding"))
    _install_leader_election_rbac(api)


@dataclass
class OperatorProcess:
    """`qm run` as a subprocess (so a test can SIGKILL it and start another)."""

    kubeconfig: Path
    logdir: Path
    extra_args: tuple[str, ...] = ()
    proc: subprocess.Popen[bytes] | None = None
    health_port: int = 0
    metrics_port: int = 0
    runs: int = 0
    logs: list[Path] = field(default_factory=list)
    start_timeout: float = 30.0  # spawn to /healthz, seconds (the fault suite allows a loaded restart more)

    def start(self) -> OperatorProcess:
        self.health_port, self.metrics_port = free_port(), free_port()
        self.runs += 1
        # Unique per process: several OperatorProcesses of one test share the logdir.
        log = self.logdir / f"operator-{id(self):x}-{self.runs}.log"
        self.logs.append(log)
        cmd = [
            sys.executable,
            "-m",
            "qm",
            "run",
            "--kubeconfig",
            str(self.kubeconfig),
            "--health-port",
            str(self.health_port),
            "--metrics-port",
            str(self.metrics_port),
            "--bind-address",
            "127.0.0.1",
            "--tick",
            "0.5",
            "--starvation-grace",
            "1",
            "--history-persist",
            "2",
            "--log-format",
            "json",
            # One operator per test unless the test elects a leader among several (test_operator_leader.py).
            *(() if "--leader-elect" in self.extra_args else ("--no-leader-elect",)),
            # The ledger of the test (its processes share it, as replicas share the Deployment's volume),
            # never the user's default one.
            *(() if any(a.startswith("--ledger") or a == "--no-ledger" for a in self.extra_args)
              else ("--ledger", str(self.logdir / "ledger.db"))),
            *self.extra_args,
        ]
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(
                    f"operator exited with {self.proc.returncode}:\n{self.log_text()[-4000:]}", pytrace=False
                )
            if self.healthy():
                return self
            time.sleep(0.1)
        pytest.fail(f"operator not healthy within {self.start_timeout:.0f} s:\n{self.log_text()[-4000:]}",
                    pytrace=False)

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/healthz", timeout=1) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2) as r:
            return str(r.read().decode())

    def kill(self) -> None:
        """SIGKILL: no cleanup handlers, as a crashed pod."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        return self.proc.returncode

    def log_text(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in self.logs if p.exists())

    def log_records(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log_text().splitlines():
            with contextlib.suppress(ValueError):
                doc = json.loads(line)
                if isinstance(doc, dict):
                    out.append(doc)
        return out


@pytest.fixture(name="operator_factory")
def operator_factory_fixture(
    operator_kubeconfig: Path, tmp_path: Path
) -> Iterator[Callable[..., OperatorProcess]]:
    started: list[OperatorProcess] = []

    def make(*extra_args: str) -> OperatorProcess:
        op = OperatorProcess(operator_kubeconfig, tmp_path, tuple(extra_args))
        started.append(op)
        return op

    yield make
    for op in started:
        op.stop()


@pytest.fixture(name="operator")
def operator_fixture(operator_factory: Callable[..., OperatorProcess]) -> OperatorProcess:
    return operator_factory().start()


# ---------------------------------------------------------------------------------------- cluster helpers
@dataclass
class Cluster:
    """Admin-side helpers for the tests (what a user and kubectl would do)."""

    api: k8s.ApiClient
    cleanup: list[Callable[[], None]] = field(default_factory=list)

    @property
    def custom(self) -> k8s.CustomObjectsApi:
        return k8s.CustomObjectsApi(self.api)

    def namespace(self, prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        k8s.CoreV1Api(self.api).create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
        return name

    def create_policy(self, body: dict[str, Any]) -> dict[str, Any]:
        out = self.custom.create_cluster_custom_object(*QP[:2], QP[2], body)
        self.cleanup.append(lambda: self.delete_policy(body["metadata"]["name"]))
        return dict(out)

    def delete_policy(self, name: str) -> None:
        with contextlib.suppress(ApiException):
            self.custom.delete_cluster_custom_object(*QP[:2], QP[2], name)

    def policy(self, name: str) -> dict[str, Any]:
        return dict(self.custom.get_cluster_custom_object(*QP[:2], QP[2], name))

    def patch_policy(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return dict(
            self.custom.patch_cluster_custom_object(
                *QP[:2], QP[2], name, patch, _content_type="application/merge-patch+json"
            )
        )

    def kueue(self, plural: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        try:
            if namespace:
                return dict(self.custom.get_namespaced_custom_object(*KUEUE, namespace, plural, name))
            return dict(self.custom.get_cluster_custom_object(*KUEUE, plural, name))
        except ApiException as err:
            if err.status == 404:
                return None
            raise

    def gpu_quota(self, cq: str, flavor: str, resource: str = "nvidia.com/gpu") -> str | None:
        obj = self.kueue("clusterqueues", cq)
        if obj is None:
            return None
        for group in obj["spec"].get("resourceGroups", []):
            for fl in group.get("flavors", []):
                if fl["name"] == flavor:
                    for r in fl["resources"]:
                        if r["name"] == resource:
                            return str(r["nominalQuota"])
        return None

    def events(self, namespace: str, *, name: str | None = None, reason: str | None = None) -> list[Any]:
        items = k8s.CoreV1Api(self.api).list_namespaced_event(namespace).items
        return [
            e
            for e in items
            if (name is None or e.involved_object.name == name) and (reason is None or e.reason == reason)
        ]

    def create_job(self, namespace: str, name: str, queue: str, priority_class: str, gpus: int) -> None:
        """A suspended Job in a LocalQueue; Kueue makes its Workload and unsuspends it on admission."""
        body = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {
                    "kueue.x-k8s.io/queue-name": queue,
                    "kueue.x-k8s.io/priority-class": priority_class,
                },
            },
            "spec": {
                "suspend": True,
                "parallelism": 1,
                "completions": 1,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "main",
                                "image": "busybox",
                                "command": ["true"],
                                "resources": {
                                    "requests": {"nvidia.com/gpu": str(gpus), "cpu": "1"},
                                    "limits": {"nvidia.com/gpu": str(gpus)},
                                },
                            }
                        ],
                    }
                },
            },
        }
        k8s.BatchV1Api(self.api).create_namespaced_job(namespace, body)

    def workloads(self, namespace: str) -> list[dict[str, Any]]:
        out = self.custom.list_namespaced_custom_object(*KUEUE, namespace, "workloads")
        return [dict(i) for i in out.get("items", [])]

    def workload_of_job(self, namespace: str, job: str) -> dict[str, Any] | None:
        for wl in self.workloads(namespace):
            owners = wl["metadata"].get("ownerReferences") or []
            if any(o.get("kind") == "Job" and o.get("name") == job for o in owners):
                return wl
        return None


def condition_true(obj: dict[str, Any] | None, type_: str) -> bool:
    if obj is None:
        return False
    return any(
        c.get("type") == type_ and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


@pytest.fixture(name="cluster")
def cluster_fixture(api_client: k8s.ApiClient) -> Iterator[Cluster]:
    c = Cluster(api_client)
    yield c
    for fn in reversed(c.cleanup):
        fn()


def two_team_policy(
    suffix: str,
    *,
    research_ns: str,
    business_ns: str,
    research_gpus: int = 4,
    business_gpus: int = 16,
    transition: dict[str, Any] | None = None,
    preemption: dict[str, Any] | None = None,
    research_preemption: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The issue's two teams with names unique to one test (cluster-scoped objects are shared)."""
    flavor = f"gpu-{suffix}"
    return {
        "apiVersion": "queuemanager.dev/v1alpha1",
        "kind": "QuotaPolicy",
        "metadata": {"name": f"policy-{suffix}"},
        "spec": {
            "flavors": [{"name": flavor}],
            "priorityClasses": [
                {"name": f"business-{suffix}", "value": 1000000},
                {"name": f"experiment-{suffix}", "value": 100, "experiment": True},
            ],
            "teams": [
                {
                    "name": f"research-{suffix}",
                    "namespaces": [research_ns],
                    "cohort": f"org-{suffix}",
                    "quotas": [
                        {
                            "flavor": flavor,
                            "resources": [
                                {"name": "nvidia.com/gpu", "nominal": research_gpus},
                                {"name": "cpu", "nominal": 64},
                            ],
                        }
                    ],
                    "preemption": research_preemption
                    or {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"},
                },
                {
                    "name": f"business-{suffix}",
                    "namespaces": [business_ns],
                    "cohort": f"org-{suffix}",
                    "quotas": [
                        {
                            "flavor": flavor,
                            "resources": [
                                {"name": "nvidia.com/gpu", "nominal": business_gpus},
                                {"name": "cpu", "nominal": 64},
                            ],
                        }
                    ],
                    "preemption": {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"},
                },
            ],
            "fairShare": {"halfLife": "1h"},
            "preemption": preemption
            or {
                "protectedClasses": [f"business-{suffix}"],
                "minRuntime": "0s",
                "budget": {"maxVictims": 10, "window": "1h"},
                "dryRun": False,
            },
            "transitions": {
                "defaults": transition
                or {"duration": "1h", "stepInterval": "10m", "curve": "linear", "drain": True}
            },
        },
    }


def suffix() -> str:
    return uuid.uuid4().hex[:6]


def test_the_operator_serves_healthz_and_metrics(operator: OperatorProcess) -> None:
    assert operator.healthy()
    assert "qm_workloads_tracked" in operator.metrics()
