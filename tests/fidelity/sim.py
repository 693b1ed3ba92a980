"""The simulator's side of the fidelity run: the same policy, the same edit at the same time, the same jobs
(arrival, GPUs, run time plus the cluster's measured overhead), in the real UIDs' order for ties."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fairshare.workload import WorkloadInfo
from simulations.jobs import JobSpec
from simulations.model import Simulation
from simulations.record import EvictedBy
from simulations.scenario import Scenario

from .workload import BENCH, GPU, FidelityJob, Quotas, edit, namespace, policy


@dataclass
class Lifecycle:
    """What happened to one job, on either side: times in seconds from the start of the run."""

    arrival: float
    admissions: list[float] = field(default_factory=list)
    evictions: list[float] = field(default_factory=list)
    finished: float | None = None

    @property
    def admitted(self) -> float | None:
        return self.admissions[0] if self.admissions else None


class _Recorder:
    """The simulation's Kueue listener, recording every admission and eviction in the order Kueue's model made
    them before passing it on (the simulator's Simulation is compiled with the core: it is wrapped, not
    subclassed)."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.order: list[tuple[float, str, str]] = []  # (t, "admit" | "evict", workload key)

    def admitted(self, info: WorkloadInfo, t: float) -> None:
        self.order.append((self.sim._now, "admit", info.key))
        self.sim.admitted(info, t)

    def evicting(self, info: WorkloadInfo, t: float) -> None:
        self.sim.evicting(info, t)

    def evicted(self, info: WorkloadInfo, t: float, *, by: EvictedBy, preemptor: str, reason: str) -> None:
        self.order.append((self.sim._now, "evict", info.key))
        self.sim.evicted(info, t, by=by, preemptor=preemptor, reason=reason)


@dataclass
class SimulatedRun:
    jobs: dict[str, Lifecycle]  # by job name
    order: list[tuple[float, str, str]]  # (t, "admit" | "evict", job name), as the model made them
    notes: list[str]
    steps: list[tuple[float, str]]  # GPU quota steps: (t, "ClusterQueue GPUs")


def simulate(jobs: list[FidelityJob], run: str, *, edit_at: float, horizon: float, overhead: float,
             arrivals: dict[str, float] | None = None, uids: dict[str, str] | None = None,
             created: dict[str, float] | None = None,
             overheads: dict[str, float] | None = None, quotas: Quotas = BENCH,
             body: dict[str, Any] | None = None, with_edit: bool = True,
             latency: float = 0.0, release: float = 0.0) -> SimulatedRun:
    """`overhead`: seconds a workload holds its quota beyond its run time on the cluster (the mean
    measured); `overheads`: each job's own, where measured (the classification's re-run). `arrivals`: when
    each Job was created on the cluster (default: its whole second); `uids` and `created`: the real
    Workloads' UIDs and creation times (whole seconds). `body` and `with_edit` change the model the simulator
    is given (the policy, and whether the edit happens): the checks' test of their own power. `latency`:
    Kueue sees each job that much after its arrival (its wait still counts from the arrival). `release`:
    how long a victim keeps its quota once Kueue evicts it (the scheduler's evictionRelease: the mean
    measured)."""
    doc = {
        "name": "fidelity",
        "horizon": f"{horizon}s",
        "seed": 1,
        # An evicted job's next pod starts like any other on KWOK: its start is in the measured hold overhead.
        "restartCost": 0,
        "scheduler": {"evictionRelease": release},
        "cluster": {"quotaPolicy": body if body is not None else policy(run, quotas)},
        # The jobs are given below; a source is needed for the file's shape only.
        "workloads": [{"name": "trace", "localQueue": f"{namespace('t0', run)}/t0-{run}", "generator": {
            "arrivals": {"kind": "poisson", "ratePerHour": 1}, "durations": {"kind": "constant", "value": 1},
            "requests": [{"resources": {GPU: 1}}], "count": 1}}],
        "events": [{"at": edit_at, "policyPatch": edit(run, quotas)}] if with_edit else [],
    }
    scenario = Scenario.model_validate(doc)
    when = {j.name: (arrivals or {}).get(j.name, float(j.at)) for j in jobs}
    ordered = sorted(jobs, key=lambda j: (when[j.name], j.name))
    specs = [
        JobSpec(name=j.name, namespace=namespace(j.team, run), local_queue=f"{j.team}-{run}",
                arrival=when[j.name] + latency, count=1,
                duration=j.seconds + (overheads or {}).get(j.name, overhead),
                requests=(("cpu", 1000), (GPU, j.gpus * 1000)), priority_class=None, source="trace")
        for j in ordered
    ]
    # The Workloads carry the real ones' UIDs and creation times to the whole second, as the API server
    # stamps them: Kueue orders pending workloads by creation time, then UID
    # (pkg/cache/queue/cluster_queue.go).
    identities = {j.name: ((uids or {}).get(j.name, str(i).zfill(10)),
                           (created or {}).get(j.name, float(math.floor(when[j.name] + latency))))
                  for i, j in enumerate(ordered)}
    sim = Simulation(scenario, specs, base_dir=Path("."), variant="fidelity", replication=0,
                     identities=identities)
    recorder = _Recorder(sim)
    sim.kueue.listener = recorder
    result = sim.run()
    by_key = {s.key: s.name for s in specs}
    out = {j.name: Lifecycle(arrival=when[j.name]) for j in jobs}
    for t, kind, key in recorder.order:
        life = out[by_key[key]]
        (life.admissions if kind == "admit" else life.evictions).append(t)
    for spec, finished in zip(result.jobs, result.finished_at, strict=True):
        if finished == finished:  # not NaN (never finished)
            out[spec.name].finished = finished
    steps = [(q.time, f"{q.cluster_queue} {q.nominal_milli // 1000}")
             for q in result.quota_changes if q.resource == GPU]
    order = [(t, kind, by_key[key]) for t, kind, key in recorder.order]
    return SimulatedRun(out, order, list(result.notes), steps)
