"""What the scheduler needs of one workload (Kueue's pkg/workload.Info): computed once from a
:class:`~fairshare.models.Workload`, below both the snapshot and the scheduler."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .models import ClusterQueueName, FlavorResource, LocalQueueKey, Workload, WorkloadKey


@dataclass(frozen=True, slots=True, init=False)
class WorkloadInfo:
    """What the scheduler needs of one workload, computed once.

    For an admitted workload ``usage`` is what it charges to ``cluster_queue`` and
    ``quota_reserved_time`` is set; for a pending one ``usage`` is empty.
    """

    key: WorkloadKey
    workload: Workload
    cluster_queue: ClusterQueueName
    local_queue: LocalQueueKey
    priority: int
    queue_order_time: float
    uid: str
    usage: Mapping[FlavorResource, int] = field(default_factory=dict)
    quota_reserved_time: float | None = None
    evicted: bool = False

    def __init__(
        self,
        key: WorkloadKey,
        workload: Workload,
        cluster_queue: ClusterQueueName,
        local_queue: LocalQueueKey,
        priority: int,
        queue_order_time: float,
        uid: str,
        usage: Mapping[FlavorResource, int] | None = None,
        quota_reserved_time: float | None = None,
        evicted: bool = False,
    ) -> None:
        # (written out: a dataclass-generated __init__ is interpreted even compiled; see scheduler/types.py)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "workload", workload)
        object.__setattr__(self, "cluster_queue", cluster_queue)
        object.__setattr__(self, "local_queue", local_queue)
        object.__setattr__(self, "priority", priority)
        object.__setattr__(self, "queue_order_time", queue_order_time)
        object.__setattr__(self, "uid", uid)
        object.__setattr__(self, "usage", {} if usage is None else usage)
        object.__setattr__(self, "quota_reserved_time", quota_reserved_time)
        object.__setattr__(self, "evicted", evicted)

    @classmethod
    def pending(cls, wl: Workload, cluster_queue: ClusterQueueName) -> WorkloadInfo:
        return WorkloadInfo(
            key=wl.key,
            workload=wl,
            cluster_queue=cluster_queue,
            local_queue=wl.local_queue_key,
            priority=wl.effective_priority,
            queue_order_time=wl.queue_order_time,
            uid=wl.uid or wl.key,
        )

    @classmethod
    def admitted(
        cls,
        wl: Workload,
        cluster_queue: ClusterQueueName | None = None,
        usage: Mapping[FlavorResource, int] | None = None,
        reserved_at: float | None = None,
    ) -> WorkloadInfo:
        """An admitted workload; ``usage`` defaults to its ``status.admission``."""
        cq = cluster_queue or (wl.admission.cluster_queue if wl.admission else ClusterQueueName(""))
        if usage is None:
            usage = wl.admitted_usage()
        evicted_cond = wl.condition("Evicted")
        return WorkloadInfo(
            key=wl.key,
            workload=wl,
            cluster_queue=cq,
            local_queue=wl.local_queue_key,
            priority=wl.effective_priority,
            queue_order_time=wl.queue_order_time,
            uid=wl.uid or wl.key,
            usage=dict(usage),
            quota_reserved_time=wl.quota_reserved_time if reserved_at is None else reserved_at,
            evicted=evicted_cond is not None and evicted_cond.status,
        )

    @property
    def run_start(self) -> float | None:
        """When it would have started had it never been evicted: its QuotaReserved time less the time it was
        admitted before (Kueue's status.accumulatedPastExecutionTimeSeconds, kept across evictions: pkg/
        workload/admissionchecks.go SyncAdmittedCondition). `now - run_start` is how long it has run in
        all; minRuntime counts that, so an eviction does not strip a workload of the runtime it had (the
        lost work of an eviction still counts from quota_reserved_time, the last start). None: no
        reservation time."""
        t = self.quota_reserved_time
        if t is None:
            return None
        past = self.workload.accumulated_past_execution_seconds
        return t - past if past else t

    def uses_any(self, frs: Iterable[FlavorResource]) -> bool:
        u = self.usage
        for fr in frs:  # noqa: SIM110 - a plain loop is measurably faster in the hot path
            if fr in u:
                return True
        return False
