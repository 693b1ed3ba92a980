"""Faults on the real control plane (issue 13, item 4): the operator SIGKILLed at seeded random points across
quota transitions and experiment preemptions, the kube-apiserver restarted mid-transition, Kueue restarted
mid-preemption, etcd paused for 30 s. After recovery every transition completes with each step applied
once, every requested victim is evicted at most once and reactivated, and no Event or audit row is lost
(docs/operator.md, "Faults": which records could be lost and why none are).

The suite runs on a control plane of its own (it restarts components; the session's shared one stays
untouched), with the operator bound to the shipped ClusterRole, writing a SQLite ledger of its own. CI time
is bounded: the 50 kill points are spread over a few compressed transitions (40 s steps) and preemption
rounds in ONE test (its length is the 50 restarts', not the steps': 12 minutes at load average 11-13), the
three component faults about 4.3 minutes together at the same load.
`QM_FAULT_SEED` and `QM_FAULT_KILLS` reproduce or widen a run; `-s` prints the figures.
"""

from __future__ import annotations

import os
import random
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from devcluster import ControlPlane
from tests.integration.controlplanes import POOL, binaries_or_skip, keep_logs
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

SEED = int(os.environ.get("QM_FAULT_SEED", "20261213"))
KILLS = int(os.environ.get("QM_FAULT_KILLS", "50"))
# The planner applies the step due when it looks: an outage longer than a step interval can merge the step
# due during it into the next (docs/operator.md, "Faults"); real step intervals are hours. So the steps of
# a test are longer than the outages it makes, counted until the operator acts again: 40 s for the
# kube-apiserver's restart (its restart plus the operator's reconnection, up to RECOVERY_TARGET: with 20 s
# steps a CI run at load merged steps 2 and 3, "5 GPUs -> 3 GPUs (step 3/3)"), for etcd's 30 s pause and for
# the SIGKILLs, whose restarts (SIGKILL to serving again) took 9-14 s median and 18 s at most at load
# average 5-6 but more than 30 s at load average 15-17 on the shared 2-core machine. A restart slower than
# that is its own failure (START_TIMEOUT, RECOVERY_TARGET), never a confusing step count.
STEPS = {"duration": "60s", "stepInterval": "20s", "curve": "linear", "drain": False}
SLOW_STEPS = {"duration": "120s", "stepInterval": "40s", "curve": "linear", "drain": False}
START_TIMEOUT = 40.0  # seconds from spawn to /healthz: SLOW_STEPS's interval
GPU = "nvidia.com/gpu"
RECOVERY_TARGET = 30.0  # seconds after the API is back (issue 13)
FIGURES: dict[str, object] = {}


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    binaries = binaries_or_skip()
    POOL.stop_extra()  # the machine runs the shared control plane and at most one more
    cp = ControlPlane(None, binaries, keep_logs=keep_logs())
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()
        if FIGURES:
            print("\nfault-suite figures:", FIGURES)


@pytest.fixture(scope="module")
def admin(plane: ControlPlane) -> Iterator[k8s.ApiClient]:
    api = k8s_config.new_client_from_config(config_file=str(plane.kubeconfig))
    try:
        yield api
    finally:
        api.close()


@pytest.fixture(scope="module")
def operator_kubeconfig(plane: ControlPlane, admin: k8s.ApiClient) -> Path:
    """The shipped CRD, ClusterRole/Binding and Lease Role; a kubeconfig of the operator's identity."""
    install_operator(admin)
    return plane.mint_kubeconfig(OPERATOR_USER, OPERATOR_GROUPS)


@pytest.fixture
def cluster(admin: k8s.ApiClient) -> Iterator[Cluster]:
    c = Cluster(admin)
    yield c
    for fn in reversed(c.cleanup):
        fn()


@pytest.fixture
def operator(operator_kubeconfig: Path, tmp_path: Path) -> Iterator[OperatorProcess]:
    """One `qm run` (no leader election: a single replica, so a fault never also moves the Lease), with a
    ledger of its own; started by the test, stopped (SIGTERM: the ledger spool is flushed) at the end."""
    op = OperatorProcess(operator_kubeconfig, tmp_path,
                         ("--ledger", str(tmp_path / "ledger.db"), "--ledger-spool", str(tmp_path / "spool")),
                         start_timeout=START_TIMEOUT)
    yield op
    op.stop()


# ---------------------------------------------------------------------------------------------- helpers
def _until(fn: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except (ApiException, OSError, urllib3.exceptions.HTTPError) as err:  # the API is away: again
            last = err
        else:
            if last:
                return last
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}; last: {last!r}", pytrace=False)


def _set_gpus(cluster: Cluster, name: str, team: int, gpus: int) -> int:
    """Set a team's GPU nominal; the new generation."""
    policy = cluster.policy(name)
    teams = policy["spec"]["teams"]
    for r in teams[team]["quotas"][0]["resources"]:
        if r["name"] == GPU:
            r["nominal"] = gpus
    return int(cluster.patch_policy(name, {"spec": {"teams": teams}})["metadata"]["generation"])


def _transition(cluster: Cluster, name: str, team: str) -> dict[str, Any]:
    entries = (cluster.policy(name).get("status") or {}).get("transitions") or []
    return next((e for e in entries if e["team"] == team and e["resource"] == GPU), {})


def _events(cluster: Cluster, namespace: str, reason: str, *, name: str | None = None) -> list[Any]:
    return cluster.events(namespace, name=name, reason=reason)


def _steps(cluster: Cluster, cq: str) -> Counter[tuple[str, int]]:
    """How many TransitionStep Events on the ClusterQueue say each (what, count)."""
    return Counter((e.message.split("; why:")[0], int(e.count or 1))
                   for e in _events(cluster, "default", "TransitionStep", name=cq))


def _ledger_rows(tmp_path: Path, action: str, policy: str) -> list[tuple[str, str]]:
    """The test's own policy's rows: a new operator re-records every fact it finds in the operator's Events
    (queue_manager/main.py recover_reported: a dead leader's facts), earlier tests' policies' too."""
    with sqlite3.connect(tmp_path / "ledger.db") as db:
        rows = db.execute("SELECT target_name, what FROM audit WHERE action = ? AND policy = ?",
                          (action, policy)).fetchall()
    return sorted(rows)


def _probe(cluster: Cluster, name: str, started: float) -> float:
    """Seconds from `started` until the operator has reconciled a new generation (an edit that changes no
    quota): the operator watches, decides and writes again."""
    half = "2h" if cluster.policy(name)["spec"]["fairShare"]["halfLife"] == "1h" else "1h"
    edited = cluster.patch_policy(name, {"spec": {"fairShare": {"halfLife": half}}})
    gen = int(edited["metadata"]["generation"])
    _until(lambda: (cluster.policy(name).get("status") or {}).get("observedGeneration") == gen, 120,
           f"generation {gen} reconciled")
    return time.monotonic() - started


@dataclass
class Chaos:
    """SIGKILLs the operator at seeded random points and starts it again at once (as a Deployment's
    pod is restarted), until told to stop or `kills` is reached."""

    operator: OperatorProcess
    rng: random.Random
    kills: int
    done: int = 0
    restarts: list[float] = field(default_factory=list)  # spawn -> healthy, seconds
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    error: BaseException | None = None

    def start(self) -> Chaos:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set() and self.done < self.kills:
                # Up between 0.3 s and 4 s after it serves: mid-reconcile, mid-write, idle.
                if self._stop.wait(self.rng.uniform(0.3, 4.0)):
                    return
                self.operator.kill()
                self.done += 1
                began = time.monotonic()
                self.operator.start()
                self.restarts.append(time.monotonic() - began)
        except BaseException as err:  # reported by the test thread (Chaos.stop)
            self.error = err

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)
        if self.error is not None:
            raise self.error


def _policy(s: str, cluster: Cluster, *, research: int, business: int,
            steps: dict[str, Any] = STEPS) -> tuple[dict[str, Any], str, str]:
    """victimHold 120 s: longer than any outage the suite makes. Restarts in a row whose operator is killed
    before its first reconcile (a loaded machine) added up to 30 s: a 20 s hold then ran out, the victims
    were reactivated before the beneficiary got in (as the policy says), and the next plan evicted one of
    them again, a second request, which the per-round count here is not about."""
    research_ns, business_ns = cluster.namespace("research"), cluster.namespace("business")
    policy = two_team_policy(s, research_ns=research_ns, business_ns=business_ns, research_gpus=research,
                             business_gpus=business, transition=steps,
                             preemption={"protectedClasses": [f"business-{s}"], "minRuntime": "0s",
                                         "starvationGrace": "1s", "victimHold": "120s",
                                         "budget": {"maxVictims": 100, "window": "1h"}})
    cluster.create_policy(policy)
    return policy, research_ns, business_ns


def _active(cluster: Cluster, cq: str) -> bool:
    return condition_true(cluster.kueue("clusterqueues", cq), "Active")


def _admitted(cluster: Cluster, ns: str) -> int:
    return sum(condition_true(w, "Admitted") for w in cluster.workloads(ns))


# ---------------------------------------------------------------------------------------------- the cut
def _cut_and_restore(cluster: Cluster, name: str, cq: str, flavor: str, *, start: int, to: int) -> int:
    """One transition start -> to (steps of 1 GPU every 40 s, SLOW_STEPS) and back (growth applies at
    once); the generation of the cut."""
    gen = _set_gpus(cluster, name, 0, to)
    _until(lambda: cluster.gpu_quota(cq, flavor) == str(to)
           and _transition(cluster, name, cq).get("phase") == "Complete", 360, f"{cq} cut to {to}")
    _set_gpus(cluster, name, 0, start)
    _until(lambda: cluster.gpu_quota(cq, flavor) == str(start), 60, f"{cq} back to {start}")
    return gen


def _expected_steps(flavor: str, start: int, to: int, cuts: int, *,
                    growth: bool = True) -> Counter[tuple[str, int]]:
    """Per cut, each step once (one Event, count 1), and the growth back (applied at once: step 0)."""
    n = start - to
    steps = [f"nominalQuota {flavor}/{GPU} {start - k + 1} GPUs -> {start - k} GPUs (step {k}/{n})"
             for k in range(1, n + 1)]
    if growth:
        steps.append(f"nominalQuota {flavor}/{GPU} {to} GPUs -> {start} GPUs (step 0/{n})")
    return Counter({(what, 1): cuts for what in steps})


@pytest.mark.timeout(2400)
def test_sigkill_at_50_seeded_points_loses_no_step_victim_event_or_audit_row(
    operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    s = suffix()
    policy, research, business = _policy(s, cluster, research=6, business=4, steps=SLOW_STEPS)
    name, cq, flavor, bcq = policy["metadata"]["name"], f"research-{s}", f"gpu-{s}", f"business-{s}"
    operator.start()
    _until(lambda: _active(cluster, cq) and _active(cluster, bcq), 60, "ClusterQueues Active")
    chaos = Chaos(operator, random.Random(SEED), KILLS).start()
    began = time.monotonic()
    cuts = 0
    rounds = 0
    while chaos.done < KILLS and chaos.error is None:
        # A transition 6 -> 3 (three steps) ...
        _cut_and_restore(cluster, name, cq, flavor, start=6, to=3)
        cuts += 1
        # ... and an experiment-preemption round: research (6 GPUs) borrows 2 of business's 4; business asks
        # for 4; two experiments must go; they come back when business finishes.
        for i in range(8):
            cluster.create_job(research, f"exp-{rounds}-{i}", cq, f"experiment-{s}", 1)
        _until(lambda: _admitted(cluster, research) == 8, 120, "8 experiments admitted")
        serve = f"serve-{rounds}"
        cluster.create_job(business, serve, bcq, f"business-{s}", 4)
        _until(lambda j=serve: _admitted_or_why(cluster, business, j, name), 180, "business admitted")
        _until(lambda: _records_done(cluster, name), 180, "victims reactivated and requeued")
        # Each victim of this round was evicted by Kueue once (Deactivated: our request) and is back.
        evictions = {w["metadata"]["name"]: _deactivations(w) for w in cluster.workloads(research)}
        assert sorted(evictions.values()) == [0] * 6 + [1] * 2, evictions
        _delete_jobs(cluster, research, business)
        rounds += 1
    chaos.stop()
    FIGURES["kills"] = chaos.done
    FIGURES["chaos seconds"] = round(time.monotonic() - began)
    FIGURES["cuts, preemption rounds"] = (cuts, rounds)
    restarts = sorted(chaos.restarts)
    FIGURES["restart to healthy (median, max s)"] = (
        round(restarts[len(restarts) // 2], 2), round(restarts[-1], 2))
    assert chaos.done >= KILLS

    # Every cut: steps 1, 2, 3 each reported (and so applied) once, in order, for each cut.
    assert _steps(cluster, cq) == _expected_steps(flavor, 6, 3, cuts)

    # Every eviction request: Kueue evicted the victim once for it, it was reactivated and requeued, and
    # each of the three facts has its Event (on the victim).
    records = cluster.policy(name)["status"]["lastPreemptions"]
    assert len(records) == 2 * rounds and {r["state"] for r in records} == {"Requeued"}
    for reason in ("PreemptionRequested", "PreemptionVerified", "VictimReactivated"):
        posted = sorted(e.involved_object.name for ns in (research,) for e in _events(cluster, ns, reason))
        assert len(posted) == len(records), (reason, posted)

    # The ledger has one audit row per fact: per step, per eviction request.
    operator.stop()
    assert len(_ledger_rows(tmp_path, "transition-step", name)) == 4 * cuts
    assert len(_ledger_rows(tmp_path, "preempt", name)) == len(records)
    assert len(_ledger_rows(tmp_path, "reactivated", name)) == len(records)


def _delete_jobs(cluster: Cluster, *namespaces: str) -> None:
    """The round's Jobs and their Workloads (this control plane runs no garbage collector)."""
    batch = k8s.BatchV1Api(cluster.api)
    for ns in namespaces:
        for job in batch.list_namespaced_job(ns).items:
            batch.delete_namespaced_job(job.metadata.name, ns, propagation_policy="Orphan")
        for wl in cluster.workloads(ns):
            cluster.custom.delete_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", ns, "workloads",
                                                           wl["metadata"]["name"])
    _until(lambda: not any(cluster.workloads(ns) for ns in namespaces), 120, "the round's workloads gone")


def _admitted_or_why(cluster: Cluster, ns: str, job: str, policy: str) -> bool | _Pending:
    """True once the Job's Workload is admitted; else, for the timeout's message, its conditions and the
    policy's eviction records and blocked preemptions."""
    wl = cluster.workload_of_job(ns, job)
    if condition_true(wl, "Admitted"):
        return True
    status = cluster.policy(policy).get("status") or {}
    why = [(c.get("type", ""), str(c.get("message", ""))[:200]) for c in ((wl or {}).get("status") or {})
           .get("conditions") or []]
    why += [(r.get("victim", ""), str(r.get("state"))) for r in status.get("lastPreemptions") or []]
    blocked = status.get("blockedPreemptions") or []
    why += [(b.get("workload", ""), b.get("reason", "")[:200]) for b in blocked]
    return _Pending(why)


def _deactivations(workload: dict[str, Any]) -> int:
    stats = (workload.get("status") or {}).get("schedulingStats") or {}
    evictions = stats.get("evictions") or []
    return sum(int(e.get("count", 0)) for e in evictions if e.get("reason") == "Deactivated")


class _Pending(list[tuple[str, str]]):
    """Falsy while some eviction request is not done; shows which (for the timeout's message)."""

    def __bool__(self) -> bool:
        return False


def _records_done(cluster: Cluster, name: str) -> bool | _Pending:
    records = (cluster.policy(name).get("status") or {}).get("lastPreemptions") or []
    if records and all(r.get("state") == "Requeued" for r in records):
        return True
    return _Pending((r.get("victim", ""), str(r.get("state"))) for r in records)


# ---------------------------------------------------------------------------------------------- components
def _start_cut(cluster: Cluster, operator: OperatorProcess, steps: dict[str, Any]) -> tuple[str, str, str]:
    """A running operator, a policy, and its 6 -> 3 cut with step 1 applied; (policy, cq, flavor)."""
    s = suffix()
    policy, _, _ = _policy(s, cluster, research=6, business=4, steps=steps)
    name, cq, flavor = policy["metadata"]["name"], f"research-{s}", f"gpu-{s}"
    operator.start()
    _until(lambda: _active(cluster, cq), 60, "ClusterQueue Active")
    _set_gpus(cluster, name, 0, 3)
    _until(lambda: cluster.gpu_quota(cq, flavor) == "5", 120, "step 1 applied")
    return name, cq, flavor


def _finish_cut(cluster: Cluster, name: str, cq: str, flavor: str, tmp_path: Path,
                operator: OperatorProcess) -> None:
    _until(lambda: cluster.gpu_quota(cq, flavor) == "3" and _transition(cluster, name, cq).get("phase")
           == "Complete", 300, "the cut completes")
    # The last step's Event follows its ClusterQueue write (reconcile.py report_writes): a moment later.
    expected = _expected_steps(flavor, 6, 3, 1, growth=False)
    _until(lambda: _steps(cluster, cq) == expected or _steps(cluster, cq) - expected, 30,
           "the last step's Event")
    assert _steps(cluster, cq) == expected
    operator.stop()
    assert len(_ledger_rows(tmp_path, "transition-step", name)) == 3


@pytest.mark.timeout(900)
def test_the_kube_apiserver_restarted_mid_transition_the_transition_completes_each_step_once(
    plane: ControlPlane, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    name, cq, flavor = _start_cut(cluster, operator, SLOW_STEPS)
    FIGURES["kube-apiserver away (s)"] = round(plane.restart("kube-apiserver"), 1)
    recovered = _probe(cluster, name, time.monotonic())
    FIGURES["operator reconciles again after kube-apiserver is back (s)"] = round(recovered, 1)
    assert recovered <= RECOVERY_TARGET
    _finish_cut(cluster, name, cq, flavor, tmp_path, operator)


@pytest.mark.timeout(900)
def test_etcd_paused_30s_mid_transition_the_transition_completes_each_step_once(
    plane: ControlPlane, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    name, cq, flavor = _start_cut(cluster, operator, SLOW_STEPS)
    plane.pause("etcd")
    try:
        time.sleep(30)
    finally:
        plane.resume("etcd")
    recovered = _probe(cluster, name, time.monotonic())
    FIGURES["operator reconciles again after etcd resumes (s)"] = round(recovered, 1)
    assert recovered <= RECOVERY_TARGET
    _finish_cut(cluster, name, cq, flavor, tmp_path, operator)


@pytest.mark.timeout(900)
def test_kueue_restarted_mid_preemption_every_victim_is_evicted_once_and_reactivated(
    plane: ControlPlane, operator: OperatorProcess, cluster: Cluster, tmp_path: Path
) -> None:
    s = suffix()
    policy, research, business = _policy(s, cluster, research=6, business=4)
    name, cq, bcq = policy["metadata"]["name"], f"research-{s}", f"business-{s}"
    operator.start()
    _until(lambda: _active(cluster, cq) and _active(cluster, bcq), 60, "ClusterQueues Active")
    for i in range(8):
        cluster.create_job(research, f"exp-{i}", cq, f"experiment-{s}", 1)
    _until(lambda: _admitted(cluster, research) == 8, 120, "8 experiments admitted")
    cluster.create_job(business, "serve", bcq, f"business-{s}", 4)
    # The moment the operator has recorded its requests, Kueue goes away (and comes back).
    _until(lambda: (cluster.policy(name).get("status") or {}).get("lastPreemptions"), 120,
           "evictions requested")
    FIGURES["Kueue away (s)"] = round(plane.restart("kueue"), 1)
    back = time.monotonic()
    _until(lambda: condition_true(cluster.workload_of_job(business, "serve"), "Admitted"), 120,
           "business admitted")
    _until(lambda: _records_done(cluster, name), 120, "victims reactivated and requeued")
    FIGURES["victims requeued after Kueue is back (s)"] = round(time.monotonic() - back, 1)
    evictions = sorted(_deactivations(w) for w in cluster.workloads(research))
    assert evictions == [0] * 6 + [1] * 2
    records = cluster.policy(name)["status"]["lastPreemptions"]
    for reason in ("PreemptionRequested", "PreemptionVerified", "VictimReactivated"):
        assert len(_events(cluster, research, reason)) == len(records) == 2, reason
    operator.stop()
    assert len(_ledger_rows(tmp_path, "preempt", name)) == 2
