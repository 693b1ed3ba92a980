"""The quotas in force that differ from the live ones (fairshare.control.decide, with
FastPaths.memo_transitions and records_memo): decisions that keep their memo between them set the same
quotas, and say everything else the same, as decisions made afresh each time, while the live quotas move
away from the policy's and back (a borrowing limit, a nominal quota changed behind the controller) and a
transition runs."""

from __future__ import annotations

import random

import pytest

from fairshare.control import HistoryBook, Observed, PolicyRules
from fairshare.control.actions import ApplyQuota
from fairshare.control.decide import decide
from fairshare.control.experiments import PlanMemo
from fairshare.manifests import parse_manifests
from fairshare.models import FlavorResource, ResourceQuota
from fairshare.policy import QuotaPolicy, parse_policy, render
from fairshare.policy.status import QuotaPolicyStatus
from fairshare.scheduler.types import SchedulerConfig
from fairshare.snapshot import FAST, Snapshot

from .test_twin_adapters import T0, _policy

GPU = "nvidia.com/gpu"
FR = FlavorResource("gpu", GPU)


def _snapshot(policy: QuotaPolicy) -> Snapshot:
    return Snapshot.from_state(parse_manifests([dict(o) for o in render(policy)]), paths=FAST)


@pytest.mark.parametrize("seed", range(8))
def test_decisions_with_the_memo_set_the_quotas_decisions_made_afresh_set(seed: int) -> None:
    rng = random.Random(seed)
    policy = _policy()
    doc = policy.model_dump(by_alias=True, mode="json", exclude_none=True)
    doc["spec"]["teams"][1]["quotas"][0]["resources"][0]["nominal"] = 2  # business 3 -> 2: a transition
    cut = parse_policy(doc)
    snaps = {m: _snapshot(policy) for m in ("memo", "fresh")}
    statuses: dict[str, QuotaPolicyStatus | None] = {"memo": None, "fresh": None}
    memo = PlanMemo()
    book = HistoryBook.new(policy, T0)
    now, applied, reused = T0, 0, 0
    for step in range(80):
        now += rng.choice([0.0, 1.0, 5.0, 10.0])
        rules = PolicyRules.of(cut if step >= 20 else policy)
        change = rng.random()
        team = rng.choice(["research", "business"])
        quota = ResourceQuota(rng.choice([1000, 2000, 3000]), rng.choice([None, 0, 5000]), None)
        seen = []
        for m in ("memo", "fresh"):
            snap = snaps[m]
            if change < 0.15:  # the live quota changed behind the controller
                snap.set_quota(snap.cluster_queue(team).node, FR, quota)
            observed = Observed(snap, {}, book.graph, SchedulerConfig())
            d = decide(rules, observed, statuses[m], now, history=book, generation=2 if step >= 20 else 1,
                       memo=memo if m == "memo" else None)
            for a in d.actions:
                if isinstance(a, ApplyQuota):
                    snap.set_quota(snap.cluster_queue(a.key.team).node, a.key.flavor_resource, a.quota)
            statuses[m] = d.status
            seen.append((d.actions, d.status.model_dump()))
        assert seen[0] == seen[1], step
        applied += sum(isinstance(a, ApplyQuota) for a in seen[0][0])
        before = memo.differs
        reused += before is not None and memo.transitions.outcome is before[0]
    assert applied > 0  # quotas were set: found differing
    assert reused > 20  # and most decisions read them from the memo
