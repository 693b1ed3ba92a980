from __future__ import annotations

from pathlib import Path

import pytest

from qm.cli import main

EXAMPLES = Path(__file__).resolve().parents[3] / "tests" / "conformance" / "shared-examples"
PREEMPT = EXAMPLES / "preempt-lowest-priority.yaml"


def test_conformance_prints_one_line_per_case_and_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance", str(EXAMPLES)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "PASS admit in different cohorts, borrowing on the first flavor",
        "PASS fair sharing reclaims borrowable quota from the queue using the most",
        "PASS preempt lowest priority",
        "3 passed, 0 failed",
    ]


def test_a_wrong_expectation_fails_the_case_with_what_differed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = tmp_path / "wrong.yaml"
    case.write_text(PREEMPT.read_text().replace("team-a/low: InClusterQueue", "team-a/mid: InClusterQueue"))
    assert main(["conformance", str(case)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "FAIL preempt lowest priority: preempted: expected {team-a/mid: InClusterQueue}, "
        "got {team-a/low: InClusterQueue}",
        "0 passed, 1 failed",
    ]


BROKEN = [
    ("yaml", "a: [", "invalid YAML at line 1"),
    (
        "unknown queue",
        PREEMPT.read_text().replace("spec: {clusterQueue: standalone}", "spec: {clusterQueue: nope}"),
        "field spec.clusterQueue: ClusterQueue 'nope' does not exist",
    ),
    ("no header", PREEMPT.read_text().split("---", 1)[1], "needs exactly one CycleCase document"),
]


@pytest.mark.parametrize(("text", "message"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_an_invalid_case_file_is_a_failed_case_never_a_traceback(
    tmp_path: Path, text: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    case = tmp_path / "broken.yaml"
    case.write_text(text)
    assert main(["conformance", str(case)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"FAIL {case}: ") and message in lines[0]
    assert lines[1:] == ["0 passed, 1 failed"]


def test_explain_prints_each_head_with_its_decision_and_reason(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(PREEMPT)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [
        "Next scheduling cycle (1 head(s)):",
        "WORKLOAD         CLUSTERQUEUE  PRIORITY  DECISION               WHY",
        "team-a/incoming  standalone    1         preempting team-a/low  "
        "preempting 1 workload(s): team-a/low (InClusterQueue)",
    ]


def test_explain_reports_bad_input_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {name: x}\n"
        "spec: {queueingStrategy: Nope}\n"
    )
    assert main(["explain", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "qm explain: error:" in err and "spec.queueingStrategy" in err
