"""The compiled core (issue 11): the simulator's hot modules compiled with mypyc, beside their pure-Python
source, which stays the reference and the fallback.

`make core` (`tools/build_core.py`, run by `make install`) compiles the modules it lists into `build/core/`,
a mirror of the package tree (`<package>/<module>.cpython-*.so`, and the shared library
`fairshare/compiled_core__mypyc`), with a manifest of the SHA-256 of every source it compiled. Each package
holding compiled modules calls :func:`extend_path` first thing in its `__init__`, which puts its folder of
`build/core` ahead of its own on its `__path__`, so that its modules import compiled, when:

- `QM_CORE` is not `python` (`QM_CORE=python`: the pure-Python reference, what the operator image runs;
  `QM_CORE=compiled`: the compiled core or a one-line error; unset: compiled when built and current);
- the manifest matches the sources: a module edited since the build makes the whole core pure Python (a
  mix of old compiled and new pure code would decide with the old rules), and says so once on stderr.

Same inputs, same outputs in both: `benchmarks/differential.py --python-vs-compiled` and
`tests/unit/core/test_compiled_core.py` compare whole simulation runs of the two.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import MutableSequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]  # the project (an installed package has no build/core: pure)
BUILD = ROOT / "build" / "core"
MANIFEST = BUILD / "manifest.json"
ENV = "QM_CORE"


@dataclass(frozen=True)
class CoreState:
    compiled: bool  # the compiled modules are imported
    why: str  # one line: what is in use and why


def digest(path: Path) -> str:
    """The SHA-256 of a source file, as the manifest records it (tools/build_core.py writes it)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_manifest() -> tuple[dict[str, str] | None, str]:
    """The sources the build compiled, by path relative to ROOT, with their SHA-256; or None and why."""
    try:
        doc = json.loads(MANIFEST.read_text())
    except FileNotFoundError:
        return None, "not built (make core)"
    except (OSError, ValueError) as err:
        return None, f"{MANIFEST}: unreadable ({err})"
    sources = doc.get("sources") if isinstance(doc, dict) else None
    tag = doc.get("cache_tag") if isinstance(doc, dict) else None
    if not isinstance(sources, dict) or not sources:
        return None, f"{MANIFEST}: no field 'sources'"
    if tag != sys.implementation.cache_tag:
        return None, f"built for {tag}, this is {sys.implementation.cache_tag} (make core)"
    return {str(k): str(v) for k, v in sources.items()}, ""


@cache
def state() -> CoreState:
    """Whether this process imports the compiled core (decided once, at the first import of fairshare)."""
    wanted = os.environ.get(ENV, "").strip().lower()
    if wanted not in ("", "python", "compiled"):
        raise SystemExit(f"error: environment variable {ENV}: must be python or compiled, got {wanted!r}")
    if wanted == "python":
        return CoreState(False, f"pure Python ({ENV}=python)")
    sources, why = _read_manifest()
    if sources is not None:
        stale = sorted(rel for rel, recorded in sources.items()
                       if not (ROOT / rel).is_file() or digest(ROOT / rel) != recorded)
        if stale:
            why = f"{stale[0]} changed since the build ({len(stale)} module(s); make core)"
            sources = None
    if sources is None:
        if wanted == "compiled":
            raise SystemExit(f"error: environment variable {ENV}=compiled: the compiled core is {why}")
        if why.startswith("not built"):
            return CoreState(False, f"pure Python (compiled core {why})")
        print(f"queue-manager: the compiled core is stale: {why}; using pure Python", file=sys.stderr)
        return CoreState(False, f"pure Python (compiled core stale: {why})")
    return CoreState(True, f"compiled ({len(sources)} modules, {BUILD})")


def extend_path(path: MutableSequence[str], package: str) -> None:
    """Put `package`'s folder of the compiled build ahead of its own on its `__path__` (see the module)."""
    if state().compiled:
        folder = BUILD.joinpath(*package.split("."))
        if folder.is_dir() and str(folder) not in path:
            path.insert(0, str(folder))
