"""The cluster as the controller sees it: what both shells must observe, in the core's own types.

- `snapshot`: the Kueue objects in force (the live ClusterQueue quotas, not the spec's) and the workloads
  holding quota, as `fairshare.snapshot.Snapshot`. A team whose ClusterQueue is absent has none yet (its
  quota applies at once). The controller never changes it (its what-ifs undo themselves).
- `pending`: workloads of the policy's queues without quota, each with when it last became pending
  (creation, or its last eviction: "waiting since") and whether Kueue holds it in its queues (active and
  not being deactivated).
- `history`: the usage history graph, kept up to date by the shell through `fairshare.control.history`.
- `config`: the Kueue Configuration the model follows (fair sharing on/off...).
- `budget_usage`: what each budget's selection consumed in its current period (`BudgetUsage`).
- `evictions`: the evictions seen within the storm window, Kueue's and the policy's
  (`fairshare.control.storms`: the simulator from its model, the operator from the Workloads).
- `held_queues`: the LocalQueues held now (stopPolicy Hold), which a budget's hold is compared with.
- `activity`: the GPUs' activity as last read (`fairshare.control.telemetry.ActivityReading`; spec.idle),
  None when not read (then every workload's activity is unknown).

The operator builds this from the objects it reads (`fairshare.control.observe`), the simulator from its
model of Kueue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from fairshare.history.graph import UsageHistoryGraph
from fairshare.models import WorkloadKey
from fairshare.scheduler.types import SchedulerConfig
from fairshare.snapshot import Snapshot
from fairshare.workload import WorkloadInfo

from .storms import Eviction
from .telemetry import ActivityReading


@dataclass(frozen=True, slots=True, init=False)
class PendingWorkload:
    """A workload without quota: its pending form, since when it waits, and whether Kueue queues it."""

    info: WorkloadInfo
    since: float  # creation, or the last eviction if later
    queued: bool  # active and in Kueue's queues (False while deactivated, e.g. a held victim)

    def __init__(self, info: WorkloadInfo, since: float, queued: bool) -> None:
        # (init=False: a dataclass-generated __init__ runs interpreted even compiled; scheduler/types.py)
        object.__setattr__(self, "info", info)
        object.__setattr__(self, "since", since)
        object.__setattr__(self, "queued", queued)


@dataclass(frozen=True, slots=True)
class BudgetUsage:
    """What a budget's selection consumed in its period (fairshare.control.budgets.period_at) as of
    `measured_at`, in the budget's unit (resource-hours, or money). The operator measures it in the
    ledger, the simulator with fairshare.control.budget_meter."""

    measured_at: float
    consumed: Decimal


@dataclass(frozen=True, slots=True)
class Overrides:
    """Process flags that win over the policy (the operator's `--dry-run`, `--starvation-grace`, ...)."""

    dry_run: bool | None = None
    starvation_grace_s: float | None = None
    victim_hold_s: float | None = None


NO_OVERRIDES = Overrides()


@dataclass(frozen=True, init=False)
class Observed:
    snapshot: Snapshot
    pending: Mapping[WorkloadKey, PendingWorkload]
    history: UsageHistoryGraph
    config: SchedulerConfig = field(default_factory=SchedulerConfig)
    # Budget name -> consumption in its current period (spec.budgets; absent: not measured yet).
    budget_usage: Mapping[str, BudgetUsage] = field(default_factory=dict)
    # The evictions the shell observed within the storm window (fairshare.control.storms.EvictionWindow).
    evictions: tuple[Eviction, ...] = ()
    activity: ActivityReading | None = None  # spec.idle: the GPUs' activity as last read
    # The LocalQueues ("namespace/name") held now (stopPolicy Hold): what a budget's hold is compared with.
    held_queues: frozenset[str] = frozenset()

    def __init__(
        self,
        snapshot: Snapshot,
        pending: Mapping[WorkloadKey, PendingWorkload],
        history: UsageHistoryGraph,
        config: SchedulerConfig | None = None,
        budget_usage: Mapping[str, BudgetUsage] | None = None,
        evictions: tuple[Eviction, ...] = (),
        activity: ActivityReading | None = None,
        held_queues: frozenset[str] = frozenset(),
    ) -> None:
        # (init=False: a dataclass-generated __init__ runs interpreted even compiled; scheduler/types.py)
        object.__setattr__(self, "snapshot", snapshot)
        object.__setattr__(self, "pending", pending)
        object.__setattr__(self, "history", history)
        object.__setattr__(self, "config", config if config is not None else SchedulerConfig())
        object.__setattr__(self, "budget_usage", budget_usage if budget_usage is not None else {})
        object.__setattr__(self, "evictions", evictions)
        object.__setattr__(self, "activity", activity)
        object.__setattr__(self, "held_queues", held_queues)

    def holds_quota(self, key: WorkloadKey) -> bool:
        return key in self.snapshot.workloads

    def exists(self, key: WorkloadKey) -> bool:
        """Still a Workload of the policy's queues (admitted or pending; a finished or deleted one is
        gone)."""
        return key in self.snapshot.workloads or key in self.pending
