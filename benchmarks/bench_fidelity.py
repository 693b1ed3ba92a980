"""The trace-fidelity run (issue 37): 1,000 jobs of a real trace (ITP 2021 cluster05) on the real control
plane (Kueue, KWOK nodes, the operator applying a policy edited in the middle) and through the simulator, the
same inputs; prints `fidelity: order agreement A%, mean wait deviation D%, p95 wait deviation P%, evictions
real R / simulated S` on stdout, the details and the classification of what is left on stderr
(tests/fidelity/README.md). About 30 minutes on 2 cores.

Run: make bench BENCH=fidelity   (QM_BENCH_FIDELITY_JOBS = jobs of the slice, default 1000, at most 1200)
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    import argparse

    from tests.fidelity.harness import cli, parse_jobs

    jobs = os.environ.get("QM_BENCH_FIDELITY_JOBS", "1000")
    try:
        parse_jobs(jobs)
    except argparse.ArgumentTypeError as err:
        print(f"bench_fidelity: error: QM_BENCH_FIDELITY_JOBS: {err}", file=sys.stderr)
        sys.exit(2)
    status = cli(["--jobs", jobs])
    if status == 2:  # bad input, said in one line: make stops there
        sys.exit(status)
