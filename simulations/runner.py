"""Run a loaded scenario: every variant x replication (serially or on a process pool:
simulations/executor.py), then summaries, the comparison, the recommendation, and what the report plots.

Every run is deterministic (its arrivals come from the seed and the replication, its decisions from the
core), so the outcome is the same whichever number of processes runs it (`qm simulate --jobs N`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from fairshare.durations import format_duration
from fairshare.errors import InputError, Location

from .cluster import cluster_state, policy_timeline
from .executor import RunJob, default_workers, progress_bar, run_job, run_jobs
from .generators import generate
from .jobs import JobSpec
from .loader import LoadedScenario, ResolvedVariant
from .objectives import Objective, check_objectives, default_objectives, recommend
from .record import RunDigest, RunResult, digest
from .rng import RandomStreams
from .scenario import Scenario
from .summary import NO_CLASS, RunSummary, Summary, summarize
from .traces import import_trace
from .whatif import compare, metric_info, short_label

# Above this many workloads in all runs together, the runs are done a pool's width at a time so that only
# one batch of full results is in memory (summaries and digests are kept; full results of replication 1).
ONE_BATCH_WORKLOADS = 2_000_000


def build_jobs(scenario: Scenario, base_dir: Path, replication: int) -> list[JobSpec]:
    """All workloads of all sources, merged by arrival time (ties: source order, then index)."""
    streams = RandomStreams(scenario.seed, replication)
    jobs: list[JobSpec] = []
    for i, source in enumerate(scenario.workloads):
        try:
            if source.generator is not None:
                jobs.extend(
                    generate(source, horizon=scenario.horizon, rng=streams.stream(f"source:{source.name}"))
                )
            else:
                traced, _ = import_trace(source, base_dir)
                jobs.extend(j for j in traced if j.arrival < scenario.horizon)
        except InputError as err:
            raise err.at(field_prefix=f"workloads[{i}]") from None
    order = {s.name: k for k, s in enumerate(scenario.workloads)}
    jobs.sort(key=lambda j: (j.arrival, order[j.source], j.name))
    return jobs


@dataclass
class ScenarioOutcome:
    summary: Summary
    first_runs: list[RunResult]  # replication 1 of every variant (for CSVs and plots)
    digests: list[RunDigest] = field(default_factory=list)  # every run, variant-major
    change_times: dict[str, list[float]] = field(default_factory=dict)  # per variant: its policy edits


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
) -> ScenarioOutcome:
    """Every selected variant x replication; `workers` processes (default: all cores; 1 = in this one)."""
    variants: list[ResolvedVariant] = [v for v in loaded.variants if not only or v.name in only]
    if not variants:
        known = ", ".join(v.name for v in loaded.variants)
        raise InputError(
            f"no variant named {', '.join(only)}; known: {known}", location=Location(file=str(loaded.path))
        )
    if not any(v.baseline for v in variants):
        variants[0] = ResolvedVariant(variants[0].name, variants[0].description, True, variants[0].scenario)
    objectives = _objectives(loaded)
    reps = replications or loaded.base.replications
    n = min(workers or default_workers(), len(variants) * reps)
    # A serial run builds each workload list once here (variants with the same workloads share it); a pool
    # builds them in its workers (pickling them would cost more than building them). The first list is
    # always built here: a bad trace row is reported before any run starts, and its size says whether all
    # the results fit in memory at once.
    job_cache: dict[tuple[str, int], list[JobSpec]] = {}

    def workloads(sc: Scenario, rep: int) -> list[JobSpec]:
        key = _key(sc, rep)
        if key not in job_cache:
            try:
                job_cache[key] = build_jobs(sc, loaded.directory, rep)
            except InputError as err:
                raise err.at(file=str(loaded.path)) from None
        return job_cache[key]

    first = len(workloads(variants[0].scenario, 0))
    runs = [
        RunJob(v.name, r, v.scenario, loaded.directory, tuple(workloads(v.scenario, r)) if n == 1 else None)
        for v in variants
        for r in range(reps)
    ]
    batch = len(runs) if first * len(runs) <= ONE_BATCH_WORKLOADS else n
    summaries: dict[str, list[RunSummary]] = {v.name: [] for v in variants}
    first_runs: dict[str, RunResult] = {}
    digests: list[RunDigest] = []
    by_name = {v.name: v for v in variants}
    top: str | None = None
    lines: list[str] = []  # per-run log lines, written once the bar is gone (it owns stderr meanwhile)
    with progress_bar(len(runs), enabled=progress, label="simulating") as bar:
        for start in range(0, len(runs), batch):
            chunk = runs[start : start + batch]
            offset = start

            def tick(done: int, total: int, job: RunJob, offset: int = offset) -> None:
                bar(offset + done, len(runs), job)

            try:
                results = run_jobs(chunk, workers=n, progress=tick, function=run_job)
            except InputError as err:  # the model knows the field, the runner knows the file
                raise err.at(file=str(loaded.path)) from None
            for job, result in zip(chunk, results, strict=True):
                lines.append(
                    f"{job.variant} #{job.replication + 1}: {len(result.jobs)} workloads, "
                    f"{result.events} events, {result.cycles} cycles in {result.wall_seconds:.2f}s\n"
                )
                window = by_name[job.variant].scenario.beneficiary_window
                summaries[job.variant].append(summarize(result, beneficiary_window=window))
                digests.append(digest(result))
                if job.replication == 0:
                    first_runs[job.variant] = result
                    if top is None:
                        top = _top_class(result)
    if log is not None:
        log.write("".join(lines))
    arms = [(v.name, v.description, v.baseline, summaries[v.name]) for v in variants]
    goals = objectives or default_objectives(top)
    extra = [o.ref for o in goals]
    info = metric_info(arms, window=format_duration(loaded.base.beneficiary_window), extra=extra)
    compared = compare(arms, extra)
    recommendation = recommend(
        compared, goals, labels={k: short_label(m.label) for k, m in info.items()}, declared=bool(objectives)
    )
    summary = Summary(
        scenario=loaded.base.name,
        description=loaded.base.description,
        replications=reps,
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
    )

