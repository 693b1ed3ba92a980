"""`qm cost --since 30d --by team`: money (flavors' pricePerUnitHour) per group and flavor."""

from __future__ import annotations

import argparse

from . import _ledger_cli as cli


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "cost",
        help="cost of the resource-hours held, per team/project/... and flavor (from the ledger)",
        description="Money in the window, per group, flavor and currency: each segment's quantity (GPUs, "
        "cores, GiB) x hours x the flavor's pricePerUnitHour in force when it was admitted, in the policy's "
        "currency (spec.ledger.currency). cost = useful + lost + running. idle: what the GPU-hours that were "
        "allocated but idle cost (spec.idle's telemetry, whole UTC hours; empty without it).",
    )
    cli.add_common(parser, since="30d")
    cli.add_grouping(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from fairshare.timestamps import rfc3339
    from ledger.queries import Dim, UsageQuery
    from ledger.records import to_millis

    since, until, now = cli.window(args)
    by = cli.dims(args.by)
    if Dim.FLAVOR not in by:  # prices are per flavor
        by = (*by, Dim.FLAVOR)
    if Dim.CURRENCY not in by:  # USD and EUR never add up
        by = (*by, Dim.CURRENCY)
    query = UsageQuery(to_millis(since), to_millis(until), to_millis(now), by, cli.filters(args.where))
    with cli.open_read(args) as ledger:
        rows = ledger.usage(query)
    places = 2 if args.output == "table" else 6
    headers = [d.value for d in by] + ["cost", "useful", "lost", "running", "idle"]
    body = [[*r.key, cli.fixed(r.cost, places), cli.fixed(r.cost_useful, places),
             cli.fixed(r.cost_lost, places), cli.fixed(r.cost_running, places),
             "" if r.cost_idle is None else cli.fixed(r.cost_idle, places)] for r in rows]
    at = by.index(Dim.CURRENCY)
    currencies = sorted({r.key[at] for r in rows if r.key[at]})
    shown = f" ({', '.join(currencies)})" if currencies else ""
    cli.emit(args.output, headers, body, title=f"Cost {rfc3339(since)} .. {rfc3339(until)}{shown}",
             meta={"since": rfc3339(since), "until": rfc3339(until)})
    return 0
