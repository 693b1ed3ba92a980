"""The compiled core (fairshare/compiled.py) decides exactly what the pure-Python reference decides.

`make test` runs this file twice: with the compiled core (built by `make core`), where the comparison is
compiled against pure Python, and in the pure-Python pass (`QM_CORE=python`), where it is pure Python in
two processes with different hash seeds (a decision that hung on set or dict order would show). The large
set: `python -m benchmarks.differential --python-vs-compiled` (make bench BENCH=differential)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import fairshare.snapshot
import simulations.model
from benchmarks.differential import compiled_differences
from fairshare.compiled import BUILD, state

ROOT = Path(__file__).resolve().parents[3]
# Random scenarios of benchmarks.differential covering fair sharing, hierarchical cohorts, several flavors
# and preemption, whose runs take well under a second (tests/differential_fast's set).
SEEDS = [1, 2, 3, 4, 6, 7, 10, 12, 15, 16, 19, 20]


def _pure_python_pass() -> bool:
    return os.environ.get("QM_CORE", "").lower() == "python"


def test_the_core_in_use_is_the_compiled_one_unless_pure_python_is_asked_for() -> None:
    core = state()
    if _pure_python_pass():
        assert not core.compiled
        assert fairshare.snapshot.__file__.endswith(".py")
        return
    assert core.compiled, f"the compiled core is not in use: {core.why}; run make core"
    for module in (fairshare.snapshot, simulations.model):
        assert module.__file__ is not None and Path(module.__file__).is_relative_to(BUILD), module.__file__


def test_every_corpus_case_and_random_scenario_decides_the_same_as_the_pure_python_reference() -> None:
    compared, problems = compiled_differences(SEEDS, corpus=True)
    assert compared >= 150 + len(SEEDS)
    assert problems == []


def test_a_stale_build_falls_back_to_pure_python_and_says_why(tmp_path: Path) -> None:
    """A source edited since the build: the whole core is pure Python (never old compiled rules beside new
    source), with one line on stderr. (Also in the pure-Python pass: the child process asks for no core.)"""
    assert (BUILD / "manifest.json").is_file(), "the compiled core is not built: run make core (needs cc)"
    # A copy of the project and its build, whose snapshot.py differs from what the manifest recorded.
    copy = tmp_path / "project"
    for name in ("fairshare", "simulations"):
        shutil.copytree(ROOT / name, copy / name)
    shutil.copytree(BUILD, copy / "build" / "core")
    with (copy / "fairshare" / "snapshot.py").open("a") as f:
        f.write("\n# edited after the build\n")
    code = ("import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]; "
            f"sys.path.insert(0, {str(copy)!r}); "
            "import fairshare.snapshot as s, fairshare.compiled as c; print(c.state().compiled, s.__file__)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={k: v for k, v in os.environ.items() if k != "QM_CORE"})
    compiled, module = proc.stdout.split()
    assert compiled == "False"
    assert module == str(copy / "fairshare" / "snapshot.py")
    assert proc.stderr.strip() == (
        "queue-manager: the compiled core is stale: fairshare/snapshot.py changed since the build "
        "(1 module(s); make core); using pure Python"
    )


def test_an_unknown_core_name_is_one_line() -> None:
    proc = subprocess.run([sys.executable, "-c", "import fairshare"], capture_output=True, text=True,
                          env={**os.environ, "QM_CORE": "fast"}, cwd=ROOT, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        "error: environment variable QM_CORE: must be python or compiled, got 'fast'"
    )
