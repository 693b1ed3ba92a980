"""The core's fast paths decide exactly what the reference decides (the small set of
``python -m benchmarks.differential``; the large set runs in ``make bench BENCH=differential``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.differential import (
    CORPUS,
    ROOT,
    controller_differences,
    corpus_differences,
    first_difference,
    lockstep,
    random_scenario,
    run_repr,
    scenario_difference,
    simulate,
)
from fairshare.snapshot import FAST, REFERENCE
from simulations.loader import load_scenario
from simulations.runner import build_jobs

# Seeds of random scenarios whose reference run takes well under a second, covering: fair sharing
# (1, 3, 4, 7, 16, 21, 28, 31), hierarchical cohorts of depth 2-3 (3, 10, 12, 16, 19, 20, 21, 24),
# several flavors and StrictFIFO / BestEffortFIFO queues.
SEEDS = [1, 2, 3, 4, 6, 7, 10, 12, 15, 16, 19, 20, 21, 24, 28, 31]


def test_every_conformance_case_decides_the_same_with_the_fast_core() -> None:
    cases, problems = corpus_differences([CORPUS])
    assert cases >= 150
    assert problems == []


@pytest.mark.parametrize("seed", SEEDS)
def test_a_random_scenario_runs_identically_with_the_fast_core(seed: int) -> None:
    assert scenario_difference(seed, FAST) is None


@pytest.mark.parametrize("seed", range(12))
def test_the_cores_decide_every_cycle_identically_in_lock_step_with_quota_changes(seed: int) -> None:
    assert lockstep(seed, FAST) is None


def test_the_comparison_sees_a_different_run() -> None:
    """The comparison is not blind: two different loads give a difference that names the field."""
    a, _ = random_scenario(2)
    b, _ = random_scenario(6)
    ra = run_repr(simulate(a, build_jobs(a, ROOT, 0), REFERENCE))
    rb = run_repr(simulate(b, build_jobs(b, ROOT, 0), FAST))
    diff = first_difference(ra, rb)
    assert diff is not None and diff.split("[")[0].split(":")[0] in ra


def test_the_random_scenarios_exercise_what_the_issue_asks_for() -> None:
    shapes = [random_scenario(s)[1] for s in SEEDS]
    assert any(s.fair_sharing for s in shapes) and any(not s.fair_sharing for s in shapes)
    assert any(s.depth >= 2 for s in shapes)
    assert any(s.flavors >= 2 for s in shapes)
    scenarios = [random_scenario(s)[0] for s in SEEDS]
    preempting = [
        o for sc in scenarios for o in sc.cluster.objects
        if o["kind"] == "ClusterQueue" and o["spec"]["preemption"]["withinClusterQueue"] != "Never"
    ]
    assert preempting


def test_the_policy_controller_decides_the_same_when_its_gate_replans_only_the_trees_that_changed() -> None:
    """FastPaths.plan_by_tree (fairshare.control.experiments.PlanMemo) against the reference, whole runs of
    a three-tree QuotaPolicy whose business work stays blocked while the other trees move, with and without
    quota steps set inside the controller's decision (the large set: benchmarks.differential --controller)."""
    runs, problems = controller_differences(load_scenario(Path(__file__).with_name("three-trees.yaml")), [0],
                                            "three-trees")
    assert runs == 3
    assert problems == []
