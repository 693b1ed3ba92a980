"""The bundled storm-80gpu.yaml (issue 32's shape): with pushed weights the controller foresees the
fair-sharing loop at its first round and damps the weights, so no workload is evicted in a loop; the summary
reports storms from the evictions themselves (fairshare.control.storms) and the controller's answers apart."""

from __future__ import annotations

from pathlib import Path

from simulations.loader import load_scenario
from simulations.model import simulate_run
from simulations.runner import build_jobs
from simulations.summary import summarize

SCENARIO = Path(__file__).resolve().parents[3] / "simulations" / "scenarios" / "storm-80gpu.yaml"


def test_pushed_weights_in_the_issues_shape_are_damped_at_the_first_round_of_a_loop() -> None:
    loaded = load_scenario(SCENARIO)
    variant = next(v for v in loaded.variants if v.name == "pushed weights")
    # The first loop of replication 1 comes on day 1.7 (a pending nlp training job and cv's experiments).
    scenario = variant.scenario.model_copy(update={"horizon": 2.5 * 86400})
    run = simulate_run(scenario, build_jobs(scenario, loaded.directory, 0), base_dir=loaded.directory,
                       variant=variant.name, replication=0)
    summary = summarize(run)
    storms = [a for a in run.actions if a.kind == "storm"]
    assert len(storms) == 1 and storms[0].detail.startswith("DampWeights: eviction storm foreseen")
    assert storms[0].target.startswith("nlp/")
    assert [a.kind for a in run.actions if a.time >= storms[0].time][:2] == ["storm", "weights"]
    assert summary.storms == [] and summary.storms_answered == 1
    assert summary.cluster.evictions.max <= 10  # Kueue's ordinary reclaim, no loop
