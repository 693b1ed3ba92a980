"""Issue 32 on the real Kueue v0.19.2 (tests/differential/storm.py, docs/kueue-fair-sharing-loop.md): from the
smallest looping state, the weights the policy controller pushes (the model's what-if sees the loop under the
pushed weights a=545m, b=1, c=1834m and damps them) make Kueue admit the trainer after one preemption round.
Under the looping weights the outcome depends on the Jobs' random UIDs (re-admitted victims share a
QuotaReserved second), so it is measured (`python -m tests.differential.storm`), not asserted here."""

from __future__ import annotations

import time

import pytest
from kubernetes import config as k8s_config

from devcluster import ControlPlane
from tests.differential.storm import controller_weights, run_trial
from tests.unit.control.storm_world import LOOPING_WEIGHTS


def test_the_controller_damps_the_looping_weights_in_the_model() -> None:
    assert LOOPING_WEIGHTS == {"a": "545m", "b": "1", "c": "1834m"}
    assert controller_weights() == {"a": "1", "b": "1", "c": "1"}


@pytest.mark.parametrize("differential_control_plane", ["fair-sharing"], indirect=True)
def test_kueue_admits_the_trainer_from_the_looping_state_under_the_weights_the_controller_pushes(
    differential_control_plane: ControlPlane,
) -> None:
    api = k8s_config.new_client_from_config(config_file=str(differential_control_plane.kubeconfig))
    pushed = controller_weights()
    run = f"{int(time.time()) % 100000}"
    try:
        trials = [run_trial(api, pushed, f"{run}t{i}", watch=15.0) for i in range(2)]  # two UID draws
    finally:
        api.close()
    for trial in trials:
        assert trial.trainer_admitted, trial.line()
        assert trial.rounds == 1, trial.line()  # one preemption round: three victims, no re-admission race

