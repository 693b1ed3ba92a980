"""The journey's seams (tests/journey/seams.py) on small records: each holds when plan, act and account agree
and names what disagrees when they do not (the journey itself runs in tests/integration/test_journey.py)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.journey import seams
from tests.journey.journey import BUSINESS, GPU, RESEARCH, Life, Observation, Record

T0 = 1_800_000_000.0
R_Q, B_Q = f"{RESEARCH}/gpu-a100/{GPU}", f"{BUSINESS}/gpu-a100/{GPU}"
V1, V2 = f"{RESEARCH}/job-experiment-a-1", f"{RESEARCH}/job-experiment-b-2"


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=UTC).isoformat()


def _line(t: float, action: str, target: str, what: str) -> dict[str, Any]:
    return {"audit": True, "time": _iso(t), "action": action, "target": target, "what": what}


def _life(key: str, gpus: int, reserved: bool, at: float | None, evicted: float | None = None) -> Life:
    team = key.split("/")[0]
    return Life(key, key, team, gpus, reserved, at, evicted, True, False)


def _record() -> Record:
    """The journey's shape: plan at T0, applied at T0 + 5, research 4 -> 1 at +90 s with two victims."""
    applied = T0 + 5
    plan = {
        "transitions": [
            {"offsetSeconds": 0.0, "quota": R_Q, "kind": "start", "what": "4 GPUs -> 1 GPU in 3 step(s)"},
            {"offsetSeconds": 0.0, "quota": B_Q, "kind": "start", "what": "16 GPUs -> 19 GPUs"},
            {"offsetSeconds": 90.0, "quota": R_Q, "kind": "step", "what": "step 3/3: 4 GPUs -> 1 GPU"},
            {"offsetSeconds": 90.0, "quota": B_Q, "kind": "step",
             "what": f"+3 GPUs at once: 16 GPUs -> 19 GPUs, freed by {RESEARCH} (paired move)"},
            *({"offsetSeconds": 90.0, "quota": None, "kind": "evict", "what": f"evicts {v}: deadline"}
              for v in (V1, V2)),
        ],
        "forecast": {
            "variants": [{"name": "current policy", "baseline": True, "metrics": {}},
                         {"name": "shift", "baseline": False, "metrics": {
                             "evictions": {"mean": 2.0}, "lost_gpu_hours": {"mean": 4 * 95 / 3600}}}],
            "quotaTimeline": {"shift": {RESEARCH: [[0.0, 4.0], [90.0, 1.0]],
                                        BUSINESS: [[0.0, 16.0], [90.0, 19.0]]}},
        },
    }
    log = [
        _line(applied + 1, "transition-started", "QuotaPolicy gpu-cluster",
              f"transition of {RESEARCH} gpu-a100/{GPU} from 4 GPUs to 1 GPU in 3 step(s)"),
        _line(applied + 1, "transition-started", "QuotaPolicy gpu-cluster",
              f"transition of {BUSINESS} gpu-a100/{GPU} from 16 GPUs to 19 GPUs in 3 step(s)"),
        _line(applied + 92, "transition-step", f"ClusterQueue {RESEARCH}",
              f"nominalQuota gpu-a100/{GPU} 4 GPUs -> 1 GPU (step 3/3)"),
        _line(applied + 92, "transition-step", f"ClusterQueue {BUSINESS}",
              f"nominalQuota gpu-a100/{GPU} 16 GPUs -> 19 GPUs (+3 GPUs at once)"),
        _line(applied + 92, "preempt", f"Workload {V1}", f"asked Kueue to evict {V1}"),
        _line(applied + 92, "preempt", f"Workload {V2}", f"asked Kueue to evict {V2}"),
    ]
    before = {V1: _life(V1, 2, True, T0 - 5), V2: _life(V2, 2, True, T0 - 5)}
    after = {V1: _life(V1, 2, False, None, applied + 92), V2: _life(V2, 2, False, None, applied + 92)}
    observations = [Observation(T0, {RESEARCH: 4000, BUSINESS: 16000}, before),
                    Observation(applied + 95, {RESEARCH: 1000, BUSINESS: 19000}, after)]
    usage = {"rows": [{"team": RESEARCH, "project": "", "resource": GPU, "held_h": "0.1", "lost_h": str(
        round(4 * 102 / 3600, 6))}]}
    return Record(plan=plan, plan_at=T0, applied_at=applied, observations=observations, operator_log=log,
                  usage=usage, until=applied + 100)


def test_a_journey_whose_plan_forecast_and_operator_agree_holds_seams_a_b_and_e() -> None:
    record = _record()
    assert [(s.name[0], s.problems) for s in seams.check(record) if s.name[0] in "abe"] == [
        ("a", []), ("b", []), ("e", [])]


@pytest.mark.parametrize(("edit", "seam", "problem"), [
    (lambda r: r.operator_log.__setitem__(2, {**r.operator_log[2], "time": _iso(r.applied_at + 98)}),
     "a", "steps off the plan by more than 4 s"),
    (lambda r: r.operator_log.__setitem__(5, {**r.operator_log[5], "target": "Workload research/other"}),
     "a", "the plan's victims are not the operator's"),
    (lambda r: r.plan["forecast"]["quotaTimeline"]["shift"].__setitem__(RESEARCH, [[0, 4.0], [20, 3.0]]),
     "a", "the forecast's quota timeline"),
    (lambda r: r.plan["forecast"]["variants"][1]["metrics"].__setitem__("lost_gpu_hours", {"mean": 0.0}),
     "b", "the forecast's lost GPU-hours (0.0)"),
    (lambda r: r.observations.append(Observation(r.applied_at + 99, {RESEARCH: 1000, BUSINESS: 19000}, {
        V1: _life(V1, 2, True, r.applied_at + 98)})),
     "e", f"{V1} re-admitted above its team's quota"),
], ids=["a-late-step", "a-another-victim", "a-forecast-timeline", "b-forecast-lost-work", "e-readmitted"])
def test_a_disagreement_fails_its_seam_and_names_it(edit: Any, seam: str, problem: str) -> None:
    record = copy.deepcopy(_record())
    edit(record)
    (found,) = [s for s in seams.check(record) if s.name.startswith(seam)]
    assert any(problem in p for p in found.problems), found.report()


def test_an_audit_row_on_a_workload_without_team_local_queue_or_project_fails_seam_d() -> None:
    record = _record()
    record.audit = {"rows": [
        {"action": "preempt", "target": f"Workload {V1}", "team": RESEARCH, "local_queue": RESEARCH,
         "project": "scaling-laws", "editor": "alice@example.com"},
        {"action": "reactivated", "target": f"Workload {V2}", "team": "", "local_queue": RESEARCH,
         "project": "scaling-laws", "editor": "alice@example.com"},
        {"action": "transition-started", "target": "QuotaPolicy gpu-cluster", "team": RESEARCH,
         "editor": "kubectl-client-side-apply"}]}
    (d,) = [s for s in seams.check(record) if s.name.startswith("d")]
    assert d.problems == [f"reactivated Workload {V2}: no team",
                          "the shift's rows name ['kubectl-client-side-apply'], not the person who applied "
                          "it (alice@example.com)"]
