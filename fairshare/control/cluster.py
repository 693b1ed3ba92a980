"""The policy controller over a cluster as the API serves it: the operator's one trip into the core, as
`simulations.control.ControllerShell.step` is the simulator's.

The operator reads (its watch cache, the objects it applied, the ledger's budget consumption, the GPUs'
activity) and hands all of it to `PolicyController.step`, which observes (`fairshare.control.observe`),
brings the usage history and the eviction window up to date, decides (`replay.Controller`, the code the
simulator runs, with the same fast paths) and derives the objects the decision puts in force
(`fairshare.control.objects`). The reply carries the decision and what the operator applies and reports.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from fairshare.models import Workload
from fairshare.policy import ObjectKey, QuotaPolicy
from fairshare.policy.render import Manifest
from fairshare.policy.status import QuotaPolicyStatus
from fairshare.scheduler import SchedulerConfig
from fairshare.snapshot import Snapshot

from .decide import Decision
from .history import HistoryBook
from .next_step import next_step
from .objects import InForce, LiveLookup, in_force, kueue_objects
from .observe import observe
from .observed import BudgetUsage, Observed
from .replay import Controller
from .rules import PolicyRules
from .standing import ObservationMemo, advance
from .storms import EvictionCounts, EvictionWindow, evictions_since, observe_evictions
from .telemetry import ActivityReading

OBSERVING = "observing the cluster"
DECIDING = "deciding"


@dataclass(frozen=True)
class ClusterView:
    """What the operator read for one policy."""

    live: LiveLookup  # the policy's Kueue objects as they exist (None: absent)
    # The watch cache's Workloads by "namespace/name": those of the policy's observe.WorkloadScope (what
    # the operator hands), or every one (the same observation).
    workloads: Mapping[str, Workload]
    config: SchedulerConfig  # the Kueue Configuration the model follows
    budget_usage: Mapping[str, BudgetUsage] | None = None  # each budget's consumption, from the ledger
    activity: ActivityReading | None = None  # spec.idle: the GPUs' activity, from Prometheus
    other_namespaces: Sequence[str] = ()  # the teams' namespaces of the operator's other policies
    # The keys of the Workloads added, replaced or deleted since the view the controller's last step was
    # given (the operator's cache records them per policy); None: unknown, every Workload is derived again.
    changed: Collection[str] | None = None


@dataclass(frozen=True)
class Reply:
    """A decision and what it puts in force."""

    decision: Decision
    settings: InForce  # what it puts in force (quotas: the ledger's quota history)
    objects: dict[ObjectKey, Manifest]  # the Kueue and tenancy objects to have in place
    next_step: str | None  # status.nextStep (NEXT STEP)
    observed: Observed  # what it was decided over
    history: HistoryBook  # the usage history, laid out for the policy (a new one when its half-life changed)
    # Seconds spent observing (the snapshot, the history, the evictions) and deciding (the decision and the
    # objects), as the `timer` given to `step` measured them (empty without one).
    stages: tuple[tuple[str, float], ...] = field(default=())
    # Per (team, priority class): the earliest creation of the policy's Workloads waiting without quota
    # (observe.oldest_waiting; qm_oldest_pending_age_seconds).
    waiting: Mapping[tuple[str, str], float] = field(default_factory=dict)


class StepFailed(Exception):
    """A step failed while observing (the objects read) or deciding; `__cause__` is the error."""

    def __init__(self, stage: str, cause: BaseException) -> None:
        super().__init__(f"{stage}: {cause}")
        self.stage = stage
        self.cause = cause


class PolicyController:
    """One policy's controller in the operator, with what it keeps between steps: the controller's memory,
    each Workload's eviction counts as last seen and the evictions within the storm window."""

    __slots__ = ("controller", "counts", "evictions", "seen")

    def __init__(self) -> None:
        self.controller = Controller()
        self.counts: EvictionCounts | None = None
        self.evictions = EvictionWindow()
        self.seen = ObservationMemo()  # the last step's observation, kept by delta (standing.py)

    def step(self, rules: PolicyRules, view: ClusterView, stored: QuotaPolicyStatus | None, now: float, *,
             history: HistoryBook, generation: int | None, timer: Callable[[], float] | None = None) -> Reply:
        """Observe, decide and derive what is in force (raises StepFailed, naming the stage). `history`: the
        book as last kept; the reply's is the one to keep (HistoryBook.follow: a new half-life restarts
        it). `timer`: a clock to time the two stages with (the operator's metrics; never read otherwise)."""
        policy = rules.policy
        started = timer() if timer is not None else 0.0
        try:
            history = history.follow(policy, now)
            # The observation, patched by the Workloads that changed (fairshare.control.standing).
            step = advance(self.seen, policy, view.live, view.workloads, view.changed, history.graph,
                           view.config)
            observed = step.observed
            sync_history(history, observed.snapshot, view.workloads, now)
            # Evictions since the last step, Kueue's and the policy's, from the Workloads' own counts.
            if step.derived is None or self.counts is None:
                self.counts, seen = observe_evictions(self.counts, step.owned.values(), now)
            else:
                self.counts, seen = evictions_since(self.counts, step.owned, step.derived, now)
            for eviction in seen:
                self.evictions.add(eviction)
            observed = dataclasses.replace(observed, budget_usage=view.budget_usage or {},
                                           evictions=self.evictions.recent(now), activity=view.activity)
            waiting = step.waiting
        except Exception as err:
            raise StepFailed(OBSERVING, err) from err
        observed_at = timer() if timer is not None else 0.0
        try:
            decision = self.controller.decide(rules, observed, stored, now, history=history,
                                              generation=generation)
            settings = in_force(rules, observed, decision.actions, view.live)
            objects = kueue_objects(rules, settings, view.other_namespaces)
            text = next_step(decision.status.transitions, observed.snapshot, now)
        except Exception as err:
            raise StepFailed(DECIDING, err) from err
        stages = () if timer is None else (
            ("observe", observed_at - started), ("decide", timer() - observed_at))
        return Reply(decision, settings, objects, text, observed, history, stages, waiting)


def sync_history(book: HistoryBook, snapshot: Snapshot, workloads: Mapping[str, Workload],
                 now: float) -> None:
    """The history's open intervals == the workloads holding quota in the policy's ClusterQueues."""

    def ended_at(key: str) -> float | None:
        wl = workloads.get(key)
        cond = wl.condition("Finished") if wl is not None else None
        return cond.last_transition_time if cond is not None and cond.status else None

    book.sync(snapshot.workloads, ended_at, now)


def bring_history_up(policy: QuotaPolicy, live: LiveLookup, workloads: Mapping[str, Workload],
                     book: HistoryBook, now: float) -> None:
    """The history up to the Workloads without a decision (the operator's shutdown)."""
    observed = observe(policy, live, workloads, book.graph)
    sync_history(book, observed.snapshot, workloads, now)
