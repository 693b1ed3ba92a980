"""`qm budget status`: each budget of a QuotaPolicy in its current period: consumed, limit, the thresholds
reached and the actions in force.

Two sources, one definition (fairshare.control.budgets):

- `qm budget status POLICY.yaml [--db URL] [--at TIME]`: the policy's budgets measured in the ledger now
  (ledger.budgets.measure, what the operator measures) and decided by the controller's own
  `fairshare.control.budgets.evaluate`, so the figures and thresholds are the ones enforcement would use;
  `--at` asks about another moment (a period boundary, say).
- `qm budget status --kubeconfig FILE [--policy NAME]`: what the running operator decided, read from the
  QuotaPolicies' `status.budgets` (with the time each threshold was reached).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from . import _ledger_cli as cli

if TYPE_CHECKING:
    from fairshare.policy.status import BudgetStatus

LATEST_AT = 253370764800.0  # 9999-01-01T00:00:00Z: the month or week that holds it ends before year 10000
LATEST_AT_TEXT = "9999-01-01T00:00:00Z, so that a budget period holding it ends before year 10000"
HEADERS = ("policy", "budget", "team", "period_start", "period_end", "used", "limit", "unit", "used_pct",
           "reached", "enforcing", "dry_run", "measured_at")
KEYS = ("policy", "budget", "team", "period_start", "period_end", "used", "limit", "unit", "used_percent",
        "reached", "enforcing", "dry_run", "measured_at")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "budget", help="budgets (spec.budgets): consumption in the current period, thresholds reached",
        description="Budgets of a QuotaPolicy.")
    sub = parser.add_subparsers(dest="budget_command", metavar="SUBCOMMAND", required=True)
    status = sub.add_parser(
        "status", help="each budget in its current period: used, limit, thresholds reached, actions in force",
        description="With POLICY.yaml: measured in the ledger (--db) and decided as the operator decides. "
        "With --kubeconfig: the running operator's status.budgets.")
    status.add_argument("policy_file", nargs="?", metavar="POLICY.yaml",
                        help="a QuotaPolicy file: measure its budgets in the ledger")
    status.add_argument("--db", metavar="URL", help="the ledger (with POLICY.yaml; default: $QM_LEDGER_URL, "
                        "else ~/.local/share/queue-manager/ledger.db)")
    status.add_argument("--at", metavar="TIME", help="the moment asked about (RFC 3339; default now; with "
                        "POLICY.yaml)")
    status.add_argument("--kubeconfig", metavar="FILE", help="read the operator's status.budgets from the "
                        "cluster instead (default config when neither this nor POLICY.yaml is given)")
    status.add_argument("--context", help="kubeconfig context")
    status.add_argument("--policy", metavar="NAME", help="with --kubeconfig: only this QuotaPolicy")
    status.add_argument("-o", "--output", default="table", choices=cli.FORMATS, help="output format")
    status.set_defaults(handler=run_status)


def run_status(args: argparse.Namespace) -> int:
    from qm.cli import UserError

    if args.policy_file is not None:
        if args.kubeconfig or args.context or args.policy:
            raise UserError("POLICY.yaml excludes --kubeconfig, --context and --policy")
        name, records = _from_ledger(args)
        rows = [_row(name, r, times=False) for r in records]
        title = f"Budgets of {args.policy_file} (measured in the ledger)"
    else:
        if args.db or args.at is not None:
            raise UserError("--db and --at need POLICY.yaml (with --kubeconfig the operator's status is "
                            "read)")
        rows = [_row(n, r, times=True) for n, recs in _from_cluster(args) for r in recs]
        title = "Budgets (the operator's status.budgets)"
    cli.emit(args.output, HEADERS, rows, title=title, meta={}, keys=KEYS)
    return 0


def _from_ledger(args: argparse.Namespace) -> tuple[str, list[BudgetStatus]]:
    from fairshare.control.budgets import budget_rules, evaluate
    from fairshare.policy import parse_policy, spec_quotas
    from fairshare.yamlfile import load_yaml_one
    from ledger.budgets import measure

    now = time.time()  # the clock is read here, at the shell's edge
    if args.at is not None:
        # A calendar period that contains --at must end inside the times a report can print.
        now = cli.moment("--at", args.at, latest=LATEST_AT, latest_text=LATEST_AT_TEXT)
    policy = parse_policy(load_yaml_one(args.policy_file, what="a QuotaPolicy"), file=args.policy_file)
    rules = budget_rules(policy)
    # The ledger is opened (and its errors reported) whatever the policy holds: `--db` is never ignored.
    with cli.open_read(args) as ledger:
        usage = measure(ledger, rules, now) if rules else {}
    if not rules:
        return policy.name, []
    # No previous records: every threshold reached now is reported as reached (at `now`), none lifted.
    outcome = evaluate(policy, rules, spec_quotas(policy), usage, (), now)
    return policy.name, outcome.records


def _from_cluster(args: argparse.Namespace) -> list[tuple[str, Sequence[BudgetStatus]]]:
    from fairshare.policy.status import read_status
    from qm.cli import UserError
    from qm.live import connect

    out: list[tuple[str, Sequence[BudgetStatus]]] = []
    with connect(args.kubeconfig, args.context) as reader:
        if args.policy:
            doc = reader.policy(args.policy)
            if doc is None:
                known = sorted(str((p.get("metadata") or {}).get("name")) for p in reader.policies())
                raise UserError(f"--policy: no QuotaPolicy {args.policy!r} in the cluster at {reader.server} "
                                f"(known: {', '.join(known) or 'none'})")
            docs = [doc]
        else:
            docs = reader.policies()
    for doc in sorted(docs, key=lambda d: str((d.get("metadata") or {}).get("name"))):
        status, _ = read_status(doc.get("status"))
        out.append((str((doc.get("metadata") or {}).get("name")), status.budgets))
    return out


def _row(policy: str, r: BudgetStatus, *, times: bool) -> list[str]:
    """One budget; `times`: when each threshold was reached (the operator's; a file's are all now)."""
    from decimal import Decimal

    # From the exact ratio, not from `used` and `limit`, which are shown to two decimals.
    percent = "" if r.used_ratio is None else cli.fixed(Decimal(repr(r.used_ratio)) * 100, 1)
    reached = " ".join(f"{c.percent}%:{c.action}" + (f"@{c.at}" if times and c.at else "")
                       for c in r.crossed)
    return [policy, r.name, r.team or "", r.period_start or "", r.period_end or "", r.used or "",
            r.limit or "", r.unit or "", percent, reached, " ".join(r.enforcing),
            "yes" if r.dry_run else "no", r.measured_at or ""]
