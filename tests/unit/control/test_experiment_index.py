"""The experiment gate's index of experiments per ClusterQueue (fairshare.control.eligible, FastPaths.
index_experiments) against the reference scans it replaces (fairshare.control.experiments: _eligible, the
minRuntime wake-up, _tree_keys): random snapshots under admissions, finishes and what-ifs rolled back, at
times on and next to the minRuntime boundaries, where floating-point rounding decides."""

from __future__ import annotations

import dataclasses
import math
import random
from collections import Counter

import pytest

from fairshare.control.eligible import ExperimentIndex
from fairshare.control.experiments import (
    GateOutcome,
    PlanMemo,
    _eligible,
    _tree_keys,
    _tree_keys_indexed,
    _wake_when_blocking_inputs_change,
    gate,
)
from fairshare.control.observed import Observed, PendingWorkload
from fairshare.control.rules import PreemptionRules
from fairshare.history import HalfLife, UsageHistoryGraph
from fairshare.models import FlavorResource
from fairshare.planners.budget import VictimBudget
from fairshare.planners.experiments import ExperimentPolicy, _root_name, _TreeExperiments
from fairshare.snapshot import FAST, FastPaths, Snapshot
from fairshare.workload import WorkloadInfo
from tests.builders import ClusterQueueBuilder, StateBuilder, WorkloadBuilder

GPU = "nvidia.com/gpu"
BELOW, MIN_RUNTIME = 500, 600.1  # a minRuntime that is not a whole number of binary fractions
NO_INDEX = FastPaths(single_search=True, skip_unborrowable=True, bound_search=True, plan_by_tree=True,
                     memo_transitions=True, index_experiments=False)
CQS = [(f"{team}-{tree}", tree) for tree in ("north", "south") for team in ("biz", "res", "lab")]


def rules(max_victims: int = 3) -> PreemptionRules:
    planner = ExperimentPolicy(experiment_below_priority=BELOW, protected_priority=1000,
                               min_runtime=MIN_RUNTIME,
                               budget=VictimBudget(max_victims=max_victims, window=3600.0))
    return PreemptionRules(planner=planner, starvation_grace_s=0.0, victim_hold_s=600.0,
                           hold_competitors=False, max_lost_milli_hours={})


def world(paths: FastPaths) -> Snapshot:
    state = StateBuilder().flavors("a100")
    for name, tree in CQS:
        state = state.cq(ClusterQueueBuilder(name).cohort(tree).quota("a100", GPU, "40"), local_queue="main")
        state = state.lq(name, "side", name)
    return Snapshot.from_state(state.build(), paths=paths)


def admit(snap: Snapshot, rng: random.Random, n: int, now: float) -> None:
    cq, _ = rng.choice(CQS)
    # Some in a namespace that every ClusterQueue serves: keys that a ClusterQueue's order alone would not
    # give in key order across the ClusterQueues of a tree.
    wl = (WorkloadBuilder(rng.choice([cq, cq, "shared"]), f"w-{n}").queue(rng.choice(["main", "side"]))
          .priority(rng.choice([10, 100, 499, 500, 1000])).request(GPU, "1"))
    if rng.random() < 0.15:  # no reservation time (the scheduler's own what-ifs): eligible at any time
        p = WorkloadInfo.pending(wl.build(), cq)
        info = WorkloadInfo(p.key, p.workload, cq, p.local_queue, p.priority, p.queue_order_time, p.uid,
                            {FlavorResource("a100", GPU): 1000})
    else:
        # Starts on, one ulp either side of, and near a minRuntime boundary of a time the test asks at,
        # where `now - start >= minRuntime` and `start <= now - minRuntime` (or `start + minRuntime > now`
        # and `start > now - minRuntime`) disagree in floating point.
        base = now - MIN_RUNTIME
        start = rng.choice([base, math.nextafter(base, -math.inf), math.nextafter(base, math.inf), base + 0.1,
                            base - 0.1, base + rng.uniform(-900, 900)])
        # Some ran before an eviction (Kueue's accumulatedPastExecutionTimeSeconds): minRuntime counts from
        # their run start, the reservation less that time, which lands on the same boundaries.
        past = rng.choice([0, 0, rng.randint(1, 1200)])
        built = wl.admitted(cq, "a100", at=start + past).build()
        if past:
            built = dataclasses.replace(built, accumulated_past_execution_seconds=past)
        info = WorkloadInfo.admitted(built)
    snap.add_workload(info)


def reference_wake(snap: Snapshot, now: float) -> float | None:
    out = GateOutcome()
    _wake_when_blocking_inputs_change(out, rules(), Observed(snap, {}, HISTORY), [], now)
    return out.wake


def indexed_wake(snap: Snapshot, index: ExperimentIndex, now: float) -> float | None:
    out = GateOutcome()
    _wake_when_blocking_inputs_change(out, rules(), Observed(snap, {}, HISTORY), [], now, index)
    return out.wake


HISTORY = UsageHistoryGraph(HalfLife.of_seconds(86400), created_at=0.0)


def starved(snap: Snapshot, n: int, gpus: int = 60) -> list[PendingWorkload]:
    out = []
    for i in range(n):
        cq = f"biz-{('north', 'south')[i % 2]}"
        wl = (WorkloadBuilder(cq, f"serve-{i}").queue("main").priority(1000).request(GPU, str(gpus))
              .created(float(i)).build())
        out.append(PendingWorkload(WorkloadInfo.pending(wl, cq), 0.0, True))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_the_index_names_the_eligible_experiments_and_the_next_wake_up_as_the_scans_do(seed: int) -> None:
    rng = random.Random(seed)
    snap = world(FAST)
    index = ExperimentIndex()
    now = 10_000.0
    seen: dict[tuple[object, ...], tuple[str, ...]] = {}
    for n in range(120):
        roll = rng.random()
        if roll < 0.55 or not snap.workloads:
            admit(snap, rng, n, now)
        elif roll < 0.8:
            snap.remove_workload(rng.choice(sorted(snap.workloads)))
        else:  # a what-if, undone: the index must answer for the state it returns to
            with snap.transaction():
                admit(snap, rng, 10_000 + n, now)
                snap.remove_workload(rng.choice(sorted(snap.workloads)))
        # (the last one earlier than the one before: the index keeps its last wake-up for later times only)
        times = (now, math.nextafter(now, math.inf), now + rng.choice([0.1, 300.0]), now)
        for at in times:
            names = _eligible(rules(), snap, at)
            key = index.key(snap, BELOW, at, MIN_RUNTIME)
            # Per ClusterQueue, the count is the reference's number of eligible workloads there.
            per_cq = Counter(snap.workloads[k].cluster_queue for k in names)
            assert {name: count for name, _, count in key if count} == dict(per_cq)
            # Equal keys, equal eligible sets (the memo's use of them).
            assert seen.setdefault(key, names) == names
            assert indexed_wake(snap, index, at) == reference_wake(snap, at)
            # The memories' test of time alone (the gate's plan memory, the quiet replay): the same
            # eligible experiments at two times exactly when the reference names the same ones.
            for then in times:
                same = index.same_eligible(snap, BELOW, MIN_RUNTIME, at, then)
                assert same == (_eligible(rules(), snap, at) == _eligible(rules(), snap, then))
        now += rng.choice([0.0, 50.3, 0.1, MIN_RUNTIME])


@pytest.mark.parametrize("seed", range(8))
def test_the_indexed_tree_keys_and_one_queue_trees_are_the_reference_ones(seed: int) -> None:
    rng = random.Random(100 + seed)
    snap = world(FAST)
    index = ExperimentIndex()
    now = 10_000.0
    seen: dict[tuple[object, ...], tuple[object, ...]] = {}
    for n in range(60):
        if rng.random() < 0.65 or not snap.workloads:
            admit(snap, rng, n, now)
        else:
            snap.remove_workload(rng.choice(sorted(snap.workloads)))
        work = starved(snap, rng.randint(1, 3))
        ref, ref_one = _tree_keys(snap, work, _eligible(rules(), snap, now))
        fast, fast_one = _tree_keys_indexed(snap, work, index, rules(), now)
        assert set(fast) == set(ref)
        assert fast_one == ref_one
        for root in ref:
            assert seen.setdefault(fast[root], ref[root]) == ref[root]
        now += rng.choice([0.0, 0.1, 120.3])


@pytest.mark.parametrize("seed", range(6))
def test_the_gate_with_the_index_decides_what_it_decides_without(seed: int) -> None:
    """The whole gate, with its memory, on the same events: the same blocked decisions, evictions and
    wake-up with the index as with the reference scans."""
    rng = random.Random(200 + seed)
    snaps = {paths: world(paths) for paths in (FAST, NO_INDEX)}
    memos = {paths: PlanMemo() for paths in snaps}
    now = 10_000.0
    teams = frozenset(name for name, _ in CQS)
    kinds: Counter[str] = Counter()
    for n in range(40):
        state = rng.getstate()
        for snap in snaps.values():  # the same event in both
            rng.setstate(state)
            if rng.random() < 0.7 or not snap.workloads:
                admit(snap, rng, n, now)
            else:
                snap.remove_workload(rng.choice(sorted(snap.workloads)))
        pending = {p.info.key: p for p in starved(snaps[FAST], 2, rng.choice([100, 112, 118]))}
        outs = [gate(rules(), Observed(snap, pending, HISTORY), [], [], teams, now, now, "pool", memos[paths])
                for paths, snap in snaps.items()]
        fast, ref = ([(b.workload, b.reason) for b in o.blocked] + [(r.victim, r.reason) for r in o.requests]
                     + [("wake", str(o.wake))] for o in outs)
        assert fast == ref
        kinds.update(k for o in outs[:1] for k, n in (("blocked", len(o.blocked)), ("evict", len(o.requests)))
                     if n)
        now += rng.choice([0.0, 0.1, 60.3, MIN_RUNTIME])
    assert kinds["blocked"] > 0 and kinds["evict"] > 0, kinds  # both kinds of decision were compared


def classified(paths: FastPaths, seed: int) -> list[dict[str, list[tuple[str, str]]]]:
    """The planner's experiments per quota tree (planners.experiments._TreeExperiments: with the index one
    tree at a time, else _experiments_by_root's full scan) after each of
    a run of random admissions (some evicted, in protected classes, evicted often), finishes and what-ifs
    rolled back, read at times on the minRuntime boundaries."""
    rng = random.Random(seed)
    snap = world(paths)
    now = 10_000.0
    policy = ExperimentPolicy(experiment_below_priority=BELOW, protected_priority=1000,
                              min_runtime=MIN_RUNTIME, protected_priority_classes=frozenset({"keep"}),
                              max_evictions=2,
                              budget=VictimBudget(max_victims=3, window=3600.0))
    roots = {cq: _root_name(snap, cq) for cq in snap.cluster_queues}
    out = []
    for n in range(80):
        roll = rng.random()
        if roll < 0.6 or not snap.workloads:
            admit(snap, rng, n, now)
            key = max(snap.workloads, key=lambda k: int(k.rsplit("-", 1)[1]))
            info = snap.remove_workload(key)
            wl = dataclasses.replace(
                info.workload,
                priority_class=rng.choice([None, "keep", "other"]),
                eviction_stats=(("Preempted", "", rng.choice([0, 1, 2, 3])),),
            )
            snap.add_workload(dataclasses.replace(info, workload=wl, evicted=rng.random() < 0.1))
        elif roll < 0.85:
            snap.remove_workload(rng.choice(sorted(snap.workloads)))
        else:
            with snap.transaction():
                admit(snap, rng, 10_000 + n, now)
                out.append(_by_tree(snap, policy, now, roots))
        for at in (now, math.nextafter(now, math.inf), now + rng.choice([0.1, 300.0])):
            out.append(_by_tree(snap, policy, at, roots))
    return out


def _by_tree(snap: Snapshot, policy: ExperimentPolicy, now: float,
             roots: dict[str, str]) -> dict[str, list[tuple[str, str]]]:
    """Every tree's list, asked in reverse name order (the planner asks in its beneficiaries' order)."""
    trees = _TreeExperiments(snap, policy, now, roots)
    out = {root: [(w.key, klass.value) for w, klass in trees.of(root)]
           for root in sorted(set(roots.values()), reverse=True)}
    return {root: ws for root, ws in sorted(out.items()) if ws}


@pytest.mark.parametrize("seed", range(8))
def test_the_planner_classifies_each_trees_experiments_from_the_index_as_the_full_scan(seed: int) -> None:
    indexed, scanned = classified(FAST, seed), classified(NO_INDEX, seed)
    assert indexed == scanned
    kinds = Counter(klass for trees in scanned for ws in trees.values() for _, klass in ws)
    assert set(kinds) == {"candidate", "young", "protected", "worn"}, kinds
