"""The large differential set (issue 11 item 1): the reference core against the fast core over the
conformance corpus and 240 random scenarios (see benchmarks/differential.py; its small set runs in
tests/differential_fast), then the policy controller's runs (--controller: the bundled QuotaPolicy
scenarios and the plan benchmark's cluster, 3 replications of every variant). Prints one line per
difference and the totals.

Run: make bench BENCH=differential   (QM_BENCH_DIFF_N = number of random scenarios, default 240;
                                      QM_BENCH_DIFF_CONTROLLER = replications of the controller set, 3)
"""

from __future__ import annotations

import os

from .differential import main as differential_main


def main() -> None:
    n = int(os.environ.get("QM_BENCH_DIFF_N", "240"))
    reps = int(os.environ.get("QM_BENCH_DIFF_CONTROLLER", "3"))
    print(f"command: make bench BENCH=differential  (python -m benchmarks.differential --random {n}; "
          f"--controller {reps})")
    status = differential_main(["--random", str(n)])
    if reps > 0:
        status |= differential_main(["--controller", str(reps)])
    print("identical" if status == 0 else "DIFFERENCES FOUND (see above)")
