"""Where `make demo`'s time goes: start-up, the runs (variants x replications, on the executor's pool),
summary.json and the CSVs, the report (matplotlib's import, the four figures, the template).

    .venv/bin/python -m benchmarks demo      # make bench BENCH=demo

QM_BENCH_DEMO_SCENARIO (default: the bundled frontier-shrink), QM_BENCH_DEMO_JOBS (default: all cores).
Wall and CPU seconds (CPU of this process and of the pool's workers), since the machine is shared.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ROOT / "simulations" / "scenarios" / "frontier-shrink.yaml"


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _timed(label: str, fn: Callable[[], T]) -> T:
    wall, cpu = time.perf_counter(), _cpu()
    out = fn()
    print(f"  {label:<38} {time.perf_counter() - wall:7.2f} s wall {_cpu() - cpu:7.2f} s CPU", flush=True)
    return out


def main() -> None:
    scenario = Path(os.environ.get("QM_BENCH_DEMO_SCENARIO", str(DEFAULT)))
    jobs_env = os.environ.get("QM_BENCH_DEMO_JOBS")
    workers = int(jobs_env) if jobs_env else None
    load = os.getloadavg()[0]
    print(f"scenario {scenario.name}, jobs {workers or os.cpu_count()}, load average {load:.1f}")
    qm = [sys.executable, "-m", "qm", "simulate", "--schema"]
    _timed("start-up (qm simulate --schema)", lambda: subprocess.run(qm, check=True, capture_output=True))

    from simulations.loader import load_scenario
    from simulations.outputs import write_run_files, write_summary
    from simulations.plots import pyplot
    from simulations.report import write_report
    from simulations.runner import run_scenario

    loaded = _timed("load the scenario", lambda: load_scenario(scenario))
    outcome = _timed("the runs", lambda: run_scenario(loaded, progress=False, workers=workers))
    walls = [r.run.wall_seconds for v in outcome.summary.variants for r in v.replications]
    print(f"    {len(walls)} runs: {sum(walls):.2f} s of run wall in all, longest {max(walls):.2f} s")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        _timed("summary.json and the CSVs", lambda: (write_summary(out, outcome.summary),
                                                     write_run_files(out, outcome.first_runs)))
        _timed("report: import matplotlib", pyplot)
        _timed(
            "report: 4 figures and the template",
            lambda: write_report(
                out,
                outcome.summary,
                outcome.first_runs,
                digests=outcome.digests,
                change_times=outcome.change_times,
            ),
        )
