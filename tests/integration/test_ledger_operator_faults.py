"""The ledger's faults on the real control plane: PostgreSQL stopped for 60 s mid-run. The operator goes on
scheduling (a quota transition steps, workloads are admitted, finish and are deleted), the records wait
in the spool, and once the server answers again every workload's life and every audit record the
operator logged are rows of the database, once."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from ledger.ledger import open_ledger
from ledger.queries import AuditQuery
from ledger.records import to_millis
from tests.integration.ledger_operator import (
    GPU,
    KUEUE,
    QP,
    audit_lines,
    create_job,
    delete_policy,
    ledger_admin,
    ledger_plane,
    namespaces,
    operator,
    patch_policy,
    policy,
    ready,
    true,
    workload_of,
)
from tests.integration.test_operator_harness import OperatorProcess, suffix
from tests.ledger_db import PostgresServer

pytestmark = pytest.mark.integration
__all__ = ["ledger_admin", "ledger_plane"]  # the fixtures, used by name

OUTAGE_S = 60.0


def _metric(op: OperatorProcess, name: str) -> float | None:
    match = re.search(rf"^{name} ([0-9.e+-]+)$", op.metrics(), re.M)
    return float(match.group(1)) if match else None


def _gpu_quota(api: k8s.ApiClient, cq: str) -> str | None:
    obj = k8s.CustomObjectsApi(api).get_cluster_custom_object(*KUEUE, "clusterqueues", cq)
    for group in obj["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for r in flavor["resources"]:
                if r["name"] == GPU:
                    return str(r["nominalQuota"])
    return None


def test_a_60_s_database_outage_mid_run_loses_no_workload_and_no_audit_row(
    ledger_admin: tuple[k8s.ApiClient, Path], own_postgres_server: PostgresServer, tmp_path: Path,
    wait_until: Callable[..., Any],
) -> None:
    api, kubeconfig = ledger_admin
    url = own_postgres_server.create_database("ledger")
    s = suffix()
    ns = team = f"research-{s}"
    cleanup = namespaces(api, ns)
    body = policy(s, ns, transition={"duration": "30s", "stepInterval": "10s", "curve": "linear",
                                     "drain": False, "floor": {GPU: 1}})
    name = body["metadata"]["name"]
    op = operator(kubeconfig, tmp_path, url).start()
    quotas_seen: list[str | None] = []
    try:
        k8s.CustomObjectsApi(api).create_cluster_custom_object(*QP[:2], QP[2], body)
        wait_until(lambda: ready(api, name), timeout=30, what="the policy Ready")
        for i in range(2):
            create_job(api, ns, team, f"before-{i}", 1, 12)
        wait_until(lambda: all(true(workload_of(api, ns, f"before-{i}"), "QuotaReserved") for i in range(2)),
                   timeout=60, what="the first jobs admitted")
        # The database goes away; the operator must not notice in its scheduling.
        own_postgres_server.stop()
        down_at = time.monotonic()
        wait_until(lambda: _metric(op, "qm_ledger_database_up") == 0, timeout=30, what="the ledger down")
        resources = [{"name": GPU, "nominal": 2}, {"name": "cpu", "nominal": 64}]
        patch_policy(api, name, {"spec": {"teams": [dict(body["spec"]["teams"][0], quotas=[
            {"flavor": f"kwok-{s}", "resources": resources}])]}}, manager="bob")
        for i in range(3):
            create_job(api, ns, team, f"during-{i}", 1, 8)
        create_job(api, ns, team, "deleted", 1, 300)
        wait_until(lambda: true(workload_of(api, ns, "deleted"), "QuotaReserved"), timeout=40,
                   what="a job admitted during the outage")
        k8s.BatchV1Api(api).delete_namespaced_job("deleted", ns, propagation_policy="Background")
        while time.monotonic() - down_at < OUTAGE_S:
            quotas_seen.append(_gpu_quota(api, team))
            time.sleep(1)
        spooled = _metric(op, "qm_ledger_spooled_records")
        finished_in_outage = [f"during-{i}" for i in range(3)
                              if true(workload_of(api, ns, f"during-{i}"), "Finished")]
        own_postgres_server.start()
        wait_until(lambda: _metric(op, "qm_ledger_database_up") == 1 and
                   _metric(op, "qm_ledger_spooled_records") == 0, timeout=60, what="the spool applied")
        wait_until(lambda: all(true(workload_of(api, ns, j), "Finished")
                               for j in ("before-0", "before-1", "during-0", "during-1", "during-2")),
                   timeout=60, what="every job finished")
        time.sleep(2)
        assert op.stop() == 0
        workloads = k8s.CustomObjectsApi(api).list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"]
        logged = audit_lines(op)
    finally:
        op.stop()
        delete_policy(api, name)
        cleanup()

    # The operator scheduled through the outage: the transition stepped down, jobs ran and finished.
    assert quotas_seen[0] == "4" and quotas_seen[-1] == "2" and "3" in quotas_seen
    assert finished_in_outage and spooled is not None and spooled > 0
    phases = _phases(url, ns)
    assert sorted(phases.values()) == ["deleted"] + ["finished"] * 5
    assert next(n for n, p in phases.items() if p == "deleted").startswith("job-deleted-")
    assert {w["metadata"]["name"] for w in workloads} == {n for n, p in phases.items() if p == "finished"}
    with open_ledger(url, read_only=True) as ledger:
        rows = ledger.audit(AuditQuery(0, to_millis(time.time() + 60)))
    # Every audit record the operator logged for this policy is a row, once (a reported fact is one row). Only
    # this policy's: the operator also reports what it does for others (an earlier test's policy deleted
    # while no operator ran is pruned now, under that policy's name).
    logged_facts = sorted({(r["action"], r["target"], r["what"]) for r in logged if r["policy"] == name})
    stored = sorted({(r.action, f"{r.target_kind} {r.target_namespace + '/' if r.target_namespace else ''}"
                      f"{r.target_name}", r.what) for r in rows if r.policy == name})
    assert stored == logged_facts
    assert any(a == "transition-step" for a, _, _ in stored)


def _phases(url: str, ns: str) -> dict[str, str]:
    """Name -> phase of every life of the namespace in the ledger."""
    from sqlalchemy import create_engine, select

    from ledger import schema as t
    from ledger.db import resolve_url

    engine = create_engine(resolve_url(url))
    try:
        with engine.connect() as conn:
            w = t.workloads.c
            rows = conn.execute(select(w.name, w.phase).where(w.namespace == ns))
            return {str(r.name): str(r.phase) for r in rows}
    finally:
        engine.dispose()
