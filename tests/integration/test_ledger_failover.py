"""Failover with the database away, as the shipped Deployment runs it: two `qm run` replicas on one
PostgreSQL, each with a spool of its own (the Deployment's emptyDir). The database is stopped, a cut is
applied, the leader is SIGKILLed right after step 1 and comes back with a fresh spool (a rescheduled pod's
new emptyDir): every row the dead leader had only spooled is gone with it. The follower takes over and
finishes the transition. Once the database answers again, every fact either replica reported (the audit
lines they logged: transition-started, capacity-stranded, each step and each apply) is one row, and the
quota history dates step 1 when the dead leader applied it, not when the new leader first looked: the new
leader re-recorded the rows the dead one's Events carry (queue_manager/main.py recover_reported)."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from sqlalchemy import create_engine, select

from ledger import schema as t
from ledger.db import resolve_url
from ledger.ledger import open_ledger
from ledger.queries import AuditQuery
from ledger.records import to_millis
from tests.integration.ledger_operator import (
    GPU,
    KUEUE,
    QP,
    audit_lines,
    delete_policy,
    ledger_admin,
    ledger_plane,
    namespaces,
    operator,
    patch_policy,
    policy,
    ready,
)
from tests.integration.test_operator_harness import OperatorProcess, shipped, suffix
from tests.ledger_db import PostgresServer

pytestmark = pytest.mark.integration
__all__ = ["ledger_admin", "ledger_plane"]  # the fixtures, used by name

LEASE_S = 6.0
STEP_S = 15.0  # longer than a takeover (the lease, plus a loaded machine's start of the follower's kopf)


def _metric(op: OperatorProcess, name: str) -> float | None:
    match = re.search(rf"^{name} ([0-9.e+-]+)$", op.metrics(), re.M)
    return float(match.group(1)) if match else None


def _gpu_quota(api: k8s.ApiClient, cq: str) -> str | None:
    try:
        obj: Any = k8s.CustomObjectsApi(api).get_cluster_custom_object(*KUEUE, "clusterqueues", cq)
    except ApiException:
        return None
    for group in obj["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for r in flavor["resources"]:
                if r["name"] == GPU:
                    return str(r["nominalQuota"])
    return None


def _leading(op: OperatorProcess) -> bool:
    return _metric(op, "qm_leader") == 1.0


def _quota_rows(url: str, team: str) -> list[tuple[int, int]]:
    """(since_ms, nominal milli-GPUs) of the team's GPU quota history."""
    engine = create_engine(resolve_url(url))
    try:
        with engine.connect() as conn:
            q = t.quotas.c
            rows = conn.execute(select(q.since_ms, q.nominal).where(q.team == team, q.resource == GPU)
                                .order_by(q.since_ms))
            return [(int(r.since_ms), int(r.nominal)) for r in rows]
    finally:
        engine.dispose()


def _logged_at(op: OperatorProcess, action: str, needle: str) -> float | None:
    """When the replica logged the audit line (its own clock, as the fact's time); None: not logged yet."""
    for r in audit_lines(op):
        if r["action"] == action and needle in r["what"]:
            return datetime.fromisoformat(str(r["time"])).timestamp()
    return None


def test_a_new_leader_re_records_what_a_dead_leader_only_spooled_with_the_original_times(
    ledger_admin: tuple[k8s.ApiClient, Path], own_postgres_server: PostgresServer, tmp_path: Path,
    wait_until: Callable[..., Any],
) -> None:
    api, kubeconfig = ledger_admin
    url = own_postgres_server.create_database("ledger")
    s = suffix()
    ns = team = f"research-{s}"
    lease_ns, lease = shipped("Role")["metadata"]["namespace"], f"qm-failover-{s}"
    election = ("--leader-elect", "--lease-namespace", lease_ns, "--lease-name", lease,
                "--lease-duration", f"{LEASE_S:g}s")
    cleanup = namespaces(api, ns)
    body = policy(s, ns, transition={"duration": f"{3 * STEP_S:g}s", "stepInterval": f"{STEP_S:g}s",
                                     "curve": "linear", "drain": False, "floor": {GPU: 1}})
    name = body["metadata"]["name"]
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    a_dir.mkdir()
    b_dir.mkdir()
    a = operator(kubeconfig, a_dir, url, *election).start()
    wait_until(lambda: _leading(a), timeout=30, what="replica a leads")
    b = operator(kubeconfig, b_dir, url, *election).start()
    try:
        k8s.CustomObjectsApi(api).create_cluster_custom_object(*QP[:2], QP[2], body)
        wait_until(lambda: ready(api, name), timeout=30, what="the policy Ready")
        wait_until(lambda: _metric(a, "qm_ledger_spooled_records") == 0, timeout=30,
                   what="the first records in the database")
        own_postgres_server.stop()
        # The cut: 4 -> 1 GPU, a team of its own in its cohort, so 3 GPUs go to no team (capacity-stranded).
        resources = [{"name": GPU, "nominal": 1}, {"name": "cpu", "nominal": 64}]
        patch_policy(api, name, {"spec": {"teams": [dict(body["spec"]["teams"][0], quotas=[
            {"flavor": f"kwok-{s}", "resources": resources}])]}}, manager="carol")
        wait_until(lambda: _gpu_quota(api, team) == "3", timeout=STEP_S + 30, what="step 1 applied by a")
        wait_until(lambda: _metric(a, "qm_ledger_database_up") == 0, timeout=30, what="the ledger down")
        # The step's audit line follows its ClusterQueue write (the Event is posted, then the fact logged):
        # on a loaded machine the quota is seen first.
        wait_until(lambda: _logged_at(a, "transition-step", "(step 1/3)") is not None, timeout=STEP_S / 2,
                   what="a's step 1 logged")
        step1_at = _logged_at(a, "transition-step", "(step 1/3)")
        assert step1_at is not None
        spooled = _metric(a, "qm_ledger_spooled_records")
        a.kill()
        # Rescheduled with a new emptyDir: the spool of the dead replica is gone with it.
        shutil.rmtree(a_dir / "spool")
        killed_at = time.monotonic()
        a.start()
        wait_until(lambda: _leading(b), timeout=3 * LEASE_S + 30, what="replica b takes over")
        took_over = time.monotonic() - killed_at
        wait_until(lambda: _gpu_quota(api, team) == "1", timeout=3 * STEP_S + 60, what="b finishes the cut")
        own_postgres_server.start()
        wait_until(lambda: _metric(b, "qm_ledger_database_up") == 1 and
                   _metric(b, "qm_ledger_spooled_records") == 0, timeout=60, what="b's spool applied")
        assert b.stop() == 0  # the leader stops cleanly (its spool flushed); a, standing by, is only ended
        a.stop()
        logged = audit_lines(a) + audit_lines(b)
    finally:
        a.stop()
        b.stop()
        delete_policy(api, name)
        cleanup()

    print(f"\nfailover: {spooled:.0f} records only in a's spool when it was killed; b led "
          f"{took_over:.1f} s after the kill")
    assert spooled is not None and spooled > 0
    with open_ledger(url, read_only=True) as ledger:
        rows = [r for r in ledger.audit(AuditQuery(0, to_millis(time.time() + 60))) if r.policy == name]
    stored = sorted((r.action, f"{r.target_kind} {r.target_namespace + '/' if r.target_namespace else ''}"
                               f"{r.target_name}", r.what) for r in rows)
    # Each logged line is one fact (a fact reported before, by either replica, is not logged again).
    facts = sorted((r["action"], r["target"], r["what"]) for r in logged if r["policy"] == name)
    # Every fact either replica reported is a row, once; the dead leader's among them.
    assert stored == facts
    actions = [a for a, _, _ in stored]
    for action in ("transition-started", "capacity-stranded", "transition-step", "apply"):
        assert action in actions, (action, actions)
    steps = sorted(m.group(1) for a, _, w in stored if a == "transition-step"
                   and (m := re.search(r"\(step (\d)/3\)", w)) is not None)
    assert steps == ["1", "2", "3"]
    # The quota history: 4, then step 1 at the dead leader's step (not the new leader's first look), 2, 1.
    history = _quota_rows(url, team)
    assert [n for _, n in history] == [4000, 3000, 2000, 1000], history
    assert abs(history[1][0] / 1000 - step1_at) <= 1.0, (history, step1_at)
