"""What a scenario would cost, estimated before anything is simulated, and the limits above which
`qm simulate` and `qm plan` refuse it without `--force` (issue 11, item 5: guards against runaway scenarios).

A typo such as `ratePerHour: 1e7`, `sampleInterval: 1ms` or `--replications 99999999999` is a valid scenario
that would run for days or exhaust memory: today it is caught by nothing, and the first sign is a machine
that stops answering. So before the first workload list is built, the cost is counted from the scenario
alone, in closed form (no random number is drawn, no trace row parsed), per variant:

- workloads: the expected arrivals of each generator over its window ([start, min(until, horizon)]; a
  diurnal rate averages to its mean over whole days; a profile's piecewise-constant rate integrated exactly),
  capped by its `count`; the rows of each trace file (lines less its header), capped by `limit`; recorded
  and initial workloads as listed;
- samples: horizon / sampleInterval + 1 (default interval: horizon / 200);
- budget wake-ups: how often the policy's budgets ask the controller to decide again (a rolling budget every
  1/60 of its window, at most once a second, while a threshold is reached; a calendar one at its period's
  end), counted as if every threshold were reached all along (fairshare.control.budgets.wakeups);
- events: each workload's arrival and finish, the samples, the budget wake-ups, the policy edits (evictions
  add more: this is a floor, not a bound).

Limits (one home: these constants; docs/simulator.md "Guards"): at most `MAX_RUNS` runs (variants x
replications), `MAX_WORKLOADS_PER_RUN` workloads in one run (what one worker holds in memory),
`MAX_SAMPLES_PER_RUN` samples and `MAX_WAKEUPS_PER_RUN` budget wake-ups in one run (each one a decision of
the controller), and `MAX_EVENTS` events in all runs together (about an hour on two cores at today's
speed). The horizon itself is bounded when the scenario is read
(`simulations.scenario.MAX_HORIZON`), as is every rate and weight (finite).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fairshare.control.budgets import wakeups
from fairshare.errors import InputError, Location

from .cluster import policy_timeline
from .loader import LoadedScenario
from .scenario import DiurnalArrivals, GeneratorSpec, PoissonArrivals, ProfileArrivals, Scenario, TraceSpec
from .traces import expand_paths

MAX_RUNS = 10_000
MAX_WORKLOADS_PER_RUN = 2_000_000
MAX_SAMPLES_PER_RUN = 200_000
MAX_WAKEUPS_PER_RUN = 50_000  # each a decision of the controller: ~1 ms with a few hundred workloads
MAX_EVENTS = 20_000_000

_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class VariantEstimate:
    """One run of one variant (every replication of it costs the same, in expectation)."""

    variant: str
    workloads: float
    samples: float
    edits: int
    wakeups: float = 0.0  # budget wake-ups (fairshare.control.budgets.wakeups)

    @property
    def events(self) -> float:
        return 2.0 * self.workloads + self.samples + self.wakeups + self.edits


@dataclass(frozen=True, slots=True)
class Estimate:
    replications: int
    variants: tuple[VariantEstimate, ...]

    @property
    def runs(self) -> int:
        return self.replications * len(self.variants)

    @property
    def workloads(self) -> float:
        return self.replications * sum(v.workloads for v in self.variants)

    @property
    def events(self) -> float:
        return self.replications * sum(v.events for v in self.variants)

    def line(self) -> str:
        """`about 1,234 workloads and 5,678 events in 8 runs`: what every message about it quotes."""
        runs = "1 run" if self.runs == 1 else f"{count(self.runs)} runs"
        return f"about {count(self.workloads)} workloads and {count(self.events)} events in {runs}"

    def over(self) -> str | None:
        """The first limit the estimate is above, said with the run that breaks it; None within all."""
        if self.runs > MAX_RUNS:
            return f"more than {count(MAX_RUNS)} runs (variants x replications)"
        worst = max(self.variants, key=lambda v: v.workloads)
        if worst.workloads > MAX_WORKLOADS_PER_RUN:
            return (f"more than {count(MAX_WORKLOADS_PER_RUN)} workloads in one run ({worst.variant}: "
                    f"{count(worst.workloads)})")
        dense = max(self.variants, key=lambda v: v.samples)
        if dense.samples > MAX_SAMPLES_PER_RUN:
            return (f"more than {count(MAX_SAMPLES_PER_RUN)} samples in one run ({dense.variant}: "
                    f"{count(dense.samples)}; sampleInterval)")
        woken = max(self.variants, key=lambda v: v.wakeups)
        if woken.wakeups > MAX_WAKEUPS_PER_RUN:
            return (f"more than {count(MAX_WAKEUPS_PER_RUN)} budget wake-ups in one run ({woken.variant}: "
                    f"{count(woken.wakeups)}; spec.budgets[].period.rolling)")
        if self.events > MAX_EVENTS:
            return f"more than {count(MAX_EVENTS)} events in all runs"
        return None


_SCALES = ((1e12, "trillion"), (1e9, "billion"), (1e6, "million"))


def count(n: float) -> str:
    """A count for a message: exact below a million (12,345), then three significant digits in words (6.72
    billion), 1.8e+15 from a quadrillion on, 'unbounded' for what overflowed: an estimate, said as one."""
    if not math.isfinite(n):
        return "unbounded"
    if n < 1e6:
        return f"{round(n):,}"
    shown = float(f"{n:.3g}")
    for scale, word in _SCALES:
        if scale <= shown < 1e15:
            return f"{shown / scale:.3g} {word}"
    return f"{n:.2g}"


def estimate(
    loaded: LoadedScenario, *, replications: int | None = None, only: Sequence[str] = ()
) -> Estimate:
    """The cost of `qm simulate` over the selected variants (all when `only` is empty; an unknown name is
    left to the runner, which says which names there are)."""
    chosen = [v for v in loaded.variants if not only or v.name in only] or list(loaded.variants)
    reps = replications if replications is not None else loaded.base.replications
    per = tuple(_variant(v.name, v.scenario, loaded) for v in chosen)
    return Estimate(reps, per)


def check(loaded: LoadedScenario, *, replications: int | None = None, only: Sequence[str] = (),
          force: bool = False, flag: str = "--force") -> tuple[Estimate, str | None]:
    """The estimate and the limit it is above (None within all); InputError (one line naming the file,
    the estimate and the limit) when above one and not `force`d."""
    est = estimate(loaded, replications=replications, only=only)
    over = est.over()
    if over is not None and not force:
        raise InputError(
            f"the scenario would simulate {est.line()}: {over} (simulations/guards.py); check the rates, "
            f"the horizon, the intervals and the replications, or run it anyway with {flag}",
            location=Location(file=str(loaded.path)))
    return est, over


def _variant(name: str, scenario: Scenario, loaded: LoadedScenario) -> VariantEstimate:
    workloads = 0.0
    for i, source in enumerate(scenario.workloads):
        if source.generator is not None:
            workloads += generator_arrivals(source.generator, scenario.horizon)
        elif source.trace is not None:
            try:
                workloads += trace_rows(source.trace, loaded.directory)
            except InputError as err:  # as build_jobs says it: the same file, the same field
                raise err.at(file=str(loaded.path), field_prefix=f"workloads[{i}]") from None
        elif source.recorded is not None:
            workloads += len(source.recorded)
    if scenario.initial is not None:
        workloads += len(scenario.initial.workloads)
    step = scenario.sample_interval or scenario.horizon / 200.0
    samples = math.floor(scenario.horizon / step) + 1.0
    return VariantEstimate(name, workloads, samples, len(scenario.events),
                           budget_wakeups(scenario, loaded.directory))


def budget_wakeups(scenario: Scenario, base_dir: Path) -> float:
    """The budget wake-ups of one run: each version of the policy over the time it is in force."""
    timeline = policy_timeline(scenario, base_dir)
    if timeline is None:
        return 0.0
    versions = [(0.0, timeline.initial), *((max(0.0, at), p) for at, p in timeline.edits)]
    total = 0.0
    for i, (start, policy) in enumerate(versions):
        end = versions[i + 1][0] if i + 1 < len(versions) else scenario.horizon
        if end > start:
            total += wakeups(policy, min(end, scenario.horizon) - start)
    return total


def generator_arrivals(spec: GeneratorSpec, horizon: float) -> float:
    """Expected arrivals of a generator before the horizon, capped by its count."""
    until = min(spec.until if spec.until is not None else horizon, horizon)
    window = max(0.0, until - spec.start)
    arrivals = spec.arrivals
    if isinstance(arrivals, PoissonArrivals):
        expected = arrivals.rate_per_hour / 3600.0 * window
    elif isinstance(arrivals, DiurnalArrivals):
        # rate(t) = mean (1 + a cos(...)): the cosine integrates to at most a/π days' worth of the mean
        # over any window, so the mean rate is the estimate.
        expected = arrivals.mean_rate_per_hour / 3600.0 * window
    else:
        expected = profile_integral(arrivals, spec.start, until) if window > 0 else 0.0
    return expected if spec.count is None else min(expected, float(spec.count))


def profile_integral(spec: ProfileArrivals, start: float, until: float) -> float:
    """Expected arrivals of a profile over [start, until]: its rate integrated exactly (t=0 sits `offset`
    into the period; `simulations.generators.profile_times` draws from the same rate)."""
    rates = [r / 3600.0 for r in spec.rates_per_hour]
    width = spec.period / len(rates)
    cumulative = [0.0]
    for r in rates:
        cumulative.append(cumulative[-1] + r * width)

    def upto(t: float) -> float:  # arrivals expected over [0, t) of the period's own clock
        periods, into = divmod(t, spec.period)
        k = min(len(rates) - 1, int(into // width))
        return periods * cumulative[-1] + cumulative[k] + rates[k] * (into - k * width)

    return upto(until + spec.offset) - upto(start + spec.offset)


def trace_rows(spec: TraceSpec, base_dir: Path) -> float:
    """The rows of a trace's files (lines, less each file's header), capped by its limit: an upper bound
    of the jobs it replays (rows without GPUs, without a queue or past the horizon are not)."""
    rows = 0
    for path in expand_paths(spec, base_dir):
        rows += max(0, _lines(path) - 1)
    return float(rows if spec.limit is None else min(rows, spec.limit))


def _lines(path: str) -> int:
    """Lines of a file, counted in 1 MiB chunks (a last line without its newline counts); one that cannot be
    read counts 0 here and is reported by the trace reader, which names it."""
    lines = 0
    last = b"\n"
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(_CHUNK):
                lines += chunk.count(b"\n")
                last = chunk[-1:]
    except OSError:
        return 0
    return lines + (0 if last == b"\n" else 1)
