"""Run the benchmarks: `python -m benchmarks [NAME...]` (default: all)."""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys

import benchmarks


def main(argv: list[str]) -> int:
    names = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_"))
    wanted = argv or [n for n in os.environ.get("QM_BENCH", "").split(",") if n]
    if wanted:
        unknown = [w for w in wanted if w not in names and f"bench_{w}" not in names]
        if unknown:
            print(f"unknown benchmark(s): {', '.join(unknown)}; known: {', '.join(names)}", file=sys.stderr)
            return 2
        names = [n for n in names if n in wanted or n.removeprefix("bench_") in wanted]
    for name in names:
        if len(names) > 1:  # one benchmark asked for: its own lines only (e.g. fidelity's one line)
            print(f"=== {name} ===", flush=True)
        importlib.import_module(f"benchmarks.{name}").main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
