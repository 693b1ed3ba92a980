"""The last quiet decision returned again (fairshare.control.replay, FastPaths.replay_quiet): while every
input it read is the same the controller returns that decision object; when one changes (protected work
arrives or starves, a transition's step falls due, the victim budget or trim moves with time, another
status is given) it decides afresh. Each case compares the decision with the memo against one made
without it."""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
from collections.abc import Sequence
from typing import Any

import pytest

from fairshare.control import (
    ApplyQuota,
    Decision,
    HistoryBook,
    Observed,
    PlanMemo,
    PolicyRules,
    WakeAt,
    decide,
)
from fairshare.control.replay import Controller
from fairshare.manifests import parse_manifests
from fairshare.models import Workload
from fairshare.policy import QuotaPolicy, parse_policy, render
from fairshare.policy.status import (
    EvictionKind,
    HeldWorkload,
    PreemptionRecord,
    QuotaPolicyStatus,
    VictimState,
)
from fairshare.scheduler.types import SchedulerConfig
from fairshare.snapshot import FAST, FastPaths
from fairshare.workload import WorkloadInfo
from simulations.control import ControllerShell
from simulations.kueue import KueueModel
from simulations.record import EvictedBy
from tests.unit.control.two_teams import two_team_policy
from tests.unit.operator.kube_objects import workload

T0 = 1_800_000_000.0
NO_REPLAY = dataclasses.replace(FAST, replay_quiet=False)


def policy(business: int = 3, *, max_victims: int = 5, min_runtime: str = "0s") -> QuotaPolicy:
    return two_team_policy(research=2, business=business, max_victims=max_victims, min_runtime=min_runtime,
                           grace="30s", duration="40s", step="20s", drain=False)


EXP = {"priority": 10, "priority_class": "exp", "flavor": "gpu"}
BIZ = {"priority": 1000, "priority_class": "biz", "flavor": "gpu"}


class World:
    """The simulator's Kueue with research running two 1-GPU experiments and business one 2-GPU job, and
    the controller's inputs: the Controller (decide with its memory, and the paths of the snapshot) and
    decide() without one."""

    def __init__(self, paths: FastPaths = FAST, p: QuotaPolicy | None = None) -> None:
        self.policy = p or policy()
        self.rules = PolicyRules.of(self.policy)
        state = parse_manifests([dict(o) for o in render(policy())])
        self.kueue = KueueModel(state, SchedulerConfig(), _Quiet(), track_pending=True, core=paths)
        for w in (workload("r", "e1", queue="research", gpus=1, admitted_to="research", reserved_at=T0 - 900,
                           **EXP),
                  workload("r", "e2", queue="research", gpus=1, admitted_to="research", reserved_at=T0 - 800,
                           **EXP),
                  workload("b", "b1", queue="business", gpus=2, admitted_to="business", reserved_at=T0 - 100,
                           **BIZ)):
            self.kueue.snapshot.add_workload(WorkloadInfo.admitted(w))
        self.book = HistoryBook.new(self.policy, T0 - 1000)
        self.controller = Controller()
        self.twin = PlanMemo()  # the same memories, without replays

    def arrive(self, name: str, gpus: int, t: float) -> None:
        w = workload("b", name, queue="business", gpus=gpus, created=t,
                     **{k: v for k, v in BIZ.items() if k != "flavor"})
        self.kueue.submit(WorkloadInfo.pending(w, "business"), t)

    def observed(self) -> Observed:
        return Observed(self.kueue.snapshot, self.kueue.pending, self.book.graph, self.kueue.config)

    def decide(self, stored: QuotaPolicyStatus | None, now: float) -> Decision:
        """The decision with the memo, checked against one made without it, and against one made with the
        same memories but no replay (which also says how many starved workloads the gate planned)."""
        fresh = decide(self.rules, self.observed(), stored, now, history=self.book, generation=1)
        snap = self.kueue.snapshot
        paths, snap.paths = snap.paths, NO_REPLAY
        twin = decide(self.rules, self.observed(), stored, now, history=self.book, generation=1,
                      memo=self.twin)
        snap.paths = paths
        d = self.controller.decide(self.rules, self.observed(), stored, now, history=self.book, generation=1)
        assert _said(d) == _said(twin)
        assert _said(d, planned=False) == _said(fresh, planned=False)
        return d


class _Quiet:
    def admitted(self, info: WorkloadInfo, t: float) -> None: ...

    def evicted(self, info: WorkloadInfo, t: float, *, by: str, preemptor: str, reason: str) -> None: ...


def _said(d: Decision, *, planned: bool = True) -> tuple[Any, ...]:
    """Everything a decision says (`planned`: with how many starved workloads its gate planned, which a
    gate without memories always plans)."""
    g = d.gate
    return (d.actions, d.status.model_dump(), d.progress, d.blocked,
            (g.requests, g.holds, g.actions, g.blocked, [p.info.key for p in g.waiting], g.starved,
             g.planned if planned else None, g.budget_remaining, g.wake))


def _kept(w: World) -> bool:
    return w.controller.last is not None


def _wakes(d: Decision) -> list[float]:
    return [a.at for a in d.actions if isinstance(a, WakeAt)]


def test_a_quiet_decision_is_returned_again_while_nothing_it_read_changed() -> None:
    w = World()
    first = w.decide(None, T0)
    assert not [a for a in first.actions if not isinstance(a, WakeAt)]
    assert w.decide(first.status, T0 + 10) is first
    assert w.decide(first.status, T0 + 3600) is first


def test_protected_work_arriving_and_then_starving_is_decided_afresh() -> None:
    w = World()
    first = w.decide(None, T0)
    w.arrive("serve", 4, T0 + 5)  # more than business has free: it waits
    waiting = w.decide(first.status, T0 + 5)
    assert waiting is not first and _wakes(waiting) == [T0 + 35]  # its starvation grace
    assert w.decide(waiting.status, T0 + 34.9) is waiting
    starved = w.decide(waiting.status, T0 + 35)
    assert starved is not waiting and starved.gate.starved == 1


def test_another_status_object_is_decided_afresh() -> None:
    w = World()
    first = w.decide(None, T0)
    copy = w.decide(first.status.model_copy(), T0 + 10)
    assert copy is not first and copy.status == first.status


def test_a_transition_step_falling_due_is_decided_afresh() -> None:
    w = World(p=policy(business=1))  # 3 -> 1 GPU in two steps of 20 s
    first = w.decide(None, T0)
    assert first.active_transitions == 1
    for a in first.actions:
        if isinstance(a, ApplyQuota):
            w.kueue.set_quota(a.key.team, a.key.flavor_resource, a.quota)
    quiet = w.decide(first.status, T0 + 1)
    assert not [a for a in quiet.actions if not isinstance(a, WakeAt)] and _wakes(quiet) == [T0 + 20]
    assert w.decide(quiet.status, T0 + 19) is quiet
    step = w.decide(quiet.status, T0 + 20)
    assert step is not quiet and [type(a).__name__ for a in step.actions if not isinstance(a, WakeAt)]


def _record(at: float, *, real: bool, n: int) -> PreemptionRecord:
    return PreemptionRecord(time="", at=at, victim=f"r/old-{n}", beneficiary="b/x", reason="test",
                            dry_run=not real, state=VictimState.REQUEUED if real else VictimState.REPORTED,
                            kind=EvictionKind.EXPERIMENT)


@pytest.mark.parametrize(
    ("records", "changed"),
    [
        # a real eviction leaves the 1 h window: the victim budget left goes 4 -> 5
        ([_record(T0 - 3590, real=True, n=0)], "the victim budget"),
        # 50 old reports and 10 that become old: trim drops them
        ([_record(T0 - 7200, real=False, n=i) for i in range(50)]
         + [_record(T0 - 3590, real=False, n=50 + i) for i in range(10)], "trim"),
    ],
    ids=["the victim budget left", "trim dropping records"],
)
def test_what_time_alone_changes_in_the_records_is_decided_afresh(records: Sequence[PreemptionRecord],
                                                                  changed: str) -> None:
    w = World()
    first = w.decide(QuotaPolicyStatus(last_preemptions=list(records)), T0)
    assert w.decide(first.status, T0 + 5) is first
    later = w.decide(first.status, T0 + 20)
    assert later is not first, changed
    if changed == "trim":
        assert len(later.status.last_preemptions) == 50 < len(first.status.last_preemptions)
    else:
        assert later.gate.budget_remaining == first.gate.budget_remaining + 1


def test_a_decision_with_an_action_is_not_kept() -> None:
    w = World(p=policy(business=5))
    first = w.decide(None, T0)
    assert [a for a in first.actions if not isinstance(a, WakeAt)] and w.controller.last is None


def test_without_the_switch_no_decision_is_returned_again() -> None:
    w = World(paths=NO_REPLAY)
    first = w.decide(None, T0)
    assert w.controller.last is None and w.decide(first.status, T0 + 10) is not first


def _shells(paths: FastPaths) -> tuple[KueueModel, ControllerShell]:
    state = parse_manifests([dict(o) for o in render(policy())])
    kueue = KueueModel(state, SchedulerConfig(), _Quiet(), track_pending=True, core=paths)
    return kueue, ControllerShell(policy(business=4, max_victims=2), kueue, start=T0)


def _submit(kueue: KueueModel, w: Workload, cq: str, t: float) -> None:
    kueue.submit(WorkloadInfo.pending(w, cq), t)


@pytest.mark.parametrize("seed", range(6))
def test_random_events_give_the_same_decisions_with_and_without_replays(seed: int) -> None:
    """Experiments and business work arrive and finish at random while a paired move (research 2 -> 1,
    business 3 -> 4) runs and experiment preemption helps starved business work: the controller with
    replays decides every step as the one without."""
    rng = random.Random(seed)
    worlds = {name: _shells(paths) for name, paths in (("replay", FAST), ("afresh", NO_REPLAY))}
    now, replays = T0, 0
    for step in range(150):
        now += rng.choice([0.0, 1.0, 5.0, 15.0, 40.0])
        event = rng.random()
        gpus = rng.choice([1, 1, 2])
        said = []
        for name, (kueue, shell) in worlds.items():
            if event < 0.25:
                extra = {k: v for k, v in (BIZ if event < 0.1 else EXP).items() if k != "flavor"}
                ns, cq = ("b", "business") if event < 0.1 else ("r", "research")
                _submit(kueue, workload(ns, f"w{step}", queue=cq, gpus=gpus, created=now, **extra), cq, now)
            elif event < 0.45 and kueue.snapshot.workloads:
                key = sorted(kueue.snapshot.workloads)[int(event * 1000) % len(kueue.snapshot.workloads)]
                info = kueue.release(key)
                shell.released(info.key, now)
            kueue.settle(now)
            before = shell.status
            shell.step(now)
            kueue.settle(now)
            if name == "replay":
                replays += shell.status is before
            said.append((shell.status.model_dump() if shell.status else None,
                         [(r.time, r.kind, r.target, r.detail) for r in shell.log]))
        assert said[0] == said[1], (seed, step)
    assert replays > 10, replays


def test_a_requested_eviction_carried_out_is_decided_afresh() -> None:
    """A record in state Requested whose victim is deactivated but still holds quota (Kueue has not evicted
    it yet) is open: its decision is not kept, and the victim gone is followed up."""
    w = World()
    e1 = w.kueue.snapshot.remove_workload("r/e1")
    w.kueue.snapshot.add_workload(WorkloadInfo.admitted(dataclasses.replace(e1.workload, active=False)))
    record = PreemptionRecord(time="", at=T0 - 5, victim="r/e1", beneficiary="b/x", reason="test",
                              state=VictimState.REQUESTED, kind=EvictionKind.EXPERIMENT)
    first = w.decide(QuotaPolicyStatus(last_preemptions=[record]), T0)
    assert not [a for a in first.actions if not isinstance(a, WakeAt)]
    w.kueue.release("r/e1")
    after = w.decide(first.status, T0 + 1)
    assert after is not first
    assert [r.state for r in after.status.last_preemptions] == [VictimState.GONE] != [
        r.state for r in first.status.last_preemptions]


def test_a_held_competitor_gone_is_forgotten_afresh() -> None:
    """Held competitors are followed up on every decision: one that is gone (deleted) leaves the status
    while the protected work it was held for still waits."""
    w = World()
    w.arrive("x", 4, T0 - 10)  # waits; starved from T0+20
    c1 = workload("r", "c1", queue="research", gpus=1, created=T0 - 10, priority=10, priority_class="exp")
    w.kueue.submit(WorkloadInfo.pending(c1, "research"), T0 - 10)
    w.kueue.deactivate("r/c1", T0 - 5, by=EvictedBy.HOLD, preemptor="b/x", reason="test")
    held = HeldWorkload(workload="r/c1", beneficiary="b/x", time="", at=T0 - 5)
    first = w.decide(QuotaPolicyStatus(held_workloads=[held]), T0)
    assert not [a for a in first.actions if not isinstance(a, WakeAt)] and first.status.held_workloads
    del w.kueue.held["r/c1"], w.kueue.pending["r/c1"]  # deleted
    after = w.decide(first.status, T0 + 1)
    assert after is not first and not after.status.held_workloads


def test_a_draining_cut_whose_usage_falls_is_decided_afresh() -> None:
    """The transitions memo's own test: the usage a step waiting for the drain reads moved."""
    p = policy(business=1)
    doc = p.model_dump(by_alias=True, mode="json", exclude_none=True)
    doc["spec"]["transitions"]["defaults"]["drain"] = True  # 3 -> 2 -> 1 GPU, each step once drained
    w = World(p=parse_policy(doc))
    d: Decision | None = None
    for t in (0.0, 25.0, 45.0, 50.0):  # the second step waits for business (2 GPUs held) from T0+45
        d = w.decide(d.status if d is not None else None, T0 + t)
        for a in d.actions:
            if isinstance(a, ApplyQuota):
                w.kueue.set_quota(a.key.team, a.key.flavor_resource, a.quota)
    assert d is not None and w.decide(d.status, T0 + 55) is d
    w.kueue.release("b/b1")  # business's usage 2 -> 0 GPUs
    after = w.decide(d.status, T0 + 60)
    assert after is not d and "FinishTransition" in [type(a).__name__ for a in after.actions]


def test_starved_work_blocked_from_the_gates_memory_is_returned_again_while_the_snapshot_stays() -> None:
    """serve wants 4 GPUs where preempting every experiment frees 3: blocked with no set. The decision that
    planned it is not kept (`planned`); the next one, read from the gate's memory, is, until the snapshot
    changes: an experiment queued changes Kueue but not the snapshot, a finish changes both."""
    w = World()
    w.arrive("serve", 4, T0 - 60)  # starved from T0 - 30
    planned = w.decide(None, T0)
    assert planned.gate.starved == 1 and planned.gate.planned == 1 and not _kept(w)
    remembered = w.decide(planned.status, T0 + 1)
    assert remembered.gate.planned == 0 and _kept(w)
    exp = workload("r", "e9", queue="research", gpus=1, created=T0 + 2, priority=10, priority_class="exp")
    w.kueue.submit(WorkloadInfo.pending(exp, "research"), T0 + 2)
    assert w.decide(remembered.status, T0 + 2) is remembered
    w.kueue.release("r/e1")
    replanned = w.decide(remembered.status, T0 + 3)  # the same kind of block: no action
    assert replanned is not remembered and replanned.gate.blocked != remembered.gate.blocked
    assert not [a for a in replanned.actions if not isinstance(a, WakeAt)] and replanned.gate.planned == 1
    assert not _kept(w) and w.decide(replanned.status, T0 + 4).gate.planned == 0


def test_an_experiment_reaching_min_runtime_without_a_wake_up_is_decided_afresh() -> None:
    """e3 started at `start`, one ulp past a second: at `start + 60.1` (rounded) it has run 60.0999999 s,
    less than minRuntime, and `start + minRuntime > now` is false, so no wake-up is set for it; a moment
    later it is past minRuntime. The gate's memory compares the eligible experiments at both times, and so
    does the replay."""
    w = World(p=policy(min_runtime="60.1s"))
    start = math.nextafter(T0 + 100.0, math.inf)
    now = start + 60.1
    assert now - start < 60.1 and not start + 60.1 > now
    e3 = workload("r", "e3", queue="research", gpus=1, admitted_to="research", reserved_at=start, **EXP)
    w.kueue.snapshot.add_workload(WorkloadInfo.admitted(e3, reserved_at=start))  # (the API's time is coarser)
    w.arrive("serve", 4, now - 100)  # starved
    planned = w.decide(None, now - 10)
    remembered = w.decide(planned.status, now)
    assert remembered.gate.planned == 0 and _kept(w) and remembered.wake_at is None
    assert "1 running less than" in remembered.gate.blocked[0].reason
    later = w.decide(remembered.status, now + 1)
    assert later is not remembered and "1 running less than" not in later.gate.blocked[0].reason


def test_another_snapshot_in_a_state_with_the_same_id_is_decided_afresh() -> None:
    """State ids are one snapshot's own: the operator observes a new snapshot on every tick, whose ids count
    from the start again."""
    w, other = World(), World()  # in the other, research runs one 2-GPU experiment instead of two of 1 GPU
    snap = other.kueue.snapshot
    snap.remove_workload("r/e1")
    snap.remove_workload("r/e2")
    e9 = workload("r", "e9", queue="research", gpus=2, admitted_to="research", reserved_at=T0 - 700, **EXP)
    snap.add_workload(WorkloadInfo.admitted(e9))
    # Its id counter set so that a change of nothing (one id for the tree's token, one for the state) lands on
    # the first snapshot's state id: no public change takes exactly the ids wanted.
    snap._ids = itertools.count(w.kueue.snapshot.state_id - 1)
    snap.add_usage("research", {})
    assert snap.state_id == w.kueue.snapshot.state_id
    w.arrive("serve", 4, T0 - 60)
    planned = w.decide(None, T0)
    remembered = w.decide(planned.status, T0 + 1)
    assert remembered.gate.starved == 1 and remembered.gate.planned == 0 and _kept(w)
    assert snap.state_id == w.kueue.snapshot.state_id  # (a decision's what-ifs are rolled back)
    other.kueue.pending = w.kueue.pending  # the same protected work waiting (the same objects)
    w.kueue = other.kueue
    after = w.decide(remembered.status, T0 + 2)
    assert after is not remembered and after.gate.blocked != remembered.gate.blocked
