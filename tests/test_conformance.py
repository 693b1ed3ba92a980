"""Every scheduling-cycle case (the shared examples, vendored, + the project's corpus) as one test."""

from __future__ import annotations

from pathlib import Path

import pytest

from fairshare.conformance import case_files, load_case, run_case

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "conformance"
SHARED = CORPUS / "shared-examples"  # copied from shared/conformance/examples (its README)
FILES = case_files([CORPUS])


def _case_id(path: Path) -> str:
    try:
        return load_case(path).name
    except Exception:  # an invalid file still gets a test (which then fails with the message)
        return path.name


def test_the_three_shared_examples_are_present() -> None:
    assert len([f for f in FILES if f.is_relative_to(SHARED)]) == 3


@pytest.mark.parametrize("path", FILES, ids=[_case_id(f) for f in FILES])
def test_the_model_decides_what_kueue_decides(path: Path) -> None:
    result = run_case(load_case(path))
    assert result.passed, result.message
