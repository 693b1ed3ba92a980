"""Commit one cycle's decisions to the snapshot (the caller's step after ``schedule_cycle``, which leaves
the snapshot unchanged): preempted victims released first, then admitted workloads charged, as Kueue's
cache sees evictions complete before the preemptor is assumed (pkg/scheduler/scheduler.go)."""

from __future__ import annotations

from ..snapshot import Snapshot
from .types import CycleResult


def apply_cycle(snapshot: Snapshot, result: CycleResult) -> None:
    for victim in result.preempted_keys():
        if victim in snapshot.workloads:
            snapshot.remove_workload(victim)
    for info in result.admitted_infos():
        snapshot.add_workload(info)
