"""Measurement of one run (a sink, as Armada's simulator has one): per-workload columns, per-ClusterQueue
integrals, cluster-wide integrals (capacity present, quota handed out, stranded and idle capacity), samples,
the eviction and quota logs, when each planner eviction's beneficiary was admitted, and the controller's
actions; `result()` assembles the `RunResult`. The simulation reports what happens; nothing here changes
what happens.

Capacity (docs/simulator.md, "Definitions"): C is the scenario's `cluster.capacity` of the primary
resource, else the ClusterQueues' and Cohorts' nominal quota at t=0. The simulator models no nodes: what
the quotas let Kueue admit is taken to exist, so the capacity present at t is max(C, Σ nominal(t),
usage(t)); the part above C is reported as overcommitted, the part of C in no quota as stranded."""

from __future__ import annotations

import math

from fairshare.models import ClusterState

from .jobs import JobSpec, Profile
from .record import (
    NEVER,
    ActionRecord,
    CapacitySample,
    ClusterIntegrals,
    EvictedBy,
    PreemptionRecord,
    QuotaRecord,
    Readmission,
    RunResult,
    Sample,
)


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
        *,
        cohort_nominal: int = 0,
        declared: bool = False,
    ) -> None:
        """`nominal`: each ClusterQueue's nominal quota of `resource` at t=0; `cohort_nominal`: the Cohorts'
        own nominal quota (constant); `capacity`: C (declared, or Σ nominal at t=0)."""
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
        # What the GPUs did (simulations/activity.py), when the scenario models it: per workload, seconds at
        # 100% (x its units: active unit-seconds); a job without a profile counts as fully active.
        self.profiles: list[Profile | None] | None = None
        self.active: list[float] | None = None
        if any(j.activity is not None for j in jobs):
            self.profiles = [j.activity for j in jobs]
            self.active = [0.0] * n
        cqs = list(state.cluster_queues)
        self.running_usage: dict[str, int] = dict.fromkeys(cqs, 0)
        self.nominal = dict(nominal)
        self.usage_area: dict[str, float] = dict.fromkeys(cqs, 0.0)
        self.quota_area: dict[str, float] = dict.fromkeys(cqs, 0.0)
        self.last_change: dict[str, float] = dict.fromkeys(cqs, 0.0)
        self.pending: dict[str, int] = dict.fromkeys(cqs, 0)
        self.running: dict[str, int] = dict.fromkeys(cqs, 0)
        self.pending_units: dict[str, int] = dict.fromkeys(cqs, 0)
        self.capacity = capacity
        self.declared = declared
        self.cohort_nominal = cohort_nominal
        # Cluster-wide running totals and their integrals (advanced by _tick before every change).
        self.quota_total = cohort_nominal + sum(self.nominal.values())
        self.usage_total = 0
        self.pending_total = 0
        self.last_tick = 0.0
        self.integrals = ClusterIntegrals()
        self.capacity_samples: list[CapacitySample] = []
        self.preemptions: list[PreemptionRecord] = []
        self.restart_lost = 0.0  # unit-seconds of restart cost spent (Scenario.restart_cost), in `lost` too
        self.beneficiary_admitted_at: list[float] = []
        self._awaiting: dict[int, list[int]] = {}  # beneficiary wid -> indexes into preemptions
        self._wid_of: dict[str, int] | None = None  # workload key -> wid, built at the first planner eviction
        self.readmissions: list[Readmission] = []
        self._policy_evicted: dict[int, float] = {}  # wid -> when the policy controller last evicted it
        self.quota_changes: list[QuotaRecord] = []
        self.actions: list[ActionRecord] = []
        self.samples: list[Sample] = []

    def _charge(self, cq: str, t: float, delta: int) -> None:
        """Integrate the CQ's usage and quota up to t, then change its usage by delta."""
        self.usage_area[cq] += self.running_usage[cq] * (t - self.last_change[cq])
        self.quota_area[cq] += self.nominal[cq] * (t - self.last_change[cq])
        self.last_change[cq] = t
        self.running_usage[cq] += delta

    def _present(self) -> int:
        """The capacity present now: C, or more when the quotas (or what they admitted) exceed it."""
        # (max's first greatest, without its generic call from compiled code)
        present = self.capacity if self.capacity >= self.quota_total else self.quota_total
        return present if present >= self.usage_total else self.usage_total

    def _tick(self, t: float) -> None:
        """Integrate the cluster-wide quantities from the last change up to t (called before each change)."""
        dt = t - self.last_tick
        if dt <= 0:
            return
        self.last_tick = t
        present = self._present()
        idle = present - self.usage_total
        acc = self.integrals
        acc.capacity += present * dt
        acc.quota += self.quota_total * dt
        acc.usage += self.usage_total * dt
        acc.stranded += max(0, self.capacity - self.quota_total) * dt
        acc.overcommitted += (present - self.capacity) * dt
        acc.idle += idle * dt
        acc.idle_while_pending += min(idle, self.pending_total) * dt

    def _pend(self, cq: str, wid: int, sign: int) -> None:
        self.pending[cq] += sign
        self.pending_units[cq] += sign * self.units[wid]
        self.pending_total += sign * self.units[wid]

    # --- what happened ---------------------------------------------------------------------------------

    def arrived(self, wid: int, t: float) -> None:
        self._tick(t)
        self._pend(self.cluster_queue_of[wid], wid, +1)

    def admitted(self, wid: int, t: float) -> None:
        self._tick(t)
        cq = self.cluster_queue_of[wid]
        self._pend(cq, wid, -1)
        self.running[cq] += 1
        if math.isnan(self.admitted_at[wid]):
            self.admitted_at[wid] = t
        self.started[wid] = t
        self._charge(cq, t, self.units[wid])
        self.usage_total += self.units[wid]
        evicted_at = self._policy_evicted.pop(wid, None)
        if evicted_at is not None:
            self.readmissions.append(
                Readmission(self.jobs[wid].key, cq, evicted_at, t, self.running_usage[cq], self.nominal[cq]))
        waiting = self._awaiting.pop(wid, None)
        if waiting is not None:
            for k in waiting:
                self.beneficiary_admitted_at[k] = t

    def released(self, wid: int, t: float, *, finished: bool) -> None:
        self._tick(t)
        cq = self.cluster_queue_of[wid]
        self.running[cq] -= 1
        self.held[wid] += t - self.started[wid]
        if self.active is not None:
            self._activity(wid, t - self.started[wid])
        self._charge(cq, t, -self.units[wid])
        self.usage_total -= self.units[wid]
        self.started[wid] = NEVER
        if finished:
            self.finished_at[wid] = t
        else:
            self._pend(cq, wid, +1)  # evicted: pending again (queued or held)

    def _activity(self, wid: int, ran: float) -> None:
        """An attempt that held quota `ran` seconds: what its GPUs did (its profile, from the attempt's
        start)."""
        if self.active is None or self.profiles is None:
            return
        profile = self.profiles[wid]
        self.active[wid] += ran if profile is None else profile.active_seconds(ran)

    def restarted(self, wid: int, seconds: float) -> None:
        """An attempt that finished spent `seconds` first on its restart (pod start, checkpoint reload): lost
        work (an evicted attempt's is in the eviction's)."""
        self.lost[wid] += seconds
        self.restart_lost += seconds * self.units[wid]

    def evicted(
        self, wid: int, key: str, t: float, by: EvictedBy, preemptor: str, reason: str, lost: float,
        restart: float = 0.0,
    ) -> None:
        """`lost`: the attempt's run time not kept (its restart cost included, `restart` of it)."""
        self.evictions[wid] += 1
        self.lost[wid] += lost
        self.restart_lost += restart * self.units[wid]
        self.preemptions.append(
            PreemptionRecord(t, key, self.cluster_queue_of[wid], by, preemptor, reason, lost, self.units[wid])
        )
        self.beneficiary_admitted_at.append(NEVER)
        if by == EvictedBy.PLANNER or by == EvictedBy.TRANSITION:
            self._policy_evicted[wid] = t
        if by == EvictedBy.PLANNER:
            self._await_beneficiary(preemptor, len(self.preemptions) - 1)
        elif by == EvictedBy.IDLE:
            # Reclaimed for idle GPUs: it stays deactivated (fairshare.control.idle), no demand waiting.
            self._pend(self.cluster_queue_of[wid], wid, -1)

    def _await_beneficiary(self, key: str, index: int) -> None:
        """A planner eviction is for a pending beneficiary: note its next admission (issue 14's check that
        the planned victims' quota went to the workload they were evicted for)."""
        if self._wid_of is None:
            self._wid_of = {job.key: i for i, job in enumerate(self.jobs)}
        wid = self._wid_of.get(key)
        if wid is not None:
            self._awaiting.setdefault(wid, []).append(index)

    def quota_set(
        self, t: float, cq: str, flavor: str, resource: str, nominal: int, total: int, note: str
    ) -> None:
        """A quota change; `total` is the CQ's new nominal of the primary resource (all flavors)."""
        self._tick(t)
        self._charge(cq, t, 0)
        self.quota_total += total - self.nominal[cq]
        self.nominal[cq] = total
        self.quota_changes.append(QuotaRecord(t, cq, flavor, resource, nominal, note))

    def action(self, record: ActionRecord) -> None:
        self.actions.append(record)

    def sample(self, t: float) -> None:
        self._tick(t)
        for cq in sorted(self.running_usage):
            self.samples.append(
                Sample(
                    t,
                    cq,
                    self.running_usage[cq],
                    self.nominal[cq],
                    self.pending[cq],
                    self.running[cq],
                    self.pending_units[cq],
                )
            )
        self.capacity_samples.append(
            CapacitySample(t, self._present(), self.quota_total, self.usage_total, self.pending_total)
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
                if self.active is not None:
                    self._activity(wid, horizon - s)
        for cq in self.running_usage:
            self._charge(cq, horizon, 0)
        self._tick(horizon)
        acc = self.integrals
        integrals = ClusterIntegrals(**{k: v / 1000.0 for k, v in vars(acc).items()})
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
            capacity_declared=self.declared,
            cluster=integrals,
            capacity_samples=self.capacity_samples,
            preemptions=self.preemptions,
            beneficiary_admitted_at=self.beneficiary_admitted_at,
            readmissions=self.readmissions,
            quota_changes=self.quota_changes,
            samples=self.samples,
            actions=self.actions,
            restart_seconds=self.restart_lost / 1000.0,
            active_seconds=self.active,
            events=events,
            cycles=cycles,
            notes=notes,
        )
