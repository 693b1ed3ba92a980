"""A model of one Kueue scheduling cycle: flavor assignment, entry ordering, preemption.

Public API: :func:`schedule_cycle`, :func:`apply_cycle`, :func:`assign`, :func:`preemption_targets`,
:func:`assign_with_targets`, :class:`SchedulerConfig`, :class:`CycleResult` and the result types.
"""

from fairshare.compiled import extend_path

extend_path(__path__, __name__)  # the compiled core first, when built (fairshare/compiled.py)

from .assignments import assign, assign_with_targets, get_assignments, preemption_targets
from .commit import apply_cycle
from .cycle import schedule_cycle
from .types import (
    LESS_THAN_INITIAL_SHARE,
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    AdmissionDecision,
    AdmissionFairSharingConfig,
    Assignment,
    CycleResult,
    EntryOutcome,
    EntryStatus,
    FlavorChoice,
    Mode,
    PodSetAssignmentResult,
    PreemptionDecision,
    ScanProgress,
    ScanStart,
    SchedulerConfig,
    Target,
    next_scan,
    pending_flavors,
)

__all__ = [
    "LESS_THAN_INITIAL_SHARE",
    "LESS_THAN_OR_EQUAL_TO_FINAL_SHARE",
    "AdmissionDecision",
    "AdmissionFairSharingConfig",
    "Assignment",
    "CycleResult",
    "EntryOutcome",
    "EntryStatus",
    "FlavorChoice",
    "Mode",
    "PodSetAssignmentResult",
    "PreemptionDecision",
    "ScanProgress",
    "ScanStart",
    "SchedulerConfig",
    "Target",
    "apply_cycle",
    "assign",
    "assign_with_targets",
    "get_assignments",
    "next_scan",
    "pending_flavors",
    "preemption_targets",
    "schedule_cycle",
]
