"""What the policy controller asks its shell to do: a closed set of typed actions (frozen dataclasses).

The operator (`queue_manager`) applies them through its one API writer, the simulator (`simulations`) to
its model of Kueue; neither decides anything of its own (Ray autoscaler v2's `schedule(request) ->
reply`). Every action carries its one-line reason. Order in `Decision.actions` is the order to apply:
transition records first (the operator persists status before it changes a ClusterQueue), then quotas,
weights, evictions and reactivations, then audit records.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from fairshare.models import QuotaKey, ResourceQuota, WorkloadKey
from fairshare.policy.status import EvictionKind, StormResponse
from fairshare.quantity import describe_quantity


class AuditAction(StrEnum):
    """Every kind of change or notable decision, as audit records name it (Events, logs, the ledger)."""

    APPLY = "apply"  # owned Kueue object created or changed (the operator's renderer)
    PRUNE = "prune"  # owned object no longer rendered, deleted
    DRIFT = "drift-corrected"  # hand edit of an owned object reverted
    TRANSITION_START = "transition-started"
    TRANSITION_STEP = "transition-step"
    TRANSITION_DONE = "transition-finished"
    TRANSITION_WAIT = "transition-waiting"
    TRANSITION_CANCEL = "transition-cancelled"
    TRANSITION_BLOCKED = "transition-blocked"
    TRANSITION_DEADLINE = "transition-deadline-passed"  # past its deadline: bounded preemption frees the rest
    CAPACITY_STRANDED = "capacity-stranded"  # a change takes quota from a cohort tree and gives it to nobody
    PREEMPT = "preempt"  # eviction requested from Kueue
    PREEMPT_DRY_RUN = "preempt-dry-run"
    PREEMPT_VERIFIED = "preemption-verified"
    PREEMPT_OVERDUE = "preemption-overdue"
    PREEMPT_BLOCKED = "preemption-blocked"
    REACTIVATED = "reactivated"
    POLICY_REJECTED = "policy-rejected"
    WEIGHTS_PUSHED = "fair-sharing-weights-pushed"
    BUDGET_CROSSED = "budget-crossed"  # a budget threshold reached (fairshare.control.budgets)
    BUDGET_LIFTED = "budget-lifted"  # a budget's enforcement ends (new period, or usage fell below)
    QUEUES_HELD = "queues-held"  # a team's LocalQueues held (stopPolicy Hold) by a budget
    WORKLOAD_HELD = "workload-held"  # a pending experiment held so that a beneficiary gets the freed quota
    QUEUES_RELEASED = "queues-released"  # the hold lifted (stopPolicy None)
    STORM = "eviction-storm"  # repeated preempt -> re-admit cycles seen, and the response (storm_response.py)
    WEIGHTS_HELD = "fair-sharing-weights-held"  # a push not made: the model sees it start a preemption loop
    IDLE_WARNED = "idle-warned"  # an experiment's GPUs idle over spec.idle.window: reclaimed after grace
    IDLE_CLEARED = "idle-cleared"  # a warned workload is busy again (or no longer holds quota)
    IDLE_BLOCKED = "idle-reclaim-blocked"  # due for reclamation, but the idle budget is spent


@dataclass(frozen=True, slots=True)
class Target:
    """What an action or record is about: a policy, a ClusterQueue or a Workload ("namespace/name")."""

    kind: str  # a Kubernetes kind: QuotaPolicy, ClusterQueue, Workload, or a workload's owner (a Job)
    name: str
    namespace: str | None = None

    @staticmethod
    def workload(key: WorkloadKey) -> Target:
        ns, _, name = key.partition("/")
        return Target("Workload", name, ns)

    @staticmethod
    def cluster_queue(name: str) -> Target:
        return Target("ClusterQueue", name)

    @staticmethod
    def policy(name: str) -> Target:
        return Target("QuotaPolicy", name)

    def describe(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


# --------------------------------------------------------------------------------------------- transitions


@dataclass(frozen=True, slots=True)
class StartTransition:
    key: QuotaKey
    before: int  # milli-units
    target: int
    steps: int
    why: str


@dataclass(frozen=True, slots=True)
class AdvanceTransition:
    """A step of a transition takes effect (the quota in force changes; `ApplyQuota` follows)."""

    key: QuotaKey
    before: int
    after: int
    step: int
    total: int  # 0: a receiver's grant in a paired move (no schedule of its own: it gets what is freed)
    why: str

    def progress(self) -> str:
        """Where the step stands, for a person: "step 2/3", or for a receiver of a paired move the grant
        ("+3 GPUs at once"), which follows its givers and has no step count."""
        if self.total == 0:
            delta = self.after - self.before
            sign = "+" if delta >= 0 else "-"
            return f"{sign}{describe_quantity(abs(delta), self.key.resource)} at once"
        return f"step {self.step}/{self.total}"


@dataclass(frozen=True, slots=True)
class WaitForDrain:
    """The due step waits for running work to finish (drain): reported once when the wait starts."""

    key: QuotaKey
    why: str


@dataclass(frozen=True, slots=True)
class FinishTransition:
    key: QuotaKey


@dataclass(frozen=True, slots=True)
class CancelTransition:
    """The target changed mid-transition: the old plan ends where it is and a new one starts."""

    key: QuotaKey
    at_value: int
    old_target: int
    new_target: int


@dataclass(frozen=True, slots=True)
class BlockTransition:
    """A transition cannot be planned (reported once per reason); the quota in force stays."""

    key: QuotaKey
    why: str


@dataclass(frozen=True, slots=True)
class ApplyQuota:
    """Set one ClusterQueue flavor-resource quota (the operator renders it, the simulator sets it)."""

    key: QuotaKey
    quota: ResourceQuota


@dataclass(frozen=True, slots=True)
class PushWeights:
    """History-adjusted fairSharing.weight per team (quantity strings)."""

    weights: Mapping[str, str]
    why: str


# --------------------------------------------------------------------------------------------- evictions


@dataclass(frozen=True, slots=True)
class RequestEviction:
    """Ask Kueue to evict a workload by deactivating it (spec.active=false); it stays deactivated until a
    `Reactivate`. `repeat`: the request was recorded but not carried out (e.g. a crash in between)."""

    victim: WorkloadKey
    beneficiary: WorkloadKey | None  # None: a transition past its deadline
    reason: str
    kind: EvictionKind
    dry_run: bool = False
    repeat: bool = False
    team: str | None = None  # the victim's ClusterQueue
    lost: tuple[tuple[str, int], ...] = ()  # work it loses: (resource, milli-units x hours), sorted


@dataclass(frozen=True, slots=True)
class Reactivate:
    """spec.active=true on a victim we deactivated: Kueue requeues it."""

    victim: WorkloadKey
    why: str


# --------------------------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class RecordAudit:
    """A decision worth recording that changes nothing by itself (blocked, verified, overdue, dry-run)."""

    action: AuditAction
    target: Target
    what: str
    why: str
    also_on: Target | None = None


# --------------------------------------------------------------------------------------------- budgets


@dataclass(frozen=True, slots=True)
class BudgetCrossed:
    """A budget threshold is reached in the current period (fairshare.control.budgets): reported once;
    `action` says what follows (alert: nothing else; shrink and deprioritize come as quota changes through
    the transitions, hold as `HoldQueues`), unless `dry_run`."""

    budget: str
    team: str | None
    percent: int
    action: str  # alert | shrink | deprioritize | hold (ledger_spec.BudgetAction)
    used: str  # in `unit`, two decimals
    limit: str
    unit: str  # e.g. "GPU-hours", "GiB-hours", or the currency of a cost budget ("USD")
    dry_run: bool
    why: str


@dataclass(frozen=True, slots=True)
class BudgetLifted:
    """A budget's enforcement (`action`) ends: a new period started, or the consumption fell below."""

    budget: str
    team: str | None
    action: str
    why: str


@dataclass(frozen=True, slots=True)
class HoldPending:
    """Deactivate a pending experiment (spec.active=false; it holds no quota, nothing is evicted) that Kueue
    would otherwise admit with the quota freed for `beneficiary`; `Reactivate` releases it."""

    workload: WorkloadKey
    beneficiary: WorkloadKey
    why: str


@dataclass(frozen=True, slots=True)
class HoldQueues:
    """Kueue stopPolicy Hold (hold=True) or None on the team's LocalQueues ("namespace/name"). The operator
    renders it into the LocalQueues; the simulator holds the queues of its Kueue."""

    team: str
    local_queues: tuple[str, ...]
    hold: bool
    why: str


@dataclass(frozen=True, slots=True)
class StormDetected:
    """An eviction storm seen (fairshare.control.storms), reported once, with the response: the operator
    posts a Warning Event and counts it (qm_eviction_storms_total), the simulator reports it. The response
    itself comes as its own actions (`PushWeights` back to safe weights, `HoldPending` of the preemptor)."""

    preemptor: str
    victims: tuple[WorkloadKey, ...]
    evictions: int
    per_minute: float
    sources: tuple[str, ...]
    response: StormResponse
    why: str


# --------------------------------------------------------------------------------------------- idle GPUs


@dataclass(frozen=True, slots=True)
class MarkIdle:
    """An experiment whose GPUs were idle over the window is warned (fairshare.control.idle): an Event on the
    Workload and on its owner (the Job), and, unless `dry_run`, the annotation queuemanager.dev/idle-reclaim-
    at with `reclaim_at` (RFC 3339). Again when `reclaim_at` moves (a keep-idle annotation)."""

    workload: WorkloadKey
    owner: Target | None  # the Workload's controller (a Job), for its Event
    reclaim_at: float
    dry_run: bool
    what: str
    why: str


@dataclass(frozen=True, slots=True)
class UnmarkIdle:
    """A warned workload is busy again, or no longer holds quota: the annotation is removed and it is said
    (unless `dry_run`, which set no annotation)."""

    workload: WorkloadKey
    owner: Target | None
    dry_run: bool
    why: str


@dataclass(frozen=True, slots=True, init=False)
class WakeAt:
    """Call the controller again at `at` (a time-dependent input changes then) even if nothing happens."""

    at: float
    why: str

    def __init__(self, at: float, why: str) -> None:
        # (init=False: a dataclass-generated __init__ runs interpreted even compiled; scheduler/types.py)
        object.__setattr__(self, "at", at)
        object.__setattr__(self, "why", why)


Action = (
    StartTransition
    | AdvanceTransition
    | WaitForDrain
    | FinishTransition
    | CancelTransition
    | BlockTransition
    | ApplyQuota
    | PushWeights
    | RequestEviction
    | Reactivate
    | RecordAudit
    | WakeAt
    | BudgetCrossed
    | BudgetLifted
    | HoldQueues
    | HoldPending
    | StormDetected
    | MarkIdle
    | UnmarkIdle
)
