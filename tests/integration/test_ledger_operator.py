"""The operator writes the ledger on the real control plane (KWOK GPU nodes; Jobs that run), against a
SQLite file and a real PostgreSQL server:

- a workload's life is exactly one accounting row with its GPU-hours useful and lost and their cost, the
  figures computed here from Kueue's own condition times;
- an operator SIGKILLed mid-run, restarted (a replayed watch: every Workload listed again) and started
  once more doubles nothing; a Workload deleted while it was down is closed at the resync (inferred);
- a cancelled transition is an Event and an audit row; every audit row carries the policy generation and
  who edited the policy (its managedFields manager);
- `qm usage` and `qm audit` answer from the database.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from sqlalchemy import create_engine, select

from ledger import schema as t
from ledger.db import resolve_url
from ledger.ledger import open_ledger
from tests.integration.ledger_operator import (
    GPU,
    QP,
    at,
    audit_lines,
    cond,
    create_job,
    delete_policy,
    get_policy,
    ledger_admin,
    ledger_plane,
    namespaces,
    operator,
    patch_policy,
    policy,
    qm_json,
    ready,
    set_active,
    true,
    workload_of,
)
from tests.integration.test_operator_harness import suffix

pytestmark = pytest.mark.integration
__all__ = ["ledger_admin", "ledger_plane"]  # the fixtures, used by name

PRICE = Decimal("2.5")


def _rows(url: str) -> dict[str, list[tuple[str, ...]]]:
    """Every row of the accounting tables (not the workloads' last-observed time, which a new observation
    of a finished life moves): what a replay must leave as it is."""
    engine = create_engine(resolve_url(url))
    try:
        with engine.connect() as conn:
            out = {}
            for table in (t.workloads, t.workload_usage, t.transitions, t.segments, t.quotas, t.audit):
                cols = [c for c in table.columns if c.name != "observed_ms"]
                out[table.name] = sorted(tuple(f"{c.name}={v}" for c, v in zip(cols, r, strict=True))
                                         for r in conn.execute(select(*cols)))
            return out
    finally:
        engine.dispose()


def _if(w: dict[str, Any] | None, kind: str) -> dict[str, Any] | None:
    """The Workload if its condition `kind` is True."""
    return w if true(w, kind) else None


def _phases(url: str, uids: list[str]) -> list[str | None]:
    with open_ledger(url, read_only=True) as ledger:
        lives = [ledger.life(uid) for uid in uids]
    return [None if life is None else str(life.row["phase"]) for life in lives]


def _transition_done(api: k8s.ApiClient, name: str) -> bool:
    status = get_policy(api, name).get("status") or {}
    records = status.get("transitions") or []
    return any(t.get("resource") == GPU and t.get("phase") == "Complete" for t in records)


def _gpus(body: dict[str, Any], s: str, gpus: int) -> dict[str, Any]:
    """The merge patch of a user setting the team's GPUs (a merge patch replaces the teams list)."""
    resources = [{"name": GPU, "nominal": gpus}, {"name": "cpu", "nominal": 64}]
    quotas = [{"flavor": f"kwok-{s}", "resources": resources}]
    return {"spec": {"teams": [dict(body["spec"]["teams"][0], quotas=quotas)]}}


def test_a_life_is_one_row_with_its_gpu_hours_and_cost_and_a_kill_and_replays_double_nothing(
    ledger_admin: tuple[k8s.ApiClient, Path], ledger_url: str, tmp_path: Path, wait_until: Callable[..., Any],
) -> None:
    api, kubeconfig = ledger_admin
    s = suffix()
    ns, team = f"research-{s}", f"research-{s}"
    cleanup = namespaces(api, ns)
    body = policy(s, ns)
    name = body["metadata"]["name"]
    op = operator(kubeconfig, tmp_path, ledger_url).start()
    try:
        k8s.CustomObjectsApi(api).create_cluster_custom_object(*QP[:2], QP[2], body)
        wait_until(lambda: ready(api, name), timeout=30, what="the policy Ready")
        create_job(api, ns, team, "short", 2, 8, labels={"project": "vision", "queuemanager.dev/user": "ann"})
        create_job(api, ns, team, "evicted", 1, 25)
        create_job(api, ns, team, "deleted", 1, 300)
        admitted = {j: wait_until(lambda j=j: _if(workload_of(api, ns, j), "QuotaReserved"), timeout=60,
                                  what=f"{j} admitted") for j in ("short", "evicted", "deleted")}
        first_admitted = at(cond(admitted["evicted"], "QuotaReserved"))
        # An eviction through Kueue's own path (deactivation), then the workload is queued again.
        set_active(api, admitted["evicted"], False)
        released = wait_until(lambda: (w := workload_of(api, ns, "evicted")) and not true(w, "QuotaReserved")
                              and true(w, "Evicted") and w, timeout=60, what="the eviction")
        released_at = at(cond(released, "QuotaReserved"))
        set_active(api, released, True)
        # A transition cancelled half-way: 4 -> 2 GPUs, then 3 before it is done (by a user of our own).
        patch_policy(api, name, _gpus(body, s, 2), manager="alice-kubectl")
        wait_until(lambda: any(r["action"] == "transition-started" for r in audit_lines(op)), timeout=20,
                   what="the transition started")
        patch_policy(api, name, _gpus(body, s, 3), manager="alice-kubectl")
        wait_until(lambda: any(r["action"] == "transition-cancelled" for r in audit_lines(op)), timeout=20,
                   what="the transition cancelled")
        wait_until(lambda: (w := workload_of(api, ns, "evicted")) and true(w, "QuotaReserved"), timeout=60,
                   what="the evicted workload admitted again")
        # SIGKILL mid-run; the long workload is deleted while no operator watches.
        op.kill()
        killed_at = time.time()
        k8s.BatchV1Api(api).delete_namespaced_job("deleted", ns, propagation_policy="Background")
        wait_until(lambda: workload_of(api, ns, "deleted") is None, timeout=60, what="the Workload deleted")
        op.start()  # the same ledger and spool: a restart, and a replay of every Workload
        restarted_at = time.time()
        finished = {j: wait_until(lambda j=j: _if(workload_of(api, ns, j), "Finished"), timeout=90,
                                  what=f"{j} finished") for j in ("short", "evicted")}
        wait_until(lambda: _transition_done(api, name), timeout=90, what="the transition complete")
        uids = [finished["short"]["metadata"]["uid"], finished["evicted"]["metadata"]["uid"],
                admitted["deleted"]["metadata"]["uid"]]
        wait_until(lambda: _phases(ledger_url, uids) == ["finished", "finished", "deleted"], timeout=60,
                   what="every life ended in the ledger")
        time.sleep(1)
        assert op.stop() == 0
        before = _rows(ledger_url)
        op.start()  # one more start: another replay of everything
        time.sleep(5)
        assert op.stop() == 0
        after = _rows(ledger_url)
        events = k8s.CoreV1Api(api).list_namespaced_event("default").items
    finally:
        op.stop()
        delete_policy(api, name)
        cleanup()

    # The restart and the replay wrote nothing new.
    changed = {k: [(set(a) - set(b), set(b) - set(a)) for a, b in zip(before[k], after[k], strict=False)
                   if a != b] or len(before[k]) - len(after[k]) for k in before if before[k] != after[k]}
    assert changed == {}
    with open_ledger(ledger_url, read_only=True) as ledger:
        short = ledger.life(finished["short"]["metadata"]["uid"])
        evicted = ledger.life(finished["evicted"]["metadata"]["uid"])
        deleted = ledger.life(admitted["deleted"]["metadata"]["uid"])
    assert short is not None and evicted is not None and deleted is not None

    def gpu(life: Any, key: str) -> Decimal:
        (row,) = [u for u in life.usage if u["resource"] == GPU]
        return Decimal(row[key])

    # One row per life, each transition once, in order.
    assert [tr["kind"] for tr in short.transitions] == ["submitted", "admitted", "finished"]
    assert [tr["kind"] for tr in evicted.transitions] == ["submitted", "admitted", "evicted", "released",
                                                         "admitted", "finished"]
    # GPU-seconds from Kueue's own times: useful = the final attempt, lost = the evicted one.
    def held(w: dict[str, Any]) -> Decimal:
        return Decimal(at(cond(w, "Finished")) - at(cond(w, "QuotaReserved")))

    def money(gpu_seconds: Decimal) -> Decimal:
        return (gpu_seconds / 3600 * PRICE).quantize(Decimal("1e-9"))

    short_useful = 2 * held(finished["short"])
    assert (gpu(short, "useful_seconds"), gpu(short, "lost_seconds")) == (short_useful, 0)
    assert (gpu(short, "cost_useful"), gpu(short, "cost_lost")) == (money(short_useful), 0)
    evicted_useful = held(finished["evicted"])
    evicted_lost = Decimal(released_at - first_admitted)
    assert (gpu(evicted, "useful_seconds"), gpu(evicted, "lost_seconds")) == (evicted_useful, evicted_lost)
    assert (gpu(evicted, "cost_useful"), gpu(evicted, "cost_lost")) == (money(evicted_useful),
                                                                         money(evicted_lost))
    assert (short.row["project"], short.row["labels"], short.row["owner_kind"], short.row["team"]) == (
        "vision", {"project": "vision", "queuemanager.dev/user": "ann"}, "Job", team)
    assert short.row["user_name"] == "ann"  # the user label (ledger.records.LabelKeys.user)
    # Deleted while the operator was down: closed at the resync, lost, inferred.
    deleted_lost = gpu(deleted, "lost_seconds")
    reserved = at(cond(admitted["deleted"], "QuotaReserved"))
    assert Decimal(killed_at - reserved) - 1 <= deleted_lost <= Decimal(restarted_at - reserved) + 30
    assert (deleted.row["phase"], deleted.row["recovered"], deleted.transitions[-1]["kind"],
            deleted.transitions[-1]["source"]) == ("deleted", True, "deleted", "inferred")
    # The cancelled transition: an Event, and audit rows with the generation and the editor.
    assert any(e.reason == "TransitionCancelled" and name in (e.involved_object.name or "") for e in events)
    trail = qm_json("audit", "--db", ledger_url, "--since", "1h", "--team", team, "--action", "transition*")
    actions = [(r["action"], r["generation"], r["editor"]) for r in trail["rows"]]
    assert ("transition-cancelled", "3", "alice-kubectl") in actions
    assert [a for a, _, _ in actions].count("transition-started") == 2
    assert all(editor == "alice-kubectl" for _, _, editor in actions)
    # The quota history follows what was put in force.
    quota_rows = [dict(x.split("=", 1) for x in r) for r in _rows(ledger_url)["quotas"]]
    nominal = [int(r["nominal"]) for r in sorted(quota_rows, key=lambda r: int(r["since_ms"]))
               if r["team"] == team and r["resource"] == GPU]
    assert nominal[0] == 4000 and nominal[-1] == 3000 and 2000 not in nominal
    # qm usage answers from the database what the lives add up to.
    usage = qm_json("usage", "--db", ledger_url, "--since", "1h", "--by", "team", "--where", f"team={team}")
    (row,) = [r for r in usage["rows"] if r["resource"] == GPU]
    hours = (short_useful + evicted_useful) / 3600
    lost_hours = (evicted_lost + deleted_lost) / 3600
    assert (Decimal(row["useful_h"]), Decimal(row["lost_h"]), Decimal(row["running_h"])) == (
        hours.quantize(Decimal("1e-6")), lost_hours.quantize(Decimal("1e-6")), 0)
