"""How the controller reads quotas with FastPaths.quota_reads (fairshare.control.decide.quotas_now): the
quota held is read per key from the team's ClusterQueue (HeldQuota), the same as `quota_usage`'s map for
every key (policy teams and others, zero usage, a ClusterQueue that does not exist); the live quotas are
read again from the last decision only for the same snapshot object with the same quotas
(Snapshot.quota_id) under the same rules, and then equal a fresh reading; a change of usage alone reads
them again, any quota change, a what-if rolled back, another snapshot (whose ids count from the same
start) or new rules read afresh."""

from __future__ import annotations

import dataclasses
from typing import Any

from fairshare.control import HistoryBook, Observed, PolicyRules
from fairshare.control.decide import HeldQuota, live_quotas, quota_usage, quotas_now
from fairshare.control.experiments import PlanMemo
from fairshare.manifests import parse_manifests
from fairshare.models import FlavorResource, QuotaKey, ResourceQuota
from fairshare.policy import QuotaPolicy, render
from fairshare.scheduler.types import SchedulerConfig
from fairshare.snapshot import FAST, REFERENCE, Snapshot
from fairshare.workload import WorkloadInfo
from tests.unit.operator.kube_objects import workload

from .test_twin_adapters import T0, _policy

GPU = "nvidia.com/gpu"
FR = FlavorResource("gpu", GPU)


def _snapshot(policy: QuotaPolicy) -> Snapshot:
    return Snapshot.from_state(parse_manifests([dict(o) for o in render(policy)]), paths=FAST)


def _admit(snap: Snapshot, name: str, gpus: int, team: str = "research") -> None:
    ns = "r" if team == "research" else "b"
    wl = workload(ns, name, queue=team, gpus=gpus, admitted_to=team, reserved_at=T0, flavor="gpu",
                  priority=10)
    snap.add_workload(WorkloadInfo.admitted(wl))


KEYS = [QuotaKey(team, fr) for team in ("research", "business", "nobody")
        for fr in (FR, FlavorResource("gpu", "cpu"), FlavorResource("other", GPU))]


def _same_held(held: HeldQuota, observed: Observed, rules: PolicyRules) -> bool:
    """HeldQuota answers every key as quota_usage's map does (with 0 and with another default)."""
    full = quota_usage(observed, rules.policy, rules.team_names, rules.quota_keys)
    keys = KEYS + list(full)
    return all(held.get(k, 0) == full.get(k, 0) and held.get(k, -1) == full.get(k, -1) for k in keys)


def _fresh_live(observed: Observed, rules: PolicyRules) -> Any:
    return live_quotas(observed, rules.policy, rules.team_names)


def test_the_same_state_is_read_again_and_every_change_is_read_afresh() -> None:
    policy = _policy()
    rules = PolicyRules.of(policy)
    snap = _snapshot(policy)
    observed = Observed(snap, {}, HistoryBook.new(policy, T0).graph, SchedulerConfig())
    memo = PlanMemo()

    first, held = quotas_now(observed, rules, memo)
    again, _ = quotas_now(observed, rules, memo)
    assert again is first  # read again, not recomputed
    assert first == _fresh_live(observed, rules)
    assert isinstance(held, HeldQuota) and _same_held(held, observed, rules)

    steps = [
        lambda: _admit(snap, "e1", 1),
        lambda: _admit(snap, "b1", 2, team="business"),
        lambda: snap.set_quota(snap.cluster_queue("research").node, FR, ResourceQuota(nominal=3000)),
        lambda: snap.remove_workload("r/e1"),
        lambda: snap.set_quota(snap.cluster_queue("business").node, FR,
                               ResourceQuota(nominal=1000, borrowing_limit=0)),
    ]
    last = first
    for step in steps:
        quotas = snap.quota_id
        step()
        live, held = quotas_now(observed, rules, memo)
        assert isinstance(held, HeldQuota)
        assert live == _fresh_live(observed, rules) and _same_held(held, observed, rules)
        # Usage alone changed: the same quotas, read again; a quota changed: read afresh.
        assert (live is last) == (snap.quota_id == quotas)
        last = live
    assert sum(1 for _ in steps) == 5
    assert quota_usage(observed, rules.policy, rules.team_names, rules.quota_keys) == {
        QuotaKey("business", FR): 2000}
    # A ClusterQueue of the cluster that is no team of the policy holds no quota the policy counts.
    research_only = policy.model_copy(update={"spec": policy.spec.model_copy(
        update={"teams": [t for t in policy.spec.teams if t.name == "research"]})})
    narrow = PolicyRules.of(research_only)
    _, held = quotas_now(observed, narrow, PlanMemo())
    assert isinstance(held, HeldQuota) and _same_held(held, observed, narrow)
    assert held.get(QuotaKey("business", FR), 0) == 0

    # A what-if rolled back: the state it returns to reads as before it.
    before, _ = quotas_now(observed, rules, memo)
    with snap.transaction():
        snap.set_quota(snap.cluster_queue("research").node, FR, ResourceQuota(nominal=5000))
        inside, _ = quotas_now(observed, rules, memo)
        assert inside == _fresh_live(observed, rules) != before
    after, _ = quotas_now(observed, rules, memo)
    assert after == before == _fresh_live(observed, rules)

    # A change kept by an inner what-if and undone by the outer one: the quotas before both.
    with snap.transaction():
        snap.set_quota(snap.cluster_queue("research").node, FR, ResourceQuota(nominal=6000))
        outer, _ = quotas_now(observed, rules, memo)  # read (and kept) with the outer change alone
        with snap.transaction(commit=True):
            snap.set_quota(snap.cluster_queue("business").node, FR, ResourceQuota(nominal=7000))
        kept, _ = quotas_now(observed, rules, PlanMemo())  # (the memo keeps the outer reading)
        assert kept == _fresh_live(observed, rules) != outer != before
    undone, _ = quotas_now(observed, rules, memo)
    assert undone == before == _fresh_live(observed, rules)

    # New rules (a new policy generation) read afresh, even in the same state.
    assert quotas_now(observed, rules, memo)[0] is undone
    assert quotas_now(observed, PolicyRules.of(policy), memo)[0] is not undone


def test_another_snapshot_in_a_state_with_the_same_id_is_read_afresh() -> None:
    policy = _policy()
    rules = PolicyRules.of(policy)
    memo = PlanMemo()
    graph = HistoryBook.new(policy, T0).graph
    one, two = _snapshot(policy), _snapshot(policy)
    one.set_quota(one.cluster_queue("research").node, FR, ResourceQuota(nominal=2000))
    # as many changes: the same state id
    two.set_quota(two.cluster_queue("research").node, FR, ResourceQuota(nominal=4000))
    assert one.state_id == two.state_id
    a, _ = quotas_now(Observed(one, {}, graph, SchedulerConfig()), rules, memo)
    b, _ = quotas_now(Observed(two, {}, graph, SchedulerConfig()), rules, memo)
    assert a != b
    assert b == _fresh_live(Observed(two, {}, graph, SchedulerConfig()), rules)


def test_the_reference_builds_both_maps() -> None:
    policy = _policy()
    rules = PolicyRules.of(policy)
    snap = _snapshot(policy)
    snap.paths = dataclasses.replace(FAST, quota_reads=False)
    _admit(snap, "e1", 1)
    observed = Observed(snap, {}, HistoryBook.new(policy, T0).graph, SchedulerConfig())
    live, usage = quotas_now(observed, rules, PlanMemo())
    assert usage == {QuotaKey("research", FR): 1000}
    assert live == _fresh_live(observed, rules)
    assert REFERENCE.quota_reads is False and FAST.quota_reads is True
