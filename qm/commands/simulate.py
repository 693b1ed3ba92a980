"""`qm simulate SCENARIO --out DIR`: what-if simulation of a scenario and its variants."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from pathlib import Path


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="simulate a scenario (and its what-if variants) with the fairshare core",
        description="Drive the same decision code as the service in simulated time over synthetic load or "
        "real traces; print a side-by-side comparison of the variants and write summary.json, CSVs and "
        "report.html to --out.",
    )
    parser.add_argument("scenario", nargs="?", help="scenario YAML file")
    parser.add_argument("--out", metavar="DIR", help="output directory (default: no files)")
    parser.add_argument("--schema", action="store_true", help="print the scenario JSON Schema and exit")
    parser.add_argument(
        "--summary-schema", action="store_true", help="print the summary.json JSON Schema and exit"
    )
    parser.add_argument("--replications", type=int, metavar="N", help="override the scenario's replications")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME", help="only these variants")
    parser.add_argument("--no-report", action="store_true", help="skip report.html and its plots")
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )
    parser.add_argument("--quiet", action="store_true", help="no per-run log lines")
    parser.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="simulate N runs at once in worker processes (default: all cores; 1: in this process); the "
        "results are the same whatever N",
    )
    parser.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="where the runs go: local worker processes (default; --jobs) or Ray tasks (an optional extra: "
        "pip install 'queue-manager[ray]'); the results are the same",
    )
    parser.add_argument(
        "--address",
        metavar="ADDR",
        help="--executor ray: the Ray cluster (HOST:PORT, ray://HOST:PORT or auto; default: a Ray started "
        "in this process, or the one RAY_ADDRESS names)",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="run even when the estimate (workloads, samples, events, runs) is above the guards' limits "
        "(docs/simulator.md, Guards)",
    )
    parser.add_argument(
        "--core",
        choices=("fast", "reference"),
        default="fast",
        help="the scheduling core: its exact fast paths (default; proven to decide identically by "
        "`make bench BENCH=differential`) or the reference implementation",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from qm.cli import UserError

    if args.schema:
        from simulations.scenario import scenario_json_schema

        print(json.dumps(scenario_json_schema(), indent=2))
        return 0
    if args.summary_schema:
        from simulations.summary import summary_json_schema

        print(json.dumps(summary_json_schema(), indent=2))
        return 0
    if not args.scenario:
        raise UserError("a scenario file is required (or --schema)")
    if args.replications is not None and args.replications < 1:
        raise UserError(f"--replications must be >= 1 (got {args.replications})")
    if args.jobs is not None and args.jobs < 1:
        raise UserError(f"--jobs must be >= 1 (got {args.jobs})")
    if args.address is not None and args.executor != "ray":
        raise UserError("--address needs --executor ray")
    if args.executor == "ray":
        from simulations.executor import require_ray

        require_ray(args.address)  # before the scenario is read: the one line saying how to install it

    from fairshare.snapshot import FAST, REFERENCE
    from simulations.guards import check
    from simulations.loader import load_scenario
    from simulations.outputs import write_run_files, write_summary
    from simulations.recommend import ranking_table
    from simulations.report import write_report
    from simulations.runner import run_scenario
    from simulations.whatif import comparison_table, storm_lines

    loaded = load_scenario(args.scenario)
    # Before any workload is drawn: a runaway scenario is refused in one line with its estimate.
    estimate, over = check(loaded, replications=args.replications, only=args.variant, force=args.force)
    if over is not None:
        print(f"warning: {args.scenario}: running {estimate.line()} although {over} (--force)",
              file=sys.stderr)
    outcome = run_scenario(
        loaded,
        replications=args.replications,
        only=args.variant,
        progress=args.progress,
        log=None if args.quiet else sys.stderr,
        workers=args.jobs,
        core=FAST if args.core == "fast" else REFERENCE,
        executor=args.executor,
        address=args.address,
    )
    print(f"{loaded.base.name}: {loaded.base.description}".rstrip(": "))
    print(comparison_table(outcome.summary.variants, outcome.summary.metric_info))
    storms = storm_lines(outcome.summary)
    if storms:
        print()
        print("Eviction storms (repeated preempt -> re-admit cycles):")
        for line in storms:
            print(textwrap.fill(line, width=110, initial_indent="  ", subsequent_indent="    "))
    recommendation = outcome.summary.recommendation
    if recommendation is not None:
        print()
        print(textwrap.fill(recommendation.paragraph, width=110))
        print()
        print(ranking_table(recommendation))
        for note in recommendation.notes:
            print(textwrap.fill(f"Note: {note}", width=110, subsequent_indent="  "))
        if recommendation.more_replications:
            print(textwrap.fill(f"More replications needed: {recommendation.more_replications}.", width=110))
    if args.out:
        out = Path(args.out)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UserError(f"cannot create --out {out}: {err.strerror}") from None
        write_summary(out, outcome.summary)
        write_run_files(out, outcome.first_runs)
        if not args.no_report:
            report = write_report(
                out,
                outcome.summary,
                outcome.first_runs,
                digests=outcome.digests,
                change_times=outcome.change_times,
            )
            print(f"\nreport: {report}  (summary: {out / 'summary.json'})")
        else:
            print(f"\nsummary: {out / 'summary.json'}")
    return 0
