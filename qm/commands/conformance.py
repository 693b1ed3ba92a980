"""`qm conformance PATH...`: run scheduling-cycle cases (../shared/conformance/FORMAT.md)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "conformance",
        help="run scheduling-cycle cases against the model of Kueue's admission cycle",
        description="Run every case file under the given paths (files or directories). Prints one "
        "line per case (PASS/FAIL) and a summary; exits 1 if any case failed.",
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help="case file or directory of case files")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from fairshare.conformance import run_paths, summary_lines

    results = run_paths(args.paths)
    for line in summary_lines(results):
        print(line)
    return 0 if results and all(r.passed for r in results) else 1
