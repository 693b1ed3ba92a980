"""A simulation that starts from a cluster as it is (`initial:`, simulations/initial.py): running work runs
on from where it is, pending work waits in Kueue's order, the policy controller sees wall-clock times and
continues from the stored status."""

from __future__ import annotations

import copy
import math
import random
from pathlib import Path
from typing import Any

import pytest

from fairshare.errors import InputError
from simulations.durations import RUNS_ON
from simulations.initial import PENDING_AT_START, RUNNING_AT_START, draw_work
from simulations.loader import validation_error
from simulations.model import Simulation, simulate_run
from simulations.record import RunResult
from simulations.runner import build_jobs
from simulations.scenario import ConstantDurations, EmpiricalDurations, Scenario
from simulations.summary import summarize
from tests.unit.plan.world import GPU, ORIGIN, objects, policy, scenario, workload

H = 3600.0


def run(doc: dict[str, Any], replication: int = 0) -> RunResult:
    sc = Scenario.model_validate(doc)
    return simulate_run(sc, build_jobs(sc, Path("."), replication), base_dir=Path("."), variant="v",
                        replication=replication)


def row(result: RunResult, name: str) -> int:
    return next(i for i, j in enumerate(result.jobs) if j.name == name)


def research_alone(gpus: int = 4) -> dict[str, Any]:
    """research without a cohort (nothing to borrow): its quota is all it gets."""
    doc = policy(research=gpus)
    for team in doc["spec"]["teams"]:
        team.pop("cohort")
    return doc


def test_a_workload_running_at_t0_finishes_its_remaining_work_and_is_not_counted_in_the_waits() -> None:
    doc = research_alone()
    result = run(scenario([{"workload": workload("research", "r1", 4, ORIGIN - 2 * H, admitted=ORIGIN - H),
                            "work": 3 * H}], doc=doc))
    i = row(result, "r1")
    assert result.jobs[i].source == RUNNING_AT_START
    assert (result.admitted_at[i], result.finished_at[i]) == (-H, 2 * H)
    assert result.held_seconds[i] == 3 * H  # the whole attempt, its hour before t=0 included
    assert result.usage_seconds["research"] == 4 * 2 * H  # the integrals count [0, horizon] only
    assert summarize(result).queues["research"].wait.count == 0


def test_work_pending_at_t0_waits_in_order_and_counts_from_its_creation() -> None:
    doc = research_alone()
    result = run(scenario([
        {"workload": workload("research", "r1", 4, ORIGIN - 2 * H, admitted=ORIGIN - H), "work": 3 * H},
        {"workload": workload("research", "late", 4, ORIGIN - 10 * 60), "work": H},
        {"workload": workload("research", "early", 4, ORIGIN - 30 * 60), "work": H},
    ], doc=doc))
    early, late = row(result, "early"), row(result, "late")
    assert result.jobs[early].source == PENDING_AT_START
    # r1 frees the 4 GPUs at 2h; Kueue's order (creation time) admits `early` first, then `late` an hour on
    # (each one requeue batch, 1 s, after the release: both were parked as inadmissible).
    assert (result.admitted_at[early], result.admitted_at[late]) == (2 * H + 1, 3 * H + 2)
    wait = summarize(result).queues["research"].wait
    assert wait.count == 2
    assert wait.mean == pytest.approx(((2 * H + 1 + 30 * 60) + (3 * H + 2 + 10 * 60)) / 2 / 1.0)


def test_a_deactivated_workload_at_t0_is_held_not_queued() -> None:
    result = run(scenario([{"workload": workload("research", "held", 1, ORIGIN - 60, active=False),
                            "work": H}]))
    i = row(result, "held")
    assert math.isnan(result.admitted_at[i])
    assert summarize(result).queues["research"].wait.censored == 1


def test_an_eviction_loses_the_whole_attempt_of_a_workload_running_since_before_t0() -> None:
    # research holds 4 GPUs, 2 of them borrowed from business; business reclaims them at 10 min.
    doc = policy(research=2, business=2)
    for team in doc["spec"]["teams"]:
        team["preemption"] = {"withinClusterQueue": "Never", "reclaimWithinCohort": "Any"}
    sc = scenario([{"workload": workload("research", "r1", 4, ORIGIN - 2 * H, admitted=ORIGIN - H),
                    "work": 5 * H}], doc=doc)
    sc["workloads"] = [{"name": "biz", "localQueue": "business/business", "recorded": [
        {"at": "10m", "work": "1h", "resources": {GPU: 2}, "priorityClass": "business"}]}]
    result = run(sc)
    i = row(result, "r1")
    assert result.evictions[i] >= 1
    assert result.preemptions[0].time == 600.0
    assert result.lost_seconds[i] >= H + 600.0  # run time since the attempt started, before t=0


def test_work_from_a_distribution_is_drawn_beyond_the_time_already_run() -> None:
    spec = EmpiricalDurations(kind="empirical", values=[1800.0, 7200.0, 18000.0])
    rng = random.Random(1)
    draws = {draw_work(spec, rng, at_least=H) for _ in range(200)}
    assert draws == {7200.0, 18000.0}
    # Older than every recorded duration: nothing recorded says when it ends, so it runs on past any
    # horizon (as the transition plan assumes), for any kind of distribution.
    assert draw_work(spec, rng, at_least=10 * H) == RUNS_ON
    assert draw_work(ConstantDurations(kind="constant", value=H), rng, at_least=2 * H) == RUNS_ON


def test_the_same_replication_draws_the_same_work_in_every_variant_and_another_replication_others() -> None:
    def works(replication: int, doc: dict[str, Any]) -> list[float]:
        sc = scenario([{"workload": workload("research", f"r{k}", 1, ORIGIN - H, admitted=ORIGIN - 600),
                        "workFrom": "research"} for k in range(8)], doc=doc)
        sc["durations"] = {"research": {"kind": "lognormal", "median": "2h", "sigma": 1.0}}
        result = run(sc, replication)
        return [j.duration for j in result.jobs if j.source == RUNNING_AT_START]

    assert works(0, policy()) == works(0, policy(research=1))
    assert works(0, policy()) != works(1, policy())
    assert min(works(0, policy())) > 600.0


def test_the_controller_sees_wall_clock_times_and_steps_a_transition_on_schedule() -> None:
    doc = policy(transitions={"defaults": {"duration": "2h", "stepInterval": "1h", "curve": "linear",
                                           "drain": False}})
    cut = {"spec": {"teams": [{"name": "research", "quotas": [
        {"flavor": "gpu", "resources": [{"name": GPU, "nominal": 2}]}]}]}}
    result = run(scenario([], doc=doc, events=[{"at": 0, "policyPatch": cut}]))
    steps = [(q.time, q.nominal_milli) for q in result.quota_changes if q.cluster_queue == "research"]
    assert steps == [(H, 3000), (2 * H, 2000)]
    assert [a.time for a in result.actions if a.kind == "transition-start"] == [0.0]


def test_a_transition_in_flight_continues_from_the_stored_status_as_after_a_restart() -> None:
    doc = policy(transitions={"defaults": {"duration": "3h", "stepInterval": "1h", "curve": "linear",
                                           "drain": False}})
    cut = {"spec": {"teams": [{"name": "research", "quotas": [
        {"flavor": "gpu", "resources": [{"name": GPU, "nominal": 1}]}]}]}}
    # The whole story from t=-1.5h: the cut at -1.5h steps at -0.5h, 0.5h and 1.5h (4 -> 3 -> 2 -> 1 GPUs).
    whole = scenario([], doc=doc, events=[{"at": 0, "policyPatch": cut}], horizon="4h")
    whole["initial"]["at"] = ORIGIN - 1.5 * H
    first = Simulation(Scenario.model_validate({**whole, "horizon": "1.5h"}), [], base_dir=Path("."),
                       variant="v", replication=0)
    first.run()
    assert first.controller is not None and first.controller.status is not None
    status = first.controller.status.model_dump(mode="json", by_alias=True, exclude_none=True)
    status["history"] = first.controller.book.serialize()
    # The cluster as it stands at t=0 (the cut policy, 3 GPUs in force), picked up by a new run.
    from fairshare.policy.patch import patch_policy

    now_doc = patch_policy(doc, cut)
    live = copy.deepcopy(objects(doc))
    for obj in live:
        if obj["kind"] == "ClusterQueue" and obj["metadata"]["name"] == "research":
            obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "3"
    resumed = scenario([], doc=now_doc, live=live, horizon="2.5h")
    resumed["initial"]["status"] = status
    resumed["initial"]["generation"] = 2
    later = run(resumed)
    steps = [(q.time, q.nominal_milli) for q in later.quota_changes if q.cluster_queue == "research"]
    assert steps == [(0.5 * H, 2000), (1.5 * H, 1000)]


def test_a_work_name_that_is_not_in_durations_is_one_line_at_its_field() -> None:
    sc = scenario([{"workload": workload("research", "r1", 1, ORIGIN - 60), "workFrom": "nope"}])
    with pytest.raises(Exception) as info:
        Scenario.model_validate(sc)
    err = validation_error(info.value, file="s.yaml")  # type: ignore[arg-type]
    assert err.one_line() == (
        "s.yaml: field initial.workloads[0].workFrom: no such entry in durations (got 'nope')")


def test_an_initial_workload_the_core_cannot_read_names_its_field() -> None:
    bad = workload("research", "r1", 1, ORIGIN - 60)
    bad["spec"]["podSets"][0]["count"] = "many"
    sc = Scenario.model_validate(scenario([{"workload": bad, "work": 60}]))
    with pytest.raises(InputError) as info:
        Simulation(sc, [], base_dir=Path("."), variant="v", replication=0)
    assert "initial.workloads[0].workload" in info.value.one_line()


def test_a_pooled_first_replication_leaves_its_built_workloads_out_after_the_initial_ones_and_gets_them_back(
) -> None:
    from benchmarks.differential import run_repr
    from simulations.executor import RunJob, map_jobs, run_job
    from simulations.runner import run_brief

    arrivals = {"name": "new", "localQueue": "research/research", "generator": {
        "arrivals": {"kind": "poisson", "ratePerHour": 4}, "durations": {"kind": "constant", "value": 1800},
        "requests": [{"resources": {GPU: 1}}]}}
    running = workload("research", "r1", 4, ORIGIN - 2 * H, admitted=ORIGIN - H)
    pending = workload("research", "r2", 1, ORIGIN - 60)
    doc = scenario([{"workload": running, "work": H}, {"workload": pending, "work": H}], doc=research_alone())
    doc["workloads"] = [arrivals]
    sc = Scenario.model_validate(doc)
    jobs = [RunJob("v", rep, sc, Path("."), None) for rep in (0, 1)]
    first, _ = map_jobs(run_brief, jobs, workers=2)
    whole = run_job(jobs[0])
    # What crosses from the worker: the two workloads present at t=0, not the ones built from the sources.
    assert first.result is not None and first.built_from == 2
    assert [j.name for j in first.result.jobs] == [j.name for j in whole.jobs[:2]]
    rebuilt = first.whole(build_jobs(sc, Path("."), 0))
    whole.wall_seconds = rebuilt.wall_seconds
    assert run_repr(rebuilt) == run_repr(whole)
