"""Classifying the chained model's disagreements (no control plane: the model side only).

Seed 193 in fair-sharing mode, the state the 130:300 run found: w03 is the StrictFIFO head of cq3,
does not fit, and Kueue retries it every cycle; its flavor scan alternates between cq3's two flavors.
At step 4, w04 (cq0) arrives. What Kueue v0.19.2 did in that run: w04's pod set ``main`` on df193-f0
(the cycle in which w03 tries df193-f1 reserves it). The chained model, settled with w03's scan at the
other phase, puts ``main`` on df193-f1. The resynced model (a fresh scan) agreed with Kueue.
"""

from __future__ import annotations

from typing import Any

from tests.differential.cluster import StepObservation, workload_body
from tests.differential.generator import GeneratedState, generate
from tests.differential.model import ChainedModel, Flavors, ModelStep, summarize
from tests.differential.runner import SCAN_PHASE, classify_chained, compare

Obj = dict[str, Any]


def _body(g: GeneratedState, i: int) -> Obj:
    body = workload_body(g.workloads[i])
    body["metadata"].update(
        namespace=g.namespace, uid=f"uid-{i}", creationTimestamp=f"2026-01-01T00:00:{i:02d}Z"
    )
    return body


def _chained(g: GeneratedState, steps: int) -> tuple[ChainedModel, Obj]:
    chain = ChainedModel(g)
    for i in range(steps):
        body = _body(g, i)
        chain.step(body, float(i))
    return chain, body


def _observed(g: GeneratedState, admitted: dict[str, Flavors]) -> StepObservation:
    """What Kueue holds after a step, as the harness reads it (only what the comparison reads)."""
    workloads = []
    for i, spec in enumerate(g.workloads):
        body = _body(g, i)
        if spec.name in admitted:
            body["status"] = {
                "conditions": [{"type": "QuotaReserved", "status": "True"}],
                "admission": {
                    "podSetAssignments": [{"name": ps, "flavors": f} for ps, f in admitted[spec.name].items()]
                },
            }
        workloads.append(body)
    return StepObservation(workloads, {}, settled=True, livelock=False, seconds=1.0, releases=0)


F0 = {"cpu": "df193-f0", "nvidia.com/gpu": "df193-f0"}
F1 = {"cpu": "df193-f1", "nvidia.com/gpu": "df193-f1"}
KUEUE_STEP_4 = {  # seed 193, fair sharing, step 4, as Kueue v0.19.2 settled it
    "w01": {"main": F1},
    "w02": {"main": F1},
    "w04": {"main": F0, "ps1": {"cpu": "df193-f0"}},
}


def test_a_submission_meeting_another_phase_of_a_retried_head_is_timing() -> None:
    g = generate(193, "fair-sharing")
    chain, new = _chained(g, 5)
    real = _observed(g, KUEUE_STEP_4)
    got = compare(real, _summary(chain))
    assert not got.agree and got.cls == "decision: flavor assignment"
    assert classify_chained(chain, new, 4.0, real, got).cls == SCAN_PHASE


def test_a_difference_no_phase_reproduces_stays_a_decision() -> None:
    g = generate(193, "fair-sharing")
    chain, new = _chained(g, 5)
    # w04 on df193-f1 for both pod sets: no phase of w03's scan gives that.
    real = _observed(g, {**KUEUE_STEP_4, "w04": {"main": F1, "ps1": {"cpu": "df193-f1"}}})
    got = compare(real, _summary(chain))
    assert not got.agree
    assert classify_chained(chain, new, 4.0, real, got) == got


def test_a_model_that_was_not_left_cycling_has_no_later_phases() -> None:
    g = generate(193, "fair-sharing")
    chain, new = _chained(g, 1)  # the first submission: nothing ran before it, nothing cycles
    assert list(chain.later_phases(new, 0.0)) == []


def _summary(chain: ChainedModel) -> ModelStep:
    assert chain.last_run is not None
    return summarize(chain.model, chain.last_run, chain.names)
