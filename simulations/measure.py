"""Measurement of one run (a sink, as Armada's simulator has one): per-workload columns, per-ClusterQueue
integrals, samples, the eviction and quota logs and the controller's actions; `result()` assembles the
`RunResult`. The simulation reports what happens; nothing here changes what happens."""

from __future__ import annotations

import math

from fairshare.models import ClusterState

from .jobs import JobSpec
from .record import NEVER, ActionRecord, PreemptionRecord, QuotaRecord, RunResult, Sample


class Measurement:
    def __init__(
        self,
        jobs: list[JobSpec],
        cluster_queue_of: list[str],
        priority: list[int],
        state: ClusterState,
        resource: str,
        nominal: dict[str, int],
        capacity: int,
    ) -> None:
        n = len(jobs)
        self.jobs = jobs
        self.resource = resource
        self.cluster_queue_of = cluster_queue_of
        self.priority = priority
        self.admitted_at: list[float] = [NEVER] * n
        self.finished_at: list[float] = [NEVER] * n
        self.evictions: list[int] = [0] * n
        self.lost: list[float] = [0.0] * n
        self.held: list[float] = [0.0] * n
        self.started: list[float] = [NEVER] * n  # start of the current attempt (NaN: not running)
        self.units: list[int] = [j.total(resource) for j in jobs]
        cqs = list(state.cluster_queues)
        self.running_usage: dict[str, int] = dict.fromkeys(cqs, 0)
        self.nominal = dict(nominal)
        self.usage_area: dict[str, float] = dict.fromkeys(cqs, 0.0)
        self.quota_area: dict[str, float] = dict.fromkeys(cqs, 0.0)
        self.last_change: dict[str, float] = dict.fromkeys(cqs, 0.0)
        self.pending: dict[str, int] = dict.fromkeys(cqs, 0)
        self.running: dict[str, int] = dict.fromkeys(cqs, 0)
        self.capacity = capacity
        self.preemptions: list[PreemptionRecord] = []
        self.quota_changes: list[QuotaRecord] = []
        self.actions: list[ActionRecord] = []
        self.samples: list[Sample] = []

    def _charge(self, cq: str, t: float, delta: int) -> None:
        """Integrate the CQ's usage and quota up to t, then change its usage by delta."""
        self.usage_area[cq] += self.running_usage[cq] * (t - self.last_change[cq])
        self.quota_area[cq] += self.nominal[cq] * (t - self.last_change[cq])
        self.last_change[cq] = t
        self.running_usage[cq] += delta

    # --- what happened ---------------------------------------------------------------------------------

    def arrived(self, wid: int) -> None:
        self.pending[self.cluster_queue_of[wid]] += 1

    def admitted(self, wid: int, t: float) -> None:
        cq = self.cluster_queue_of[wid]
        self.pending[cq] -= 1
        self.running[cq] += 1
        if math.isnan(self.admitted_at[wid]):
            self.admitted_at[wid] = t
        self.started[wid] = t
        self._charge(cq, t, self.units[wid])

    def released(self, wid: int, t: float, *, finished: bool) -> None:
        cq = self.cluster_queue_of[wid]
        self.running[cq] -= 1
        self.held[wid] += t - self.started[wid]
        self._charge(cq, t, -self.units[wid])
        self.started[wid] = NEVER
        if finished:
            self.finished_at[wid] = t
        else:
            self.pending[cq] += 1  # evicted: pending again (queued or held)

    def evicted(
        self, wid: int, key: str, t: float, by: str, preemptor: str, reason: str, lost: float
    ) -> None:
        self.evictions[wid] += 1
        self.lost[wid] += lost
        self.preemptions.append(
            PreemptionRecord(t, key, self.cluster_queue_of[wid], by, preemptor, reason, lost, self.units[wid])
        )

    def quota_set(
        self, t: float, cq: str, flavor: str, resource: str, nominal: int, total: int, note: str
    ) -> None:
        """A quota change; `total` is the CQ's new nominal of the primary resource (all flavors)."""
        self._charge(cq, t, 0)
        self.nominal[cq] = total
        self.quota_changes.append(QuotaRecord(t, cq, flavor, resource, nominal, note))

    def action(self, record: ActionRecord) -> None:
        self.actions.append(record)

    def sample(self, t: float) -> None:
        for cq in sorted(self.running_usage):
            self.samples.append(
                Sample(t, cq, self.running_usage[cq], self.nominal[cq], self.pending[cq], self.running[cq])
            )

    # --- the result -------------------------------------------------------------------------------------

    def result(
        self,
        *,
        variant: str,
        replication: int,
        horizon: float,
        warmup: float,
        events: int,
        cycles: int,
        notes: list[str],
    ) -> RunResult:
        running_at_end = [not math.isnan(s) for s in self.started]
        for wid, s in enumerate(self.started):
            if not math.isnan(s):
                self.held[wid] += horizon - s
        for cq in self.running_usage:
            self._charge(cq, horizon, 0)
        return RunResult(
            variant=variant,
            replication=replication,
            horizon=horizon,
            warmup=warmup,
            primary_resource=self.resource,
            jobs=self.jobs,
            cluster_queue=self.cluster_queue_of,
            priority=self.priority,
            admitted_at=self.admitted_at,
            finished_at=self.finished_at,
            evictions=self.evictions,
            lost_seconds=self.lost,
            held_seconds=self.held,
            running_at_end=running_at_end,
            usage_seconds={cq: a / 1000.0 for cq, a in self.usage_area.items()},
            quota_seconds={cq: a / 1000.0 for cq, a in self.quota_area.items()},
            capacity_milli=self.capacity,
            preemptions=self.preemptions,
            quota_changes=self.quota_changes,
            samples=self.samples,
            actions=self.actions,
            events=events,
            cycles=cycles,
            notes=notes,
        )
