"""Build the compiled core (fairshare/compiled.py): the simulator's hot modules compiled with mypyc into
build/core/, with a manifest of their sources' SHA-256. Re-running when the manifest matches the sources is a
no-op.

    .venv/bin/python tools/build_core.py             # make core
    .venv/bin/python tools/build_core.py --optional  # make install: without a C compiler, say so and go on

Why mypyc (issue 11, item 3): the modules are mypy --strict already, so the compiled code is the same source
as the pure-Python reference (no second implementation to keep in step); measured by `make bench BENCH=sim`
against the pure-Python run of the same scenario in the same command. Rust behind PyO3 would be faster per
call, but it is a second implementation of Kueue's rules to keep identical to the first.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

os.environ["QM_CORE"] = "python"  # this process only reads the manifest; it never imports the core it builds
# This checkout's sources, not those of the checkout a virtualenv has installed (a second worktree run with
# another's .venv would otherwise compile the first one's sources into the first one's build).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fairshare.compiled import BUILD, MANIFEST, ROOT, digest

GROUP = "fairshare.compiled_core"  # the shared library: fairshare/compiled_core__mypyc.*.so

# The hot path of a simulation run, bottom up: the Kueue object types, quantities and the quota tree, the
# snapshot, Kueue's queues and scheduling cycle, the settle loop; the policy controller and its planners; the
# simulator's event loop and measurement. (Not the pydantic boundary types, the loaders or the CLI: they run
# once per run.)
MODULES = (
    "fairshare/models.py",
    "fairshare/quantity.py",
    "fairshare/quota_tree.py",
    "fairshare/workload.py",
    "fairshare/snapshot.py",
    "fairshare/queues.py",
    "fairshare/livelock.py",
    "fairshare/settle.py",
    "fairshare/scheduler/types.py",
    "fairshare/scheduler/bound.py",
    "fairshare/scheduler/flavor_assigner.py",
    "fairshare/scheduler/preemption/common.py",
    "fairshare/scheduler/preemption/classical.py",
    "fairshare/scheduler/preemption/fairsharing.py",
    "fairshare/scheduler/preemption/targets.py",
    "fairshare/scheduler/assignments.py",
    "fairshare/scheduler/entry.py",
    "fairshare/scheduler/ordering.py",
    "fairshare/scheduler/cycle.py",
    "fairshare/scheduler/commit.py",
    "fairshare/history/decay.py",
    "fairshare/history/graph.py",
    "fairshare/history/drs.py",
    "fairshare/history/fair_tree.py",
    "fairshare/planners/budget.py",
    "fairshare/planners/deadline.py",
    "fairshare/planners/quota_shift.py",
    "fairshare/planners/experiments.py",
    "fairshare/control/actions.py",
    "fairshare/control/observed.py",
    "fairshare/control/history.py",
    "fairshare/control/victims.py",
    "fairshare/control/record_book.py",
    "fairshare/control/same.py",
    "fairshare/control/replay.py",
    "fairshare/control/transitions.py",
    "fairshare/control/eligible.py",
    "fairshare/control/experiments.py",
    "fairshare/control/decide.py",
    "simulations/engine.py",
    "simulations/measure.py",
    "simulations/kueue.py",
    "simulations/control.py",
    "simulations/model.py",
)


def digests() -> dict[str, str]:
    return {m: digest(ROOT / m) for m in MODULES}


def current() -> bool:
    try:
        doc = json.loads(MANIFEST.read_text())
    except (OSError, ValueError):
        return False
    return bool(doc.get("sources") == digests() and doc.get("cache_tag") == sys.implementation.cache_tag)


def compiler() -> str | None:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc)


def build() -> None:
    """mypycify + build_ext into a fresh temporary tree, swapped in whole (a failed build leaves none)."""
    started = time.monotonic()
    sources = digests()  # what is compiled: a source edited during the build is not current after it
    tmp = Path(tempfile.mkdtemp(prefix="core.", dir=ROOT / "build"))
    paths = ["--config-file", str(ROOT / "pyproject.toml"), *(str(ROOT / m) for m in MODULES)]
    script = (
        "import sys\n"
        "from setuptools import setup\n"
        "from mypyc.build import mypycify\n"
        f"setup(name='queue-manager-core', ext_modules=mypycify({paths!r}, group_name={GROUP!r}, "
        f"opt_level='3', target_dir={str(tmp / 'c')!r}),\n"
        f"      script_args=['build_ext', '--parallel', '{os.cpu_count() or 1}', '--build-lib', "
        f"{str(tmp / 'lib')!r}, '--build-temp', {str(tmp / 'obj')!r}])\n"
    )
    log = tmp / "build.log"
    env = {**os.environ, "QM_CORE": "python"}
    # (run in the temporary folder: setuptools would read the project's pyproject.toml as a package to build;
    # mypy reads its settings from it explicitly)
    with log.open("w") as out:
        rc = subprocess.call([sys.executable, "-c", script], cwd=tmp, stdout=out, stderr=subprocess.STDOUT,
                             env=env)
    if rc != 0:
        tail = log.read_text().strip().splitlines()[-15:]
        print("\n".join(tail), file=sys.stderr)
        print(f"make core: the mypyc build failed (exit {rc}); full log: {log}", file=sys.stderr)
        raise SystemExit(2)
    built = tmp / "lib"
    (built / MANIFEST.name).write_text(
        json.dumps({"cache_tag": sys.implementation.cache_tag, "sources": sources}, indent=1) + "\n"
    )
    if BUILD.exists():
        shutil.rmtree(BUILD)
    built.rename(BUILD)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"make core: {len(MODULES)} modules compiled with mypyc into {BUILD.relative_to(ROOT)} "
          f"in {time.monotonic() - started:.0f} s", file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--optional", action="store_true",
                        help="without a C compiler, say so and exit 0 (the simulator runs pure Python)")
    args = parser.parse_args()
    if current():
        # stderr: a status, not a result (`make bench BENCH=name` prints only the benchmark's lines on stdout)
        print(f"make core: the compiled core in {BUILD.relative_to(ROOT)} is current", file=sys.stderr)
        return
    if compiler() is None:
        line = ("make core: no C compiler found (cc): the compiled core is not built; the simulator runs "
                "pure Python, about 2x slower (install gcc and run make core)")
        print(line, file=sys.stderr)
        raise SystemExit(0 if args.optional else 2)
    (ROOT / "build").mkdir(exist_ok=True)
    print(f"make core: compiling {len(MODULES)} modules with mypyc (a few minutes on 2 cores)...",
          file=sys.stderr, flush=True)
    build()


if __name__ == "__main__":
    main()
