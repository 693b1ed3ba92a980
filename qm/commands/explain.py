"""`qm explain FILE`: what the next Kueue scheduling cycle does with this state, and why."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "explain",
        help="show what the next scheduling cycle does and why (a table)",
        description="Read a case file (../shared/conformance/FORMAT.md) or plain Kueue v1beta2 manifests "
        "and print, for each ClusterQueue's head, the decision (admitted on which flavors, preempting "
        "whom, or pending and why).",
    )
    parser.add_argument("file", metavar="FILE")
    parser.add_argument("--now", help="the cycle's time (RFC 3339); default: the case's spec.now")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from fairshare.errors import InputError
    from fairshare.explain import explain_file, render
    from fairshare.manifests import parse_time
    from qm.cli import UserError

    try:
        now = parse_time(args.now) if args.now else None
    except InputError:
        raise UserError(f"--now: not an RFC 3339 time: {args.now!r}") from None
    for line in render(explain_file(args.file, now=now)):
        print(line)
    return 0
