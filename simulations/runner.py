"""Run a loaded scenario: every variant x replication, then summaries, files and the report."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from fairshare.durations import format_duration
from fairshare.errors import InputError, Location
from fairshare.snapshot import Snapshot

from .cluster import cluster_state, policy_timeline
from .generators import generate
from .jobs import JobSpec
from .loader import LoadedScenario, ResolvedVariant
from .model import simulate_run
from .record import RunResult
from .rng import RandomStreams
from .scenario import Scenario
from .summary import RunSummary, Summary, summarize
from .traces import import_trace, never_fit, never_fit_warning
from .whatif import compare

ProgressFn = Callable[[float], None]


class ProgressBar:
    """A one-line progress bar on stderr (only when stderr is a terminal, or forced)."""

    def __init__(self, label: str, *, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.label = label
        self._last = -1

    def __call__(self, fraction: float) -> None:
        if not self.enabled:
            return
        pct = int(100 * min(max(fraction, 0.0), 1.0))
        if pct == self._last:
            return
        self._last = pct
        filled = pct * 30 // 100
        self.stream.write(f"\r{self.label[:40]:<40} [{'#' * filled}{'.' * (30 - filled)}] {pct:3d}%")
        if pct == 100:
            self.stream.write("\n")
        self.stream.flush()


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
                jobs.extend(
                    generate(source, horizon=scenario.horizon, rng=streams.stream(f"source:{source.name}"))
                )
                continue
            traced, report = import_trace(source, base_dir)
            replayed = [j for j in traced if j.arrival < scenario.horizon]
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


@dataclass
class ScenarioOutcome:
    summary: Summary
    first_runs: list[RunResult]  # replication 0 of every variant (for CSVs and plots)


def run_scenario(
    loaded: LoadedScenario,
    *,
    replications: int | None = None,
    only: Sequence[str] = (),
    progress: bool | None = None,
    log: TextIO | None = None,
) -> ScenarioOutcome:
    variants: list[ResolvedVariant] = [v for v in loaded.variants if not only or v.name in only]
    if not variants:
        known = ", ".join(v.name for v in loaded.variants)
        raise InputError(
            f"no variant named {', '.join(only)}; known: {known}", location=Location(file=str(loaded.path))
        )
    if not any(v.baseline for v in variants):
        variants[0] = ResolvedVariant(variants[0].name, variants[0].description, True, variants[0].scenario)
    reps = replications or loaded.base.replications
    job_cache: dict[tuple[str, int], list[JobSpec]] = {}
    noted: set[str] = set()  # each trace note once, however many variants and replications replay it
    arms: list[tuple[str, str, bool, list[RunSummary]]] = []
    first_runs: list[RunResult] = []
    for variant in variants:
        summaries: list[RunSummary] = []
        for rep in range(reps):
            sc = variant.scenario
            key = (json.dumps([w.model_dump(mode="json") for w in sc.workloads] + [sc.horizon, sc.seed]), rep)
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
            bar = ProgressBar(f"{variant.name} #{rep + 1}/{reps}", enabled=progress)
            started = time.perf_counter()
            try:
                result = simulate_run(
                    sc,
                    job_cache[key],
                    base_dir=loaded.directory,
                    variant=variant.name,
                    replication=rep,
                    progress=bar,
                )
            except InputError as err:  # the model knows the field, the runner knows the file
                raise err.at(file=str(loaded.path)) from None
            result.wall_seconds = time.perf_counter() - started
            bar(1.0)
            if log is not None:
                log.write(
                    f"{variant.name} #{rep + 1}: {len(result.jobs)} workloads, {result.events} events, "
                    f"{result.cycles} cycles in {result.wall_seconds:.2f}s\n"
                )
            summaries.append(summarize(result))
            if rep == 0:
                first_runs.append(result)
        arms.append((variant.name, variant.description, variant.baseline, summaries))
    summary = Summary(
        scenario=loaded.base.name,
        description=loaded.base.description,
        replications=reps,
        horizon_seconds=loaded.base.horizon,
        variants=compare(arms),
    )
    return ScenarioOutcome(summary=summary, first_runs=first_runs)
