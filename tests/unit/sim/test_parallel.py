"""qm simulate --jobs N: the runs go through simulations/executor.py; the outcome does not depend on N."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from qm.cli import main
from tests.unit.sim.test_cli import SCENARIO


def _without_wall_time(value: Any) -> Any:
    """summary.json minus what measures the machine, not the model (wall seconds, workloads per second)."""
    if isinstance(value, dict):
        return {
            k: _without_wall_time(v)
            for k, v in value.items()
            if k not in ("wall_seconds", "workloads_per_second")
        }
    if isinstance(value, list):
        return [_without_wall_time(v) for v in value]
    return value


def test_a_pool_of_worker_processes_gives_the_same_outcome_as_one_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO)
    outs = {}
    printed = []
    for jobs in ("1", "2"):
        out = tmp_path / f"jobs-{jobs}"
        assert (
            main(["simulate", str(scenario), "--out", str(out), "--quiet", "--no-report", "--jobs", jobs])
            == 0
        )
        outs[jobs] = out
        printed.append(capsys.readouterr().out.replace(str(out), "OUT"))
    summaries = [json.loads((o / "summary.json").read_text()) for o in outs.values()]
    assert _without_wall_time(summaries[0]) == _without_wall_time(summaries[1])
    assert summaries[0]["variants"][1]["replications"][1]["run"]["events"] > 0
    for name in ("keep/workloads.csv", "abrupt-cut/preemptions.csv", "abrupt-cut/actions.csv"):
        assert (outs["1"] / name).read_text() == (outs["2"] / name).read_text(), name
    assert printed[0] == printed[1]  # the table and the recommendation, printed the same


def test_zero_jobs_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(SCENARIO)
    assert main(["simulate", str(scenario), "--jobs", "0"]) == 2
    assert capsys.readouterr().err.strip() == "qm simulate: error: --jobs must be >= 1 (got 0)"
