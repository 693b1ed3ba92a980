"""The policy controller (DESIGN.md "Who does what"): from a QuotaPolicy, the observed cluster, the stored
status and the time it decides everything the service does and returns typed actions; the operator
(`queue_manager`) and the simulator (`simulations`) only apply them.

Public API: `decide(PolicyRules.of(policy), observed, stored, now, history=...) -> Decision`, the rules
(`PolicyRules`: a policy's rules resolved once per generation); `Controller`, what a shell holds: `decide`
with its memory; `PolicyController.step`, the operator's one trip (observe, decide, what is in force);
the inputs `Observed`, `PendingWorkload`, `Overrides`; the usage history `HistoryBook` (layout and
feeding); the actions (`fairshare.control.actions`).
"""

from fairshare.compiled import extend_path

extend_path(__path__, __name__)  # the compiled core first, when built (fairshare/compiled.py)

from .actions import (
    Action,
    AdvanceTransition,
    ApplyQuota,
    AuditAction,
    BlockTransition,
    BudgetCrossed,
    BudgetLifted,
    CancelTransition,
    FinishTransition,
    HoldPending,
    HoldQueues,
    MarkIdle,
    PushWeights,
    Reactivate,
    RecordAudit,
    RequestEviction,
    StartTransition,
    StormDetected,
    Target,
    UnmarkIdle,
    WaitForDrain,
    WakeAt,
)
from .cluster import ClusterView, PolicyController, Reply, StepFailed
from .decide import Decision, decide
from .experiments import PlanMemo
from .history import HistoryBook, HistoryLayout, history_weights
from .next_step import next_step
from .objects import InForce, in_force, kueue_objects
from .observe import observe
from .observed import BudgetUsage, Observed, Overrides, PendingWorkload
from .replay import Controller
from .rules import PolicyRules
from .storms import Eviction, EvictionSource, EvictionWindow, Storm, find_storms
from .transitions import Stranded, stranded_by_change

__all__ = [
    "Action",
    "AdvanceTransition",
    "ApplyQuota",
    "AuditAction",
    "BlockTransition",
    "BudgetCrossed",
    "BudgetLifted",
    "BudgetUsage",
    "CancelTransition",
    "ClusterView",
    "Controller",
    "Decision",
    "Eviction",
    "EvictionSource",
    "EvictionWindow",
    "FinishTransition",
    "HistoryBook",
    "HistoryLayout",
    "HoldPending",
    "HoldQueues",
    "InForce",
    "MarkIdle",
    "Observed",
    "Overrides",
    "PendingWorkload",
    "PlanMemo",
    "PolicyController",
    "PolicyRules",
    "PushWeights",
    "Reactivate",
    "RecordAudit",
    "Reply",
    "RequestEviction",
    "StartTransition",
    "StepFailed",
    "Storm",
    "StormDetected",
    "Stranded",
    "Target",
    "UnmarkIdle",
    "WaitForDrain",
    "WakeAt",
    "decide",
    "find_storms",
    "history_weights",
    "in_force",
    "kueue_objects",
    "next_step",
    "observe",
    "stranded_by_change",
]
