"""Run a loaded scenario: every variant x replication (serially or on a process pool:
simulations/executor.py), then summaries, the comparison, the recommendation, and what the report plots.

Every run is deterministic (its arrivals come from the seed and the replication, its decisions from the
core), so the outcome is the same whichever number of processes runs it (`qm simulate --jobs N`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from contextlib import closing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol, TextIO

from fairshare.durations import format_duration
from fairshare.errors import InputError, Location
from fairshare.snapshot import FAST, FastPaths, Snapshot

from .activity import with_activity
from .cluster import cluster_state, policy_timeline
from .executor import Executor, RunJob, default_workers, map_jobs, progress_bar, run_job, stream_pool
from .generators import generate
from .initial import recorded_jobs
from .jobs import JobSpec
from .loader import LoadedScenario, ResolvedVariant
from .model import FewerCollections
from .objectives import Objective, check_objectives, default_objectives
from .recommend import recommend
from .record import RunDigest, RunResult, digest
from .rng import RandomStreams
from .scenario import Scenario
from .summary import NO_CLASS, RunSummary, Summary, summarize
from .traces import import_trace, never_fit, never_fit_warning
from .whatif import Arm, compare, metric_info, short_label


def queue_limits(scenario: Scenario, base_dir: Path) -> dict[str, dict[str, int]]:
    """Per LocalQueue ("namespace/name") and resource, the most one workload could ever be admitted with:
    its ClusterQueue's potential available quota (nominal plus what the cohort can lend, capped by
    borrowingLimit: Kueue's `PotentialAvailable`, pkg/cache/resource_node.go) on its best flavor, under
    the policy at t=0 or after any of its edits (a job that fits after an edit is not "never")."""
    timeline = policy_timeline(scenario, base_dir)
    policies = [None] if timeline is None else [timeline.initial, *(p for _, p in timeline.edits)]
    out: dict[str, dict[str, int]] = {}
    for policy in policies:
        state = cluster_state(scenario, base_dir, policy)
        snapshot = Snapshot.from_state(state)
        for key, lq in state.local_queues.items():
            if lq.cluster_queue not in state.cluster_queues:
                continue
            node = snapshot.cluster_queue(lq.cluster_queue).node
            limits = out.setdefault(key, {})
            for fr in node.quotas:
                limits[fr.resource] = max(limits.get(fr.resource, 0), node.potential_available(fr))
    return out


def build_jobs(
    scenario: Scenario, base_dir: Path, replication: int, notes: list[str] | None = None
) -> list[JobSpec]:
    """All workloads of all sources, merged by arrival time (ties: source order, then index). `notes`
    receives, per trace, its import summary (rows read, skipped by reason, kept; jobs past the horizon)
    and a warning line if some of its jobs can never be admitted (the run goes on: they count as never
    admitted)."""
    streams = RandomStreams(scenario.seed, replication)
    jobs: list[JobSpec] = []
    limits: dict[str, dict[str, int]] | None = None
    for i, source in enumerate(scenario.workloads):
        try:
            if source.generator is not None:
                jobs.extend(with_activity(source, generate(
                    source, horizon=scenario.horizon, rng=streams.stream(f"source:{source.name}")), streams))
                continue
            if source.recorded is not None:  # explicit workloads (simulations/initial.py)
                jobs.extend(with_activity(source, recorded_jobs(
                    source, scenario, horizon=scenario.horizon, rng=streams.stream(f"source:{source.name}")),
                    streams))
                continue
            traced, report = import_trace(source, base_dir)
            replayed = with_activity(source, [j for j in traced if j.arrival < scenario.horizon], streams)
            jobs.extend(replayed)
        except InputError as err:
            raise err.at(field_prefix=f"workloads[{i}]") from None
        if notes is None:
            continue
        late = len(traced) - len(replayed)
        notes.append(report.summary_line(source.name) + (
            f"; {late:,} arrive after the horizon ({format_duration(scenario.horizon)}) and are not replayed"
            if late else ""))
        if limits is None:
            limits = queue_limits(scenario, base_dir)
        warning = never_fit_warning(source.name, never_fit(replayed, limits))
        if warning is not None:
            notes.append(warning)
    order = {s.name: k for k, s in enumerate(scenario.workloads)}
    jobs.sort(key=lambda j: (j.arrival, order[j.source], j.name))
    return jobs


class StopRule(Protocol):
    """When to stop replicating before the maximum (simulations/gate.py: Sequential, `qm plan`'s gate)."""

    @property
    def looks(self) -> tuple[int, ...]: ...  # replication counts to look at, ascending; the last: the maximum

    @property
    def level(self) -> float: ...  # the confidence each look reads its intervals at

    def decided(self, arms: Sequence[Arm]) -> bool: ...


@dataclass(frozen=True)
class Stopped:
    """How many replications ran of the most asked, and whether the stop rule decided at the last look."""

    ran: int
    maximum: int
    decided: bool
    level: float
    looks: int


@dataclass
class ScenarioOutcome:
    summary: Summary
    first_runs: list[RunResult]  # replication 1 of every variant (for CSVs and plots)
    digests: list[RunDigest] = field(default_factory=list)  # every run, variant-major
    change_times: dict[str, list[float]] = field(default_factory=dict)  # per variant: its policy edits
    stopped: Stopped | None = None  # with a stop rule: where it stopped


@dataclass(frozen=True)
class RunBrief:
    """What the runner keeps of one run, made in the process that ran it (`run_brief`): its summary, digest,
    size and wall time, and the whole result of replication 1 only (the CSVs, plots and report read it).
    Summarizing where the run ran spares the parent the whole result's trip back (a 14-day run's result
    pickles to about 10 MB: about 1.7 s of CPU to pickle and unpickle) and its own summarizing, which
    competed with the workers for the cores."""

    workloads: int
    events: int
    cycles: int
    wall_seconds: float
    summary: RunSummary
    digest: RunDigest
    top_class: str | None
    result: RunResult | None  # replication 1's, else None
    # The result's jobs from this index on are the replication's workload list as build_jobs makes it,
    # left out of `result` (`whole` puts them back): the parent built that list too, before any run,
    # and it is most of the result's pickle (a 14-day run's 54,000 jobs: 5.4 of 10.9 MB, 0.8 s of CPU to
    # pickle and unpickle). None: `result` has all its jobs.
    built_from: int | None = None

    def whole(self, built: Sequence[JobSpec]) -> RunResult:
        """Replication 1's whole result, `built` being its workload list (build_jobs)."""
        if self.result is None:
            raise ValueError("only replication 1's brief has a result")
        if self.built_from is None:
            return self.result
        return replace(self.result, jobs=self.result.jobs[: self.built_from] + list(built))


def run_brief(job: RunJob) -> RunBrief:
    """Run one job (`run_job`) and summarize it there: the picklable top-level function of `run_scenario`'s
    executors."""
    first = job.replication == 0
    with FewerCollections():  # building the workloads and summarizing too (simulations/model.py)
        built: list[JobSpec] | None = None
        if first and job.jobs is None:
            built = build_jobs(job.scenario, job.base_dir, job.replication)
            job = replace(job, jobs=tuple(built))
        result = run_job(job)
        summary = summarize(result, beneficiary_window=job.scenario.beneficiary_window)
    brief = RunBrief(
        workloads=len(result.jobs),
        events=result.events,
        cycles=result.cycles,
        wall_seconds=result.wall_seconds,
        summary=summary,
        digest=digest(result),
        top_class=_top_class(result) if first else None,
        result=result if first else None,
    )
    if built is None:
        return brief
    # The run puts the workloads present at t=0 (the initial state) before the built ones: what follows
    # them must be the very list built, object for object, to be left out.
    start = len(result.jobs) - len(built)
    tail = result.jobs[start:] if start >= 0 else []
    if len(tail) != len(built) or any(a is not b for a, b in zip(tail, built, strict=True)):
        return brief
    return replace(brief, result=replace(result, jobs=result.jobs[:start]), built_from=start)


def _classes(scenario: Scenario) -> set[str]:
    """The priority classes the scenario's workloads can carry ("(none)" for none)."""
    out: set[str] = set()
    for source in scenario.workloads:
        if source.generator is not None:
            mix = source.generator.priority_classes
            out.update(m.priority_class or NO_CLASS for m in mix)
            if not mix:
                out.add(NO_CLASS)
        elif source.trace is not None:
            out.add(source.trace.priority_class or NO_CLASS)
            out.update(source.trace.priority_map.values())
    return out


def _objectives(loaded: LoadedScenario) -> list[Objective]:
    base = loaded.base
    if base.objectives:
        timeline = policy_timeline(base, loaded.directory)
        state = cluster_state(base, loaded.directory, timeline.initial if timeline else None)
        check_objectives(
            base.objectives, classes=_classes(base), teams=set(state.cluster_queues), file=str(loaded.path)
        )
    return list(base.objectives)


def _top_class(run: RunResult) -> str | None:
    best: tuple[int, str] | None = None
    for i, job in enumerate(run.jobs):
        if job.priority_class is not None and (best is None or (run.priority[i], job.priority_class) > best):
            best = (run.priority[i], job.priority_class)
    return best[1] if best else None


def _runs(
    variants: Sequence[ResolvedVariant], first: int, last: int, base_dir: Path, core: FastPaths,
    workloads: Callable[[Scenario, int], list[JobSpec]] | None = None,
) -> list[RunJob]:
    """Replications first..last-1 of every variant, variant-major; `workloads`: each run's list, built here
    (None: built where it runs)."""
    return [RunJob(v.name, r, v.scenario, base_dir,
                   tuple(workloads(v.scenario, r)) if workloads is not None else None, core)
            for v in variants for r in range(first, last)]


def _key(sc: Scenario, rep: int) -> tuple[str, int]:
    return json.dumps([w.model_dump(mode="json") for w in sc.workloads] + [sc.horizon, sc.seed]), rep


def run_scenario(
    loaded: LoadedScenario,
    *,
    replications: int | None = None,
    only: Sequence[str] = (),
    progress: bool | None = None,
    log: TextIO | None = None,
    workers: int | None = None,
    core: FastPaths = FAST,
    executor: Executor = "local",
    address: str | None = None,
    until: StopRule | None = None,
) -> ScenarioOutcome:
    """Every selected variant x replication; `workers` processes (default: all cores; 1 = in this one);
    `core`: the scheduling core's exact fast paths (default) or the reference (`qm simulate --core`);
    `executor="ray"`: the runs as Ray tasks on the cluster at `address` (simulations/executor.py).
    `until`: replications up to each of its looks, stopping at the first look it finds decided (its last
    look is the maximum; the outcome is that of running exactly as many replications). A local pool runs
    every look's runs in one stream, a later look's started on the cores an earlier one leaves idle and
    dropped if that one decides; one process and Ray run a look at a time."""
    variants: list[ResolvedVariant] = [v for v in loaded.variants if not only or v.name in only]
    if not variants:
        known = ", ".join(v.name for v in loaded.variants)
        raise InputError(
            f"no variant named {', '.join(only)}; known: {known}", location=Location(file=str(loaded.path))
        )
    if not any(v.baseline for v in variants):
        # `--variant` without the declared baseline: it runs too, so every delta stays against it.
        declared = next((v for v in loaded.variants if v.baseline), loaded.variants[0])
        variants.insert(0, declared)
        if log is not None:
            log.write(f"the baseline {declared.name!r} runs too: every delta is against it\n")
    objectives = _objectives(loaded)
    reps = replications or loaded.base.replications
    looks = [k for k in until.looks if k < reps] + [reps] if until is not None else [reps]
    n = min(workers or default_workers(), len(variants) * looks[0])
    # Ray tasks build their own workload lists, as pool workers do: only the trace files' bytes are shipped
    # (once per sweep: simulations/shipping.py), not the lists.
    here = n == 1 and executor == "local"
    # A serial run builds each workload list once here (variants with the same workloads share it); a pool
    # builds them in its workers (pickling them would cost more than building them). Replication 1 of each
    # variant is always built here: a bad trace row is reported before any run starts, each trace's import
    # summary and never-fit warning is printed (a trace replays the same in every replication).
    job_cache: dict[tuple[str, int], list[JobSpec]] = {}
    noted: set[str] = set()  # each trace note once, however many variants and replications replay it

    def workloads(sc: Scenario, rep: int) -> list[JobSpec]:
        key = _key(sc, rep)
        if key not in job_cache:
            notes: list[str] = []
            try:
                job_cache[key] = build_jobs(sc, loaded.directory, rep, notes)
            except InputError as err:
                raise err.at(file=str(loaded.path)) from None
            for line in notes:
                # A warning is printed even with --quiet (log None): rc 0 is only honest with it.
                stream = log if log is not None else (sys.stderr if line.startswith("warning:") else None)
                if stream is not None and line not in noted:
                    noted.add(line)
                    stream.write(line + "\n")
        return job_cache[key]

    for v in variants:
        workloads(v.scenario, 0)
    summaries: dict[str, list[RunSummary]] = {v.name: [] for v in variants}
    first_runs: dict[str, RunResult] = {}
    digest_of: dict[tuple[str, int], RunDigest] = {}
    top: str | None = None
    lines: dict[tuple[int, int], str] = {}  # per-run log lines, written once the bar is gone (it owns stderr)
    order = {v.name: k for k, v in enumerate(variants)}
    scenario_of = {v.name: v.scenario for v in variants}
    ran, decided = 0, False

    def take(runs: Sequence[RunJob], briefs: Sequence[RunBrief]) -> None:
        """Keep one look's runs (in their job order: each variant's replications in order)."""
        nonlocal top
        for job, brief in zip(runs, briefs, strict=True):
            lines[order[job.variant], job.replication] = (
                f"{job.variant} #{job.replication + 1}: {brief.workloads} workloads, "
                f"{brief.events} events, {brief.cycles} cycles in {brief.wall_seconds:.2f}s\n"
            )
            summaries[job.variant].append(brief.summary)
            digest_of[job.variant, job.replication] = brief.digest
            if brief.result is not None:
                first_runs[job.variant] = brief.whole(workloads(scenario_of[job.variant], 0))
                if top is None:
                    top = brief.top_class

    def stop_here() -> bool:
        return until is not None and until.decided(
            [(v.name, v.description, v.baseline, summaries[v.name]) for v in variants])

    total = len(variants) * reps
    with progress_bar(total, enabled=progress, label="simulating") as bar:
        try:
            if executor == "local" and n > 1:
                # One pool for every look: a core the runs of one look leave idle (they rarely take the
                # same time) starts the next look's, dropped unread if the stop rule decides before them.
                # Each look is read only once all its runs are in, so the outcome is that of running
                # exactly as many replications, and a failure is raised only from a look that is read.
                runs = [job for first, last in zip([0, *looks], looks, strict=False)
                        for job in _runs(variants, first, last, loaded.directory, core)]
                ends = [len(variants) * look for look in looks]
                finished: dict[int, Future[RunBrief]] = {}
                read = 0  # the looks read
                width = min(workers or default_workers(), len(runs))
                with closing(stream_pool(run_brief, runs, width)) as stream:
                    for count, (i, fut) in enumerate(stream, start=1):
                        finished[i] = fut
                        bar(count, total, runs[i])
                        while read < len(looks):
                            start, end = ends[read - 1] if read else 0, ends[read]
                            failed = [j for j in range(start, end)
                                      if j in finished and finished[j].exception() is not None]
                            if failed:
                                finished[failed[0]].result()  # raises the look's first failure, in job order
                            if any(j not in finished for j in range(start, end)):
                                break
                            take(runs[start:end], [finished[j].result() for j in range(start, end)])
                            ran, read = looks[read], read + 1
                            decided = stop_here()
                            if decided:
                                break
                        if decided or read == len(looks):
                            break
            else:
                for look in looks:
                    runs = _runs(variants, ran, look, loaded.directory, core, workloads if here else None)
                    done = len(variants) * ran

                    def step(k: int, _total: int, job: RunJob, done: int = done) -> None:
                        bar(done + k, total, job)

                    # Only briefs come back (and replication 1's whole result): each round's runs in one pool.
                    take(runs, map_jobs(run_brief, runs, executor=executor, workers=n, address=address,
                                        progress=step))
                    ran = look
                    decided = stop_here()
                    if decided:
                        break
        except InputError as err:  # the model knows the field, the runner knows the file
            raise err.at(file=str(loaded.path)) from None
    if log is not None:
        log.write("".join(lines[k] for k in sorted(lines)))  # variant-major, as the runs are listed
    digests = [digest_of[v.name, r] for v in variants for r in range(ran)]  # variant-major
    arms = [(v.name, v.description, v.baseline, summaries[v.name]) for v in variants]
    goals = objectives or default_objectives(top)
    extra = [o.ref for o in goals]
    info = metric_info(arms, window=format_duration(loaded.base.beneficiary_window), extra=extra)
    levers = {v.name: v.lever_of for v in loaded.base.variants if v.lever_of is not None}
    compared = [v.model_copy(update={"lever_of": levers[v.name]}) if v.name in levers else v
                for v in compare(arms, extra)]
    recommendation = recommend(
        compared, goals, labels={k: short_label(m.label) for k, m in info.items()}, declared=bool(objectives)
    )
    summary = Summary(
        scenario=loaded.base.name,
        description=loaded.base.description,
        replications=ran,
        horizon_seconds=loaded.base.horizon,
        metric_info={k: info[k] for k in compared[0].metrics if k in info},
        variants=compared,
        recommendation=recommendation,
    )
    return ScenarioOutcome(
        summary=summary,
        first_runs=[first_runs[v.name] for v in variants],
        digests=digests,
        change_times={v.name: sorted(e.at for e in v.scenario.events) for v in variants},
        stopped=None if until is None else Stopped(ran, reps, decided, until.level, len(looks)),
    )

