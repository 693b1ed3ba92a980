"""``python -m tests.fidelity [--jobs N] [--out DIR]`` (``make bench BENCH=fidelity``): the trace-fidelity run
on a control plane of its own; prints the one `fidelity:` line on stdout, the details and the classification
on stderr; exits 1 when a target is missed, 2 on bad input (one line, no traceback)."""

from __future__ import annotations

import sys

from .harness import cli

if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
