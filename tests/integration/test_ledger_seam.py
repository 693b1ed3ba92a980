"""The seam between what runs, what the ledger bills and what the operator exports (issue 31, seam (c)), with
the SHIPPED sample policy (manifests/samples/quotapolicy.yaml) and the sample Jobs, on the real control
plane (Kueue admitting, KWOK GPU nodes running the pods) and a real PostgreSQL ledger written by `qm run`:

- each team's cost in the ledger (`qm cost`) is the sum, over its workloads and resources, of the hours
  Kueue held the quota (its own condition times) x the quantity in the price's declared unit (GPUs, cores,
  GiB) x the sample's price per GPU-, core- and GiB-hour; `qm usage` gives the same hours in GPU-h, core-h
  and GiB-h; the sample's project label reaches `qm usage --by project`;
- the operator's Prometheus counters (qm_cost_total, qm_resource_hours_total) say the same per team;
- a budget over the same window (`qm budget status`) counts the same money and GPU-hours;
- ten minutes of the sample Jobs cost cents to dollars, not millions.

`QM_SEAM_SECONDS` sets how long each sample Job runs (default 20 s; 600 gives the issue's ten minutes).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from prometheus_client.parser import text_string_to_metric_families

from devcluster.nodes import run_for
from tests.integration.ledger_operator import (
    QP,
    at,
    cond,
    delete_policy,
    ledger_admin,
    ledger_plane,
    operator,
    qm_json,
    ready,
    true,
)

pytestmark = pytest.mark.integration
__all__ = ["ledger_admin", "ledger_plane"]  # the fixtures, used by name

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "manifests" / "samples"
SECONDS = float(os.environ.get("QM_SEAM_SECONDS", "20"))
GIB = 2**30
# resource -> (usage unit in qm usage, in the counters' unit label, Kubernetes base units per unit)
UNITS = {"nvidia.com/gpu": ("GPU-h", "GPU-hours", 1), "cpu": ("core-h", "core-hours", 1),
         "memory": ("GiB-h", "GiB-hours", GIB)}
MICRO = Decimal("1e-6")
NANO = Decimal("1e-9")


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((SAMPLES / name).read_text()) if d]


def _label_nodes(api: k8s.ApiClient, labels: dict[str, str | None]) -> None:
    """The KWOK nodes get (or lose) the sample flavor's node labels, so its pods schedule there."""
    core = k8s.CoreV1Api(api)
    for node in core.list_node(label_selector="type=kwok").items:
        core.patch_node(node.metadata.name, {"metadata": {"labels": labels}})


def _workloads(api: k8s.ApiClient, namespace: str) -> list[dict[str, Any]]:
    items = k8s.CustomObjectsApi(api).list_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", namespace, "workloads")["items"]
    return [dict(w) for w in items]


def _quantity(text: str) -> Decimal:
    """The few quantity forms the sample Jobs use ("2", "32Gi", "500m")."""
    for suffix, factor in (("Gi", GIB), ("Mi", 2**20), ("m", Decimal("0.001"))):
        if text.endswith(suffix):
            return Decimal(text[: -len(suffix)]) * factor
    return Decimal(text)


def _expected(workloads: list[dict[str, Any]], prices: dict[str, Decimal]) -> tuple[
        dict[str, Decimal], dict[tuple[str, str], Decimal]]:
    """Per team: the money, and per (team, resource): the hours in the resource's unit, from Kueue's own
    records (status.admission's resourceUsage; QuotaReserved and Finished times), each part's money
    rounded half-even to 1e-9 as the ledger rounds it."""
    money: dict[str, Decimal] = {}
    hours: dict[tuple[str, str], Decimal] = {}
    for w in workloads:
        status = w["status"]
        team = status["admission"]["clusterQueue"]
        held_s = Decimal(at(cond(w, "Finished")) - at(cond(w, "QuotaReserved")))
        for psa in status["admission"]["podSetAssignments"]:
            for resource, text in psa["resourceUsage"].items():
                base = UNITS[resource][2]
                units = _quantity(str(text)) / base
                h = units * held_s / 3600
                hours[(team, resource)] = hours.get((team, resource), Decimal(0)) + h
                cost = (h * prices[resource]).quantize(NANO, rounding=ROUND_HALF_EVEN)
                money[team] = money.get(team, Decimal(0)) + cost
    return money, hours


def _series(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    return [(s.labels, s.value) for family in text_string_to_metric_families(text) for s in family.samples
            if s.name == name]


@pytest.mark.timeout(int(300 + 3 * SECONDS))  # QM_SEAM_SECONDS=600 runs the sample Jobs for ten minutes
def test_the_ledger_bills_what_kueue_held_at_the_sample_s_prices_and_the_counters_agree(
    ledger_admin: tuple[k8s.ApiClient, Path], postgres_url: str, tmp_path: Path,
    wait_until: Callable[..., Any],
) -> None:
    api, kubeconfig = ledger_admin
    (policy,) = _docs("quotapolicy.yaml")
    flavor = policy["spec"]["flavors"][0]
    prices = {r: Decimal(str(p)) for r, p in flavor["pricePerUnitHour"].items()}
    assert prices == {"nvidia.com/gpu": Decimal("2.5"), "cpu": Decimal("0.03"), "memory": Decimal("0.004")}
    name = policy["metadata"]["name"]
    namespaces = [d["metadata"]["name"] for d in _docs("namespaces.yaml")]
    core, batch = k8s.CoreV1Api(api), k8s.BatchV1Api(api)
    for ns in namespaces:
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=ns)))
    _label_nodes(api, dict(flavor["nodeLabels"]))
    op = operator(kubeconfig, tmp_path, postgres_url).start()
    try:
        k8s.CustomObjectsApi(api).create_cluster_custom_object(*QP[:2], QP[2], copy.deepcopy(policy))
        wait_until(lambda: ready(api, name), timeout=60, what="the sample policy Ready")
        jobs = _docs("jobs.yaml")
        for _ in range(2):  # two of each sample Job: 4 + 8 GPUs on the two 8-GPU nodes
            for job in jobs:
                body = copy.deepcopy(job)
                body["spec"]["template"].setdefault("metadata", {})["annotations"] = run_for(SECONDS)
                batch.create_namespaced_job(body["metadata"]["namespace"], body)
        finished = wait_until(
            lambda: (ws := [w for ns in namespaces for w in _workloads(api, ns)]) and len(ws) == 4
            and all(true(w, "Finished") for w in ws) and ws, timeout=120 + 3 * SECONDS,
            what="the four sample Jobs finished")
        money, hours = _expected(finished, prices)
        until = max(at(cond(w, "Finished")) for w in finished) + 1
        window = ["--since", "1d", "--until", _rfc3339(until)]
        # Every attempt ended in the ledger (nothing still running there), then in the counters, which are
        # incremented after the ledger's commit.
        usage = wait_until(lambda: (doc := qm_json("usage", "--db", postgres_url, *window, "--by", "team"))
                           and {(r["team"], r["resource"]) for r in doc["rows"]} == set(hours)
                           and all(Decimal(r["running_h"]) == 0 for r in doc["rows"]) and doc,
                           timeout=60, what="every attempt ended in the ledger")
        metrics = wait_until(lambda: (text := op.metrics()) and len(_series(text, "qm_resource_hours_total"))
                             == len(hours) and text, timeout=30, what="the counters of every attempt")
        cost = qm_json("cost", "--db", postgres_url, *window, "--by", "team")
        projects = qm_json("usage", "--db", postgres_url, *window, "--by", "team,project",
                           "--where", "resource=nvidia.com/gpu")
        budgets = _budget_status(tmp_path, policy, postgres_url, until)
    finally:
        op.stop()
        delete_policy(api, name)
        for ns in namespaces:
            core.delete_namespace(ns)
        _label_nodes(api, dict.fromkeys(flavor["nodeLabels"]))

    # One attempt each (nothing evicted): what Kueue held is what ran.
    assert all(not (w["status"].get("schedulingStats") or {}).get("evictions") for w in finished)
    # (c) the ledger's cost per team = sum of resource-hours x the price in its declared unit (the CLI
    # prints six decimals of the exact sum; the parts are rounded to 1e-9 each: within a micro-unit).
    ledger_money: dict[str, Decimal] = {}
    for row in cost["rows"]:
        assert (row["flavor"], row["currency"]) == ("gpu-a100", "USD")
        ledger_money[row["team"]] = ledger_money.get(row["team"], Decimal(0)) + Decimal(row["cost"])
    assert set(ledger_money) == set(money)
    assert all(abs(ledger_money[t] - money[t]) <= MICRO for t in money), (ledger_money, money)
    ledger_hours = {(r["team"], r["resource"]): (r["unit"], Decimal(r["held_h"])) for r in usage["rows"]}
    assert ledger_hours == {k: (UNITS[k[1]][0], h.quantize(MICRO, rounding=ROUND_HALF_EVEN))
                            for k, h in hours.items()}
    # The sample's project label (fairShare.projectLabel) reaches the ledger's project.
    labelled = {(j["metadata"]["namespace"], j["metadata"]["labels"].get("queuemanager.dev/project", ""))
                for j in _docs("jobs.yaml") if j.get("kind") == "Job"}
    assert labelled == {("ai-frontier-research", "scaling-laws"), ("biz-model-serving", "serving-prod")}
    assert {(r["team"], r["project"]) for r in projects["rows"]} == labelled
    # The operator's counters agree with the ledger, per team.
    counted: dict[str, float] = {}
    for labels, value in _series(metrics, "qm_cost_total"):
        assert labels["currency"] == "USD"
        counted[labels["team"]] = counted.get(labels["team"], 0.0) + value
    assert counted == pytest.approx({t: float(m) for t, m in money.items()}, rel=1e-9, abs=1e-9)
    counted_h: dict[tuple[str, str], float] = {}
    for labels, value in _series(metrics, "qm_resource_hours_total"):
        assert labels["kind"] == "useful" and labels["unit"] == UNITS[labels["resource"]][1]
        key = (labels["team"], labels["resource"])
        counted_h[key] = counted_h.get(key, 0.0) + value
    assert counted_h == pytest.approx({k: float(h) for k, h in hours.items()}, rel=1e-9, abs=1e-9)
    # A budget over the same hour counts the same figures (the budget CLI measures as the operator).
    shown = {b["budget"]: (b["used"], b["unit"], b["used_percent"]) for b in budgets}
    research_money = money["ai-frontier-research"]
    research_gpu_h = hours[("ai-frontier-research", "nvidia.com/gpu")]
    assert shown == {
        "research-money": (_two(research_money), "USD", _one(research_money * 100 / 10)),
        "research-gpu": (_two(research_gpu_h), "GPU-hours", _one(research_gpu_h * 100 / 4)),
    }
    # Cents to dollars: the sample Jobs' cost for ten minutes, at the rate measured.
    per_ten_minutes = {t: m * 600 / Decimal(SECONDS) for t, m in money.items()}
    assert all(Decimal("0.01") <= v <= 100 for v in per_ten_minutes.values()), per_ten_minutes
    print(f"\nsample Jobs, {SECONDS:.0f} s each (2 of each): cost per team {_fmt(money)}; "
          f"per ten minutes {_fmt(per_ten_minutes)}")


def _budget_status(tmp_path: Path, policy: dict[str, Any], url: str, at_s: float) -> list[dict[str, Any]]:
    """`qm budget status` of the sample with two rolling budgets of research added (a copy of it)."""
    doc = copy.deepcopy(policy)
    team = {"team": "ai-frontier-research"}
    doc["spec"]["budgets"] = [
        {"name": "research-money", "selector": team, "period": {"rolling": "1h"}, "limit": {"cost": "10"},
         "thresholds": [{"percent": 80, "action": "alert"}]},
        {"name": "research-gpu", "selector": team, "period": {"rolling": "1h"}, "limit": {"gpuHours": "4"},
         "thresholds": [{"percent": 80, "action": "alert"}]}]
    path = tmp_path / "policy-with-budgets.yaml"
    path.write_text(yaml.safe_dump(doc))
    argv = ["budget", "status", str(path), "--db", url, "--at", _rfc3339(at_s), "-o", "json"]
    out = subprocess.run([sys.executable, "-m", "qm", *argv], cwd=ROOT, capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["rows"]
    assert isinstance(rows, list)
    return rows


def _rfc3339(seconds: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(int(seconds), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _two(value: Decimal) -> str:
    return str(value.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN))


def _one(value: Decimal) -> str:
    return str(value.quantize(Decimal("0.1"), rounding=ROUND_HALF_EVEN))


def _fmt(values: dict[str, Decimal]) -> str:
    return ", ".join(f"{t} {v.quantize(Decimal('0.0001'))} USD" for t, v in sorted(values.items()))
