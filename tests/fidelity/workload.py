"""The fidelity run's inputs: a slice of a real trace, compressed in time, over three teams of one cohort,
the QuotaPolicy the operator applies and the edit (a transition) it applies in the middle.

The slice is Microsoft ITP 2021 `cluster05.csv` rows 401-1,600 (tests/data/itp-cluster05-fidelity.csv; every
job asks for 1 to 8 GPUs). Time is compressed by `FACTOR` (trace seconds per second on the cluster); why 1,000
is in tests/fidelity/README.md. Arrivals are whole seconds (rounded) from the start, run times whole seconds
(rounded, at least 1 s). Run times above `MAX_TRACE_SECONDS` (one trace day) are cut there: a handful of
multi-day jobs would otherwise hold quota for most of the run and leave little to compare.
"""

from __future__ import annotations

import csv
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "data" / "itp-cluster05-fidelity.csv"
GPU = "nvidia.com/gpu"
FACTOR = 1000.0
MAX_TRACE_SECONDS = 86400.0  # run times are cut at one trace day
TEAMS = ("t0", "t1", "t2")
NOMINAL = {"t0": 6, "t1": 6, "t2": 6}
# The edit in the middle: t0 gives 2 GPUs to t1 (a paired move: t1 gets each GPU as t0's drain frees it).
EDITED = {"t0": 4, "t1": 8}


@dataclass(frozen=True)
class Quotas:
    """Each team's GPUs before the edit, and the teams' GPUs the edit sets."""

    nominal: dict[str, int]
    edited: dict[str, int]

    @property
    def capacity(self) -> int:
        """The cohort's GPUs (a move between teams keeps the total)."""
        return sum(self.nominal.values())

    def describe(self) -> str:
        sizes = sorted(set(self.nominal.values()))
        each = f"{sizes[0]} GPUs" if len(sizes) == 1 else "GPUs " + "/".join(map(str, self.nominal.values()))
        moves = ", ".join(f"{t} {self.nominal[t]} -> {n} GPUs" for t, n in sorted(self.edited.items()))
        return f"{len(self.nominal)} ClusterQueues of {each} in one cohort; the edit: {moves}"


BENCH = Quotas(NOMINAL, EDITED)
# The CI slice's: half the GPUs, so that its 40 jobs queue (mean wait about 8 s instead of 2-3 s) and the
# cluster's latencies are a smaller share of a wait.
SMALL = Quotas({"t0": 3, "t1": 3, "t2": 3}, {"t0": 1, "t1": 5})
CPU_NOMINAL = 1000  # never the binding resource (each pod asks for 1 cpu)


@dataclass(frozen=True)
class FidelityJob:
    name: str  # the Job's name
    team: str
    at: int  # arrival, seconds from the start of the run
    gpus: int
    seconds: int  # run time on the cluster
    trace_id: str


def slice_size(path: Path = DATA) -> int:
    """How many jobs the vendored slice holds."""
    with path.open(newline="") as f:
        return sum(1 for _ in csv.DictReader(f))


def load(jobs: int, *, factor: float = FACTOR, path: Path = DATA) -> list[FidelityJob]:
    """The first `jobs` rows of the slice, compressed; each job in a team by a stable hash of its trace id."""
    out: list[FidelityJob] = []
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    if jobs > len(rows):
        raise ValueError(f"the slice has {len(rows)} jobs, not {jobs}")
    first = int(rows[0]["submission_time"])
    for i, row in enumerate(rows[:jobs]):
        trace_seconds = min(float(row["duration"]), MAX_TRACE_SECONDS)
        out.append(FidelityJob(
            name=f"j{i:04d}",
            team=TEAMS[zlib.crc32(row["job_id"].encode()) % len(TEAMS)],
            at=round((int(row["submission_time"]) - first) / factor),
            gpus=int(row["num_gpu"]),
            seconds=max(1, round(trace_seconds / factor)),
            trace_id=row["job_id"],
        ))
    return out


def namespace(team: str, run: str) -> str:
    return f"fid-{team}-{run}"


def policy(run: str, quotas: Quotas = BENCH) -> dict[str, Any]:
    """Three teams of one cohort, reclaiming borrowed GPUs from each other (Kueue preempts: the
    evictions compared), one flavor on the KWOK nodes; transitions are gradual and drain."""
    flavor = f"fid-{run}"
    return {
        "apiVersion": "queuemanager.dev/v1alpha1",
        "kind": "QuotaPolicy",
        "metadata": {"name": f"fidelity-{run}"},
        "spec": {
            "flavors": [{"name": flavor, "nodeLabels": {"type": "kwok"}}],
            "teams": [
                {
                    "name": f"{team}-{run}",
                    "namespaces": [namespace(team, run)],
                    "cohort": f"fid-{run}",
                    "quotas": [{"flavor": flavor, "resources": [
                        {"name": GPU, "nominal": quotas.nominal[team]},
                        {"name": "cpu", "nominal": CPU_NOMINAL}]}],
                    "preemption": {"withinClusterQueue": "Never", "reclaimWithinCohort": "Any"},
                }
                for team in TEAMS
            ],
            "fairShare": {"halfLife": "1h"},
            # An eviction storm's response holds for an hour of the trace's time, compressed like it (the
            # default hour would outlast the run: a held preemptor would wait for the drain deadline).
            "preemption": {"stormCoolDown": f"{3600.0 / FACTOR:g}s"},
            "transitions": {"defaults": {
                "duration": "60s", "stepInterval": "20s", "curve": "linear", "drain": True}},
        },
    }


def edit(run: str, quotas: Quotas = BENCH) -> dict[str, Any]:
    """The edit in the middle, as a policy patch (teams merge by name)."""
    flavor = f"fid-{run}"
    return {"spec": {"teams": [
        {"name": f"{team}-{run}", "quotas": [{"flavor": flavor, "resources": [{"name": GPU, "nominal": n}]}]}
        for team, n in sorted(quotas.edited.items())
    ]}}


def edit_at(jobs: list[FidelityJob]) -> int:
    """The edit lands in the middle of the arrivals."""
    return jobs[len(jobs) // 2].at
