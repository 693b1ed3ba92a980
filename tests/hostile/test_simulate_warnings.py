"""`qm simulate` over a trace that is valid but partly unplayable: exit 0, and stderr says so in one line
each (issue 13: "a trace whose jobs can never fit: warn with counts; rc 0 only with a warning line", "rows
dropped without a count"). The trace is tests/data/itp-cluster10-head.csv: 50 jobs over 8 days, two of
them asking for 16 GPUs, the others for at most 8."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from qm.cli import main

from .bases import ROOT

SCENARIO = """\
name: itp-replay
seed: 1
horizon: {horizon}
cluster:
  objects:
  - {{apiVersion: kueue.x-k8s.io/v1beta2, kind: ResourceFlavor, metadata: {{name: gpu}}}}
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: ClusterQueue
    metadata: {{name: team}}
    spec:
      namespaceSelector: {{}}
      resourceGroups:
      - coveredResources: [nvidia.com/gpu]
        flavors: [{{name: gpu, resources: [{{name: nvidia.com/gpu, nominalQuota: {gpus}}}]}}]
  - apiVersion: kueue.x-k8s.io/v1beta2
    kind: LocalQueue
    metadata: {{namespace: team, name: main}}
    spec: {{clusterQueue: team}}
workloads:
- name: itp
  trace:
    format: itp
    paths: [trace.csv]
    queues: {{rule: single, localQueue: team/main}}
"""

NEVER_FIT = (
    "warning: trace itp: 2 of {n} jobs ({share}) can never be admitted: they request more than their "
    "queue can ever hold (largest: 16 nvidia.com/gpu in team/main, which can hold at most 8)"
)


def _simulate(tmp_path: Path, horizon: str, gpus: int, *flags: str) -> int:
    shutil.copy(ROOT / "tests" / "data" / "itp-cluster10-head.csv", tmp_path / "trace.csv")
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO.format(horizon=horizon, gpus=gpus))
    return main(["simulate", str(path), "--no-report", *flags])


@pytest.mark.parametrize(
    ("horizon", "gpus", "flags", "lines"),
    [
        pytest.param(
            "9d",
            8,
            ("--quiet",),
            [NEVER_FIT.format(n=50, share="4.0%")],
            id="jobs that can never fit: one warning line with counts, even with --quiet",
        ),
        pytest.param(
            "9d",
            8,
            (),
            ["trace itp: 50 rows read from 1 file, 0 skipped, 50 kept", NEVER_FIT.format(n=50, share="4.0%")],
            id="the import is summarized, then the warning",
        ),
        pytest.param(
            "5d",
            8,
            (),
            [
                "trace itp: 50 rows read from 1 file, 0 skipped, 50 kept; 48 arrive after the horizon (5d) "
                "and are not replayed",
                NEVER_FIT.format(n=2, share="100.0%"),
            ],
            id="jobs past the horizon are counted",
        ),
        pytest.param("9d", 16, ("--quiet",), [], id="every job fits: no warning"),
    ],
)
def test_a_trace_that_is_partly_unplayable_runs_with_rc_0_and_says_so(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    horizon: str,
    gpus: int,
    flags: tuple[str, ...],
    lines: list[str],
) -> None:
    rc = _simulate(tmp_path, horizon, gpus, *flags)
    err = capsys.readouterr().err.splitlines()
    # Without --quiet the per-run log lines follow ("itp-replay #1: ... in 0.01s": timing varies).
    notes = [line for line in err if not line.startswith("itp-replay #")]
    assert (rc, notes) == (0, lines)
    assert len(err) - len(notes) == (0 if "--quiet" in flags else 1)
