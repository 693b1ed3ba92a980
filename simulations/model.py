"""The simulation model: Kueue's timing around fairshare's decisions, in simulated time.

Every decision comes from `fairshare` (the admission cycle and its preemptions, the
pending queues with BestEffortFIFO parking, the quota-shift and experiment-preemption
planners, the usage history graph); this module only keeps time, moves workloads
between states and records what happened.

Timing (Kueue pkg/scheduler/scheduler.go): the scheduler runs a cycle whenever
something changed and keeps cycling while cycles make progress; each cycle pops one
head per ClusterQueue (pkg/cache/queue/manager.go Heads). All events at one instant
are applied first and then cycles run once for the instant: Kueue sees the state
after every simultaneous change, and the simulator saves one cycle per event.
A cycle's preemptions evict their victims at once (requeued, losing the work since
their last checkpoint); the preemptor is admitted by a later cycle at the same instant,
as in Kueue where it waits for the evictions to complete.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from fairshare.errors import InputError, Location
from fairshare.history.decay import HalfLife
from fairshare.history.graph import UsageHistoryGraph
from fairshare.history.paths import NodeKind, NodePath
from fairshare.manifests import load_yaml_documents, parse_manifests
from fairshare.models import ClusterState, FlavorResource, PodSet, ResourceQuota, Workload
from fairshare.queues import QueueManager
from fairshare.scheduler.cycle import schedule_cycle
from fairshare.scheduler.types import SchedulerConfig
from fairshare.snapshot import Snapshot
from fairshare.workload import WorkloadInfo

from .engine import EventQueue, Kind
from .jobs import JobSpec
from .policies import ExperimentPreemptor, QuotaShifter
from .record import NEVER, PreemptionRecord, QuotaRecord, RunResult, Sample
from .scenario import Scenario

# A guard against a cycle loop that never settles at one instant (e.g. two workloads
# preempting each other forever); Kueue would spin the same way, so we stop and note it.
MAX_CYCLES_PER_INSTANT = 10_000
PRIMARY_RESOURCE = "nvidia.com/gpu"


def cluster_state(scenario: Scenario, base_dir: Path) -> ClusterState:
    """The cluster's Kueue objects: manifest files, inline objects, or a rendered QuotaPolicy."""
    docs: list[dict[str, object]] = []
    for i, name in enumerate(scenario.cluster.manifests):
        path = Path(name) if Path(name).is_absolute() else base_dir / name
        try:
            docs.extend(load_yaml_documents(path))
        except InputError as err:
            raise err.at(field_prefix=f"cluster.manifests[{i}]") from None
    docs.extend(scenario.cluster.objects)
    if scenario.cluster.quota_policy is not None:
        docs.extend(render_quota_policy(scenario.cluster.quota_policy, base_dir))
    return parse_manifests(docs, file=None)


def render_quota_policy(policy: str | dict[str, object], base_dir: Path) -> list[dict[str, object]]:
    from fairshare.policy import load_policy_file, parse_policy, render

    if isinstance(policy, str):
        path = Path(policy) if Path(policy).is_absolute() else base_dir / policy
        qp = load_policy_file(path)
    else:
        qp = parse_policy(policy, file="cluster.quotaPolicy")
    return [dict(obj) for obj in render(qp)]


def primary_resource(state: ClusterState) -> str:
    covered = sorted(
        {r for cq in state.cluster_queues.values() for g in cq.resource_groups for r in g.covered_resources}
    )
    if PRIMARY_RESOURCE in covered or not covered:
        return PRIMARY_RESOURCE
    return covered[0]


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
    ) -> None:
        self.scenario = scenario
        self.jobs = jobs
        self.variant = variant
        self.replication = replication
        self.progress = progress
        self.horizon = scenario.horizon
        self.quantum = scenario.time_quantum
        self.checkpoint = scenario.checkpoint_interval
        state = cluster_state(scenario, base_dir)
        self.state = state
        self.snapshot = Snapshot.from_state(state)
        self.config = SchedulerConfig(fair_sharing=scenario.scheduler.fair_sharing)
        if scenario.scheduler.preemption_strategies:
            self.config = SchedulerConfig(
                fair_sharing=scenario.scheduler.fair_sharing,
                fair_sharing_strategies=tuple(scenario.scheduler.preemption_strategies),
            )
        self.queues = QueueManager.from_snapshot(self.snapshot, self.config, pending=())
        self.resource = primary_resource(state)
        self.events = EventQueue()
        n = len(jobs)
        self.cq_of: list[str] = [""] * n
        self.priority: list[int] = [0] * n
        self.admitted_at: list[float] = [NEVER] * n
        self.finished_at: list[float] = [NEVER] * n
        self.evictions: list[int] = [0] * n
        self.lost: list[float] = [0.0] * n
        self.held: list[float] = [0.0] * n
        self.remaining: list[float] = [j.duration for j in jobs]
        self.started: list[float] = [NEVER] * n  # start of the current attempt (NaN: not running)
        self.finish_due: list[float] = [NEVER] * n
        self.units: list[int] = [j.total(self.resource) for j in jobs]
        self.index: dict[str, int] = {}
        self.workloads: list[Workload | None] = [None] * n
        self.running_usage: dict[str, int] = {cq: 0 for cq in state.cluster_queues}
        self.nominal: dict[str, int] = {cq: self._nominal(cq) for cq in state.cluster_queues}
        self.usage_area: dict[str, float] = dict.fromkeys(state.cluster_queues, 0.0)
        self.quota_area: dict[str, float] = dict.fromkeys(state.cluster_queues, 0.0)
        self.last_change: dict[str, float] = dict.fromkeys(state.cluster_queues, 0.0)
        self.pending: dict[str, int] = dict.fromkeys(state.cluster_queues, 0)
        self.running: dict[str, int] = dict.fromkeys(state.cluster_queues, 0)
        self.capacity = sum(self.nominal.values()) + sum(
            q.nominal
            for c in state.cohorts.values()
            for g in c.resource_groups
            for f in g.flavors
            for r, q in f.resources
            if r == self.resource
        )
        self.preemptions: list[PreemptionRecord] = []
        self.quota_changes: list[QuotaRecord] = []
        self.samples: list[Sample] = []
        self.root_of: dict[str, str] = {}
        for name, cqs in self.snapshot.cluster_queues.items():
            self.root_of[name] = cqs.node.root().name if cqs.node.parent is not None else name
        self.released: set[str] = set()  # CQs whose usage dropped at this instant
        self.cycles = 0
        self.processed = 0
        self.notes: list[str] = []
        self.history = UsageHistoryGraph(HalfLife.of_seconds(scenario.fair_share.half_life), created_at=0.0)
        self.lq_path: dict[str, NodePath] = self._history_paths()
        self.shifter = QuotaShifter(self, scenario.events)
        self.planner = (
            ExperimentPreemptor(self, scenario.experiment_preemption)
            if scenario.experiment_preemption is not None and scenario.experiment_preemption.enabled
            else None
        )
        self._resolve_jobs()

    # ------------------------------------------------------------------ setup

    def _nominal(self, cq: str) -> int:
        node = self.snapshot.cluster_queue(cq).node
        return sum(q.nominal for fr, q in node.quotas.items() if fr.resource == self.resource)

    def _history_paths(self) -> dict[str, NodePath]:
        paths: dict[str, NodePath] = {}
        cohort_parent = {name: c.parent for name, c in self.state.cohorts.items()}

        def cohort_path(name: str) -> NodePath:
            chain = [name]
            seen = {name}
            while (parent := cohort_parent.get(chain[-1])) and parent not in seen:
                chain.append(parent)
                seen.add(parent)
            return NodePath.of(*((NodeKind.COHORT, c) for c in reversed(chain)))

        for key in sorted(self.state.local_queues):
            lq = self.state.local_queues[key]
            cq = self.state.cluster_queues.get(lq.cluster_queue)
            if cq is None:
                continue
            base = cohort_path(cq.cohort) if cq.cohort else NodePath.root()
            path = base.child(NodeKind.CLUSTER_QUEUE, cq.name).child(NodeKind.LOCAL_QUEUE, key)
            self.history.add_node(path)
            paths[key] = path
        return paths

    def _resolve_jobs(self) -> None:
        sources = {s.name: i for i, s in enumerate(self.scenario.workloads)}
        classes = self.state.priority_classes
        for wid, job in enumerate(self.jobs):
            lq = self.state.local_queues.get(f"{job.namespace}/{job.local_queue}")
            field = f"workloads[{sources.get(job.source, 0)}]"
            if lq is None:
                raise InputError(
                    "no such LocalQueue in the cluster",
                    location=Location(field=f"{field}.localQueue"),
                    value=f"{job.namespace}/{job.local_queue}",
                )
            self.cq_of[wid] = lq.cluster_queue
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

    def run(self) -> RunResult:
        ev = self.events
        ev.extend_sorted([(self._at(j.arrival), Kind.ARRIVAL, wid) for wid, j in enumerate(self.jobs)])
        step = self.scenario.sample_interval or self.horizon / 200.0
        k = 0
        while k * step <= self.horizon:
            ev.push(k * step, Kind.SAMPLE, 0)
            k += 1
        self.shifter.schedule(ev)
        if self.planner is not None:
            self.planner.schedule(ev)
        horizon = self.horizon
        report_every = max(1, len(self.jobs) // 100)
        arrivals = 0
        while len(ev):
            t = ev.peek_time()
            if t is None or t > horizon:
                break
            changed: set[str] = set()
            for _, kind, _, payload in ev.pop_instant():
                if kind == Kind.FINISH:
                    self._finish(payload, t, changed)
                elif kind == Kind.ARRIVAL:
                    self._arrive(payload, t)
                    arrivals += 1
                    if self.progress is not None and arrivals % report_every == 0:
                        self.progress(t / horizon)
                elif kind == Kind.POLICY:
                    self.shifter.on_event(payload, t, changed)
                elif kind == Kind.PLANNER:
                    if self.planner is not None:
                        self.planner.on_event(t, changed, payload)
                elif kind == Kind.SAMPLE:
                    self._sample(t)
            self._notify(changed)
            self._cycles(t)
            if self.released:
                again = self.shifter.after_instant(t, self.released)
                self.released.clear()
                if again:
                    self._notify(again)
                    self._cycles(t)
                    self.released.clear()
        self.processed = ev.popped
        return self._result()

    # ------------------------------------------------------------------ transitions

    def _workload(self, wid: int) -> Workload:
        wl = self.workloads[wid]
        if wl is None:
            job = self.jobs[wid]
            wl = Workload(
                namespace=job.namespace,
                name=job.name,
                queue_name=job.local_queue,
                pod_sets=(PodSet("main", job.count, job.requests),),
                priority=self.priority[wid],
                creation_timestamp=job.arrival,
                uid=f"{wid:010d}",  # creation order: Kueue's last tie-break is the UID
                priority_class=job.priority_class,
                priority_class_kind="WorkloadPriorityClass" if job.priority_class else None,
            )
            self.workloads[wid] = wl
        return wl

    def _arrive(self, wid: int, t: float) -> None:
        self._enqueue(wid, t)

    def _enqueue(self, wid: int, t: float, *, counted: bool = False) -> None:
        cq = self.cq_of[wid]
        info = WorkloadInfo.pending(self._workload(wid), cq)
        self.queues.push(info)
        if not counted:
            self.pending[cq] += 1
        if self.planner is not None:
            self.planner.pending(info, t)

    def _charge(self, cq: str, t: float, delta: int) -> None:
        """Integrate the CQ's usage up to t, then change it by delta."""
        self.usage_area[cq] += self.running_usage[cq] * (t - self.last_change[cq])
        self.quota_area[cq] += self.nominal[cq] * (t - self.last_change[cq])
        self.last_change[cq] = t
        self.running_usage[cq] += delta

    def set_nominal(self, cq: str, fr: FlavorResource, nominal: int, t: float, note: str) -> None:
        """Apply a quota step decided by the quota-shift planner (kept limits unchanged)."""
        node = self.snapshot.cluster_queue(cq).node
        old = node.quota(fr)
        self.snapshot.set_quota(cq, fr, ResourceQuota(nominal, old.borrowing_limit, old.lending_limit))
        self._charge(cq, t, 0)
        self.nominal[cq] = self._nominal(cq)
        self.quota_changes.append(QuotaRecord(t, cq, fr.flavor, fr.resource, nominal, note))

    def _notify(self, changed: set[str]) -> None:
        """QueueInadmissibleWorkloads once per cohort tree that changed (it releases the whole tree)."""
        done: set[str] = set()
        for cq in sorted(changed):
            root = self.root_of[cq]
            if root not in done:
                done.add(root)
                self.queues.notify_cohort_event(cq)

    def _cycles(self, t: float) -> None:
        queues = self.queues
        for _ in range(MAX_CYCLES_PER_INSTANT):
            heads = queues.heads(t)
            if not heads:
                return
            result = schedule_cycle(self.snapshot, now=t, config=self.config, heads=heads)
            self.cycles += 1
            changed: set[str] = set()
            for p in result.preemptions:
                self.evict(p.victim, t, changed, by="kueue", preemptor=p.preemptor, reason=str(p.reason))
            for a in result.admissions:
                self._admit(a.info, t)
            queues.requeue_after_cycle(heads, result)
            self._notify(changed)
            if not result.admissions and not result.preemptions:
                return
        self.notes.append(f"t={t:.0f}s: stopped after {MAX_CYCLES_PER_INSTANT} cycles at one instant")

    def _admit(self, info: WorkloadInfo, t: float) -> None:
        wid = self.index[info.key]
        cq = info.cluster_queue
        self.snapshot.add_workload(info)
        self.pending[cq] -= 1
        if self.planner is not None:
            self.planner.admitted(info.key, t)
        self.running[cq] += 1
        if math.isnan(self.admitted_at[wid]):
            self.admitted_at[wid] = t
        self.started[wid] = t
        due = self._at(t + self.remaining[wid])
        self.finish_due[wid] = due
        self.events.push(due, Kind.FINISH, wid)
        self._charge(cq, t, self.units[wid])
        path = self.lq_path.get(info.local_queue)
        if path is not None:
            self.history.start(info.key, path, dict(info.usage), t)

    def _release(self, wid: int, t: float) -> str:
        key = self.jobs[wid].key
        info = self.snapshot.remove_workload(key)
        cq = info.cluster_queue
        self.released.add(cq)
        self.running[cq] -= 1
        self.held[wid] += t - self.started[wid]
        self._charge(cq, t, -self.units[wid])
        if info.local_queue in self.lq_path:
            self.history.stop(key, t)
        return cq

    def _finish(self, wid: int, t: float, changed: set[str]) -> None:
        if math.isnan(self.started[wid]) or self.finish_due[wid] != t:
            return  # stale: the workload was evicted after this finish was scheduled
        changed.add(self._release(wid, t))
        self.started[wid] = NEVER
        self.remaining[wid] = 0.0
        self.finished_at[wid] = t
        self.workloads[wid] = None  # never needed again: keeps a million-workload run small

    def evict(self, key: str, t: float, changed: set[str], *, by: str, preemptor: str, reason: str,
              requeue: bool = True) -> None:
        """Evict a running workload: release its quota, lose work since the last checkpoint, requeue it.

        With requeue=False the workload is deactivated, as the service evicts experiment victims
        (`spec.active=false`, docs/controlplane.md): it stays a pending Workload but is not queued
        until `reactivate`, so it cannot take back the quota its eviction freed for the beneficiary."""
        wid = self.index[key]
        if math.isnan(self.started[wid]):
            return
        ran = t - self.started[wid]
        saved = 0.0
        if self.checkpoint:
            saved = math.floor(ran / self.checkpoint) * self.checkpoint
        lost = ran - saved
        self.remaining[wid] = max(0.0, self.remaining[wid] - saved)
        cq = self._release(wid, t)
        changed.add(cq)
        self.started[wid] = NEVER
        self.finish_due[wid] = NEVER
        self.evictions[wid] += 1
        self.lost[wid] += lost
        self.preemptions.append(PreemptionRecord(t, key, cq, by, preemptor, reason, lost, self.units[wid]))
        if requeue:
            self._enqueue(wid, t)
        else:
            self.pending[cq] += 1

    def reactivate(self, key: str, t: float) -> None:
        """`spec.active=true` on a deactivated victim: Kueue requeues it (it was counted as pending)."""
        wid = self.index[key]
        self._enqueue(wid, t, counted=True)
        self.queues.notify_cohort_event(self.cq_of[wid])

    def _sample(self, t: float) -> None:
        for cq in sorted(self.running_usage):
            self.samples.append(
                Sample(t, cq, self.running_usage[cq], self.nominal[cq], self.pending[cq], self.running[cq])
            )

    # ------------------------------------------------------------------ result

    def _result(self) -> RunResult:
        h = self.horizon
        running_at_end = [not math.isnan(s) for s in self.started]
        for wid, s in enumerate(self.started):
            if not math.isnan(s):
                self.held[wid] += h - s
        for cq in self.running_usage:
            self._charge(cq, h, 0)
        return RunResult(
            variant=self.variant,
            replication=self.replication,
            horizon=h,
            warmup=self.scenario.warmup,
            primary_resource=self.resource,
            jobs=self.jobs,
            cluster_queue=self.cq_of,
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
            events=self.processed,
            cycles=self.cycles,
            notes=self.notes,
        )


def simulate_run(
    scenario: Scenario,
    jobs: list[JobSpec],
    *,
    base_dir: Path,
    variant: str,
    replication: int,
    progress: Callable[[float], None] | None = None,
) -> RunResult:
    sim = Simulation(
        scenario, jobs, base_dir=base_dir, variant=variant, replication=replication, progress=progress
    )
    return sim.run()
