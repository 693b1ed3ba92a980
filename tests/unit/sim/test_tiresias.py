"""An external reproduction: the Tiresias simulator's FIFO scheduler with `count` placement, re-run by our
simulator on the same trace and cluster sizes, must give every job the same start and finish time.

Tiresias (SymbioticLab/Tiresias, `simulator/run_sim.py` `one_queue_fifo_sim_jobs`) keeps one pending list in
submission order; at each event it releases the finished jobs' GPUs, appends the arrivals, and starts pending
jobs in order while the next one fits the free GPU count, stopping at the first that does not (head-of-line
blocking). That is one ClusterQueue whose nominal quota is the cluster's GPUs, `queueingStrategy: StrictFIFO`
(Kueue keeps a StrictFIFO head that does not fit at the head: pkg/cache/queue/cluster_queue.go
requeueIfNotPresent pushes it back to the heap, never to the inadmissible list), no preemption, and jobs that
run exactly their duration. The oracle's inputs and the per-job outputs it produced are vendored in
tests/data/tiresias with their provenance (README.md there); its code is not part of this project.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from simulations.model import simulate_run
from simulations.runner import build_jobs
from simulations.scenario import Scenario

DATA = Path(__file__).resolve().parents[2] / "data" / "tiresias"
GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class Outcome:
    start: float
    end: float


def _cluster_gpus(spec: str) -> int:
    """num_switch x num_node_p_switch x num_gpu_p_node of a Tiresias cluster spec (its `count` placement
    counts GPUs only: cluster.py none_placement)."""
    with (DATA / f"{spec}.csv").open() as f:
        row = next(csv.DictReader(f))
    return int(row["num_switch"]) * int(row["num_node_p_switch"]) * int(row["num_gpu_p_node"])


def _oracle(spec: str) -> dict[str, Outcome]:
    """job_id -> (start_time, end_time) as Tiresias logged them (only the jobs it started)."""
    with (DATA / f"fifo-count-{spec}.csv").open() as f:
        return {r["job_id"]: Outcome(float(r["start_time"]), float(r["end_time"])) for r in csv.DictReader(f)}


def _scenario(gpus: int) -> dict[str, Any]:
    return {
        "name": "tiresias-fifo",
        "horizon": "30d",
        "cluster": {"objects": [
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "gpu"}},
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cluster"},
             "spec": {"namespaceSelector": {}, "queueingStrategy": "StrictFIFO",
                      "preemption": {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"},
                      "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                          {"name": "gpu", "resources": [{"name": GPU, "nominalQuota": gpus}]}]}]}},
            {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
             "metadata": {"name": "jobs", "namespace": "tiresias"}, "spec": {"clusterQueue": "cluster"}},
        ]},
        "workloads": [{"name": "tiresias", "trace": {
            "format": "csv", "paths": [str(DATA / "60_job.csv")],
            "columns": {"id": "job_id", "submit": "submit_time", "duration": "duration", "gpus": "num_gpu"},
            "queues": {"rule": "single", "localQueue": "tiresias/jobs"},
        }}],
    }


def _simulated(gpus: int) -> dict[str, Outcome | None]:
    scenario = Scenario.model_validate(_scenario(gpus))
    jobs = build_jobs(scenario, DATA, 0)
    run = simulate_run(scenario, jobs, base_dir=DATA, variant="fifo", replication=0)
    with (DATA / "60_job.csv").open() as f:
        ids = [r["job_id"] for r in csv.DictReader(f)]
    # The trace is in submission order and import_trace keeps it (a stable sort): jobs[i] is row i.
    assert [j.name for j in run.jobs] == [f"tiresias-{i:07d}" for i in range(len(ids))]
    out: dict[str, Outcome | None] = {}
    for job_id, admitted, finished in zip(ids, run.admitted_at, run.finished_at, strict=True):
        out[job_id] = None if math.isnan(admitted) else Outcome(admitted, finished)  # NEVER is NaN
    return out


@pytest.mark.parametrize(
    ("spec", "waiting"),
    [
        pytest.param("n2g4", 59, id="8 GPUs (a spec of 1 switch x 2 nodes x 4 GPUs): 59 of 60 jobs wait"),
        pytest.param("n4g4", 28, id="16 GPUs (1 x 4 x 4): 28 jobs wait"),
        pytest.param("cluster_spec", 0, id="64 GPUs (the shipped cluster_spec.csv): nobody waits"),
    ],
)
def test_every_job_starts_and_finishes_when_tiresias_fifo_says(spec: str, waiting: int) -> None:
    oracle = _oracle(spec)
    simulated = _simulated(_cluster_gpus(spec))
    assert len(oracle) == 60
    assert simulated == oracle
    submits = _submits()
    assert sum(1 for k, o in oracle.items() if o.start > submits[k]) == waiting


def test_a_job_larger_than_the_cluster_blocks_the_queue_for_good_as_in_tiresias() -> None:
    """n1g4 (4 GPUs): job 1 asks for 8 GPUs. Tiresias starts job 0, then stops ("This cluster is not large
    enough to run the job") having logged job 0 only; a StrictFIFO ClusterQueue keeps the 8-GPU head at the
    front for ever, so nothing after it is admitted either."""
    oracle = _oracle("n1g4")
    simulated = _simulated(_cluster_gpus("n1g4"))
    assert oracle == {"0": Outcome(0.0, 164.0)}
    assert {k: v for k, v in simulated.items() if v is not None} == oracle


def _submits() -> dict[str, float]:
    with (DATA / "60_job.csv").open() as f:
        return {r["job_id"]: float(r["submit_time"]) for r in csv.DictReader(f)}
