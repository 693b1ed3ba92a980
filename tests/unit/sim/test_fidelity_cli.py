"""The trace-fidelity harness's command line (python -m tests.fidelity, make bench BENCH=fidelity): bad input
is one line naming the flag and the value, exit 2, before any control plane starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fidelity.harness import cli

CASES = {
    "a count that is not a number": (["--jobs", "X"], "argument --jobs: 'X' is not a whole number of jobs"),
    "no jobs": (["--jobs", "0"], "argument --jobs: 0 is outside 1 to 1,200"),
    "more jobs than the slice holds": (["--jobs", "5000"], "argument --jobs: 5000 is outside 1 to 1,200"),
    # (no abbreviations: `--job 10` must not start a run of 10 jobs)
    "an unknown flag": (["--job", "10"], "unrecognized arguments: --job 10"),
}


@pytest.mark.parametrize(("argv", "message"), CASES.values(), ids=CASES.keys())
def test_bad_flags_are_one_line_and_exit_2(argv: list[str], message: str,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err.count("\n") == 1 and err.startswith("python -m tests.fidelity: error: ") and message in err


def test_an_out_folder_that_is_a_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    taken = tmp_path / "taken"
    taken.write_text("")
    with pytest.raises(SystemExit) as exit_:
        cli(["--jobs", "40", "--out", str(taken)])
    err = capsys.readouterr().err
    assert exit_.value.code == 2
    assert err == (f"python -m tests.fidelity: error: argument --out: {str(taken)!r} is not a writable "
                   "folder (File exists)\n")
