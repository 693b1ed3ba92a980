"""One simulation run: the event loop and the workload lifecycle, around a simulated Kueue
(simulations/kueue.py) and, for a QuotaPolicy scenario, the policy controller (simulations/control.py,
the operator's own `fairshare.control`). Measurement goes to a sink (simulations/measure.py).

Each instant: apply its events (finishes first, then policy edits, arrivals, controller wake-ups, samples;
engine.py), then settle: the controller decides if anything it observes changed (or it asked to be woken),
its actions are applied, Kueue's cycles run; repeated until neither has anything more to do at that
instant (the operator does the same over successive reconcile ticks).

Evictions release quota and lose the work done since the last checkpoint: with `checkpointInterval: C` a
workload that ran `r` seconds keeps `floor(r/C)·C` seconds of progress; without it it restarts from zero.
Its next attempt first spends `restartCost` (pod start and checkpoint reload) holding quota: lost work too.
"""

from __future__ import annotations

import dataclasses
import gc
import math
from collections.abc import Callable
from pathlib import Path

from fairshare.control.telemetry import ActivityReading
from fairshare.errors import InputError, Location
from fairshare.models import ClusterQueueName, PodSet, Workload
from fairshare.policy.settings import IdleSettings
from fairshare.policy.status import read_status
from fairshare.scheduler.types import SchedulerConfig
from fairshare.snapshot import FAST, FastPaths
from fairshare.workload import WorkloadInfo

from .activity import FULLY_ACTIVE, SimActivity, sim_reading
from .cluster import cluster_state, policy_timeline, primary_resource
from .control import ControllerShell
from .engine import EventQueue, Kind
from .initial import by_key, holds_quota, initial_jobs, parse_workloads, pending_since
from .jobs import JobSpec, Profile
from .kueue import KueueModel
from .measure import Measurement
from .record import NEVER, EvictedBy, RunResult
from .rng import RandomStreams
from .scenario import Scenario

# Controller decisions and Kueue settles at one instant before the simulator stops and notes it (a policy
# and Kueue undoing each other forever would spin the operator the same way, tick after tick).
MAX_ROUNDS_PER_INSTANT = 100
GC_THRESHOLD = 50_000  # the cyclic collector's youngest generation during a run (simulate_run)


class FewerCollections:
    """The cyclic collector's youngest generation collected every GC_THRESHOLD net allocations while held,
    then as before. A run allocates millions of short-lived tuples and dicts, nearly all freed by reference
    counting; collected every 700 net allocations by default, the youngest generation took 4-6% of a
    14-day run (perf, 2026-12-04), and summarizing a run, with its result alive, 1% more (2026-12-06). The
    collector frees memory only: it decides nothing."""

    __slots__ = ("_threshold",)

    def __init__(self) -> None:
        self._threshold: tuple[int, int, int] = (0, 0, 0)

    def __enter__(self) -> None:
        self._threshold = gc.get_threshold()
        gc.set_threshold(GC_THRESHOLD, *self._threshold[1:])

    def __exit__(self, *exc: object) -> None:
        gc.set_threshold(*self._threshold)


class Simulation:
    """One replication of one variant."""

    def __init__(
        self,
        scenario: Scenario,
        jobs: list[JobSpec],
        *,
        base_dir: Path,
        variant: str,
        replication: int,
        progress: Callable[[float], None] | None = None,
        core: FastPaths = FAST,
        identities: dict[str, tuple[str, float]] | None = None,
    ) -> None:
        self.scenario = scenario
        # A replay of a real run: job name -> its Workload's UID and creation time (seconds from the start),
        # Kueue's last tie-breaks (queue order: creation time, then UID); other jobs draw theirs (_uid).
        self.identities: dict[str, tuple[str, float]] = dict(identities) if identities else {}
        self.jobs = jobs
        self._present = 0  # the first jobs are the workloads present at t=0 (an initial state)
        self.variant = variant
        self.replication = replication
        self.progress = progress
        self.horizon = scenario.horizon
        self.quantum = scenario.time_quantum
        self.checkpoint = scenario.checkpoint_interval
        self.timeline = policy_timeline(scenario, base_dir)
        state = cluster_state(scenario, base_dir, self.timeline.initial if self.timeline else None)
        # An initial state (simulations/initial.py): Kueue's model and the controller see wall-clock times
        # (origin + t); the event loop and the measurement keep seconds from t=0.
        initial = scenario.initial
        self.origin = initial.origin if initial is not None else 0.0
        present = parse_workloads(initial) if initial is not None else []
        if present:
            state = dataclasses.replace(state, workloads={wl.key: wl for wl in present})
            jobs = initial_jobs(scenario, present, RandomStreams(scenario.seed, replication)) + jobs
            self.jobs = jobs
            self._present = len(present)
        self.state = state
        config = SchedulerConfig(fair_sharing=scenario.scheduler.fair_sharing)
        if scenario.scheduler.preemption_strategies:
            config = SchedulerConfig(
                fair_sharing=scenario.scheduler.fair_sharing,
                fair_sharing_strategies=tuple(scenario.scheduler.preemption_strategies),
            )
        self.kueue = KueueModel(state, config, self, track_pending=self.timeline is not None, core=core,
                                eviction_release=scenario.scheduler.eviction_release)
        self.resource = primary_resource(state)
        self.events = EventQueue()
        n = len(jobs)
        self.cq_of: list[str] = [""] * n
        self.priority: list[int] = [0] * n
        self.index: dict[str, int] = {}
        self.workloads: list[Workload | None] = [None] * n
        # Kueue's last tie-break is the UID (queue order: priority, timestamp, UID, pkg/cache/queue
        # cluster_queue.go; preemption candidates: ..., QuotaReserved time, UID, common/ordering.go), and a
        # real cluster's UIDs are random: drawn from the replication's seed, so that replications show the
        # spread of outcomes ties give (creation order would always draw the same end of it). One draw per
        # workload, the wid-th draw for workload wid: every variant of a replication gives a workload the same
        # UID. Drawn as workloads are made (in wid order but for the few made out of it, kept meanwhile).
        self._uids = RandomStreams(scenario.seed, replication).stream("uid")
        self._uid_next = 0
        self._uid_ahead: dict[int, int] = {}
        self.remaining: list[float] = [j.duration for j in jobs]
        # Restart cost (Scenario.restart_cost): what an evicted workload's next attempt spends before its
        # work goes on (`restart_due`), and what the current attempt started with (`overhead`).
        self.restart_cost = scenario.restart_cost
        self.restart_due: list[float] = [0.0] * n
        self.overhead: list[float] = [0.0] * n
        self.finish_due: list[float] = [NEVER] * n
        self._resolve_jobs()
        for wid, wl in enumerate(present):  # as they are: their own priority, pod sets, UID, admission
            self.workloads[wid] = wl
            self.priority[wid] = wl.priority
            if wl.admission is not None and holds_quota(wl):
                self.cq_of[wid] = wl.admission.cluster_queue
        nominal: dict[str, int] = {cq: self._nominal(cq) for cq in state.cluster_queues}
        cohort_nominal = sum(
            q.nominal
            for c in state.cohorts.values()
            for g in c.resource_groups
            for f in g.flavors
            for r, q in f.resources
            if r == self.resource
        )
        declared = scenario.cluster.capacity_milli(self.resource)
        capacity = declared if declared is not None else sum(nominal.values()) + cohort_nominal
        self.measure = Measurement(
            jobs,
            self.cq_of,
            self.priority,
            state,
            self.resource,
            nominal,
            capacity,
            cohort_nominal=cohort_nominal,
            declared=declared is not None,
        )
        self.controller: ControllerShell | None = None
        if self.timeline is not None:
            status, history = None, None
            if initial is not None and initial.status is not None:
                status, _ = read_status(initial.status)
                stored = initial.status.get("history")
                history = stored if isinstance(stored, dict) else None
            self.controller = ControllerShell(
                self.timeline.initial, self.kueue, start=self.origin, status=status, history=history,
                generation=initial.generation if initial is not None else 1,
            )
        self.wakes: set[float] = set()
        # spec.idle: the jobs' GPU activity (workloads[].activity) is the controller's telemetry.
        self.modelled = any(j.activity is not None for j in self.jobs)
        if self.controller is not None and self.modelled:
            self.controller.activity = self._activity
        self.requeues: set[float] = set()  # times of REQUEUE events in the heap
        self.notes: list[str] = list(self.controller.notes) if self.controller is not None else []
        self._now = 0.0  # the instant being settled (Kueue's callbacks come in wall-clock time)
        self._stopped: dict[int, float] = {}  # workloads being evicted -> when their pods stopped

    # ------------------------------------------------------------------ setup

    def _nominal(self, cq: str) -> int:
        node = self.kueue.snapshot.cluster_queue(ClusterQueueName(cq)).node
        return sum(q.nominal for fr, q in node.quotas.items() if fr.resource == self.resource)

    def _resolve_jobs(self) -> None:
        sources = {s.name: i for i, s in enumerate(self.scenario.workloads)}
        classes = self.state.priority_classes
        for wid, job in enumerate(self.jobs):
            lq = self.state.local_queues.get(f"{job.namespace}/{job.local_queue}")
            present = wid < self._present
            field = f"initial.workloads[{wid}].workload.spec" if present else \
                f"workloads[{sources.get(job.source, 0)}]"
            if lq is None:
                raise InputError(
                    "no such LocalQueue in the cluster",
                    location=Location(field=f"{field}.localQueue"),
                    value=f"{job.namespace}/{job.local_queue}",
                )
            self.cq_of[wid] = lq.cluster_queue
            if present:  # its own priority (set below), whichever class kind gave it
                self.index[job.key] = wid
                continue
            if job.priority_class is not None:
                pc = classes.get(job.priority_class)
                if pc is None:
                    raise InputError(
                        "no such WorkloadPriorityClass in the cluster",
                        location=Location(field=f"{field}.priorityClass"),
                        value=job.priority_class,
                    )
                self.priority[wid] = pc.value
            self.index[job.key] = wid

    def _at(self, t: float) -> float:
        """Event time rounded up to the time quantum (0: exact)."""
        q = self.quantum
        return t if q <= 0 else math.ceil(t / q) * q

    # ------------------------------------------------------------------ run

    def _start_from_initial(self) -> None:
        """The workloads present at t=0: those holding quota run on (their finish falls due at their
        attempt's start plus their work), the others wait in Kueue's queues since they became pending (a
        deactivated one is held, as the controller left it)."""
        if not self._present or self.scenario.initial is None:
            return
        initial = self.scenario.initial
        entries = by_key(initial, [w for w in self.workloads[: self._present] if w is not None])
        holding = self.kueue.snapshot.workloads
        for wid in range(self._present):
            wl = self.workloads[wid]
            if wl is None:  # pragma: no cover - set in __init__
                continue
            self.measure.arrived(wid, 0.0)
            info = holding.get(wl.key)
            if info is not None:
                self.measure.admitted(wid, 0.0)  # the usage integrals start at t=0 ...
                start = (info.quota_reserved_time or self.origin) - self.origin
                self.measure.started[wid] = start  # ... the attempt (its lost work) where it started
                self.measure.admitted_at[wid] = start
                due = max(0.0, self._at(start + self.remaining[wid]))
                self.finish_due[wid] = due
                self.events.push(due, Kind.FINISH, wid)
                continue
            since = pending_since(entries[wl.key], wl)
            self.kueue.submit(WorkloadInfo.pending(wl, ClusterQueueName(self.cq_of[wid])), since)
            if not wl.active:
                why = "inactive at t=0"
                self.kueue.deactivate(wl.key, since, by=EvictedBy.INITIAL, preemptor="", reason=why)
        if self.controller is not None:
            self.controller.adopt(self.origin)

    def run(self) -> RunResult:
        ev = self.events
        self._start_from_initial()
        ev.extend_sorted([(self._at(j.arrival), Kind.ARRIVAL, wid)
                          for wid, j in enumerate(self.jobs) if wid >= self._present])
        step = self.scenario.sample_interval or self.horizon / 200.0
        k = 0
        while k * step <= self.horizon:
            ev.push(k * step, Kind.SAMPLE, 0)
            k += 1
        if self.timeline is not None:
            for i, (at, _) in enumerate(self.timeline.edits):
                ev.push(at, Kind.POLICY, i)
            ev.push(0.0, Kind.CONTROL, 0)
        horizon = self.horizon
        report_every = max(1, len(self.jobs) // 100)
        arrivals = 0
        while len(ev):
            t = ev.peek_time()
            if t is None or t > horizon:
                break
            wake = False
            sample = False
            self._now = t
            for _, kind, _, payload in ev.pop_instant():
                if kind == Kind.FINISH:
                    self._finish(payload, t)
                elif kind == Kind.ARRIVAL:
                    self._arrive(payload, t)
                    arrivals += 1
                    if self.progress is not None and arrivals % report_every == 0:
                        self.progress(t / horizon)
                elif kind == Kind.POLICY and self.controller is not None and self.timeline is not None:
                    self.controller.edit(self.timeline.edits[payload][1], self.origin + t)
                    wake = True
                elif kind == Kind.CONTROL:
                    self.wakes.discard(t)
                    wake = True
                elif kind == Kind.SAMPLE:
                    sample = True
                elif kind == Kind.REQUEUE:
                    self.requeues.discard(t)  # KueueModel.settle fires the timers due
            self._settle(t, wake)
            due = self.kueue.next_timer()
            if due is not None and due - self.origin not in self.requeues:
                self.requeues.add(due - self.origin)
                ev.push(due - self.origin, Kind.REQUEUE, 0)
            if sample:
                self.measure.sample(t)
        return self.measure.result(
            variant=self.variant,
            replication=self.replication,
            horizon=horizon,
            warmup=self.scenario.warmup,
            events=ev.popped,
            cycles=self.kueue.cycles,
            notes=self.notes + self.kueue.notes,
        )

    def _settle(self, t: float, wake: bool) -> None:
        ctl = self.controller
        if not wake:
            # Kueue reacts to arrivals and finishes first: its cycle runs within milliseconds of the event,
            # the operator's reconcile after it (its tick, and the starvation grace that gives Kueue the
            # first chance). A policy edit or a wake-up is the controller's to act on first.
            self.kueue.settle(self.origin + t)
        for _ in range(MAX_ROUNDS_PER_INSTANT):
            if ctl is not None and (wake or ctl.due):
                applied = ctl.step(self.origin + t)
                wake = False
                for a, note in applied.quota_steps:
                    self.measure.quota_set(
                        t,
                        a.key.team,
                        a.key.flavor,
                        a.key.resource,
                        a.quota.nominal,
                        self._nominal(a.key.team),
                        note,
                    )
                # (wall clock -> t: exact, both are near the origin's magnitude; back again is exact too)
                wake_at = None if applied.wake is None else applied.wake - self.origin
                if wake_at is not None and wake_at > t and wake_at not in self.wakes:
                    self.wakes.add(wake_at)
                    self.events.push(wake_at, Kind.CONTROL, 0)
            self.kueue.settle(self.origin + t)
            if ctl is None or not ctl.due:
                return
        self.notes.append(
            f"t={t:.0f}s: the policy controller and Kueue did not settle after "
            f"{MAX_ROUNDS_PER_INSTANT} rounds at one instant"
        )

    # ------------------------------------------------------------------ the workload lifecycle

    def _workload(self, wid: int) -> Workload:
        wl = self.workloads[wid]
        if wl is None:
            job = self.jobs[wid]
            given = self.identities.get(job.name)
            wl = Workload(
                namespace=job.namespace,
                name=job.name,
                queue_name=job.local_queue,
                pod_sets=(PodSet("main", job.count, job.requests),),
                priority=self.priority[wid],
                creation_timestamp=self.origin + (job.arrival if given is None else given[1]),
                uid=self._uid(wid) if given is None else given[0],
                priority_class=job.priority_class,
                priority_class_kind="WorkloadPriorityClass" if job.priority_class else None,
            )
            self.workloads[wid] = wl
        return wl

    def _uid(self, wid: int) -> str:
        bits = self._uid_ahead.pop(wid, None)
        while bits is None and self._uid_next <= wid:
            drawn = self._uids.getrandbits(128)
            if self._uid_next == wid:
                bits = drawn
            else:
                self._uid_ahead[self._uid_next] = drawn
            self._uid_next += 1
        if bits is None:  # pragma: no cover - a workload is made once (then kept until it finishes)
            raise RuntimeError(f"workload {wid} made twice")
        return _uid(bits)

    def _arrive(self, wid: int, t: float) -> None:
        self.measure.arrived(wid, t)
        info = WorkloadInfo.pending(self._workload(wid), ClusterQueueName(self.cq_of[wid]))
        self.kueue.submit(info, self.origin + t)

    def admitted(self, info: WorkloadInfo, t: float) -> None:
        """Kueue admitted a workload (KueueListener; `t` on the wall clock, the instant is `_now`)."""
        wid = self.index[info.key]
        now = self._now
        self.measure.admitted(wid, now)
        self.overhead[wid] = self.restart_due[wid]
        due = self._at(now + self.overhead[wid] + self.remaining[wid])
        self.finish_due[wid] = due
        self.events.push(due, Kind.FINISH, wid)
        if self.controller is not None:
            self.controller.admitted(info, t)
            profile = self.jobs[wid].activity
            idle_on = self.controller.rules.idle is not None
            if profile is not None and profile.idle_after is not None and idle_on:
                # The telemetry changes when it goes idle: the controller looks then (the operator sees it at
                # its next reading).
                idle = now + profile.idle_after
                if now < idle < due and idle not in self.wakes:
                    self.wakes.add(idle)
                    self.events.push(idle, Kind.CONTROL, 0)

    def _activity(self, at: float, settings: IdleSettings) -> ActivityReading:
        """The GPUs' activity of the admitted workloads at `at` (wall clock), as the operator reads it."""

        def lookup(key: str) -> tuple[Profile, int, float] | None:
            wid = self.index.get(key)
            if wid is None or math.isnan(self.measure.started[wid]):
                return None
            job = self.jobs[wid]
            devices = math.ceil(job.total(settings.resource) / 1000)
            return (job.activity or FULLY_ACTIVE, devices, self.origin + self.measure.started[wid])

        def keys() -> list[str]:
            return sorted(self.kueue.snapshot.workloads)

        return sim_reading(SimActivity(lookup, keys, at, settings), at, settings)

    def evicting(self, info: WorkloadInfo, t: float) -> None:
        """Kueue began evicting a workload (KueueListener; SchedulerSpec.eviction_release > 0): its pods
        stop now, so its work and its finish stop here; its quota is released at `evicted`."""
        wid = self.index[info.key]
        self.finish_due[wid] = NEVER
        self._stopped[wid] = self._now

    def evicted(self, info: WorkloadInfo, t: float, *, by: EvictedBy, preemptor: str, reason: str) -> None:
        """Kueue evicted a workload: its quota is released (KueueListener; `t` on the wall clock). Its work
        stopped now, or when its eviction began (`evicting`)."""
        wid = self.index[info.key]
        now = self._now
        ran = self._stopped.pop(wid, now) - self.measure.started[wid]
        # The restart cost spent first is no progress; the rest resumes from its last checkpoint.
        progress = max(0.0, ran - self.overhead[wid])
        saved = math.floor(progress / self.checkpoint) * self.checkpoint if self.checkpoint else 0.0
        self.remaining[wid] = max(0.0, self.remaining[wid] - saved)
        spent = min(ran, self.overhead[wid])
        self.restart_due[wid] = self.restart_cost
        self.overhead[wid] = 0.0
        self.finish_due[wid] = NEVER
        self.measure.released(wid, now, finished=False)
        self.measure.evicted(wid, info.key, now, by, preemptor, reason, ran - saved, spent)
        if self.controller is not None:
            self.controller.released(info.key, t)
            self.controller.evicted(info.key, t, by=by, preemptor=preemptor, reason=reason)

    def _finish(self, wid: int, t: float) -> None:
        if self.finish_due[wid] != t:
            return  # stale: the workload was evicted after this finish was scheduled
        self.kueue.release(self.jobs[wid].key)
        self.measure.released(wid, t, finished=True)
        if self.overhead[wid]:
            self.measure.restarted(wid, self.overhead[wid])  # held, and not the workload's work: lost
        self.remaining[wid] = 0.0
        self.finish_due[wid] = NEVER
        if self.controller is not None:
            self.controller.released(self.jobs[wid].key, self.origin + t)
        self.workloads[wid] = None  # never needed again: keeps a million-workload run small


def _uid(bits: int) -> str:
    """A UUID (version 4, as the API server assigns them) from 128 random bits."""
    h = f"{(bits & ~(0xF << 76) & ~(0x3 << 62)) | (0x4 << 76) | (0x2 << 62):032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def simulate_run(
    scenario: Scenario,
    jobs: list[JobSpec],
    *,
    base_dir: Path,
    variant: str,
    replication: int,
    progress: Callable[[float], None] | None = None,
    core: FastPaths = FAST,
) -> RunResult:
    """One run; `core`: the scheduling core's exact fast paths (default) or the reference."""
    sim = Simulation(
        scenario, jobs, base_dir=base_dir, variant=variant, replication=replication, progress=progress,
        core=core,
    )
    with FewerCollections():
        result = sim.run()
    if sim.controller is not None:
        result.actions = list(sim.controller.log)
    return result
