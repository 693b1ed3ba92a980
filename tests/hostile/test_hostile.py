"""The hostile-input suite: >= 1,000 generated cases (tests/hostile/generator.py; the ledger commands'
in gen_ledger.py; issue 33's policy fields, qm run bounds and --fail-if in gen_hardening.py; spec.idle and
qm run --prometheus-url in gen_idle.py) run through
the real `qm` entry point in-process; each must end with its exact outcome, in one line, fast."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from qm.cli import main

from . import gen_hardening, gen_idle
from .gen_ledger import generate_ledger
from .generator import SEED, Case, generate

CASES = (generate(SEED) + generate_ledger(SEED) + gen_hardening.generate(gen_hardening.SEED)
         + gen_idle.generate(gen_idle.SEED))
SECONDS = 5.0  # per case, on a loaded 2-core machine (the whole suite takes well under a minute)


@pytest.fixture(scope="session")
def empty_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty ledger of this version (made once, by the ledger itself), for cases of valid windows."""
    from ledger.ledger import open_ledger

    path = tmp_path_factory.mktemp("hostile-ledger") / "ledger.db"
    open_ledger(str(path)).close()
    return path


def _run(argv: tuple[str, ...]) -> int:
    try:
        return main(list(argv))
    except SystemExit as exit_:  # argparse's own errors (bad flags) exit 2 through SystemExit
        return int(exit_.code or 0) if not isinstance(exit_.code, str) else 2


def test_the_generator_makes_over_a_thousand_distinct_cases_for_every_command() -> None:
    commands = {c.command for c in CASES}
    assert len(CASES) >= 1000 and len({c.id for c in CASES}) == len(CASES)
    assert commands >= {
        "explain",
        "conformance",
        "policy check",
        "policy render",
        "run",
        "dev-cluster",
        "simulate",
        "usage",
        "cost",
        "audit",
        "budget status",
        "plan",
    }
    assert (generate(SEED) + generate_ledger(SEED) + gen_hardening.generate(gen_hardening.SEED)
            + gen_idle.generate(gen_idle.SEED)) == CASES


def test_issue_33s_surfaces_have_over_500_cases_of_their_own() -> None:
    # tests/hostile/gen_hardening.py: policy fields, scenario budgets, `qm run` bounds, `--fail-if`.
    cases = gen_hardening.generate(gen_hardening.SEED)
    assert len(cases) >= 500
    assert {c.command for c in cases} == {"policy check", "policy render", "simulate", "run", "plan"}


@pytest.mark.timeout(10)  # a hang fails its case (pytest-timeout) in 10 s, not the whole run
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_a_hostile_input_is_one_clear_line_never_a_traceback_or_a_hang(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    path = tmp_path / "input.yaml"
    if case.path_kind == "dir":
        path.mkdir()
    elif case.path_kind == "ledger":  # an empty ledger of this version; `content` is a policy beside it
        shutil.copyfile(request.getfixturevalue("empty_ledger"), path)
        if case.content is not None:
            path.with_name(path.name + ".policy").write_bytes(case.content)
    elif case.path_kind == "file" and case.content is not None:
        path.write_bytes(case.content)
    argv, stdout, stderr = case.render(str(path))
    started = time.perf_counter()
    rc = _run(argv)
    took = time.perf_counter() - started
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert (rc, out, err) == (case.rc, stdout, stderr)
    assert took < SECONDS, f"{took:.2f} s"
