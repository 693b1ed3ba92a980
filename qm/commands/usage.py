"""`qm usage --since 30d --by team,project`: resource-hours held, useful and lost, from the ledger."""

from __future__ import annotations

import argparse

from . import _ledger_cli as cli


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "usage",
        help="resource-hours (GPU-hours...) held, useful and lost, by team/project/... (from the ledger)",
        description="Resource-hours in the window, per group and resource: held = useful (attempts that "
        "finished) + lost (attempts evicted or deleted before finishing) + running (still held; counted up "
        "to now). Each resource in the unit a person reads it in (column unit): GPU-h, core-h, GiB-h of "
        "memory. With the GPUs' telemetry (spec.idle), what the GPUs did, in whole UTC hours: measured (held "
        "while their DCGM series reported) = active (utilization x time) + idle (allocated but idle).",
    )
    cli.add_common(parser, since="30d")
    cli.add_grouping(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from fairshare.resource_units import unit_of
    from fairshare.timestamps import rfc3339
    from ledger.queries import Dim, UsageQuery
    from ledger.records import to_millis

    since, until, now = cli.window(args)
    by = cli.dims(args.by)
    if Dim.RESOURCE not in by:  # GPU-hours and core-hours never add up
        by = (*by, Dim.RESOURCE)
    query = UsageQuery(to_millis(since), to_millis(until), to_millis(now), by, cli.filters(args.where))
    with cli.open_read(args) as ledger:
        rows = ledger.usage(query)
    places = 2 if args.output == "table" else 6
    at = by.index(Dim.RESOURCE)
    headers = [d.value for d in by] + ["unit", "held_h", "useful_h", "lost_h", "running_h", "measured_h",
                                       "active_h", "idle_h"]
    body = []
    for r in rows:
        unit = unit_of(r.key[at])  # the resource's unit: GiB-hours of memory, never byte-hours
        body.append([*r.key, unit.hours, *(cli.hours(s, places, unit.base) for s in (
            r.held_seconds, r.useful_seconds, r.lost_seconds, r.running_seconds)),
            *("" if s is None else cli.hours(s, places, unit.base)
              for s in (r.measured_seconds, r.active_seconds, r.idle_seconds))])
    units = {r.key[at]: unit_of(r.key[at]).hours for r in rows}
    cli.emit(args.output, headers, body, title=f"Usage {rfc3339(since)} .. {rfc3339(until)}",
             meta={"since": rfc3339(since), "until": rfc3339(until), "units": units})
    return 0
