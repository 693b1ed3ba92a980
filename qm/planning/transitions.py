"""The transition plan: what the policy controller does with the new policy over the live state, decision by
decision, when nothing but the controller's own actions changes the cluster.

It is one run of the simulator (simulations/model.py: Kueue's model and the controller's shell, the very
engine and start the forecast runs): the live Kueue objects, the policy's status and generation, the
Workloads as they are; the new policy applied at t=0 as `kubectl apply` would; the work running now runs
on through the horizon (the plan assumes no run time: when drain lets a step land depends on running work
finishing, which the forecast draws) and nothing new arrives. Kueue reacts as it does: a quota granted
admits pending work, a victim the controller reactivates is admitted again if its team can borrow (and may
be evicted again). So a forecast replication differs from the plan only by what the plan leaves out, the
run times it draws and the arrivals it adds: where those change nothing the replication lands the same
steps at the same times and evicts the same victims (tests/unit/plan/test_plan_vs_forecast.py).

Evictions carry their lost work: the victim's GPUs x its run time since its attempt started (the plan's
scenario has no checkpoints: an evicted workload restarts from zero, `checkpointInterval` unset).

When the simulator cannot apply the change mid-run (it changes more than quotas, weights and the policy's
rules: a team or a namespace added, for instance), the plan is the controller's decisions alone
(`controller_only`): its own steps, asked for at each wake-up, its quota steps and evictions carried out in
the observed snapshot, nothing else changing; said so in its `how`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fairshare.control import (
    AdvanceTransition,
    ApplyQuota,
    BlockTransition,
    CancelTransition,
    Decision,
    FinishTransition,
    PendingWorkload,
    PlanMemo,
    RequestEviction,
    StartTransition,
    WaitForDrain,
    decide,
)
from fairshare.errors import InputError
from fairshare.models import ClusterQueueName, QuotaKey
from fairshare.quantity import describe_quantity
from fairshare.workload import WorkloadInfo

from .diff import Now
from .inputs import PRIMARY, Live, PolicyFile

MAX_DECISIONS = 2000  # controller_only: decisions before it stops (a wake-up every step interval)
SIMULATED = "simulated"


@dataclass(frozen=True)
class Step:
    """One thing the controller does at `at` (seconds since the epoch) for a quota, or an eviction."""

    at: float
    key: QuotaKey | None
    kind: str  # start | step | wait | finish | cancel | blocked | evict | would-evict (dry run)
    what: str
    victim: str | None = None  # evict: the workload
    gpus: float = 0.0  # evict: the primary resource it held (GPUs)
    ran: float | None = None  # evict: seconds its attempt had run (None: not simulated)

    @property
    def lost_gpu_hours(self) -> float:
        return self.gpus * (self.ran or 0.0) / 3600.0


QuotaPoint = tuple[float, str, str, str, int]  # (seconds from the read, team, flavor, resource, milli)


@dataclass(frozen=True)
class Plan:
    steps: list[Step]
    how: str  # SIMULATED, or why the controller's decisions alone
    origin: float  # t=0: the read of the cluster (seconds since the epoch)
    quotas: list[QuotaPoint] = field(default_factory=list)  # each quota change the plan applies, in order
    notes: list[str] = field(default_factory=list)

    @property
    def evictions(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "evict"]

    @property
    def lost_gpu_hours(self) -> float:
        return sum(s.lost_gpu_hours for s in self.evictions)


def quantity(milli: int, resource: str) -> str:
    return describe_quantity(milli, resource)


def receivers(decision: Decision) -> set[QuotaKey]:
    """The quotas that grow in a paired move: they receive what their givers free, on no schedule of
    their own (status: a pair group and no step count)."""
    out = set()
    for r in decision.status.transitions:
        if r.pair_group and r.total_steps == 0:
            out.add(QuotaKey.of(ClusterQueueName(r.team), r.flavor, r.resource))
    return out


def step_of(a: object, t: float, receiving: set[QuotaKey]) -> Step | None:
    """The plan's line for one of the controller's actions (None: not a transition's or an eviction's)."""
    if isinstance(a, StartTransition):
        r = a.key.resource
        if a.key in receiving:
            return Step(t, a.key, "start", f"{quantity(a.before, r)} -> {quantity(a.target, r)}, paired: "
                                           "receives each unit as its givers free it")
        return Step(t, a.key, "start", f"{quantity(a.before, r)} -> {quantity(a.target, r)} in "
                                       f"{a.steps} step(s): {a.why}")
    if isinstance(a, AdvanceTransition):
        r = a.key.resource
        text = f"{a.progress()}: {quantity(a.before, r)} -> {quantity(a.after, r)}"
        if a.total == 0:
            text += ", " + a.why.rsplit(": ", 1)[-1]  # "freed by research (paired move)"
        return Step(t, a.key, "step", text)
    if isinstance(a, WaitForDrain):
        return Step(t, a.key, "wait", f"waits for drain: {a.why.split(': ', 1)[-1]}")
    if isinstance(a, FinishTransition):
        return Step(t, a.key, "finish", "target reached")
    if isinstance(a, CancelTransition):
        r = a.key.resource
        return Step(t, a.key, "cancel", f"the transition to {quantity(a.old_target, r)} is cancelled at "
                                        f"{quantity(a.at_value, r)}; new target {quantity(a.new_target, r)}")
    if isinstance(a, BlockTransition):
        return Step(t, a.key, "blocked", a.why)
    if isinstance(a, RequestEviction) and not a.repeat:
        if a.dry_run:
            return Step(t, None, "would-evict", f"would evict {a.victim} (dry run): {a.reason}",
                        victim=str(a.victim))
        return Step(t, None, "evict", f"evicts {a.victim}: {a.reason}", victim=str(a.victim))
    return None


def plan(live: Live, new: PolicyFile, now: Now, horizon: float, path: Path) -> Plan:
    """The transition plan (module docstring)."""
    from qm.planning import scenario

    try:
        loaded = scenario.plan_scenario(live, new, now.generation != live.generation, horizon, path)
    except InputError as err:
        if "changes more than quotas, weights and the policy's rules" not in err.message:
            raise
        what = err.message.split("(", 1)[1].split(")", 1)[0]
        steps, quotas = controller_only(now, live.now + horizon)
        return Plan(steps, f"the controller's decisions alone, nothing simulated: the change also {what}, "
                    "which the simulator cannot apply to a running cluster", live.now, quotas)
    return simulated(loaded, live.now)


def simulated(loaded: Any, origin: float) -> Plan:
    """The plan's one run (module docstring): its decisions as steps, its evictions with their lost work."""
    from simulations.model import Simulation
    from simulations.runner import build_jobs

    sc = loaded.base
    sim = Simulation(sc, build_jobs(sc, loaded.directory, 0), base_dir=loaded.directory, variant="plan",
                     replication=0)
    trace: list[tuple[float, Decision]] = []
    if sim.controller is not None:
        sim.controller.trace = trace
    result = sim.run()
    lost = {(round(p.time, 6), p.victim): p for p in result.preemptions}
    steps: list[Step] = []
    for t, decision in trace:
        receiving = receivers(decision)
        for a in decision.actions:
            s = step_of(a, t, receiving)
            if s is None:
                continue
            if s.kind == "evict" and s.victim is not None:
                p = lost.pop((round(t - origin, 6), s.victim), None)
                if p is not None:
                    s = dataclasses.replace(s, gpus=p.gpus_milli / 1000, ran=p.lost_seconds)
            steps.append(s)
    for (at, victim), p in sorted(lost.items()):  # Kueue's own preemptions in the run
        steps.append(Step(origin + at, None, "evict", f"Kueue preempts {victim}: {p.reason}", victim=victim,
                          gpus=p.gpus_milli / 1000, ran=p.lost_seconds))
    steps.sort(key=lambda s: s.at)  # stable: a decision's order within an instant
    quotas = [(q.time, q.cluster_queue, q.flavor, q.resource, q.nominal_milli) for q in result.quota_changes]
    return Plan(steps, SIMULATED, origin, quotas, list(result.notes))


def controller_only(now: Now, until: float) -> tuple[list[Step], list[QuotaPoint]]:
    """The controller's decisions from `now` to `until` with nothing but its own actions changing the
    observed snapshot (module docstring), and the quota changes they make; the live observation is restored
    afterwards."""
    decision = now.decision
    observed = now.observed
    snap = observed.snapshot
    rules = decision.rules
    pending: dict[str, PendingWorkload] = dict(observed.pending)
    out: list[Step] = []
    quotas: list[QuotaPoint] = []
    t = now.at
    with snap.transaction():
        for _ in range(MAX_DECISIONS):
            receiving = receivers(decision)
            for a in decision.actions:
                step = step_of(a, t, receiving)
                if step is not None:
                    out.append(step)
                if isinstance(a, ApplyQuota):
                    cq = snap.cluster_queues.get(a.key.team)
                    if cq is not None and cq.node.quota(a.key.flavor_resource) != a.quota:
                        snap.set_quota(cq.node, a.key.flavor_resource, a.quota)
                        quotas.append((t - now.at, a.key.team, a.key.flavor, a.key.resource, a.quota.nominal))
                elif isinstance(a, RequestEviction) and not a.dry_run and a.victim in snap.workloads:
                    info = snap.remove_workload(a.victim)
                    wl = info.workload.after_eviction("Deactivated")
                    held = WorkloadInfo.pending(wl, info.cluster_queue)
                    pending[a.victim] = PendingWorkload(held, t, queued=False)
            wake = decision.wake_at
            if wake is None or wake > until:
                break
            t = wake
            seen = dataclasses.replace(observed, pending=dict(pending))
            decision = decide(rules, seen, decision.status, t, history=now.book, generation=now.generation,
                              memo=PlanMemo())
    return out, quotas


def primary(steps: Sequence[Step]) -> list[Step]:
    return [s for s in steps if s.key is None or s.key.resource == PRIMARY]
