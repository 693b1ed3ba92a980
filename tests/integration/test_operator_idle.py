"""Idle GPUs (spec.idle) on the real control plane with KWOK GPU nodes and a real Prometheus: the operator
reads dcgm-exporter's series (served for the KWOK pods by the test's exporter, tests/prometheus_server.py) and
applies the controller's rule (fairshare.control.idle).

Three research experiments run on one GPU each: `idle` reports 0% (a real zero), `busy` 80%, `missing`
reports nothing (dcgm-exporter never mapped its pod). A business job (protected) reports 0% too. Within a
few seconds' window and grace: `idle` is warned (an Event on the Workload and on its Job, the annotation),
then reclaimed through the eviction lifecycle (Kueue evicts it, it stays deactivated, the ledger has the
rows); `busy`, `missing` and the business job are untouched, and the status says why `missing` is unknown.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from devcluster import ControlPlane
from fairshare.control.idle import RECLAIM_ANNOTATION
from ledger.ledger import open_ledger
from ledger.queries import AuditQuery
from ledger.schema import activity as activity_table
from qm.cli import main
from tests.integration.jobs import gpu_job
from tests.integration.test_operator_harness import (
    OPERATOR_GROUPS,
    OPERATOR_USER,
    Cluster,
    OperatorProcess,
    condition_true,
    install_operator,
    suffix,
    two_team_policy,
)
from tests.prometheus_server import Telemetry

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def idle_admin(control_plane_with_nodes: ControlPlane) -> Iterator[k8s.ApiClient]:
    client = k8s_config.new_client_from_config(config_file=str(control_plane_with_nodes.kubeconfig))
    try:
        install_operator(client)
        yield client
    finally:
        client.close()


def _policy(s: str, research: str, business: str, *, dry_run: bool) -> dict[str, Any]:
    doc = two_team_policy(s, research_ns=research, business_ns=business, research_gpus=4, business_gpus=4,
                          preemption={"protectedClasses": [f"business-{s}"], "minRuntime": "0s"})
    doc["spec"]["flavors"][0]["nodeLabels"] = {"type": "kwok"}  # the KWOK nodes'
    doc["spec"]["idle"] = {"enabled": True, "dryRun": dry_run, "thresholdPercent": 10, "window": "6s",
                           "grace": "6s", "scrapeInterval": "1s", "staleAfterScrapes": 3}
    return doc


def _pod_of(api: k8s.ApiClient, ns: str, job: str) -> dict[str, Any] | None:
    pods = k8s.CoreV1Api(api).list_namespaced_pod(ns, label_selector=f"job-name={job}").items
    running = [p for p in pods if p.status.phase == "Running"]
    if not running:
        return None
    p = running[0]
    return {"name": p.metadata.name, "node": p.spec.node_name, "annotations": p.metadata.annotations or {}}


def test_an_idle_experiment_is_warned_then_reclaimed_and_busy_and_unmeasured_work_is_untouched(
    control_plane_with_nodes: ControlPlane, idle_admin: k8s.ApiClient, prometheus: Telemetry, tmp_path: Path,
    wait_until: Callable[..., Any], capsys: pytest.CaptureFixture[str],
) -> None:
    s = suffix()
    cluster = Cluster(idle_admin)
    research, business = cluster.namespace("research"), cluster.namespace("business")
    kubeconfig = control_plane_with_nodes.mint_kubeconfig(OPERATOR_USER, list(OPERATOR_GROUPS))
    op = OperatorProcess(kubeconfig, tmp_path, ("--prometheus-url", prometheus.url)).start()
    policy = _policy(s, research, business, dry_run=False)
    name = policy["metadata"]["name"]
    batch = k8s.BatchV1Api(idle_admin)
    try:
        cluster.create_policy(policy)
        for team, ns in (("research", research), ("business", business)):
            wait_until(lambda t=team, n=ns: condition_true(cluster.kueue("localqueues", f"{t}-{s}", n),
                                                           "Active"),
                       timeout=30, what=f"{team} LocalQueue Active")
        for job in ("idle", "busy", "missing"):
            batch.create_namespaced_job(research, gpu_job(job, research, f"research-{s}", seconds=600,
                                                          priority_class=f"experiment-{s}"))
        batch.create_namespaced_job(business, gpu_job("serve", business, f"business-{s}", seconds=600,
                                                      priority_class=f"business-{s}"))
        pods = {job: wait_until(lambda j=job, n=ns: _pod_of(idle_admin, n, j), timeout=90,
                                what=f"the pod of {job} running")
                for job, ns in (("idle", research), ("busy", research), ("missing", research),
                                ("serve", business))}
        # Kueue names the Workload on the pods it started (the operator's first way to map them).
        assert all(p["annotations"].get("kueue.x-k8s.io/workload") for p in pods.values())
        exporter = prometheus.exporter
        exporter.set_pod(research, pods["idle"]["name"], 0.0, node=pods["idle"]["node"])
        exporter.set_pod(research, pods["busy"]["name"], 80.0, node=pods["busy"]["node"])
        exporter.set_pod(business, pods["serve"]["name"], 0.0, node=pods["serve"]["node"])
        prometheus.server.wait_for_series("DCGM_FI_DEV_GPU_UTIL", 3)
        workloads = {job: cluster.workload_of_job(research, job) for job in ("idle", "busy", "missing")}
        keys = {job: f"{research}/{w['metadata']['name']}" for job, w in workloads.items() if w}
        assert len(keys) == 3

        # 1. Warned: the Event on the Workload and on its Job, the annotation.
        idle_wl = workloads["idle"]
        assert idle_wl is not None
        wl_name = idle_wl["metadata"]["name"]
        wait_until(lambda: cluster.events(research, name=wl_name, reason="IdleGPUsWarning"), timeout=60,
                   what="IdleGPUsWarning on the idle Workload")
        assert cluster.events(research, name="idle", reason="IdleGPUsWarning") != []  # on its Job
        warned = cluster.kueue("workloads", wl_name, research)
        assert warned is not None and RECLAIM_ANNOTATION in warned["metadata"].get("annotations", {})

        # 2. Reclaimed: deactivated, evicted by Kueue (Deactivated), the record Reclaimed.
        def reclaimed() -> bool:
            w = cluster.kueue("workloads", wl_name, research)
            return bool(w) and not w["spec"].get("active", True) and any(
                e.get("reason") == "Deactivated"
                for e in (w["status"].get("schedulingStats") or {}).get("evictions") or [])

        wait_until(reclaimed, timeout=60, what="the idle workload evicted by Kueue")
        wait_until(lambda: [(r["victim"], r["kind"], r["state"]) for r in
                            cluster.policy(name)["status"].get("lastPreemptions", [])]
                   == [(keys["idle"], "idle-gpus", "Reclaimed")], timeout=30, what="the record Reclaimed")
        assert cluster.events(research, name=wl_name, reason="PreemptionRequested") != []
        # It stays deactivated (no beneficiary waits for it, its GPUs did nothing): a few ticks later too.
        time.sleep(3)
        assert not cluster.kueue("workloads", wl_name, research)["spec"].get("active", True)

        # 3. Busy, missing and the protected business job: untouched, still running, no warning.
        for job in ("busy", "missing"):
            w = cluster.workload_of_job(research, job)
            assert w is not None and w["spec"].get("active", True) and condition_true(w, "Admitted"), job
            assert cluster.events(research, name=w["metadata"]["name"], reason="IdleGPUsWarning") == []
            assert RECLAIM_ANNOTATION not in (w["metadata"].get("annotations") or {})
        serve = cluster.workload_of_job(business, "serve")
        assert serve is not None and condition_true(serve, "Admitted") and serve["spec"].get("active", True)
        telemetry = cluster.policy(name)["status"]["telemetry"]
        assert (telemetry["busy"], telemetry["unknown"]) == (1, 1), telemetry
        assert telemetry["unknownReasons"] == [f"{keys['missing']}: no DCGM series for its pods (absent)"]

        # 4. The ledger has the warning and the eviction; the metrics count them.
        with open_ledger(str(tmp_path / "ledger.db"), read_only=True) as ledger:
            now = time.time()
            rows = ledger.audit(AuditQuery(since_ms=int((now - 600) * 1000), until_ms=int((now + 60) * 1000),
                                           actions=("idle-*", "preempt*")))
        assert {(r.action, r.target_name) for r in rows} >= {("idle-warned", wl_name), ("preempt", wl_name)}
        metrics = op.metrics()
        assert f'qm_preemptions_total{{mode="enforced",policy="{name}",reason="idle-gpus"}} 1.0' in metrics
        assert f'qm_gpu_activity_workloads{{policy="{name}",state="unknown"}} 1.0' in metrics

        # 5. What the GPUs did, in the ledger (the seam telemetry -> ledger): busy's GPU-time measured is 80%
        # active, idle's 0%, missing has none; qm usage shows research's measured, active and idle GPU-hours.
        uids = {job: (cluster.workload_of_job(research, job) or {})["metadata"]["uid"]
                for job in ("idle", "busy", "missing")}
        engine = sa.create_engine(f"sqlite:///{tmp_path / 'ledger.db'}")
        a = activity_table.c

        def measured() -> dict[str, tuple[int, int]]:
            with engine.connect() as conn:
                rows = conn.execute(sa.select(a.uid, sa.func.sum(a.measured_ms), sa.func.sum(a.active_ms))
                                    .group_by(a.uid)).all()
            return {str(r[0]): (int(r[1]), int(r[2])) for r in rows}

        got = wait_until(lambda: (m := measured()) and all(m.get(uids[j], (0, 0))[0] >= 3000
                                                           for j in ("idle", "busy")) and m,
                         timeout=30, what="the busy and idle workloads' GPU-time in the ledger")
        engine.dispose()
        busy_ms, busy_active = got[uids["busy"]]
        assert abs(busy_active - busy_ms * 0.8) <= 0.01 * busy_ms, got[uids["busy"]]
        assert got[uids["idle"]][1] == 0 and uids["missing"] not in got
        assert main(["usage", "--db", str(tmp_path / "ledger.db"), "--since", "1h", "--where",
                     f"team=research-{s}", "--where", "resource=nvidia.com/gpu", "-o", "json"]) == 0
        [row] = json.loads(capsys.readouterr().out)["rows"]
        assert Decimal(row["held_h"]) > Decimal(row["measured_h"]) > Decimal(row["idle_h"]) > 0
    finally:
        op.stop()
        cluster.delete_policy(name)
        for ns in (research, business):
            k8s.CoreV1Api(idle_admin).delete_namespace(ns)
