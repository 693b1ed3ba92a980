"""The forecast itself (qm/forecaster.py `forecast`): the live state read at the transition's start and the
ledger's history, simulated through the one controller; checked on a cluster whose next hour is worked out
by hand, and for determinism."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from fairshare.policy import parse_policy, render
from ledger.queries import LifeSummary
from qm.forecaster import forecast
from queue_manager.forecast import ForecastRequest
from tests.unit.ledger.kueue_docs import HOUR, T0, Doc

GPU = "nvidia.com/gpu"
ORIGIN = T0 + 2.0  # the cluster is read 2 s after the transition started


def policy(research: int, generation: int) -> dict[str, Any]:
    def team(name: str, gpus: int) -> dict[str, Any]:
        return {"name": name, "namespaces": [name], "quotas": [{"flavor": "a100", "resources": [
            {"name": GPU, "nominal": gpus}, {"name": "cpu", "nominal": 64}]}]}

    return {"apiVersion": "queuemanager.dev/v1alpha1", "kind": "QuotaPolicy",
            "metadata": {"name": "p", "generation": generation, "uid": "uid-p"},
            "spec": {"flavors": [{"name": "a100"}],
                     "teams": [team("research", research), team("business", 4)],
                     "transitions": {"defaults": {"duration": "30m", "stepInterval": "10m", "drain": True}}}}


def lives(queue: str, n: int, run: float) -> list[LifeSummary]:
    """`n` finished one-GPU lives of `queue` over the last four weeks, each running `run` seconds."""
    out = []
    for i in range(n):
        submitted = ORIGIN - 27 * 24 * HOUR + i * 60 * HOUR
        out.append(LifeSummary(
            uid=f"{queue}-{i}", namespace=queue, name=f"old-{i}", local_queue=queue, team=queue,
            priority_class=None, priority=0, submitted_ms=int(submitted * 1000),
            first_admitted_ms=int(submitted * 1000), last_admitted_ms=int(submitted * 1000),
            finished_ms=int((submitted + run) * 1000), finish_reason="Succeeded", deleted_ms=None,
            evictions=0, attempts=1,
            pod_sets=({"name": "main", "count": 1, "requests": {GPU: 1000, "cpu": 2000}},),
            phase="Finished", attempt_start_ms=None))
    return out


def world() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Research runs 4 one-GPU jobs (started 10 min ago; research's jobs run 2 h) and the policy now cuts it
    to 1 GPU over 30 min with drain; business has 1 one-GPU job pending (business's jobs run 30 min)."""
    objects = [dict(o) for o in render(parse_policy(policy(4, 1)))]
    docs = [{**o} for o in objects]
    for i in range(4):
        d = Doc(f"r{i}", "research", created=T0 - 20 * 60, gpus_per_pod=1, pods=1)
        docs.append(d.reserved(T0 - 10 * 60, cluster_queue="research").raw)
    docs.append(Doc("b0", "business", created=T0 - 60, gpus_per_pod=1, pods=1, queue="business").raw)
    live = policy(1, 2)
    live["status"] = {}
    return live, docs


def request(generation: int = 2, metrics: tuple[str, ...] = ()) -> ForecastRequest:
    return ForecastRequest("p", generation, T0, T0 + HOUR, metrics or (
        "gpu_hours[research]", "gpu_hours[business]", "lost_gpu_hours", "wait_p95", "never_admitted"), 3, 11)


def test_the_next_hour_of_a_drained_cut_as_worked_out_by_hand() -> None:
    live, docs = world()
    history = lives("research", 10, 2 * HOUR) + lives("business", 10, 30 * 60)
    result = forecast(request(), live, docs, origin=ORIGIN, lives=history, history_s=28 * 24 * HOUR)
    got = {p.metric: p for p in result.predictions}
    assert result.resource == GPU and result.replications == 3
    # The 4 research jobs run 2 h: drain holds the cut above them the whole hour (4 GPUs x 1 h), nothing
    # is evicted, and research's arrivals (10 in 4 weeks) find no quota.
    assert got["gpu_hours[research]"].mean == pytest.approx(4.0)
    assert got["gpu_hours[research]"].ci95 == pytest.approx(0.0)
    assert got["lost_gpu_hours"].mean == 0.0
    # business's pending job is admitted at once and runs 30 min (its history); arrivals add a little.
    assert 0.5 <= (got["gpu_hours[business]"].mean or 0) < 1.5
    assert result.notes[-1].startswith("5 workloads at the start, 2 calibrated groups from 20 recorded lives")


def test_kueue_is_modelled_with_fair_sharing_when_the_operator_reads_it_so() -> None:
    live, docs = world()
    history = lives("research", 10, 2 * HOUR) + lives("business", 10, 30 * 60)
    said = "Kueue modelled with fair sharing (its Configuration, as the operator reads it)"
    fair = forecast(dataclasses.replace(request(), fair_sharing=True), live, docs, origin=ORIGIN,
                    lives=history, history_s=28 * 24 * HOUR)
    classical = forecast(request(), live, docs, origin=ORIGIN, lives=history, history_s=28 * 24 * HOUR)
    assert (said in fair.notes, said in classical.notes) == (True, False)


def test_the_same_request_gives_the_same_forecast() -> None:
    live, docs = world()
    history = lives("research", 10, 2 * HOUR) + lives("business", 30, 30 * 60)
    a = forecast(request(), live, docs, origin=ORIGIN, lives=history, history_s=28 * 24 * HOUR)
    b = forecast(request(), live, docs, origin=ORIGIN, lives=history, history_s=28 * 24 * HOUR)
    assert a.predictions == b.predictions


def test_without_history_there_are_no_arrivals_and_running_work_runs_past_the_window() -> None:
    live, docs = world()
    result = forecast(request(), live, docs, origin=ORIGIN, lives=[], history_s=28 * 24 * HOUR)
    got = {p.metric: p.mean for p in result.predictions}
    assert got["gpu_hours[research]"] == pytest.approx(4.0)
    # b0, pending when the cluster was read (2 s into the window), runs the rest of the hour.
    assert got["gpu_hours[business]"] == pytest.approx((HOUR - 2.0) / HOUR)
    assert "no arrivals: the ledger has no workloads of the policy's queues in its history" in result.notes
    assert any("5 workload(s) at the start have no recorded run time" in n for n in result.notes)


def test_a_metric_naming_a_team_the_policy_does_not_have_fails_the_forecast_in_one_line() -> None:
    live, docs = world()
    with pytest.raises(ValueError) as err:
        forecast(request(metrics=("gpu_hours[ghost]",)), live, docs, origin=ORIGIN, lives=[],
                 history_s=HOUR)
    assert str(err.value) == "gpu_hours[ghost]: no team 'ghost' in the policy (teams: research, business)"
