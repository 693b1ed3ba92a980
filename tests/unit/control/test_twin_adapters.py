"""The two shells observe the same cluster alike: recorded observations (Workloads as the API server
returns them, at a few instants of a quota cut with experiment preemption) go through the operator's
adapter (fairshare.control.observe, which the operator's step calls) and the simulator's (a simulated Kueue
holding the same workloads); the one controller then takes identical actions from both, step after step,
each shell feeding its own status back. The real-cluster twin is tests/integration/test_twin.py."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from fairshare.control import (
    Action,
    ClusterView,
    HistoryBook,
    Observed,
    PolicyController,
    PolicyRules,
    RequestEviction,
    WakeAt,
    decide,
    in_force,
    observe,
)
from fairshare.control.cluster import sync_history
from fairshare.manifests import parse_manifests
from fairshare.models import ResourceQuota, Workload
from fairshare.policy import QuotaPolicy, render, render_index
from fairshare.policy.status import QuotaPolicyStatus
from fairshare.scheduler.types import SchedulerConfig
from fairshare.snapshot import FAST, REFERENCE
from fairshare.workload import WorkloadInfo
from simulations.kueue import KueueModel
from simulations.record import EvictedBy
from tests.unit.control.two_teams import two_team_policy
from tests.unit.operator.kube_objects import workload

T0 = 1_800_000_000.0


def _policy() -> QuotaPolicy:
    return two_team_policy(research=1, business=3, grace="5s", duration="20s", step="10s", drain=True)


# The cluster at each recorded instant: research ran 3 experiments on 4 GPUs when its cut to 1 GPU
# arrived at T0; business runs b1 on 2 of its 3 GPUs, then serve (2 GPUs) arrives and waits. Kueue carries
# out the eviction we ask for (e3) at T0+12; serve is admitted at T0+13; e3 is active again from T0+20.
def _cluster(t: float) -> list[Workload]:
    exp = {"queue": "research", "priority": 10, "priority_class": "exp", "flavor": "gpu"}
    biz = {"queue": "business", "priority": 1000, "priority_class": "biz", "flavor": "gpu"}
    out = [workload("r", "e1", gpus=2, admitted_to="research", reserved_at=T0 - 900, **exp),
           workload("b", "b1", gpus=2, admitted_to="business", reserved_at=T0 - 100, **biz)]
    # e2 is the second victim (asked for at T0+12, when the cut's first step takes what e3 freed): Kueue
    # evicts it at T0+20; it is active again from T0+30.
    if t < T0 + 20:
        e2 = workload("r", "e2", gpus=1, admitted_to="research", reserved_at=T0 - 600, **exp)
        out.append(dataclasses.replace(e2, active=t < T0 + 12))
    else:
        e2 = workload("r", "e2", gpus=1, created=T0 - 700, **{k: v for k, v in exp.items() if k != "flavor"})
        out.append(dataclasses.replace(e2, active=t >= T0 + 30))
    if t < T0 + 12:  # deactivated by us at T0+6, still holding quota until Kueue evicts it
        e3 = workload("r", "e3", gpus=1, admitted_to="research", reserved_at=T0 - 300, **exp)
        out.append(dataclasses.replace(e3, active=t < T0 + 6))
    else:
        e3 = workload("r", "e3", gpus=1, created=T0 - 400, **{k: v for k, v in exp.items() if k != "flavor"})
        out.append(dataclasses.replace(e3, active=t >= T0 + 20))
    if t >= T0 + 1:
        admitted = t >= T0 + 13
        out.append(workload("b", "serve", gpus=2, admitted_to="business" if admitted else None,
                            reserved_at=T0 + 13, created=T0 + 1, **biz))
    return out


TIMES = [T0, T0 + 2, T0 + 6, T0 + 8, T0 + 10, T0 + 12, T0 + 13, T0 + 20, T0 + 30, T0 + 40]


def _operator_observed(policy: QuotaPolicy, quotas: dict[Any, ResourceQuota], wls: Sequence[Workload],
                       book: HistoryBook) -> Observed:
    held = {k: v for k, v in quotas.items()}
    objects = render_index(policy, quotas=held)

    def live(key: Any) -> dict[str, Any] | None:
        obj = objects.get(key)
        return None if obj is None else {k: v for k, v in obj.items() if k not in ("apiVersion", "kind",
                                                                                   "metadata")}

    return observe(policy, live, {w.key: w for w in wls}, book.graph)


class _NoListener:
    def admitted(self, info: WorkloadInfo, t: float) -> None: ...

    def evicted(self, info: WorkloadInfo, t: float, *, by: str, preemptor: str, reason: str) -> None: ...


def _simulator_observed(policy: QuotaPolicy, quotas: dict[Any, ResourceQuota], wls: Sequence[Workload],
                        book: HistoryBook) -> Observed:
    state = parse_manifests([dict(o) for o in render(policy, quotas=quotas)])
    kueue = KueueModel(state, SchedulerConfig(), _NoListener(), track_pending=True)
    for w in wls:
        if w.has_quota_reservation:
            kueue.snapshot.add_workload(WorkloadInfo.admitted(w))
        else:
            kueue.submit(WorkloadInfo.pending(w, "business" if w.namespace == "b" else "research"),
                         w.creation_timestamp)
            if not w.active:
                kueue.deactivate(w.key, w.creation_timestamp, by=EvictedBy.INITIAL, preemptor="", reason="")
    return Observed(kueue.snapshot, kueue.pending, book.graph, kueue.config)


def _actions(actions: Sequence[Action]) -> list[Action]:
    return [a for a in actions if not isinstance(a, WakeAt)]


def test_both_shells_observe_alike_and_the_controller_takes_the_same_actions_from_each() -> None:
    policy = _policy()
    rules = PolicyRules.of(policy)
    shells: dict[str, tuple[QuotaPolicyStatus | None, HistoryBook]] = {
        "operator": (None, HistoryBook.new(policy, T0)), "simulator": (None, HistoryBook.new(policy, T0))}
    quotas: dict[str, dict[Any, ResourceQuota]] = {"operator": {}, "simulator": {}}
    # Before the cut research had 4 GPUs: the quota in force starts there.
    for q in quotas.values():
        q.update({k: dataclasses.replace(v, nominal=4000) for k, v in rules.targets.items()
                  if k.team == "research"})
    log: dict[str, list[list[Action]]] = {"operator": [], "simulator": []}
    for t in TIMES:
        wls = _cluster(t)
        for name in shells:
            status, book = shells[name]
            holding = {w.key: WorkloadInfo.admitted(w) for w in wls if w.has_quota_reservation}
            book.sync(holding, lambda _: None, t)
            observed = (_operator_observed(policy, quotas[name], wls, book) if name == "operator"
                        else _simulator_observed(policy, quotas[name], wls, book))
            d = decide(rules, observed, status, t, history=book, generation=1)
            shells[name] = (d.status, book)
            quotas[name] = in_force(rules, observed, d.actions).held_quotas(rules)
            log[name].append(_actions(d.actions))
    assert log["operator"] == log["simulator"]
    evictions = [a for step in log["operator"] for a in step if isinstance(a, RequestEviction)]
    assert [(a.victim, a.beneficiary, a.repeat) for a in evictions] == [
        ("r/e3", "b/serve", False), ("r/e2", "b/serve", False)]
    kinds = [type(a).__name__ for step in log["operator"] for a in step]
    assert {"StartTransition", "AdvanceTransition", "RequestEviction", "Reactivate"} <= set(kinds)


def test_the_operators_step_with_fast_paths_and_memory_decides_what_a_bare_reference_decide_does() -> None:
    """The operator's step (fresh snapshot every reconcile, the FAST paths, the controller's memory kept
    between reconciles) against `decide` over a REFERENCE snapshot with no memory, instant by instant, each
    fed its own status and quotas back: the same actions and status (the differential's contract, in the
    operator's setting)."""
    policy = _policy()
    rules = PolicyRules.of(policy)
    controller = PolicyController()
    books = {"step": HistoryBook.new(policy, T0), "reference": HistoryBook.new(policy, T0)}
    statuses: dict[str, QuotaPolicyStatus | None] = {"step": None, "reference": None}
    start = {k: dataclasses.replace(v, nominal=4000)
             for k, v in rules.targets.items() if k.team == "research"}
    quotas: dict[str, dict[Any, ResourceQuota]] = {"step": dict(start), "reference": dict(start)}
    evictions = 0
    for t in [*TIMES, T0 + 41, T0 + 50, T0 + 60]:
        wls = {w.key: w for w in _cluster(t)}
        replies = {}
        for name in ("step", "reference"):
            objects = render_index(policy, quotas=quotas[name])

            def live(key: Any, objects: Any = objects) -> dict[str, Any] | None:
                obj = objects.get(key)
                return None if obj is None else {k: v for k, v in obj.items() if k != "metadata"}

            if name == "step":
                reply = controller.step(rules, ClusterView(live, wls, SchedulerConfig()), statuses[name], t,
                                        history=books[name], generation=1)
                books[name], observed, d = reply.history, reply.observed, reply.decision
                assert observed.snapshot.paths == FAST
            else:
                observed = observe(policy, live, wls, books[name].graph, paths=REFERENCE)
                sync_history(books[name], observed.snapshot, wls, t)
                d = decide(rules, observed, statuses[name], t, history=books[name], generation=1)
            statuses[name] = d.status
            quotas[name] = in_force(rules, observed, d.actions).held_quotas(rules)
            replies[name] = d
        assert replies["step"].actions == replies["reference"].actions, t
        dumped = {name: d.status.model_dump(mode="json") for name, d in replies.items()}
        assert dumped["step"] == dumped["reference"], t
        evictions += sum(isinstance(a, RequestEviction) for a in replies["step"].actions)
    assert evictions == 2  # (the run exercises the gate and the transitions, not only quiet ticks)
