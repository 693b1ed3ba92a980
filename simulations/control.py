"""The policy controller in simulated time: the simulator's shell around `fairshare.control.decide`, the
same controller the operator runs. It observes the simulated Kueue, asks for a decision and applies the
actions to the simulated Kueue; it has no policy rule of its own.

- ApplyQuota: the ClusterQueue's quota changes (Kueue's snapshot; a cohort event).
- PushWeights: fairSharing.weight of the teams' ClusterQueues.
- HoldQueues: the team's LocalQueues are held (stopPolicy Hold) or released.
- RequestEviction, HoldPending: the workload is deactivated (evicted through Kueue's path, held, not queued).
- Reactivate: it is queued again.
- WakeAt: the controller is called again at that time even if nothing happens.

Budgets (spec.budgets) are measured by a `BudgetMeter` (fairshare.control.budget_meter) fed with what the
simulated Kueue admits and releases; its usage is part of the observation, as the ledger's is for the
operator, so a what-if shows when a budget would bite.
- The rest (transition records, audit records) only goes to the action log (`actions.csv`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import assert_never

from fairshare.control import (
    Action,
    AdvanceTransition,
    ApplyQuota,
    BlockTransition,
    BudgetCrossed,
    BudgetLifted,
    CancelTransition,
    Decision,
    Eviction,
    EvictionSource,
    EvictionWindow,
    FinishTransition,
    HistoryBook,
    HoldPending,
    HoldQueues,
    MarkIdle,
    Observed,
    PolicyRules,
    PushWeights,
    Reactivate,
    RecordAudit,
    RequestEviction,
    StartTransition,
    StormDetected,
    UnmarkIdle,
    WaitForDrain,
    WakeAt,
)
from fairshare.control.budget_meter import BudgetMeter
from fairshare.control.replay import Controller
from fairshare.control.telemetry import ActivityReading
from fairshare.models import ClusterQueueName
from fairshare.policy import QuotaPolicy
from fairshare.policy.settings import IdleSettings
from fairshare.policy.status import EvictionKind, QuotaPolicyStatus
from fairshare.quantity import describe_quantity, parse_quantity
from fairshare.workload import WorkloadInfo

from .kueue import KueueModel
from .record import ActionRecord, EvictedBy

# Who evicted, in the measurement (PreemptionRecord.by), and for whom, by kind of request.
_BY = {EvictionKind.EXPERIMENT: EvictedBy.PLANNER, EvictionKind.TRANSITION: EvictedBy.TRANSITION,
       EvictionKind.IDLE: EvictedBy.IDLE}
_FOR = {EvictionKind.IDLE: "idle GPUs"}


@dataclass(frozen=True, slots=True, init=False)
class Applied:
    """What one decision did to the simulated cluster (for the loop and the measurement)."""

    quota_steps: tuple[tuple[ApplyQuota, str], ...]  # each quota change with its note
    wake: float | None

    def __init__(self, quota_steps: tuple[tuple[ApplyQuota, str], ...], wake: float | None) -> None:
        # (init=False: a dataclass-generated __init__ runs interpreted even compiled; scheduler/types.py)
        object.__setattr__(self, "quota_steps", quota_steps)
        object.__setattr__(self, "wake", wake)


class ControllerShell:
    def __init__(
        self,
        policy: QuotaPolicy,
        kueue: KueueModel,
        *,
        start: float = 0.0,
        status: QuotaPolicyStatus | None = None,
        history: Mapping[str, object] | None = None,
        generation: int = 1,
    ) -> None:
        """`status`, `history` (status.history) and `generation`: where a policy already running stands at
        `start` (an initial state, simulations/initial.py); the controller continues from them as a
        restarted operator does."""
        self.policy = policy
        self.rules = PolicyRules.of(policy)
        self.kueue = kueue
        self.start = start  # the action log is in seconds from it
        self.generation = generation
        self.status: QuotaPolicyStatus | None = status
        self.notes: list[str] = []
        if history is not None:
            self.book, warning = HistoryBook.restore(policy, history, start)
            if warning:
                self.notes.append(warning)
        else:
            self.book = HistoryBook.new(policy, start)
        self.decided_version = -1  # the Kueue version the last decision saw
        self.controller = Controller()  # decide, with its memory (the operator holds the same)
        self.log: list[ActionRecord] = []
        self.meter = BudgetMeter(policy)
        self.evictions = EvictionWindow()  # the evictions seen within the storm window (Observed.evictions)
        # Every decision with its wall-clock time, when asked for (None: not kept): `qm plan`'s transition
        # plan is the controller's typed actions of one run (qm/planning/transitions.py).
        self.trace: list[tuple[float, Decision]] | None = None
        # spec.idle: the GPUs' activity at a time, as the operator would read it (simulations/activity.py;
        # set by the simulation when its jobs model activity; None: no reading, every activity unknown).
        self.activity: Callable[[float, IdleSettings], ActivityReading] | None = None

    def adopt(self, t: float) -> None:
        """The workloads holding quota when the run starts (an initial state): the usage history's open
        intervals become exactly these (`HistoryBook.sync`, the operator's rule: each opened at its
        QuotaReserved time), and the budget meter counts them from `t` (what they consumed before is the
        ledger's)."""
        holding = self.kueue.snapshot.workloads
        self.book.sync(holding, lambda _key: None, t)
        if not self.meter.empty:
            for key in sorted(holding):
                info = holding[key]
                self.meter.start(key, info.cluster_queue, dict(info.workload.labels), info.usage, t)

    # --- inputs -----------------------------------------------------------------------------------------

    def edit(self, policy: QuotaPolicy, t: float) -> None:
        """A new generation of the policy (a `kubectl apply`)."""
        self.book = self.book.follow(policy, t)  # a new half-life restarts it, as in the operator
        self.policy = policy
        self.rules = PolicyRules.of(policy)
        self.meter = BudgetMeter.follow(self.meter, policy)
        self.generation += 1
        self.decided_version = -1

    def admitted(self, info: WorkloadInfo, t: float) -> None:
        self.book.start(info, t)
        if not self.meter.empty:
            self.meter.start(info.key, info.cluster_queue, dict(info.workload.labels), info.usage, t)

    def evicted(self, key: str, t: float, *, by: EvictedBy, preemptor: str, reason: str) -> None:
        """Kueue evicted a workload (its own preemption, or the policy's deactivation)."""
        source = EvictionSource.KUEUE if by == EvictedBy.KUEUE else EvictionSource.POLICY
        named = by == EvictedBy.KUEUE or by == EvictedBy.PLANNER
        self.evictions.add(Eviction(key, t, source, preemptor if named else "", reason))

    def released(self, key: str, t: float) -> None:
        self.book.stop(key, t)
        if not self.meter.empty:
            self.meter.stop(key, t)

    @property
    def due(self) -> bool:
        """Something the controller may react to changed since its last decision."""
        return self.kueue.version != self.decided_version

    # --- one decision -----------------------------------------------------------------------------------

    def step(self, t: float) -> Applied:
        k = self.kueue
        # What this decision sees; the changes its own actions make are news for the next one (an evicted
        # victim to reactivate, a quota step that lets Kueue admit), as for the operator's next tick.
        seen = k.version
        usage = {} if self.meter.empty else self.meter.usage(t)
        idle = self.rules.idle
        activity = self.activity(t, idle.settings) if idle is not None and self.activity is not None else None
        observed = Observed(k.snapshot, k.pending, self.book.graph, k.config, budget_usage=usage,
                            evictions=self.evictions.recent(t), activity=activity, held_queues=k.held_queues)
        decision = self.controller.decide(self.rules, observed, self.status, t, history=self.book,
                                          generation=self.generation)
        self.status = decision.status
        if self.trace is not None:
            self.trace.append((t, decision))
        applied = self._apply(decision, t)
        self.decided_version = seen
        return applied

    def _apply(self, decision: Decision, t: float) -> Applied:
        """Each action to the simulated Kueue, in order (the operator applies the same to the cluster)."""
        k = self.kueue
        notes = {
            a.key: a.progress() for a in decision.actions if isinstance(a, AdvanceTransition)
        }
        steps: list[tuple[ApplyQuota, str]] = []
        wake: float | None = None
        held = set(k.held_queues)
        for a in decision.actions:
            self._log(a, t - self.start)
            match a:
                case ApplyQuota():
                    if a.key.team in k.snapshot.cluster_queues and k.set_quota(
                        a.key.team, a.key.flavor_resource, a.quota
                    ):
                        steps.append((a, notes.get(a.key, "applied")))
                case PushWeights():
                    for team, weight in sorted(a.weights.items()):
                        if team in k.snapshot.cluster_queues:
                            k.set_weight(ClusterQueueName(team), parse_quantity(weight))
                case HoldQueues():
                    queues = set(a.local_queues)
                    held = held | queues if a.hold else held - queues
                case RequestEviction():
                    if not a.dry_run and not a.repeat:
                        by = _BY.get(a.kind, EvictedBy.TRANSITION)
                        preemptor = a.beneficiary or _FOR.get(a.kind, "quota transition")
                        k.deactivate(a.victim, t, by=by, preemptor=preemptor, reason=a.reason)
                case HoldPending():
                    k.deactivate(a.workload, t, by=EvictedBy.HOLD, preemptor=a.beneficiary, reason=a.why)
                case Reactivate():
                    k.reactivate(a.victim, t)
                case WakeAt():
                    wake = a.at if wake is None else min(wake, a.at)
                case (StartTransition() | AdvanceTransition() | WaitForDrain() | FinishTransition()
                      | CancelTransition() | BlockTransition() | RecordAudit() | BudgetCrossed()
                      | BudgetLifted() | StormDetected() | MarkIdle() | UnmarkIdle()):
                    pass  # records: the action log has them (an idle mark is an annotation on the cluster)
                case _:
                    assert_never(a)
        # The LocalQueues the budgets hold, in place once the decision's actions are (a cohort event each).
        k.hold_local_queues({lq for lq in held if lq in k.snapshot.local_queues})
        return Applied(tuple(steps), wake)

    def _log(self, a: Action, t: float) -> None:
        record: ActionRecord | None = None
        match a:
            case ApplyQuota():
                shown = describe_quantity(a.quota.nominal, a.key.resource)
                record = ActionRecord(t, "quota", str(a.key), shown)
            case StartTransition():
                r = a.key.resource
                shown = f"{describe_quantity(a.before, r)} -> {describe_quantity(a.target, r)}"
                record = ActionRecord(t, "transition-start", str(a.key), f"{shown} in {a.steps} step(s)")
            case AdvanceTransition():
                record = ActionRecord(t, "transition-step", str(a.key), f"{a.progress()}: {a.why}")
            case WaitForDrain():
                record = ActionRecord(t, "transition-wait", str(a.key), a.why)
            case FinishTransition():
                record = ActionRecord(t, "transition-finish", str(a.key), "target reached")
            case CancelTransition():
                record = ActionRecord(t, "transition-cancel", str(a.key), f"new target {a.new_target}m")
            case BlockTransition():
                record = ActionRecord(t, "transition-blocked", str(a.key), a.why)
            case RequestEviction():
                kind = "evict-dry-run" if a.dry_run else ("evict-repeat" if a.repeat else "evict")
                record = ActionRecord(t, kind, a.victim, a.reason)
            case Reactivate():
                record = ActionRecord(t, "reactivate", a.victim, a.why)
            case HoldPending():
                record = ActionRecord(t, "hold-workload", a.workload, a.why)
            case HoldQueues():
                record = ActionRecord(t, "hold" if a.hold else "release", a.team, a.why)
            case PushWeights():
                record = ActionRecord(
                    t,
                    "weights",
                    ",".join(sorted(a.weights)),
                    ", ".join(f"{k}={v}" for k, v in sorted(a.weights.items())),
                )
            case RecordAudit():
                record = ActionRecord(t, str(a.action), a.target.describe(), a.why)
            case BudgetCrossed():
                record = ActionRecord(t, "budget-crossed", a.budget, a.why)
            case StormDetected():
                about = a.preemptor or ",".join(a.victims)
                record = ActionRecord(t, "storm", about, f"{a.response}: {a.why}")
            case BudgetLifted():
                record = ActionRecord(t, "budget-lifted", a.budget, f"{a.action}: {a.why}")
            case MarkIdle():
                record = ActionRecord(t, "idle-warned", a.workload, f"{a.what}: {a.why}")
            case UnmarkIdle():
                record = ActionRecord(t, "idle-cleared", a.workload, a.why)
            case WakeAt():
                pass  # (the event loop's)
            case _:
                assert_never(a)
        if record is not None:
            self.log.append(record)
