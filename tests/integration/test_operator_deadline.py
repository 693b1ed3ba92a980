"""A transition's deadline on the real control plane (issue 31, item 4), the live defect replayed: the seed's
shift (research 4 -> 1 GPU, business 16 -> 19, one cohort) with a short transition while research runs 6
experiments, 2 of them on GPUs business leaves idle. Before, the operator evicted two of them at the deadline
and Kueue re-admitted both within 2 s on the same borrowed GPUs. Now: past the deadline nothing is evicted
while nobody needs the quota (PHASE Borrowing, NEXT STEP says so, with the deadline's time); once business
work that Kueue cannot admit waits, the fewest experiments are evicted for it and none is re-admitted while
research stays above its new quota (the futile-eviction check on Kueue's Events, tests/futile.py)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client as k8s

from tests.builders import SeedShiftBuilder
from tests.futile import assert_no_futile_evictions, holdings_from_events, readmissions
from tests.integration.test_operator_harness import (  # noqa: F401 - the *_fixture names register fixtures
    Cluster,
    OperatorProcess,
    cluster_fixture,
    condition_true,
    operator_factory_fixture,
    operator_fixture,
    operator_kubeconfig_fixture,
    suffix,
)

HOLD = 15.0  # spec.preemption.victimHold of the test's policy, seconds


def _status(cluster: Cluster, name: str) -> dict[str, Any]:
    return cluster.policy(name).get("status") or {}


def _research(cluster: Cluster, name: str, team: str) -> dict[str, Any]:
    found = [t for t in _status(cluster, name).get("transitions") or [] if t["team"] == team]
    return found[0] if found else {}


def _admitted(cluster: Cluster, ns: str) -> list[str]:
    return sorted(w["metadata"]["name"] for w in cluster.workloads(ns)
                  if condition_true(w, "Admitted") and not condition_true(w, "Finished"))


def test_past_the_deadline_borrowed_gpus_are_evicted_only_for_work_that_takes_them_and_never_come_back(
    operator: OperatorProcess, cluster: Cluster, wait_until: Callable[..., Any]
) -> None:
    s = suffix()
    research, business = cluster.namespace("research"), cluster.namespace("business")
    spec = (SeedShiftBuilder(s).namespaces(research, business)
            .transition(duration="20s", stepInterval="10s", deadline="40s", maxVictimsPerHour=2)
            .preemption(victimHold=f"{HOLD:g}s"))
    name = spec.name("seed-shift")
    r_team, b_team = spec.name("research"), spec.name("business")
    exp, biz = spec.name("exp"), spec.name("biz")
    cluster.create_policy(spec.before())
    for team, ns in ((r_team, research), (b_team, business)):
        wait_until(lambda t=team, n=ns: condition_true(cluster.kueue("localqueues", t, n), "Active"),
                   timeout=30, what=f"{team} LocalQueue Active")
    for i in range(6):
        cluster.create_job(research, f"exp-{i}", r_team, exp, 1)
    wait_until(lambda: len(_admitted(cluster, research)) == 6, timeout=60,
               what="6 experiments admitted (2 on business's idle GPUs)")
    after = spec.after()
    cluster.patch_policy(name, {"spec": {"teams": after["spec"]["teams"]}})  # type: ignore[index]
    started = wait_until(lambda: _research(cluster, name, r_team).get("startedAt"), timeout=30,
                         what="the research transition started")

    # 1. Past the deadline, nobody needs the GPUs research borrows: nothing is evicted.
    wait_until(lambda: _status(cluster, name).get("phase") == "Borrowing", timeout=90,
               what="PHASE Borrowing past the deadline")
    record = _research(cluster, name, r_team)
    next_step = _status(cluster, name).get("nextStep") or ""
    assert record["deadlineAt"] > started and record["current"] == "1", record
    assert next_step == (
        f"{r_team} {spec.name('gpu')}/nvidia.com/gpu: 5 GPUs borrowed above the quota in force (1 GPU): "
        f"evicted only when another team's pending work needs it; deadline passed at {record['deadlineAt']}"
    ), next_step
    time.sleep(3)  # a few more ticks of the operator (0.5 s each)
    asked = cluster.events(research, reason="PreemptionRequested")
    assert (len(_admitted(cluster, research)), asked) == (6, [])

    # 2. Business fills the 14 idle GPUs, then needs 2 more: Kueue cannot reclaim (reclaimWithinCohort
    #    Never); the operator evicts the 2 newest experiments for it, and holds them.
    cluster.create_job(business, "fill", b_team, biz, 14)
    wait_until(lambda: _admitted(cluster, business) != [], timeout=30, what="business fills the idle GPUs")
    cluster.create_job(business, "serve", b_team, biz, 2)
    serve = wait_until(
        lambda: (w := cluster.workload_of_job(business, "serve")) and condition_true(w, "Admitted") and w,
        timeout=60, what="the business job admitted on the GPUs research borrowed")
    records = [r for r in _status(cluster, name).get("lastPreemptions") or [] if r.get("kind") ==
               "transition-deadline"]
    assert [(r["beneficiary"], r["team"]) for r in records] == [
        (f"{business}/{serve['metadata']['name']}", r_team)] * 2, records
    victims = sorted(r["victim"] for r in records)
    assert len(set(victims)) == 2 and all(v.startswith(f"{research}/") for v in victims)

    # 3. Held for victimHold, then requeued: none comes back while research holds 4 GPUs of its 1.
    wait_until(lambda: all(r.get("state") == "Requeued" for r in _status(cluster, name)["lastPreemptions"]
                           if r.get("kind") == "transition-deadline"),
               timeout=HOLD + 30, what="victims reactivated after the hold and requeued by Kueue")
    time.sleep(3)
    assert len(_admitted(cluster, research)) == 4
    # Kueue kept what they ran (status.accumulatedPastExecutionTimeSeconds): minRuntime counts it.
    by_name = {f"{research}/{w['metadata']['name']}": w for w in cluster.workloads(research)}
    ran = [by_name[v]["status"].get("accumulatedPastExecutionTimeSeconds", 0) for v in victims]
    assert all(x >= 40 for x in ran), ran
    evicted_at = [(r["victim"], float(r["at"])) for r in records]

    def team_of(key: str) -> str | None:
        return r_team if key.startswith(f"{research}/") else None

    held = holdings_from_events(k8s.CoreV1Api(cluster.api).list_namespaced_event(research).items, team_of,
                                lambda _: 1000)
    back = readmissions(evicted_at, held, lambda _team, _t: 1000)
    assert_no_futile_evictions(back, within=math.inf)
    assert back == []
