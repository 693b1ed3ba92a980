"""simulations.executor: a process pool and Ray tasks give the results of a serial run, in job order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks.differential import run_repr
from fairshare.errors import InputError
from simulations.executor import RunJob, map_jobs, run_job, run_jobs
from simulations.runner import build_jobs
from simulations.scenario import Scenario

KUEUE = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"


def _cq(name: str, quota: int) -> list[dict[str, Any]]:
    return [
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": name},
         "spec": {"cohortName": "pool", "namespaceSelector": {},
                  "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
                  "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                      {"name": "gpu", "resources": [{"name": GPU, "nominalQuota": quota}]}]}]}},
        {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "q", "namespace": name},
         "spec": {"clusterQueue": name}},
    ]


def _scenario(quota_b: int) -> Scenario:
    objects: list[dict[str, Any]] = [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "gpu"}},
        {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": "low"}, "value": 10},
        {"apiVersion": KUEUE, "kind": "WorkloadPriorityClass", "metadata": {"name": "high"}, "value": 1000},
        *_cq("a", 4),
        *_cq("b", quota_b),
    ]
    sources = [
        {"name": n, "localQueue": f"{n}/q",
         "generator": {"arrivals": {"kind": "poisson", "ratePerHour": 2.0},
                       "durations": {"kind": "exponential", "mean": "2h"},
                       "requests": [{"resources": {GPU: 1}}, {"resources": {GPU: 2}}],
                       "priorityClasses": [{"priorityClass": "low", "weight": 3}, {"priorityClass": "high"}]}}
        for n in ("a", "b")
    ]
    return Scenario.model_validate({"name": "executor", "seed": 5, "horizon": "1d", "sampleInterval": "6h",
                                    "cluster": {"objects": objects}, "workloads": sources})


def _jobs(*, prebuilt: bool = False) -> list[RunJob]:
    out = []
    for variant, sc in (("four", _scenario(4)), ("two", _scenario(2))):
        for rep in range(3):
            jobs = tuple(build_jobs(sc, Path("."), rep)) if prebuilt else None
            out.append(RunJob(variant, rep, sc, Path("."), jobs))
    return out


@pytest.fixture(scope="module")
def serial() -> list[dict[str, Any]]:
    results = run_jobs(_jobs(), workers=1)
    return [run_repr(r) for r in results]


def test_a_serial_run_returns_every_job_in_order_with_its_variant_and_replication() -> None:
    jobs = _jobs()
    results = run_jobs(jobs, workers=1)
    assert [(r.variant, r.replication) for r in results] == [(j.variant, j.replication) for j in jobs]
    assert all(r.wall_seconds > 0 for r in results)
    # replications differ (their own seeds), variants differ (their own clusters)
    reprs = [run_repr(r) for r in results]
    assert reprs[0] != reprs[1] and reprs[0] != reprs[3]


def test_a_process_pool_gives_the_serial_results(serial: list[dict[str, Any]]) -> None:
    seen: list[tuple[int, int]] = []
    results = run_jobs(_jobs(), workers=2, progress=lambda done, total, job: seen.append((done, total)))
    assert [run_repr(r) for r in results] == serial
    assert seen == [(i, 6) for i in range(1, 7)]


def test_jobs_with_their_workloads_built_by_the_runner_give_the_same_results(
    serial: list[dict[str, Any]],
) -> None:
    assert [run_repr(r) for r in run_jobs(_jobs(prebuilt=True), workers=2)] == serial


def test_ray_tasks_on_a_local_ray_instance_give_the_serial_results(serial: list[dict[str, Any]]) -> None:
    import ray  # the optional extra queue-manager[ray], in the dev extras

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        seen: list[int] = []
        results = run_jobs(_jobs(), executor="ray", progress=lambda done, total, job: seen.append(done))
    finally:
        ray.shutdown()
    assert [run_repr(r) for r in results] == serial
    assert seen == list(range(1, 7))


def test_a_failing_job_fails_the_pool_run_with_its_error() -> None:
    sc = _scenario(4)
    broken = sc.model_copy(update={"cluster": sc.cluster.model_copy(update={"manifests": ["missing.yaml"]})})
    with pytest.raises(InputError, match=r"missing\.yaml"):
        run_jobs([*_jobs()[:2], RunJob("bad", 0, broken, Path("/nonexistent"), None)], workers=2)


def test_zero_workers_is_a_one_line_error_naming_the_flag() -> None:
    with pytest.raises(InputError, match="--jobs"):
        run_jobs(_jobs(), workers=0)


def test_the_job_function_is_the_picklable_top_level_run_job() -> None:
    import pickle

    assert pickle.loads(pickle.dumps(run_job)) is run_job
    job = _jobs(prebuilt=True)[0]
    assert pickle.loads(pickle.dumps(job)) == job


def test_a_brief_made_where_the_run_ran_keeps_its_summary_and_digest_and_only_the_first_replications_result(
    serial: list[dict[str, Any]],
) -> None:
    from simulations.record import digest
    from simulations.runner import run_brief
    from simulations.summary import summarize

    jobs = _jobs()
    briefs = map_jobs(run_brief, jobs, workers=2)
    for job, brief, expected in zip(jobs, briefs, serial, strict=True):
        whole = run_job(job)
        whole.wall_seconds = brief.wall_seconds  # (the machine's, not the model's)
        assert brief.summary == summarize(whole, beneficiary_window=job.scenario.beneficiary_window)
        assert brief.digest == digest(whole)
        assert (brief.workloads, brief.events, brief.cycles) == (len(whole.jobs), whole.events, whole.cycles)
        if job.replication == 0:
            # Its built workloads are left out of the pickle, and put back from the list the parent built.
            assert brief.result is not None and brief.built_from is not None
            assert len(brief.result.jobs) == brief.built_from < len(whole.jobs)
            assert run_repr(brief.whole(build_jobs(job.scenario, job.base_dir, 0))) == expected
            assert brief.top_class == "high"
        else:
            assert brief.result is None and brief.top_class is None


def _pid_then_wait(job: RunJob) -> int:
    """A job that records its worker's pid and, but for the first, outlives any test."""
    import os
    import time

    Path(str(job.base_dir), f"{job.replication}.pid").write_text(str(os.getpid()))
    if job.replication > 0:
        time.sleep(3600)
    return os.getpid()


def _alive(pid: int) -> bool:
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # (a killed child the pool has not reaped yet is a zombie: gone for this purpose)
    status = Path(f"/proc/{pid}/status").read_text() if Path(f"/proc/{pid}/status").exists() else ""
    return "State:\tZ" not in status


def test_leaving_a_pool_stream_early_kills_the_jobs_still_running_instead_of_waiting_for_them(
    tmp_path: Path,
) -> None:
    from simulations.executor import stream_pool

    sc = _scenario(4)
    jobs = [RunJob("v", rep, sc, tmp_path, None) for rep in range(4)]
    stream = stream_pool(_pid_then_wait, jobs, 2)
    index, first = next(stream)
    assert index == 0 and first.result() > 0
    # The other worker is in its hour-long job (and the first takes the next one): both are stopped.
    import time

    started = time.monotonic()
    while not (tmp_path / "1.pid").exists() and time.monotonic() - started < 120:
        time.sleep(0.05)
    running = [int(p.read_text()) for p in tmp_path.glob("*.pid") if p.name != "0.pid"]
    assert running and all(_alive(pid) for pid in running)
    stream.close()
    assert not any(_alive(pid) for pid in running)
