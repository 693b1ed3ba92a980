"""`qm audit --since 7d [--team X] [--action preempt]`: what the service did, and why (from the ledger)."""

from __future__ import annotations

import argparse

from . import _ledger_cli as cli


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "audit",
        help="the audit trail: every action of the service with what, why and the policy generation",
        description="Audit records in the window, oldest first.",
    )
    cli.add_common(parser, since="7d")
    parser.add_argument("--team", metavar="NAME", help="only actions concerning this team (ClusterQueue)")
    parser.add_argument("--action", action="append", default=[], metavar="ACTION",
                        help="only this action (repeatable; a trailing * matches a prefix, e.g. preempt*)")
    parser.add_argument("--limit", metavar="N", help="at most N records (up to 1,000,000)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from fairshare.timestamps import rfc3339
    from ledger.queries import AuditQuery
    from ledger.records import to_millis

    most = cli.limit(args.limit)
    since, until, _ = cli.window(args)
    query = AuditQuery(to_millis(since), to_millis(until), args.team, tuple(args.action), most)
    with cli.open_read(args) as ledger:
        entries = ledger.audit(query)
    headers = ["time", "action", "target", "what", "why", "policy", "generation", "editor", "team",
               "local_queue", "project", "user"]
    rows = []
    for e in entries:
        target = f"{e.target_kind} {e.target_namespace + '/' if e.target_namespace else ''}{e.target_name}"
        rows.append([rfc3339(e.at), e.action, target, e.what, e.why, e.policy,
                     "" if e.policy_generation is None else str(e.policy_generation), e.editor or "",
                     e.team or "", e.local_queue or "", e.project or "", e.user or ""])
    cli.emit(args.output, headers, rows, title=f"Audit {rfc3339(since)} .. {rfc3339(until)}",
             meta={"since": rfc3339(since), "until": rfc3339(until)})
    return 0
