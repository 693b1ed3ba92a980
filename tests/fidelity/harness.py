"""One fidelity run: the slice on the real control plane, then the simulator on the same inputs, then the
comparison, and, where a target misses, the classification of the causes.

Classification (as the differential classifies a disagreement by re-running the model under another timing):

- *KWOK and the Job's life on the cluster*: the simulator is run again with each job's own measured hold time
  (admission to Finished, less its run time) instead of the mean; what that re-run removes is the per-job
  jitter of pod start and completion (KWOK's stages, the Job controller, Kueue's Finished), which no model of
  Kueue decides.
- *API latency*: the real wait of the jobs both sides admit at once on arrival (the simulator's wait is 0: the
  Job's creation, Kueue's Workload, its cycle, the status write and the watch) is latency; the simulator is
  run again with it after each arrival and each release (`SimInputs.with_latency`), and what that removes is
  the API's.
- What neither explains is the model's, and is named as such.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from devcluster import Binaries, BinariesMissing, ControlPlane, ControlPlaneError
from devcluster.nodes import NodeGroup, NodeShape

from .compare import Figures, figures, held_gpu_seconds, idle_while_pending
from .real import EDIT_OFFSET, RealRun, run_real
from .sim import Lifecycle, SimulatedRun, simulate
from .workload import BENCH, DATA, FACTOR, Quotas, edit_at, load, slice_size

# One node holding every team's quota (18 GPUs) and more: the model counts quota, not nodes, so no admitted
# pod may wait for a node (fragmentation would be a difference of the cluster, not of Kueue).
NODES = (NodeGroup(1, NodeShape(gpus=64, cpu="2000", memory="8Ti", pods="2000"), prefix="kwok-fid"),)


@dataclass(frozen=True)
class SimInputs:
    """What the simulator is given from the real run: the same arrivals (each Job's creation on the cluster,
    to the millisecond), the same UIDs and creation seconds (Kueue's last tie-breaks), the same edit time,
    the cluster's mean hold overhead."""

    jobs_n: int
    tag: str
    edit_at: float
    horizon: float
    overhead: float
    arrivals: dict[str, float]
    uids: dict[str, str]
    created: dict[str, float]
    quotas: Quotas
    latency: float = 0.0  # Kueue sees each job this long after its arrival
    release: float = 0.0  # a victim keeps its quota this long once evicted (the cluster's mean)

    def with_latency(self, latency: float) -> SimInputs:
        """The cluster's admission latency given to the simulator: each job arrives `latency` later (the
        Workload's creation, Kueue's cycle, the status write, the watch) and each hold lasts `latency` longer
        (the quota a job frees is admitted again that much after the release is seen)."""
        return dataclasses.replace(self, latency=latency, overhead=self.overhead + latency)

    def simulate(self, overheads: dict[str, float] | None = None, **model: Any) -> SimulatedRun:
        """`model`: another policy `body`, `with_edit=False` or `release` (a wrong or older model, for the
        checks' own test and the report)."""
        model.setdefault("release", self.release)
        return simulate(load(self.jobs_n), self.tag, edit_at=self.edit_at, horizon=self.horizon,
                        overhead=self.overhead, arrivals=self.arrivals, uids=self.uids, created=self.created,
                        overheads=overheads, quotas=self.quotas, latency=self.latency, **model)


@dataclass
class Outcome:
    jobs: int
    quotas: Quotas
    figures: Figures
    per_job: Figures  # the simulator given each job's own measured hold time
    real: RealRun
    simulated: SimulatedRun
    latency: float  # mean real wait of the jobs both sides admit on arrival
    inputs: SimInputs
    with_latency: Figures  # the simulator given that latency too (SimInputs.with_latency)
    released_at_once: Figures  # the simulator releasing victims at once (the model without evictionRelease)

    def real_steps(self) -> list[str]:
        return [what for _, what in sorted(self.real.steps)]

    def simulated_steps(self) -> list[str]:
        """The simulator's quota steps until the real run ended (it simulates on to its horizon)."""
        return [what for t, what in sorted(self.simulated.steps) if t <= self.real.ended]

    def service_lost(self) -> float:
        """Seconds of the whole cohort's service the cluster lost against the simulator: the quota-time
        it held beyond the simulator's (hold overhead's spread, eviction release) plus the quota it left idle
        while jobs waited beyond the simulator's (admission latency), over the cohort's GPUs. A saturated
        queue's waits accumulate it; no job waits longer for it than the whole."""
        jobs = load(self.jobs)
        held = held_gpu_seconds(jobs, self.real.jobs) - held_gpu_seconds(jobs, self.simulated.jobs)
        idle = (idle_while_pending(jobs, self.real.jobs, self.quotas.capacity)
                - idle_while_pending(jobs, self.simulated.jobs, self.quotas.capacity))
        return max(0.0, held + idle) / self.quotas.capacity

    def report(self) -> list[str]:
        overheads = sorted(self.real.overheads.values())
        lines = [
            self.figures.detail(),
            f"  slice: ITP 2021 cluster05 rows 401-{400 + self.jobs:,} ({self.jobs:,} jobs), time compressed "
            f"{FACTOR:g}x; {self.quotas.describe()} at {edit_at(load(self.jobs))}s; reclaimWithinCohort: Any",
            f"  transition steps (ClusterQueue and GPUs, as applied): real {self.real_steps()}, simulated "
            f"{self.simulated_steps()}; every job finished on the cluster: {self.real.finished}",
            f"  the cluster's hold overhead (admission to Finished, less the run time): median "
            f"{statistics.median(overheads):.2f}s, p5 {_pct(overheads, 5):.2f}s, p95 "
            f"{_pct(overheads, 95):.2f}s over {len(overheads)} uninterrupted jobs"
            if overheads else "  no uninterrupted job",
        ]
        misses = self.figures.misses()
        lines.append("  targets met (order >= 99%, mean wait deviation <= 2%)" if not misses else
                     "  TARGET MISSED: " + "; ".join(misses))
        share = 100 * self.latency / max(self.figures.mean_wait_real, 1e-9)
        lines.append("  classified: KWOK and the Job's life on the cluster: with each job's own hold time "
                     f"the simulator gives {self.per_job.line().removeprefix('fidelity: ')}")
        lines.append("  classified: API latency: the jobs both sides admit on arrival wait "
                     f"{self.latency:.2f}s on the cluster on average ({share:.2f}% of the real mean wait); "
                     "with that latency after each arrival and each release the simulator gives "
                     f"{self.with_latency.line().removeprefix('fidelity: ')}")
        delays = sorted(self.real.eviction_delays)
        if delays:
            lines.append("  modelled: a victim keeps its quota once Kueue evicts it (the Job suspended, its "
                         f"pod deleted, Kueue's release): {statistics.median(delays):.2f}s median, p95 "
                         f"{_pct(delays, 95):.2f}s on the cluster; the simulator is given the mean, "
                         f"{self.inputs.release:.2f}s (scheduler.evictionRelease), and its preemptor waits "
                         "for it; releasing at once instead gives "
                         f"{self.released_at_once.line().removeprefix('fidelity: ')}")
        close, spaced = self.figures.close_discordant, self.figures.spaced_agreement
        lines.append(f"  classified: Kueue's timing: {close} of {self.figures.discordant} pairs out of order "
                     "were admitted within 1 s of each other on the cluster (admissions are written "
                     f"asynchronously); order agreement over the pairs at least 1 s apart: {spaced:.2f}%")
        jobs = load(self.jobs)
        work = sum(j.seconds * j.gpus for j in jobs)
        held_real = held_gpu_seconds(jobs, self.real.jobs)
        held_sim = held_gpu_seconds(jobs, self.simulated.jobs)
        idle_real = idle_while_pending(jobs, self.real.jobs, self.quotas.capacity)
        idle_sim = idle_while_pending(jobs, self.simulated.jobs, self.quotas.capacity)
        mean_overhead = statistics.fmean(overheads) if overheads else 0.0
        lines.append(f"  throughput: the jobs' work is {work:,.0f} GPU-s; the cluster held quota "
                     f"{held_real:,.0f} GPU-s, the simulator {held_sim:,.0f} (the cluster's mean hold "
                     f"overhead, given to the simulator, is {mean_overhead:.2f}s); quota idle "
                     f"while jobs waited: cluster {idle_real:,.0f} GPU-s, simulator {idle_sim:,.0f}: "
                     f"{self.service_lost():.1f}s of the cohort's service lost on the cluster")
        quick = _quick(self.real.jobs, 1.0)
        lines.append(f"  evictions within 1 s of the victim's admission: cluster {quick} of "
                     f"{self.figures.evictions_real}; simulator {_quick(self.simulated.jobs, 1.0)} of "
                     f"{self.figures.evictions_sim} ({_quick(self.simulated.jobs, 0.0)} at the very instant)")
        if self.simulated.notes:
            lines.append("  simulator notes: " + "; ".join(self.simulated.notes[:3]))
        return lines


def _quick(life: dict[str, Lifecycle], within: float) -> int:
    """Evictions of an attempt that lasted at most `within` seconds."""
    return sum(1 for lc in life.values()
               for start, end in zip(lc.admissions, sorted(lc.evictions), strict=False)
               if end - start <= within)


def _pct(values: list[float], p: int) -> float:
    return values[min(len(values) - 1, len(values) * p // 100)]


def run(cp: ControlPlane, jobs_n: int, workdir: Path, *, quotas: Quotas = BENCH,
        log: Callable[[str], None] = print) -> Outcome:
    jobs = load(jobs_n)
    tag = uuid.uuid4().hex[:5]
    at = edit_at(jobs)
    drain = 900.0 + sum(j.seconds * j.gpus for j in jobs) / 10.0
    # The run goes on until every job finished and the transition (60 s from the edit, steps once drained)
    # had time to land.
    real = run_real(cp, jobs, tag, edit_at=at, workdir=workdir, drain=drain, quotas=quotas, log=log,
                    until=at + 120.0)
    # The same arrivals (each Job's creation on the cluster, to the millisecond), the same UIDs (Kueue's last
    # tie-break), the same edit time.
    arrivals = {name: life.arrival for name, life in real.jobs.items()}
    horizon = max([life.finished or 0.0 for life in real.jobs.values()] + [j.at for j in jobs]) + 600.0
    release = statistics.fmean(real.eviction_delays) if real.eviction_delays else 0.0
    inputs = SimInputs(jobs_n, tag, at + EDIT_OFFSET, horizon, real.mean_overhead(), arrivals, real.uids,
                       real.created, quotas, release=release)

    def again(overheads: dict[str, float] | None) -> SimulatedRun:
        return inputs.simulate(overheads)

    simulated, per_job = again(None), again(real.overheads)
    found = figures(jobs, real.jobs, real.order, simulated.jobs, simulated.order)
    found_per_job = figures(jobs, real.jobs, real.order, per_job.jobs, per_job.order)
    # Both sides admit it on arrival: within 2 s on the cluster, at once in the simulator.
    instant = [real.jobs[j.name] for j in jobs if simulated.jobs[j.name].admitted == arrivals[j.name]
               and (real.jobs[j.name].admitted or math.inf) - arrivals[j.name] < 2.0]
    delays = [(life.admitted or 0.0) - life.arrival for life in instant]
    latency = statistics.fmean(delays) if delays else 0.0
    late = inputs.with_latency(latency).simulate()
    found_late = figures(jobs, real.jobs, real.order, late.jobs, late.order)
    at_once = inputs.simulate(release=0.0)
    found_at_once = figures(jobs, real.jobs, real.order, at_once.jobs, at_once.order)
    return Outcome(jobs_n, quotas, found, found_per_job, real, simulated, latency, inputs, found_late,
                   found_at_once)


def save(outcome: Outcome, out: Path) -> None:
    """Every job's life on both sides (jobs.jsonl) and the operator's log, for reading a run afterwards."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / "jobs.jsonl").open("w") as f:
        for name in sorted(outcome.real.jobs):
            r, s = outcome.real.jobs[name], outcome.simulated.jobs[name]
            f.write(json.dumps({"job": name, "real": dataclasses.asdict(r), "sim": dataclasses.asdict(s),
                                "uid": outcome.real.uids.get(name), "created": outcome.real.created.get(name),
                                "overhead": outcome.real.overheads.get(name)}) + "\n")
    (out / "order.json").write_text(json.dumps({"real": outcome.real.order, "sim": outcome.simulated.order,
                                                "steps_real": outcome.real.steps,
                                                "steps_sim": outcome.simulated.steps}))


def main(jobs_n: int, out: Path | None = None) -> int:
    """The bench: its own control plane with one large KWOK node; the one line on stdout, the rest on
    stderr."""
    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    with ControlPlane(None, node_groups=NODES, log=log) as cp:
        logs = out if out is not None else cp.workdir
        logs.mkdir(parents=True, exist_ok=True)
        outcome = run(cp, jobs_n, logs, log=log)
    if out is not None:
        save(outcome, out)
    print(outcome.figures.line(), flush=True)
    for line in outcome.report():
        log(line)
    return 0 if not outcome.figures.misses() else 1


class _Parser(argparse.ArgumentParser):
    """Bad flags are bad input: one line naming the flag and the value, exit 2 (no usage block)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def parse_jobs(text: str) -> int:
    rows = slice_size()
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of jobs (1 to {rows:,})") from None
    if not 1 <= value <= rows:
        raise argparse.ArgumentTypeError(f"{value} is outside 1 to {rows:,} (the slice's jobs, {DATA.name})")
    return value


def cli(argv: list[str]) -> int:
    """`python -m tests.fidelity`: bad flags, an unusable --out and a missing control plane are one line on
    stderr and exit 2, before anything starts."""
    parser = _Parser(prog="python -m tests.fidelity", description="The trace-fidelity run (tests/fidelity).",
                     allow_abbrev=False)
    parser.add_argument("--jobs", type=parse_jobs, default=1000,
                        help="jobs of the slice to replay (default 1000)")
    parser.add_argument("--out", type=Path, default=None,
                        help="a folder for every job's life on both sides and the operator's log")
    args = parser.parse_args(argv)
    out: Path | None = args.out
    if out is not None:
        try:
            out.mkdir(parents=True, exist_ok=True)
            probe = out / ".fidelity-write-test"
            probe.write_text("")
            probe.unlink()
        except OSError as err:
            parser.error(f"argument --out: {str(out)!r} is not a writable folder ({err.strerror or err})")
    try:
        Binaries.discover()
    except BinariesMissing as err:
        print(f"python -m tests.fidelity: error: the control plane is not built: {err}", file=sys.stderr)
        return 2
    try:
        return main(args.jobs, out)
    except ControlPlaneError as err:
        print(f"python -m tests.fidelity: error: the control plane failed: {err}", file=sys.stderr)
        return 2
