"""A head in the cycle (Kueue pkg/scheduler/scheduler.go `entry`): its nomination and what the cycle did
with it."""

from __future__ import annotations

from dataclasses import dataclass

from fairshare.models import FlavorResource
from fairshare.snapshot import ClusterQueueSnapshot
from fairshare.workload import WorkloadInfo

from .types import Assignment, EntryStatus, ScanProgress, Target


@dataclass(slots=True, init=False)
class Entry:
    info: WorkloadInfo
    cq: ClusterQueueSnapshot
    assignment: Assignment
    targets: list[Target]
    status: EntryStatus
    reason: str
    immediate: bool
    pending_preemption: bool
    requeue_reason: str
    reserved: dict[FlavorResource, int]
    scan: ScanProgress | None  # entry.LastAssignment (None: cleared)

    def __init__(
        self,
        info: WorkloadInfo,
        cq: ClusterQueueSnapshot,
        assignment: Assignment,
        targets: list[Target],
        scan: ScanProgress | None = None,
    ) -> None:
        # (written out: a dataclass-generated __init__ is interpreted even compiled; see scheduler/types.py)
        self.info = info
        self.cq = cq
        self.assignment = assignment
        self.targets = targets
        self.status = EntryStatus.WAITING
        self.reason = ""
        self.immediate = False
        self.pending_preemption = False
        self.requeue_reason = ""
        self.reserved = {}
        self.scan = scan
