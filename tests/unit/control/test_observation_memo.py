"""The operator's observation kept by delta (fairshare.control.standing, in the controller's ObservationMemo):
a step given the keys of the Workloads that changed derives those, and observes exactly what a fresh
observation of every Workload does (observe, policy_workloads, oldest_waiting, observe_evictions). Random
Workload churn (admissions, completions, evictions, deactivations, deletions, new objects with the same
content, queues moved, a LocalQueue edited by hand, the policy re-parsed or edited, steps without the keys)
on the smallest looping world's three teams; the Kueue objects' models are taken again while the lookup
returns the same object."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from fairshare.control import HistoryBook, PolicyController, PolicyRules
from fairshare.control.cluster import ClusterView
from fairshare.control.observe import observe, oldest_waiting, policy_workloads
from fairshare.control.observed import Observed
from fairshare.control.standing import ObservationMemo, advance
from fairshare.control.storms import EvictionCounts, eviction_counts, evictions_since, observe_evictions
from fairshare.history import UsageHistoryGraph
from fairshare.history.decay import HalfLife
from fairshare.models import Condition, Workload
from fairshare.policy import ObjectKey, QuotaPolicy, parse_policy, render_index
from fairshare.policy.owners import team_of
from fairshare.scheduler.types import SchedulerConfig
from fairshare.snapshot import Snapshot
from tests.builders import WorkloadBuilder
from tests.unit.control.storm_world import GPU, storm_policy

T0 = 1_000_000.0
TEAMS = ("a", "b", "c")


def _new(rng: random.Random, i: int, t: float) -> Workload:
    team = rng.choice((*TEAMS, "d"))  # (namespace d: no team's, until an edit gives it to team b)
    train = rng.random() < 0.3
    b = (WorkloadBuilder(team, f"w{i}").queue("main").created(t).request(GPU, rng.choice((1, 2, 4)))
         .priority(1000 if train else 100).priority_class("train" if train else "exp"))
    if rng.random() < 0.4 and team != "d":
        b = b.admitted(team, "gpu", at=t + 1)
    return b.build()


def _changed(rng: random.Random, w: Workload, t: float) -> Workload | None:
    """A new object for `w` (None: deleted)."""
    kind = rng.choice(("same", "admit", "finish", "evict", "active", "delete", "move", "boost"))
    if kind == "delete":
        return None
    if kind == "same":  # a watch event that changed nothing we read (e.g. a label)
        return dataclasses.replace(w)
    if kind == "admit" and w.admission is None:
        admitted = WorkloadBuilder(w.namespace, w.name).request(GPU, 1).admitted(w.namespace, "gpu", at=t)
        done = admitted.build()
        return dataclasses.replace(w, admission=done.admission, conditions=(*w.conditions, *done.conditions))
    if kind == "finish":
        finished = Condition("Finished", True, "Succeeded", "", t)
        return dataclasses.replace(w, conditions=(*w.conditions, finished))
    if kind == "evict":
        n = sum(c for r, _, c in w.eviction_stats if r == "Preempted") + 1
        message = "Preempted to accommodate a workload (UID: a/w0, JobUID: j) due to prioritization"
        gone = ("QuotaReserved", "Admitted", "Evicted", "Preempted")
        kept = tuple(c for c in w.conditions if c.type not in gone)
        return dataclasses.replace(
            w, admission=None, eviction_stats=(("Preempted", "", n),),
            conditions=(*kept, Condition("Evicted", True, "Preempted", "", t),
                        Condition("Preempted", True, "InCohortReclamation", message, t)))
    if kind == "active":
        return dataclasses.replace(w, active=not w.active)
    if kind == "move":
        return dataclasses.replace(w, queue_name="other" if w.queue_name == "main" else "main")
    return dataclasses.replace(w, priority_boost=w.priority_boost + 1)


def _same_snapshot(got: Snapshot, want: Snapshot) -> None:
    assert list(got.workloads.items()) == list(want.workloads.items())
    assert list(got.pending.items()) == list(want.pending.items())
    assert got.state_id == want.state_id
    for name, cq in want.cluster_queues.items():
        assert got.cluster_queues[name].workloads == cq.workloads
        assert got.usage(got.cluster_queues[name].node) == want.usage(cq.node)
        assert got.tree_token(got.cluster_queues[name].node) == want.tree_token(cq.node)


def _same_observed(got: Observed, want: Observed) -> None:
    _same_snapshot(got.snapshot, want.snapshot)
    assert list(got.pending.items()) == list(want.pending.items())
    assert got.held_queues == want.held_queues


def _world(rng: random.Random, n: int) -> dict[str, Workload]:
    out: dict[str, Workload] = {}
    for i in range(n):
        w = _new(rng, i, T0 + i)
        out[w.key] = w
    return out


def _churn(rng: random.Random, workloads: dict[str, Workload], step: int, n: int) -> set[str]:
    """Change, delete and add Workloads; the keys of those (what the operator's cache records)."""
    t = T0 + 1000 + step * 10
    keys: set[str] = set()
    for key in rng.sample(sorted(workloads), min(n, len(workloads))):
        w = _changed(rng, workloads[key], t)
        keys.add(key)
        if w is None:
            del workloads[key]
        else:
            workloads[key] = w
    for j in range(rng.randrange(3)):
        w = _new(rng, 1000 + step * 10 + j, t)
        workloads[w.key] = w
        keys.add(w.key)
    return keys


def _oldest(policy: QuotaPolicy, workloads: dict[str, Workload]) -> dict[tuple[str, str], float]:
    """oldest_waiting's rule, read afresh."""
    out: dict[tuple[str, str], float] = {}
    for w in workloads.values():
        team = team_of(policy, w)
        if team is not None and not (w.has_quota_reservation or w.is_finished or not w.active):
            k = (team, w.priority_class or "")
            out[k] = min(out.get(k, w.creation_timestamp), w.creation_timestamp)
    return out


def _b_also_in(policy: QuotaPolicy, namespace: str) -> QuotaPolicy:
    doc = policy.model_dump(by_alias=True, exclude_none=True, mode="json")
    for team in doc["spec"]["teams"]:
        if team["name"] == "b":
            team["namespaces"] = [*team["namespaces"], namespace]
    return parse_policy(doc)


def _risen(before: EvictionCounts | None, mine: list[Workload]) -> list[str]:
    """The Workloads whose eviction counts rose since `before`, once per eviction, in key order (read
    afresh: the rule observe_evictions follows)."""
    out: list[str] = []
    for w in sorted(mine, key=lambda w: w.key):
        seen = before.counts.get(w.key) if before is not None else None
        if seen is not None:
            now = eviction_counts(w)
            out += [w.key] * sum(max(0, now[r] - seen.get(r, 0)) for r in sorted(now))
    return out


def _live(policy: QuotaPolicy, hand_edit: bool) -> dict[ObjectKey, dict[str, Any]]:
    """The rendered objects; `hand_edit`: team b's LocalQueue pointed at team c's ClusterQueue."""
    out = {k: dict(v) for k, v in render_index(policy).items()}
    if hand_edit:
        for key, obj in out.items():
            if key.kind == "LocalQueue" and key.namespace == "b":
                out[key] = {**obj, "spec": {**obj["spec"], "clusterQueue": "c"}}
    return out


def _kept(before: dict[ObjectKey, dict[str, Any]],
          now: dict[ObjectKey, dict[str, Any]]) -> dict[ObjectKey, dict[str, Any]]:
    """`now`, with the objects of `before` whose content is the same: a cache replaces what changed."""
    return {k: before[k] if before.get(k) == obj else obj for k, obj in now.items()}


SEEDS = [pytest.param(seed, id=f"seed {seed}") for seed in range(6)]


@pytest.mark.parametrize("seed", SEEDS)
def test_an_observation_kept_by_delta_is_the_fresh_observation_through_random_workload_churn(
    seed: int,
) -> None:
    rng = random.Random(seed)
    policy = storm_policy()
    workloads = _world(rng, 40)
    memo = ObservationMemo()
    counts_kept: EvictionCounts | None = None
    counts_fresh: EvictionCounts | None = None
    graph = UsageHistoryGraph(HalfLife.of_seconds(3 * 86400.0), created_at=T0)
    reused = reused_objects = patched = 0
    live: dict[ObjectKey, dict[str, Any]] = {}
    changed: set[str] | None = None  # (the first step: unknown)
    for step in range(40):
        if step % 13 == 12:
            policy = storm_policy()  # parsed again: a new object, the same content
        if step % 13 == 5:
            policy = storm_policy(weights={"a": "2", "b": "1", "c": "1"})  # an edit the owners do not read
        if step % 13 == 9:
            policy = _b_also_in(policy, "d")  # an edit they do: team b gets namespace d too
        if step % 11 == 10:
            changed = None  # a step without the keys (the operator's scope changed)
        live = _kept(live, _live(policy, hand_edit=step % 10 >= 7))
        before = dict(memo.standing.pending.items) if memo.standing is not None else {}
        models = {k: m for k, (_, m) in memo.kueue.objects.items()}
        got = advance(memo, policy, live.get, workloads, changed, graph, SchedulerConfig())
        want = observe(policy, live.get, workloads, graph, SchedulerConfig())
        _same_observed(got.observed, want)
        patched += got.derived is not None
        reused += sum(1 for k, p in got.observed.pending.items() if before.get(k) is p)
        reused_objects += sum(1 for k, (_, m) in memo.kueue.objects.items() if models.get(k) is m)
        mine = policy_workloads(policy, workloads.values())
        assert sorted(got.owned) == sorted(w.key for w in mine)
        assert all(got.owned[w.key] is w for w in mine)
        assert got.waiting == oldest_waiting(policy, workloads) == _oldest(policy, workloads)
        risen = _risen(counts_kept, mine)
        if got.derived is None or counts_kept is None:
            counts_kept, seen_kept = observe_evictions(counts_kept, got.owned.values(), T0 + step)
        else:
            counts_kept, seen_kept = evictions_since(counts_kept, got.owned, got.derived, T0 + step)
        counts_fresh, seen_fresh = observe_evictions(counts_fresh, mine, T0 + step)
        counts_fresh = EvictionCounts(counts_fresh.counts)  # no objects: every Workload read again
        assert seen_kept == seen_fresh
        assert [e.workload for e in seen_kept] == risen
        assert dict(counts_kept.counts) == {w.key: eviction_counts(w) for w in mine}
        changed = _churn(rng, workloads, step, rng.randrange(1, 8))
    assert patched > 20  # most steps were patched, not derived afresh
    assert reused > 0  # what was derived from the same object was taken, not only kept
    assert reused_objects > 0


@pytest.mark.parametrize("seed", SEEDS[:3])
def test_a_policy_controller_given_the_changed_keys_decides_as_one_that_derives_every_workload_each_step(
    seed: int,
) -> None:
    rng = random.Random(seed)
    policy = storm_policy()
    rules = PolicyRules.of(policy)
    live = _live(policy, hand_edit=False)
    workloads = _world(rng, 40)
    keeps, forgets = PolicyController(), PolicyController()
    books = [HistoryBook.restore(policy, None, T0)[0] for _ in range(2)]
    stored = [None, None]
    changed: set[str] | None = None
    for step in range(25):
        now = T0 + 1000 + step * 10
        replies = []
        for i, pc in enumerate((keeps, forgets)):
            if pc is forgets:
                pc.seen = ObservationMemo()
            view = ClusterView(live=live.get, workloads=dict(workloads), config=SchedulerConfig(),
                               changed=changed if pc is keeps else None)
            reply = pc.step(rules, view, stored[i], now, history=books[i], generation=1)
            books[i] = reply.history
            stored[i] = reply.decision.status
            replies.append(reply)
        assert replies[0].decision == replies[1].decision
        assert replies[0].objects == replies[1].objects
        _same_observed(replies[0].observed, replies[1].observed)
        assert replies[0].waiting == replies[1].waiting
        changed = _churn(rng, workloads, step, rng.randrange(1, 8))
