"""Forecasts in status on the real control plane (kube-apiserver, etcd, Kueue, kube-controller-manager,
kube-scheduler, KWOK GPU nodes: Jobs whose pods run for given times), in compressed time.

One `qm run` (bound only to the shipped ClusterRole, with a SQLite ledger) reconciles two identical
policies, F with `spec.forecasts` enabled and N without. Each team runs work that outlasts the window; both
policies are cut at the same moment (research 4 -> 2 GPUs over 6 s, a step every 2 s, drain), and a business
job arrives inside F's window. Checked:

- F's status gets a `Computing` forecast at the transition's start, then its predictions;
- the first step of F's transition is applied when it is due, as N's is (the forecast is computed in a
  child process meanwhile): both within one tick plus the machine's slack (TOLERANCE);
- once F's window (spec.forecasts.horizon: 60 s, the least a policy may ask) has passed, the forecast is
  `Scored`: each metric has the value the ledger observed beside it, and those values are what the cluster
  did (the Workloads' own condition times, read independently here): 2 research GPUs and 1 business GPU
  held through the window;
- `qm_forecast_error_ratio` is exported per metric that has both values.

How close the prediction is is not asserted here: the ledger holds only the running work's first seconds,
so the calibrated run times are short (a lower bound: simulations/calibrate.py); the accuracy of the
calibrated simulation is `qm plan`'s test. The figures are printed (pytest -s).
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from devcluster import ControlPlane
from tests.integration.jobs import gpu_job
from tests.integration.test_operator_harness import (
    OPERATOR_GROUPS,
    OPERATOR_USER,
    QP,
    OperatorProcess,
    install_operator,
    suffix,
)

pytestmark = pytest.mark.integration

GPU = "nvidia.com/gpu"
WINDOW = 60.0  # spec.forecasts.horizon (at least 1m: fairshare.policy semantics)
STEP = 2.0  # the transition's step interval
TOLERANCE = 2.5  # one reconcile tick (0.5 s) + the shared machine's slack
RUN = 100.0  # the running jobs outlast the window


@pytest.fixture(scope="module")
def admin(control_plane_with_nodes: ControlPlane) -> Iterator[k8s.ApiClient]:
    client = k8s_config.new_client_from_config(config_file=str(control_plane_with_nodes.kubeconfig))
    try:
        install_operator(client)
        yield client
    finally:
        client.close()


def policy(s: str, *, forecasts: bool) -> dict[str, Any]:
    def quota() -> list[dict[str, Any]]:  # one per team: the cut edits research's alone
        return [{"flavor": f"kwok-{s}",
                 "resources": [{"name": GPU, "nominal": 4}, {"name": "cpu", "nominal": 64}]}]

    never = {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"}
    spec: dict[str, Any] = {
        "flavors": [{"name": f"kwok-{s}", "nodeLabels": {"type": "kwok"}}],
        "priorityClasses": [{"name": f"work-{s}", "value": 100}],
        "teams": [{"name": f"{team}-{s}", "namespaces": [f"{team}-{s}"], "quotas": quota(),
                   "preemption": dict(never)} for team in ("research", "business")],
        "transitions": {"defaults": {"duration": f"{3 * STEP:g}s", "stepInterval": f"{STEP:g}s",
                                     "curve": "linear", "drain": True}},
    }
    if forecasts:
        spec["forecasts"] = {"enabled": True, "horizon": f"{WINDOW:g}s", "replications": 3, "metrics": [
            f"gpu_hours[research-{s}]", f"gpu_hours[business-{s}]", "lost_gpu_hours", "wait_p95"]}
    return {"apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy",
            "metadata": {"name": f"fc-{s}"}, "spec": spec}


def job(api: k8s.ApiClient, ns: str, queue: str, name: str, klass: str, seconds: float) -> None:
    k8s.BatchV1Api(api).create_namespaced_job(ns, gpu_job(name, ns, queue, seconds=seconds,
                                                          priority_class=klass))


def local_queue(custom: k8s.CustomObjectsApi, ns: str, name: str) -> dict[str, Any] | None:
    """The LocalQueue, or None while the operator has not created it yet."""
    try:
        found: dict[str, Any] = custom.get_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", ns,
                                                                    "localqueues", name)
    except k8s.ApiException as err:
        if err.status == 404:
            return None
        raise
    return found


def epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def held_seconds(custom: k8s.CustomObjectsApi, ns: str, start: float, end: float) -> float:
    """GPU-seconds the namespace's Workloads held inside [start, end), from their own condition times."""
    total = 0.0
    for w in custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", ns, "workloads")["items"]:
        conds = {c["type"]: c for c in (w.get("status") or {}).get("conditions") or []}
        reserved = conds.get("QuotaReserved")
        if reserved is None or reserved["status"] != "True":
            continue
        since = epoch(reserved["lastTransitionTime"])
        finished = conds.get("Finished")
        until = epoch(finished["lastTransitionTime"]) if finished and finished["status"] == "True" else end
        total += max(0.0, min(until, end) - max(since, start))
    return total


def step_times(op: OperatorProcess, team: str) -> list[tuple[int, float]]:
    """(step index, when the operator applied it) for each step of `team`'s GPU transition that changed
    the quota (its audit log lines, "... (step 2/3)"). Step k is due at the plan's start + k step intervals
    (fairshare/planners/quota_shift.py make_plan); 4 -> 2 GPUs in 3 steps rounds step 1 up to 4 GPUs (a cut
    rounds toward the current value), so the first step that changes anything is step 2."""
    out = []
    for r in op.log_records():
        if r.get("audit") and r.get("action") == "transition-step" and GPU in r.get("what", "") \
                and r.get("target", "").endswith(f" {team}"):
            index = re.search(r"\(step (\d+)/\d+\)", r["what"])
            if index is not None:
                out.append((int(index.group(1)), epoch(r["time"])))
    return out


def test_a_transition_is_forecast_in_the_background_and_scored_against_the_ledger_later(
    control_plane_with_nodes: ControlPlane, admin: k8s.ApiClient, tmp_path: Path,
    wait_until: Callable[..., Any],
) -> None:
    f, n = suffix(), suffix()
    core = k8s.CoreV1Api(admin)
    custom = k8s.CustomObjectsApi(admin)
    for s in (f, n):
        for team in ("research", "business"):
            core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=f"{team}-{s}")))
    kubeconfig = control_plane_with_nodes.mint_kubeconfig(OPERATOR_USER, list(OPERATOR_GROUPS))
    op = OperatorProcess(kubeconfig, tmp_path, ("--forecast-timeout", "120s")).start()
    names = {s: policy(s, forecasts=s == f)["metadata"]["name"] for s in (f, n)}
    try:
        for s in (f, n):
            custom.create_cluster_custom_object(*QP[:2], QP[2], policy(s, forecasts=s == f))
        for s in (f, n):
            for team in ("research", "business"):
                wait_until(lambda s=s, team=team: local_queue(custom, f"{team}-{s}", f"{team}-{s}"),
                           timeout=30, what=f"the LocalQueue {team}-{s}")
        for s in (f, n):
            for i in (1, 2):
                job(admin, f"research-{s}", f"research-{s}", f"r{i}", f"work-{s}", RUN)
            job(admin, f"business-{s}", f"business-{s}", "b1", f"work-{s}", RUN)

        def running(s: str) -> bool:
            pods = core.list_namespaced_pod(f"research-{s}").items + core.list_namespaced_pod(
                f"business-{s}").items
            return sum(1 for p in pods if p.status.phase == "Running") == 3

        for s in (f, n):
            wait_until(lambda s=s: running(s), timeout=60, what="3 pods running")
        # The cut, to both policies at once (a JSON merge patch replaces the teams list).
        edits = []
        for s in (f, n):
            cut = policy(s, forecasts=s == f)["spec"]["teams"]
            cut[0]["quotas"][0]["resources"][0]["nominal"] = 2
            edits.append(threading.Thread(target=custom.patch_cluster_custom_object, args=(
                *QP[:2], QP[2], names[s], {"spec": {"teams": cut}}),
                kwargs={"_content_type": "application/merge-patch+json"}))
        for t in edits:
            t.start()
        for t in edits:
            t.join()
        # A business job inside F's window: its wait is observed (the forecast, with no history, has no
        # arrivals to predict it from).
        threading.Timer(3.0, job, (admin, f"business-{f}", f"business-{f}", "b2", f"work-{f}", 5.0)).start()

        def forecast_entry() -> dict[str, Any] | None:
            entries = (custom.get_cluster_custom_object(*QP[:2], QP[2], names[f]).get("status") or {}).get(
                "forecasts") or []
            return entries[-1] if entries else None

        computing = wait_until(lambda: forecast_entry(), timeout=20, what="a forecast entry")
        assert computing["phase"] in ("Computing", "Forecast") and computing["policyGeneration"] == 2
        # Scored may come first on a loaded machine: a forecast computed after its window has passed is
        # scored by the reconcile that collects it (the predictions are the same).
        forecast = wait_until(lambda: (e := forecast_entry()) and e["phase"] in ("Forecast", "Scored") and e,
                              timeout=120, what="the forecast computed")
        start, end = forecast["at"], forecast["horizonEndAt"]
        assert end == pytest.approx(start + WINDOW)
        values = {v["metric"]: v for v in forecast["values"]}
        assert set(values) == {f"gpu_hours[research-{f}]", f"gpu_hours[business-{f}]", "lost_gpu_hours",
                               "wait_p95"}
        for v in values.values():
            if v.get("predicted") is not None:
                assert v["low"] <= v["predicted"] <= v["high"]
        for team in ("research", "business"):
            assert values[f"gpu_hours[{team}-{f}]"]["predicted"] > 0

        # The first steps: each when due (its transition's start + its index x the step interval).
        for s in (f, n):
            wait_until(lambda s=s: step_times(op, f"research-{s}"), timeout=20, what="a first step")
        lateness = {}
        for s in (f, n):
            records = custom.get_cluster_custom_object(*QP[:2], QP[2], names[s])["status"]["transitions"]
            record = next(t for t in records if t["team"] == f"research-{s}" and t["resource"] == GPU)
            index, applied = step_times(op, f"research-{s}")[0]
            lateness[s] = applied - (float(record["plan"]["start"]) + index * STEP)
        print(f"\nfirst step after it fell due: with forecasts {lateness[f]:.2f}s, without "
              f"{lateness[n]:.2f}s; forecast computed in {forecast['computedSeconds']:.1f}s "
              f"({forecast.get('message')})")
        assert -1.0 <= lateness[f] <= TOLERANCE and -1.0 <= lateness[n] <= TOLERANCE

        scored = wait_until(lambda: (e := forecast_entry()) and e["phase"] == "Scored" and e,
                            timeout=WINDOW + 90, what="the forecast scored")
        got = {v["metric"]: v for v in scored["values"]}
        research = held_seconds(custom, f"research-{f}", start, end) / 3600
        business = held_seconds(custom, f"business-{f}", start, end) / 3600
        print("forecast vs observed: " + "; ".join(
            f"{m} {v.get('predicted')} ± {v.get('ci95')} [{v.get('low')}, {v.get('high')}] vs "
            f"{v.get('observed')} (error ratio {v.get('errorRatio')})" for m, v in got.items()))
        assert research == pytest.approx(2 * WINDOW / 3600, rel=0.05)
        assert got[f"gpu_hours[research-{f}]"]["observed"] == pytest.approx(research, rel=0.02)
        assert got[f"gpu_hours[business-{f}]"]["observed"] == pytest.approx(business, rel=0.02)
        assert got["lost_gpu_hours"]["observed"] == 0.0
        assert got["wait_p95"]["observed"] is not None and got["wait_p95"]["observed"] < 10 / 3600
        v = got[f"gpu_hours[research-{f}]"]
        assert v["errorRatio"] == pytest.approx(abs(v["observed"] - v["predicted"]) / max(
            abs(v["predicted"]), v.get("ci95") or 0.0))
        assert v["withinInterval"] == (v["low"] <= v["observed"] <= v["high"])
        exported = re.findall(r'qm_forecast_error_ratio\{metric="([^"]+)",policy="' + names[f] + r'"\}',
                              op.metrics())
        assert set(exported) == {m for m, v in got.items()
                                 if v.get("observed") is not None and v.get("predicted") is not None}
        # The policy without forecasts has none, and no ForecastFailed condition anywhere.
        status_n = custom.get_cluster_custom_object(*QP[:2], QP[2], names[n])["status"]
        assert not status_n.get("forecasts")
        status_f = custom.get_cluster_custom_object(*QP[:2], QP[2], names[f])["status"]
        failed = next(c for c in status_f["conditions"] if c["type"] == "ForecastFailed")
        assert failed["status"] == "False"
    finally:
        op.stop()
        for s in (f, n):  # what a failed create never made is not there: a 404 must not hide the failure
            with contextlib.suppress(k8s.ApiException):
                custom.delete_cluster_custom_object(*QP[:2], QP[2], names[s])
            for team in ("research", "business"):
                core.delete_namespace(f"{team}-{s}")
