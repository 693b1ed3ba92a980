"""Run a loaded scenario: every variant x replication, then summaries, files and the report."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from fairshare.errors import InputError, Location

from .generators import generate
from .jobs import JobSpec
from .loader import LoadedScenario, ResolvedVariant
from .model import simulate_run
from .record import RunResult
from .rng import RandomStreams
from .scenario import Scenario
from .summary import RunSummary, Summary, summarize
from .traces import import_trace
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
    arms: list[tuple[str, str, bool, list[RunSummary]]] = []
    first_runs: list[RunResult] = []
    for variant in variants:
        summaries: list[RunSummary] = []
        for rep in range(reps):
            sc = variant.scenario
            key = (json.dumps([w.model_dump(mode="json") for w in sc.workloads] + [sc.horizon, sc.seed]), rep)
            if key not in job_cache:
                try:
                    job_cache[key] = build_jobs(sc, loaded.directory, rep)
                except InputError as err:
                    raise err.at(file=str(loaded.path)) from None
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
