"""`qm explain --kubeconfig` on the real control plane (kube-apiserver, etcd, the real Kueue): what it says
about a live workload agrees with what Kueue itself decided.

- a pending workload: the model's verdict is in Kueue's own message (its QuotaReserved condition), and the
  explanation names the blocking quota (flavor/resource, the ClusterQueue's nominal and usage, the cohort
  node's quota and usage) and the higher-priority entry ahead of it in its queue;
- a preempted workload: the explanation names its preemptor (the Workload that took its quota, found by the
  UID in Kueue's message) and Kueue's reason (InClusterQueue);
- `kubectl get -o yaml` of the same objects piped to `qm explain -` gives the same next cycle;
- bad input is one line and exit 2: an unknown workload, a kubeconfig that is not one, a server that
  accepts the connection and never answers (bounded by --timeout).

`qm explain` runs as a subprocess, as a user runs it (exit code, stdout, stderr).
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

ROOT = Path(__file__).resolve().parents[2]
GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"
Obj = dict[str, Any]


def qm_explain(*args: str, stdin: str | None = None,
               timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "qm", "explain", *args], cwd=ROOT, capture_output=True,
                          text=True, input=stdin, timeout=timeout, check=False)


@dataclass
class Setup:
    api: k8s.ApiClient
    kubeconfig: Path
    s: str
    namespace: str

    @property
    def custom(self) -> k8s.CustomObjectsApi:
        return k8s.CustomObjectsApi(self.api)

    def cluster(self, plural: str, body: Obj) -> None:
        self.custom.create_cluster_custom_object(GROUP, VERSION, plural, body)

    def cq(self, name: str, cpu: int, *, cohort: str | None, within: str) -> None:
        spec: Obj = {
            "namespaceSelector": {},
            "queueingStrategy": "BestEffortFIFO",
            "preemption": {"withinClusterQueue": within, "reclaimWithinCohort": "Never"},
            "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
                {"name": f"f-{self.s}", "resources": [{"name": "cpu", "nominalQuota": str(cpu)}]}]}],
        }
        if cohort:
            spec["cohortName"] = cohort
        self.cluster("clusterqueues", {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterQueue",
                                       "metadata": {"name": name}, "spec": spec})
        self.custom.create_namespaced_custom_object(GROUP, VERSION, self.namespace, "localqueues", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "LocalQueue", "metadata": {"name": name},
            "spec": {"clusterQueue": name}})

    def job(self, name: str, queue: str, cpu: int, priority: str) -> None:
        """A suspended Job; Kueue's Job integration makes its Workload and unsuspends it on admission (no
        pods run here: there is no kube-controller-manager, which admission does not need)."""
        body = {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "labels": {"kueue.x-k8s.io/queue-name": queue,
                                                  "kueue.x-k8s.io/priority-class": f"{priority}-{self.s}"}},
            "spec": {"suspend": True, "parallelism": 1, "completions": 1, "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": "registry.invalid/x",
                                "resources": {"requests": {"cpu": str(cpu)}}}]}}},
        }
        k8s.BatchV1Api(self.api).create_namespaced_job(self.namespace, body)

    def workload_of(self, job: str) -> Obj | None:
        items = self.custom.list_namespaced_custom_object(GROUP, VERSION, self.namespace,
                                                          "workloads")["items"]
        return next((w for w in items if any(o.get("name") == job for o in
                                             w["metadata"].get("ownerReferences") or [])), None)

    def key_of(self, job: str) -> str:
        wl = self.workload_of(job)
        assert wl is not None, f"no Workload for Job {job}"
        return f"{self.namespace}/{wl['metadata']['name']}"


def _condition(wl: Obj | None, kind: str) -> Obj:
    if wl is None:
        return {}
    return next((c for c in (wl.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


@pytest.fixture
def setup(api_client: k8s.ApiClient, kubeconfig: Path, namespace: str) -> Iterator[Setup]:
    s = uuid.uuid4().hex[:6]
    st = Setup(api_client, kubeconfig, s, namespace)
    st.cluster("resourceflavors", {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ResourceFlavor",
                                   "metadata": {"name": f"f-{s}"}})
    for name, value in (("high", 1000), ("low", 10)):
        st.cluster("workloadpriorityclasses", {"apiVersion": f"{GROUP}/{VERSION}",
                                               "kind": "WorkloadPriorityClass",
                                               "metadata": {"name": f"{name}-{s}"}, "value": value})
    yield st
    for plural, name in (("clusterqueues", f"p-{s}"), ("clusterqueues", f"q-{s}"),
                         ("clusterqueues", f"r-{s}"), ("resourceflavors", f"f-{s}"),
                         ("workloadpriorityclasses", f"high-{s}"), ("workloadpriorityclasses", f"low-{s}")):
        with contextlib.suppress(ApiException):
            st.custom.delete_cluster_custom_object(GROUP, VERSION, plural, name)


def test_a_pending_workload_is_explained_as_kueue_decided_with_its_blocking_quota_and_who_is_ahead(
    setup: Setup, wait_until: Callable[..., Any]
) -> None:
    s = setup.s
    # Cohort co-S: p (2 cpu) and q (1 cpu); no preemption. p1 fills p, q1 fills q: the cohort is full.
    setup.cq(f"p-{s}", 2, cohort=f"co-{s}", within="Never")
    setup.cq(f"q-{s}", 1, cohort=f"co-{s}", within="Never")
    setup.job("p1", f"p-{s}", 2, "low")
    setup.job("q1", f"q-{s}", 1, "low")
    for job in ("p1", "q1"):
        wait_until(lambda job=job: _condition(setup.workload_of(job), "QuotaReserved").get("status")
                   == "True", timeout=30, what=f"{job} admitted")
    setup.job("p2", f"p-{s}", 1, "high")
    p2 = wait_until(lambda: "insufficient" in _condition(setup.workload_of("p2"), "QuotaReserved").get(
        "message", "") and setup.workload_of("p2"), timeout=30, what="Kueue's verdict on p2")
    time.sleep(1.1)  # p3 is created a second later (creation timestamps have 1 s resolution)
    setup.job("p3", f"p-{s}", 1, "low")
    wait_until(lambda: "insufficient" in _condition(setup.workload_of("p3"), "QuotaReserved").get(
        "message", ""), timeout=30, what="Kueue's verdict on p3")
    kueue_says = _condition(p2, "QuotaReserved")["message"]

    out = qm_explain("--kubeconfig", str(setup.kubeconfig), setup.key_of("p2"))
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert f"Kueue says: {kueue_says}" in text
    assert "the model agrees with Kueue" in text
    # The model's own verdict, in Kueue's words.
    assert f"insufficient unused quota for cpu in flavor f-{s}, 1 more needed" in text
    assert (f"blocked by quota f-{s}/cpu: requests 1; ClusterQueue p-{s} nominal 2, used 2, can take 0 now"
            in text)
    assert f"cohort co-{s}: quota 3, used 3, free 0" in text
    assert f"first in ClusterQueue p-{s}'s queue" in text

    out = qm_explain("--kubeconfig", str(setup.kubeconfig), setup.key_of("p3"))
    assert out.returncode == 0, out.stderr
    assert f"1 entry ahead in ClusterQueue p-{s}'s queue (1 of higher priority):" in out.stdout
    assert f"{setup.key_of('p2')}  priority 1000 (high-{s})" in out.stdout
    assert "the model agrees with Kueue" in out.stdout

    out = qm_explain("--kubeconfig", str(setup.kubeconfig), "--cluster-queue", f"p-{s}")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    queue = [ln.split()[1] for ln in lines if ln[:2] in ("1 ", "2 ")]
    assert queue == [setup.key_of("p2"), setup.key_of("p3")]  # Kueue's order: priority first

    # The same objects as kubectl prints them, through stdin: the same next cycle.
    docs = []
    for plural in ("resourceflavors", "workloadpriorityclasses", "clusterqueues"):
        for item in setup.custom.list_cluster_custom_object(GROUP, VERSION, plural)["items"]:
            if item["metadata"]["name"].endswith(s):
                docs.append({"apiVersion": f"{GROUP}/{VERSION}", "kind": plural_kind(plural), **item})
    for plural in ("localqueues", "workloads"):
        listed_items = setup.custom.list_namespaced_custom_object(GROUP, VERSION, setup.namespace, plural)
        for item in listed_items["items"]:
            docs.append({"apiVersion": f"{GROUP}/{VERSION}", "kind": plural_kind(plural), **item})
    listed = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": docs})
    piped = qm_explain("-", stdin=listed)
    assert piped.returncode == 0, piped.stderr
    head = [ln for ln in piped.stdout.splitlines() if ln.startswith(f"{setup.namespace}/")]
    assert len(head) == 1 and head[0].split()[0] == setup.key_of("p2")
    assert f"insufficient unused quota for cpu in flavor f-{s}, 1 more needed" in head[0]


def plural_kind(plural: str) -> str:
    return {"resourceflavors": "ResourceFlavor", "workloadpriorityclasses": "WorkloadPriorityClass",
            "clusterqueues": "ClusterQueue", "localqueues": "LocalQueue", "workloads": "Workload"}[plural]


def test_a_preempted_workload_names_its_preemptor_and_kueues_reason(
    setup: Setup, wait_until: Callable[..., Any]
) -> None:
    s = setup.s
    setup.cq(f"r-{s}", 1, cohort=None, within="LowerPriority")
    setup.job("r1", f"r-{s}", 1, "low")
    wait_until(lambda: _condition(setup.workload_of("r1"), "QuotaReserved").get("status") == "True",
               timeout=30, what="r1 admitted")
    setup.job("r2", f"r-{s}", 1, "high")
    wait_until(lambda: _condition(setup.workload_of("r1"), "Preempted").get("status") == "True",
               timeout=30, what="Kueue preempts r1 for r2")
    wait_until(lambda: _condition(setup.workload_of("r2"), "QuotaReserved").get("status") == "True",
               timeout=30, what="r2 admitted")
    out = qm_explain("--kubeconfig", str(setup.kubeconfig), setup.key_of("r1"))
    assert out.returncode == 0, out.stderr
    assert (f"preempted by {setup.key_of('r2')} (InClusterQueue: prioritization in the ClusterQueue)"
            in out.stdout), out.stdout
    out = qm_explain("--kubeconfig", str(setup.kubeconfig), setup.key_of("r2"))
    assert out.returncode == 0, out.stderr
    assert f"holds quota in ClusterQueue r-{s} on f-{s}" in out.stdout
    assert "next cycle: keeps its quota" in out.stdout


def _one_error_line(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert out.stdout == ""
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


def test_an_unknown_workload_is_one_line_and_exit_2(kubeconfig: Path, namespace: str) -> None:
    line = _one_error_line(qm_explain("--kubeconfig", str(kubeconfig), f"{namespace}/nope"))
    assert line.startswith("qm explain: error: https://127.0.0.1:")
    assert line.endswith(f": no such Workload (got '{namespace}/nope')")
    line = _one_error_line(qm_explain("--kubeconfig", str(kubeconfig), "--cluster-queue", "nope-cq"))
    assert "no such ClusterQueue" in line and "(got 'nope-cq')" in line


def test_a_kubeconfig_that_is_not_one_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("clusters: {a: b}\n")
    line = _one_error_line(qm_explain("--kubeconfig", str(bad), "ns/wl"))
    assert line == f"qm explain: error: {bad}: field clusters: must be a list (got 'dict')"
    line = _one_error_line(qm_explain("--kubeconfig", str(tmp_path / "missing"), "ns/wl"))
    assert line == f"qm explain: error: {tmp_path / 'missing'}: no such file"
    line = _one_error_line(qm_explain("--kubeconfig", str(bad), "not-a-key"))
    assert line == "qm explain: error: with --kubeconfig, the target is NAMESPACE/WORKLOAD (got 'not-a-key')"


def test_a_server_that_never_answers_is_one_line_within_the_timeout(tmp_path: Path) -> None:
    """A TCP listener that accepts and never speaks (a hung API server, or a proxy that swallows
    requests): the request ends at --timeout, one line, exit 2."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            held.append(conn)  # never read, never answered

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    config = tmp_path / "kubeconfig"
    config.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "hung",
        "clusters": [{"name": "hung", "cluster": {"server": f"https://127.0.0.1:{port}",
                                                   "insecure-skip-tls-verify": True}}],
        "contexts": [{"name": "hung", "context": {"cluster": "hung", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
    }))
    try:
        started = time.monotonic()
        out = qm_explain("--kubeconfig", str(config), "--timeout", "1s", "ns/wl", timeout=60)
        took = time.monotonic() - started
    finally:
        stop.set()
        thread.join(5)
        for conn in held:
            conn.close()
        server.close()
    line = _one_error_line(out)
    assert line == (f"qm explain: error: https://127.0.0.1:{port}: cannot list ResourceFlavors: the API "
                    "server does not answer (no answer within 1s)")
    assert took < 20, took  # one bounded request (interpreter start included), not a retry loop
