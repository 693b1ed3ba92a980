"""The real side of the fidelity run: the operator (`qm run`, bound to the shipped ClusterRole) applies the
policy on a control plane with kube-controller-manager, kube-scheduler and KWOK nodes; the jobs are created as
suspended batch/v1 Jobs at their arrival times (their pods run for their run time on KWOK); the policy is
edited in the middle; a watch on the Workloads records, on this machine's clock, when each was admitted
(QuotaReserved=True), evicted (its reservation lost before it finished) and finished."""

from __future__ import annotations

import contextlib
import math
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch
from kubernetes.client.exceptions import ApiException

from devcluster import ControlPlane
from fairshare.policy.patch import patch_policy
from tests.integration.jobs import gpu_job
from tests.integration.test_operator_harness import (
    OPERATOR_GROUPS,
    OPERATOR_USER,
    OperatorProcess,
    install_operator,
)

from .sim import Lifecycle
from .workload import BENCH, GPU, TEAMS, FidelityJob, Quotas, edit, namespace, policy

KUEUE = ("kueue.x-k8s.io", "v1beta2")
QP = ("queuemanager.dev", "v1alpha1", "quotapolicies")
# Jobs are created this long after their whole second: Kueue orders by the Workload's creation time to the
# second, so a job created at second S must not slip into S+1 (the API call and Kueue's Workload creation
# take a few tens of milliseconds).
SUBMIT_OFFSET = 0.05
EDIT_OFFSET = 0.5  # the edit lands half a second after its whole second, off the arrivals of that second
# KWOK's general pod stages wait 1 s plus up to 5 s of jitter to create, ready and delete a pod unless the pod
# says otherwise: the jobs' pods start and stop at once, and complete their run time after they are Ready
# (devcluster.nodes.run_for), so that the cluster holds quota for the run time plus its own latency only.
IMMEDIATE = {f"pod-{stage}.stage.kwok.x-k8s.io/{key}": "0ms"
             for stage in ("create", "ready", "delete") for key in ("delay", "jitter-delay")}


@dataclass
class _Seen:
    job: str
    holding: bool = False
    finished: bool = False
    evicting: float | None = None  # when Kueue's Evicted condition was first seen on this reservation


@dataclass
class RealRun:
    jobs: dict[str, Lifecycle]  # by job name; times from t0 on this machine's clock
    order: list[tuple[float, str, str]]  # (t, "admit" | "evict", job name) as the watch saw them
    uids: dict[str, str]  # job name -> its Workload's UID
    created: dict[str, float]  # job name -> its Workload's creationTimestamp - t0 (whole seconds)
    steps: list[tuple[float, str]]  # the operator's transition audit lines: (t, what)
    t0: float
    finished: bool  # every job finished before the deadline
    overheads: dict[str, float] = field(default_factory=dict)  # job name -> held - run time (one attempt)
    eviction_delays: list[float] = field(default_factory=list)  # Kueue's Evicted condition -> quota released
    ended: float = 0.0  # when the run stopped, from t0

    def mean_overhead(self) -> float:
        """The mean, not the median: the simulator then holds the quota-time the cluster held (the overhead is
        skewed: under load a few pods take seconds longer to start or to be seen complete)."""
        spans = list(self.overheads.values())
        if not spans:
            raise RuntimeError("no job ran once uninterrupted: nothing to measure the cluster's overhead on")
        return sum(spans) / len(spans)


class _Watcher(threading.Thread):
    """Workloads of the run's namespaces, every change stamped with time.time() as it arrives."""

    def __init__(self, api: k8s.ApiClient, namespaces: set[str], t0: float) -> None:
        super().__init__(daemon=True)
        self.custom = k8s.CustomObjectsApi(api)
        self.namespaces = namespaces
        self.t0 = t0
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.seen: dict[str, _Seen] = {}  # by workload ns/name
        self.order: list[tuple[float, str, str]] = []
        self.finished: set[str] = set()
        self.life: dict[str, Lifecycle] = {}
        self.uids: dict[str, str] = {}
        self.created: dict[str, float] = {}
        self.eviction_delays: list[float] = []

    def run(self) -> None:
        rv: str | None = None
        while not self.stop.is_set():
            try:
                if rv is None:
                    listing = self.custom.list_cluster_custom_object(*KUEUE, "workloads")
                    for item in listing["items"]:
                        self._observe(item)
                    rv = listing["metadata"]["resourceVersion"]
                stream = k8s_watch.Watch().stream(
                    self.custom.list_cluster_custom_object, *KUEUE, "workloads",
                    resource_version=rv, timeout_seconds=30, allow_watch_bookmarks=True)
                for event in stream:
                    if self.stop.is_set():
                        return
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        rv = None  # 410 Gone: list again
                        break
                    rv = obj["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        self._observe(obj)
            except ApiException as err:
                if err.status == 410:
                    rv = None
                else:
                    time.sleep(0.2)
            except Exception:
                time.sleep(0.2)

    def _observe(self, wl: dict[str, Any]) -> None:
        meta = wl["metadata"]
        if meta["namespace"] not in self.namespaces:
            return
        now = time.time() - self.t0
        owners = meta.get("ownerReferences") or []
        job = owners[0]["name"] if owners else meta["name"]
        key = f"{meta['namespace']}/{meta['name']}"
        conds = {c["type"]: c for c in (wl.get("status") or {}).get("conditions") or []}
        holding = conds.get("QuotaReserved", {}).get("status") == "True"
        finished = conds.get("Finished", {}).get("status") == "True"
        evicted = conds.get("Evicted", {}).get("status") == "True"
        with self.lock:
            seen = self.seen.setdefault(key, _Seen(job))
            self.uids[job] = meta["uid"]
            self.created[job] = datetime.fromisoformat(meta["creationTimestamp"]).timestamp() - self.t0
            life = self.life[job]
            if holding and not seen.holding and not finished:
                life.admissions.append(now)
                self.order.append((now, "admit", job))
            elif seen.holding and not holding and not finished:
                life.evictions.append(now)
                self.order.append((now, "evict", job))
                if seen.evicting is not None:
                    self.eviction_delays.append(now - seen.evicting)
            if holding and evicted and seen.evicting is None:
                seen.evicting = now
            if not holding:
                seen.evicting = None
            if finished and not seen.finished:
                life.finished = now
                self.finished.add(job)
            seen.holding, seen.finished = holding and not finished, finished


def _wait(what: str, fn: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ApiException):
            value = fn()
            if value:
                return value
        time.sleep(0.2)
    raise RuntimeError(f"fidelity: {what} not within {timeout:.0f} s")


def _ready(custom: k8s.CustomObjectsApi, name: str) -> bool:
    body = custom.get_cluster_custom_object(*QP, name)
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (body.get("status") or {}).get("conditions") or [])


def run_real(cp: ControlPlane, jobs: list[FidelityJob], run: str, *, edit_at: float, workdir: Path,
             drain: float, quotas: Quotas = BENCH, log: Any = print, until: float = 0.0) -> RealRun:
    """Run the jobs on `cp` (which must have KWOK nodes labelled type=kwok holding every team's quota).
    `drain`: seconds after the last arrival to wait for the last finish; `until`: the run lasts at least this
    long from t0 (the transition's steps)."""
    api = k8s_config.new_client_from_config(config_file=str(cp.kubeconfig))
    custom, core, batch = k8s.CustomObjectsApi(api), k8s.CoreV1Api(api), k8s.BatchV1Api(api)
    install_operator(api)
    namespaces = {namespace(t, run) for t in TEAMS}
    for ns in sorted(namespaces):
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=ns)))
    kubeconfig = cp.mint_kubeconfig(OPERATOR_USER, list(OPERATOR_GROUPS))
    op = OperatorProcess(kubeconfig, workdir).start()
    body = policy(run, quotas)
    name = body["metadata"]["name"]
    watcher: _Watcher | None = None
    try:
        custom.create_cluster_custom_object(*QP, body)
        _wait("the policy Ready", lambda: _ready(custom, name), 60)
        for team in TEAMS:
            _wait(f"LocalQueue {team}", lambda t=team: custom.get_namespaced_custom_object(
                *KUEUE, namespace(t, run), "localqueues", f"{t}-{run}"), 30)
        t0 = float(math.ceil(time.time()) + 2)  # a whole second: arrivals are whole seconds from it
        watcher = _Watcher(api, namespaces, t0)
        watcher.life = {j.name: Lifecycle(arrival=float(j.at)) for j in jobs}
        watcher.start()
        edited = patch_policy(body, edit(run, quotas))
        pending_edit = True
        for i, job in enumerate(sorted(jobs, key=lambda j: (j.at, j.name))):
            if pending_edit and job.at >= edit_at:
                _sleep_until(t0 + edit_at + EDIT_OFFSET)
                custom.patch_cluster_custom_object(
                    *QP, name, {"spec": {"teams": edited["spec"]["teams"]}},
                    _content_type="application/merge-patch+json")
                pending_edit = False
            _sleep_until(t0 + job.at + SUBMIT_OFFSET)
            ns = namespace(job.team, run)
            sent = time.time() - t0
            body = gpu_job(job.name, ns, f"{job.team}-{run}", gpus=job.gpus, seconds=job.seconds)
            body["spec"]["template"]["metadata"]["annotations"].update(IMMEDIATE)
            batch.create_namespaced_job(ns, body)  # type: ignore[arg-type]
            watcher.life[job.name].arrival = sent
            if (i + 1) % 100 == 0:
                log(f"fidelity: {i + 1} jobs submitted at {sent:.0f}s, {len(watcher.finished)} finished")
        deadline = time.time() + drain
        while time.time() < deadline and (len(watcher.finished) < len(jobs) or time.time() < t0 + until):
            time.sleep(1.0)
        ended = time.time() - t0
        finished = len(watcher.finished) == len(jobs)
        log(f"fidelity: {len(watcher.finished)} of {len(jobs)} jobs finished at {time.time() - t0:.0f}s")
    finally:
        if watcher is not None:
            watcher.stop.set()
        op.stop()
        with contextlib.suppress(ApiException):
            custom.delete_cluster_custom_object(*QP, name)
        for ns in sorted(namespaces):
            with contextlib.suppress(ApiException):
                core.delete_namespace(ns)
    assert watcher is not None
    steps = []
    for r in op.log_records():
        if r.get("audit") and r.get("action") == "transition-step" and GPU in str(r["what"]):
            value = re.search(r"-> (\d+) GPU", str(r["what"]))
            cq = str(r.get("target", "")).removeprefix("ClusterQueue ")
            steps.append((_epoch(r["time"]) - t0, f"{cq} {value.group(1) if value else r['what']}"))
    with watcher.lock:
        life = {k: v for k, v in watcher.life.items()}
        by_name = {j.name: j for j in jobs}
        overheads = {n: x.finished - x.admissions[0] - by_name[n].seconds for n, x in life.items()
                     if x.finished is not None and len(x.admissions) == 1 and not x.evictions}
        out = RealRun(life, list(watcher.order), dict(watcher.uids), dict(watcher.created), steps, t0,
                      finished, overheads, list(watcher.eviction_delays), ended)
    api.close()
    return out


def _sleep_until(at: float) -> None:
    delay = at - time.time()
    if delay > 0:
        time.sleep(delay)


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()
