"""Measure the local control plane: warm start-to-ready time and resident memory.

    .venv/bin/python tools/controlplane/measure.py [--runs 5]

Prints each run's phase timings (seconds since start), then the median start-to-ready and the RSS of
each component right after readiness (median over runs). Figures only; it asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from devcluster import Binaries, ControlPlane


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    binaries = Binaries.discover()
    ready: list[float] = []
    rss: dict[str, list[int]] = {}
    for run in range(args.runs):
        with ControlPlane(None, binaries, log=lambda _msg: None) as cp:
            mem = cp.rss_kib()
            phases = " ".join(f"{k}={v:.2f}" for k, v in cp.timings.items())
            print(f"run {run + 1}: {phases}  rss_MiB={ {k: round(v / 1024) for k, v in mem.items()} }")
            ready.append(cp.timings["ready"])
            for name, kib in mem.items():
                rss.setdefault(name, []).append(kib)
    v = binaries.versions
    print(f"kubernetes {v.kubernetes}, etcd {v.etcd}, kueue {v.kueue}; {args.runs} runs")
    print(
        f"start-to-ready: median {statistics.median(ready):.2f}s (min {min(ready):.2f}, max {max(ready):.2f})"
    )
    medians = {name: statistics.median(vals) / 1024 for name, vals in sorted(rss.items())}
    parts = ", ".join(f"{name} {mib:.0f} MiB" for name, mib in medians.items())
    print(f"RSS at ready (median): {parts}; total {sum(medians.values()):.0f} MiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
