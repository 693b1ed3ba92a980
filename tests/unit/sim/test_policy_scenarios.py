"""A QuotaPolicy scenario is simulated whole: its transitions, experiment preemption and fair share run
through the operator's own controller (fairshare.control); timed changes are policy edits."""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml

from fairshare.errors import InputError
from simulations.loader import load_scenario
from simulations.model import simulate_run
from simulations.record import RunResult
from simulations.runner import build_jobs
from simulations.scenario import Scenario

DAY = 86400.0
GPU = "nvidia.com/gpu"
SAMPLE = Path(__file__).resolve().parents[3] / "manifests" / "samples" / "quotapolicy.yaml"


def _policy(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "flavors": [{"name": "gpu"}],
        "priorityClasses": [{"name": "biz", "value": 1000000},
                            {"name": "exp", "value": 100, "experiment": True}],
        "teams": [
            {"name": "research", "namespaces": ["r"], "localQueueName": "q", "cohort": "pool",
             "quotas": [{"flavor": "gpu", "resources": [{"name": GPU, "nominal": 4}]}]},
            {"name": "serving", "namespaces": ["s"], "localQueueName": "q", "cohort": "pool",
             "quotas": [{"flavor": "gpu", "resources": [{"name": GPU, "nominal": 4}]}]},
        ],
    }
    base.update(spec)
    return {"apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy", "metadata": {"name": "p"},
            "spec": base}


def _doc(policy: dict[str, Any], exp_rate: float = 1.0, **extra: Any) -> dict[str, Any]:
    def source(name: str, lq: str, rate: float, mean: str, pc: str) -> dict[str, Any]:
        return {"name": name, "localQueue": lq, "generator": {
            "arrivals": {"kind": "poisson", "ratePerHour": rate},
            "durations": {"kind": "exponential", "mean": mean},
            "requests": [{"resources": {GPU: 1}}], "priorityClasses": [{"priorityClass": pc}]}}

    return {"name": "p", "seed": 3, "horizon": "20d", "sampleInterval": "1h",
            "cluster": {"quotaPolicy": policy},
            "workloads": [source("exp", "r/q", exp_rate, "6h", "exp"),
                          source("biz", "s/q", 1.5, "2h", "biz")],
            **extra}


def _run(doc: dict[str, Any], base_dir: Path = Path(".")) -> RunResult:
    sc = Scenario.model_validate(doc)
    return simulate_run(sc, build_jobs(sc, base_dir, 0), base_dir=base_dir, variant="v", replication=0)


def _cut(at: str = "2d", gpus: int = 1, **spec: Any) -> dict[str, Any]:
    return {"at": at, "policyPatch": {"spec": {
        **spec, "teams": [{"name": "research", "quotas": [{"flavor": "gpu", "resources": [
            {"name": GPU, "nominal": gpus}]}]}]}}}


def test_an_immediate_cut_applies_the_target_at_once() -> None:
    abrupt = {"defaults": {"curve": "immediate", "drain": False}}
    run = _run(_doc(_policy(), events=[_cut(transitions=abrupt)]))
    assert [(q.time, q.cluster_queue, q.nominal_milli) for q in run.quota_changes] == \
        [(2 * DAY, "research", 1000)]


def test_a_cut_follows_the_policys_own_transition_settings_one_step_a_day_never_below_usage() -> None:
    policy = _policy(transitions={"defaults": {"curve": "linear", "duration": "6d", "stepInterval": "1d",
                                               "drain": True}})
    run = _run(_doc(policy, exp_rate=0.4, events=[_cut()]))
    steps = [(q.time, q.nominal_milli) for q in run.quota_changes]
    values = [v for _, v in steps]
    assert values == sorted(values, reverse=True) and values[-1] == 1000 and values[0] < 4000
    assert all(b - a >= DAY - 1e-6 for (a, _), (b, _) in itertools.pairwise(steps))
    assert all(q.note.startswith("step ") for q in run.quota_changes)
    assert sum(run.evictions) == sum(1 for p in run.preemptions if p.by == "kueue")  # drain: we kill nothing
    kinds = [a.kind for a in run.actions]
    assert kinds.count("transition-start") == 1 and kinds.count("transition-finish") == 1


def test_the_sample_policy_with_a_cut_follows_its_336h_rollout_in_daily_steps() -> None:
    sample = yaml.safe_load(SAMPLE.read_text())
    doc = _doc(sample, horizon="21d", events=[{"at": "1d", "policyPatch": {"spec": {"teams": [
        {"name": "ai-frontier-research", "quotas": [{"flavor": "gpu-a100", "resources": [
            {"name": GPU, "nominal": 1}]}]}]}}}])
    for source, team, pc in ((doc["workloads"][0], "ai-frontier-research", "low-priority-experiment"),
                             (doc["workloads"][1], "biz-model-serving", "high-priority-business")):
        source["localQueue"] = f"{team}/{team}"
        source["generator"]["priorityClasses"] = [{"priorityClass": pc}]
    run = _run(doc)
    steps = [(round(q.time / DAY, 3), q.nominal_milli) for q in run.quota_changes if q.resource == GPU]
    # 336h in 24h steps from 4 to 1: whole GPUs at steps 1..14, rounded toward the current value, each
    # no earlier than scheduled (drain may hold one back), the last at the target.
    assert [v for _, v in steps] == [3000, 2000, 1000] and all(t >= 1 + 1 for t, _ in steps)
    assert all(b - a >= 1 for (a, _), (b, _) in itertools.pairwise(steps))  # one change per stepInterval


def test_experiment_preemption_comes_from_the_policy_and_helps_waiting_business_work() -> None:
    preemption = {"protectedClasses": ["biz"], "experimentPriorityThreshold": 1000, "minRuntime": "0s",
                  "starvationGrace": "10m", "budget": {"maxVictims": 50, "window": "1h"}}
    never = {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never"}
    teams = copy.deepcopy(_policy()["spec"]["teams"])
    for t in teams:
        t["preemption"] = never
    base = _run(_doc(_policy(teams=teams)))
    run = _run(_doc(_policy(teams=teams, preemption=preemption)))
    assert run.preemptions and {p.by for p in run.preemptions} == {"planner"}
    assert all(p.victim.startswith("r/") and p.preemptor.startswith("s/") for p in run.preemptions)
    assert all(p.reason.startswith(f"preempt {p.victim}: priority 100 < 1000000") for p in run.preemptions)
    kinds = [a.kind for a in run.actions]
    # Each victim is reactivated once its beneficiary got in; so is each competitor held with it.
    victims_reactivated = kinds.count("reactivate") - kinds.count("hold-workload")
    assert kinds.count("evict") == len(run.preemptions) == victims_reactivated

    def mean_biz_wait(r: RunResult) -> float:
        waits = [r.admitted_at[i] - j.arrival for i, j in enumerate(r.jobs)
                 if j.source == "biz" and r.admitted_at[i] == r.admitted_at[i]]
        return sum(waits) / len(waits)

    assert mean_biz_wait(run) < mean_biz_wait(base)


@pytest.mark.parametrize(("doc", "message"), [
    (_doc(_policy(), events=[{"at": "2d", "clusterQueue": "research", "flavor": "gpu", "resource": GPU,
                              "nominalQuota": 1}]),
     "events[0]: quota events are QuotaPolicy edits: write {at: 7d, policyPatch:"),
    (_doc(_policy(), experimentPreemption={"waitThreshold": "10m"}),
     "experimentPreemption is no longer a scenario key: experiment preemption is the QuotaPolicy's "
     "spec.preemption"),
    (_doc(_policy(), events=[{"at": "1d", "policyPatch": {"spec": {"teams": [
        {"name": "research", "namespaces": ["r", "x"]}]}}}]),
     "field events[0]: this edit changes more than quotas, weights and the policy's rules (adds "
     "LocalQueue q)"),
], ids=["old quota event", "old experimentPreemption", "structural edit"])
def test_bad_policy_scenarios_are_one_line_errors_naming_the_field(
        tmp_path: Path, doc: dict[str, Any], message: str) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError) as err:
        load_scenario(f)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_cut_below_the_floor_is_refused_at_load_time_as_the_api_server_and_the_operator_refuse_it(
        tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump(_doc(_policy(), horizon="3d",
                                     events=[_cut(transitions={"defaults": {"floor": {GPU: 2}}})])))
    with pytest.raises(InputError) as err:
        load_scenario(f)
    assert str(err.value) == (
        f"{f}: QuotaPolicy p: field events[0].policyPatch.spec.teams[0].quotas[0].resources[0].nominal: "
        "nominal is below the transition floor of nvidia.com/gpu (2 GPUs, spec.transitions.defaults.floor): "
        "a quota never goes below its floor (got '1')")


def _reclaiming_lower_priority(hold: bool) -> dict[str, Any]:
    preemption = {"protectedClasses": ["biz"], "experimentPriorityThreshold": 1000, "minRuntime": "0s",
                  "starvationGrace": "10m", "budget": {"maxVictims": 50, "window": "1h"},
                  "holdCompetingExperiments": hold, "maxEvictionsPerWorkload": 3}
    teams = copy.deepcopy(_policy()["spec"]["teams"])
    for t in teams:
        t["preemption"] = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"}
    return _doc(_policy(teams=teams, preemption=preemption), exp_rate=2.0, horizon="10d")


def _beneficiaries_admitted_at_once(run: RunResult) -> tuple[int, int]:
    index = {j.key: i for i, j in enumerate(run.jobs)}
    planned = [p for p in run.preemptions if p.by == "planner"]
    return sum(1 for p in planned if abs(run.admitted_at[index[p.preemptor]] - p.time) <= 1.0), len(planned)


def test_every_planned_eviction_is_followed_by_its_beneficiarys_admission_while_the_victims_queue_is_held(
) -> None:
    # Research's other pending experiments fit within its nominal quota, so Kueue orders them before the
    # borrowing business beneficiary: unless they are held they take the freed GPU (and are then evicted in
    # turn).
    held = _run(_reclaiming_lower_priority(hold=True))
    unheld = _run(_reclaiming_lower_priority(hold=False))
    admitted, planned = _beneficiaries_admitted_at_once(held)
    assert planned > 20 and admitted == planned
    admitted_unheld, planned_unheld = _beneficiaries_admitted_at_once(unheld)
    assert admitted_unheld < planned_unheld / 2
    held_keys = [a.target for a in held.actions if a.kind == "hold-workload"]
    reactivated = {a.target for a in held.actions if a.kind == "reactivate"}
    assert held_keys and all(k.startswith("r/") for k in held_keys) and set(held_keys) <= reactivated


def test_no_workload_is_chosen_as_a_victim_once_it_was_evicted_max_evictions_per_workload_times() -> None:
    run = _run(_reclaiming_lower_priority(hold=False))  # the thrashing configuration
    before: dict[str, int] = {}
    for p in sorted(run.preemptions, key=lambda p: p.time):
        if p.by == "planner":
            assert before.get(p.victim, 0) < 3, p
        before[p.victim] = before.get(p.victim, 0) + 1
    assert max(before.values()) >= 3  # the cap was reached, and held


def test_the_work_experiment_preemption_throws_away_stays_within_the_lost_work_budget_per_window() -> None:
    doc = _reclaiming_lower_priority(hold=True)
    doc["cluster"]["quotaPolicy"]["spec"]["preemption"]["budget"]["maxLostHours"] = {GPU: 3}
    run = _run(doc)
    planned = sorted((p for p in run.preemptions if p.by == "planner"), key=lambda p: p.time)
    unbounded = sorted((p for p in _run(_reclaiming_lower_priority(hold=True)).preemptions
                        if p.by == "planner"), key=lambda p: p.time)
    def lost_in_hour_to(t: float, records: list[Any]) -> float:
        return sum(q.lost_seconds * q.gpus_milli / 1000 / 3600 for q in records if t - 3600 < q.time <= t)

    assert planned and any(lost_in_hour_to(p.time, unbounded) > 3 for p in unbounded)  # unbounded loses more
    assert all(lost_in_hour_to(p.time, planned) <= 3 + 1e-9 for p in planned)
    blocked = [a for a in run.actions if a.kind == "preemption-blocked" and "lost-work budget" in a.detail]
    assert blocked and "nvidia.com/gpu-hours of work and the lost-work budget allows" in blocked[0].detail
