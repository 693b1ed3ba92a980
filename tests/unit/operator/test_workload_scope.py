"""The operator's one Workload cache, split per policy (queue_manager.cache.WorkloadCache.view, by
fairshare.control.observe.WorkloadScope): a policy's controller handed only the Workloads of its namespaces
and ClusterQueues, with the keys of those put or dropped since its last read (what it derives again),
decides exactly what it decides deriving every Workload of the cluster. Random churn on the
smallest looping world (admissions, completions, evictions, deletions, queues moved, namespace d given to
team b by an edit, team b's LocalQueue pointed at team c's ClusterQueue by hand), plus Workloads of a
namespace no team has that hold quota in team c's ClusterQueue (a LocalQueue made by hand there)."""

from __future__ import annotations

import random

import pytest

from fairshare.control import HistoryBook, PolicyController, PolicyRules
from fairshare.control.cluster import ClusterView
from fairshare.control.observe import WorkloadScope, workload_scope
from fairshare.models import Workload
from fairshare.scheduler.types import SchedulerConfig
from queue_manager.cache import WorkloadCache
from tests.builders import WorkloadBuilder
from tests.unit.control.storm_world import GPU, storm_policy
from tests.unit.control.test_observation_memo import (
    T0,
    _b_also_in,
    _churn,
    _live,
    _same_observed,
    _world,
)


def _strangers(rng: random.Random, n: int) -> dict[str, Workload]:
    """Workloads of namespace x (no team's): half admitted to team c's ClusterQueue, holding its quota."""
    out: dict[str, Workload] = {}
    for i in range(n):
        b = WorkloadBuilder("x", f"s{i}").queue("byhand").created(T0 + i).request(GPU, rng.choice((1, 2)))
        if i % 2 == 0:
            b = b.admitted("c", "gpu", at=T0 + i + 1)
        w = b.build()
        out[w.key] = w
    return out


def _mirror(cache: WorkloadCache, workloads: dict[str, Workload]) -> None:
    """The watch's deltas: what changed since the cache last saw `workloads` (replaced objects, deletions)."""
    with cache.lock:
        for key in [k for k in cache.items if k not in workloads]:
            cache.drop(key)
        for key, w in workloads.items():
            if cache.items.get(key) is not w:
                cache.put(key, w)


def _expected(scope: WorkloadScope, workloads: dict[str, Workload]) -> dict[str, Workload]:
    return {k: w for k, w in sorted(workloads.items())
            if w.namespace in scope.namespaces
            or (w.admission is not None and w.admission.cluster_queue in scope.cluster_queues)}


def _indexes_hold_only_what_is_cached(cache: WorkloadCache) -> None:
    for ns, part in cache.by_namespace.items():
        assert part and all(cache.items.get(k) is w and w.namespace == ns for k, w in part.items())
    for cq, part in cache.by_cluster_queue.items():
        assert part and all(cache.items.get(k) is w and w.admission is not None
                            and w.admission.cluster_queue == cq for k, w in part.items())
    assert sum(len(p) for p in cache.by_namespace.values()) == len(cache.items)


def test_the_scope_is_the_policys_local_queue_namespaces_and_cluster_queues() -> None:
    scope = workload_scope(storm_policy())
    assert scope == WorkloadScope(frozenset({"a", "b", "c"}), frozenset({"a", "b", "c"}))
    assert workload_scope(_b_also_in(storm_policy(), "d")).namespaces == {"a", "b", "c", "d"}


@pytest.mark.parametrize("seed", [pytest.param(s, id=f"seed {s}") for s in range(4)])
def test_a_controller_given_its_scope_of_the_cache_decides_as_one_given_every_workload(seed: int) -> None:
    rng = random.Random(seed)
    policy = storm_policy()
    workloads = {**_world(rng, 40), **_strangers(rng, 6)}
    cache = WorkloadCache()
    changes = cache.subscribe()
    scoped, whole = PolicyController(), PolicyController()
    books = [HistoryBook.restore(policy, None, T0)[0] for _ in range(2)]
    stored = [None, None]
    narrowed = patched = 0
    for step in range(30):
        if step == 12:
            policy = _b_also_in(policy, "d")  # team b gets namespace d: its Workloads enter the scope
        rules = PolicyRules.of(policy)
        live = _live(policy, hand_edit=step % 10 >= 7)
        _mirror(cache, workloads)
        _indexes_hold_only_what_is_cached(cache)
        scope = workload_scope(policy)
        mine, changed = cache.view(scope, changes)
        assert mine == _expected(scope, workloads)  # (as mappings: the order is the cache's)
        assert (changed is None) == (step in (0, 12))  # the first read, and the scope widened by the edit
        patched += changed is not None
        narrowed += len(workloads) - len(mine)
        everything = dict(rng.sample(sorted(workloads.items()), len(workloads)))  # any order
        now = T0 + 1000 + step * 10
        replies = []
        for i, (pc, seen, keys) in enumerate(((scoped, mine, changed), (whole, everything, None))):
            view = ClusterView(live=live.get, workloads=seen, config=SchedulerConfig(), changed=keys)
            reply = pc.step(rules, view, stored[i], now, history=books[i], generation=1)
            books[i] = reply.history
            stored[i] = reply.decision.status
            replies.append(reply)
        assert replies[0].decision == replies[1].decision
        assert replies[0].objects == replies[1].objects
        assert replies[0].waiting == replies[1].waiting
        assert replies[0].history.serialize() == replies[1].history.serialize()
        _same_observed(replies[0].observed, replies[1].observed)
        _churn(rng, workloads, step, rng.randrange(1, 8))
    assert narrowed > 0  # it left Workloads out: namespace d's before the edit, namespace x's queued ones
    assert patched == 28


def test_a_deleted_or_readmitted_workload_leaves_the_indexes_it_was_in() -> None:
    cache = WorkloadCache()
    pending = WorkloadBuilder("x", "w").queue("q").request(GPU, 1).build()
    admitted = WorkloadBuilder("x", "w").queue("q").request(GPU, 1).admitted("c", "gpu", at=T0).build()
    elsewhere = WorkloadBuilder("x", "w").queue("q").request(GPU, 1).admitted("b", "gpu", at=T0).build()
    with cache.lock:
        cache.put("x/w", pending)
        cache.put("x/w", admitted)
    assert cache.of(WorkloadScope(frozenset(), frozenset({"c"}))) == {"x/w": admitted}
    with cache.lock:
        cache.put("x/w", elsewhere)
    assert cache.of(WorkloadScope(frozenset(), frozenset({"c"}))) == {}
    assert cache.of(WorkloadScope(frozenset({"x"}), frozenset())) == {"x/w": elsewhere}
    with cache.lock:
        cache.drop("x/w")
    assert (cache.items, cache.by_namespace, cache.by_cluster_queue) == ({}, {}, {})


def test_a_reader_is_told_every_key_put_or_dropped_since_its_last_read_and_none_beyond_the_bound() -> None:
    cache = WorkloadCache()
    changes = cache.subscribe()
    scope = WorkloadScope(frozenset({"x"}), frozenset())
    w = WorkloadBuilder("x", "w").queue("byhand").created(T0).request(GPU, 1).build()
    assert cache.view(scope, changes) == ({}, None)  # the first read: unknown
    with cache.lock:
        cache.put("x/w", w)
        cache.put("y/v", WorkloadBuilder("y", "v").created(T0).request(GPU, 1).build())  # (told too)
    assert cache.view(scope, changes) == ({"x/w": w}, {"x/w", "y/v"})
    assert cache.view(scope, changes) == ({"x/w": w}, set())
    with cache.lock:
        cache.drop("x/w")
    assert cache.view(scope, changes) == ({}, {"x/w"})
    with cache.lock:
        for i in range(1025):  # beyond the bound: unknown
            cache.put(f"x/w{i}", WorkloadBuilder("x", f"w{i}").created(T0).request(GPU, 1).build())
    assert cache.view(scope, changes)[1] is None
    assert cache.view(WorkloadScope(frozenset({"y"}), frozenset()), changes)[1] is None  # another scope
    cache.unsubscribe(changes)
    with cache.lock:
        cache.drop("x/w0")
    assert changes.keys == set()
