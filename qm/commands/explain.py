"""`qm explain`: what the next Kueue scheduling cycle does and why.

- `qm explain FILE` / `qm explain -` (stdin): a case file (../shared/conformance/FORMAT.md) or plain Kueue
  v1beta2 manifests.
- `qm explain --kubeconfig K`: the live cluster's next cycle; `NAMESPACE/WORKLOAD` explains one workload
  (why it is pending: which quota, which cohort node, which entries are ahead; why it was preempted, and by
  whom); `--cluster-queue CQ` one ClusterQueue (its quota, its queue in Kueue's order, its first entries).

Bad input is one line and exit 2: an unknown workload or ClusterQueue, a kubeconfig the client cannot use,
a server that does not answer within `--timeout`.
"""

from __future__ import annotations

import argparse
import sys

from qm.flags import seconds


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "explain",
        help="show what the next scheduling cycle does and why (a file, stdin or the live cluster)",
        description="Read a case file (../shared/conformance/FORMAT.md) or plain Kueue v1beta2 manifests "
        "(FILE, or - for stdin), or the live cluster (--kubeconfig), and print, for each ClusterQueue's "
        "head, the decision (admitted on which flavors, preempting whom, or pending and why). With "
        "NAMESPACE/WORKLOAD (live) or --cluster-queue, explain one workload or one ClusterQueue.",
    )
    parser.add_argument("target", nargs="?", metavar="FILE | - | NAMESPACE/WORKLOAD",
                        help="a file or - (stdin); with --kubeconfig, a workload (optional)")
    parser.add_argument("--now", help="the cycle's time (RFC 3339); default: the case's spec.now, or (live) "
                        "the time of the read")
    parser.add_argument("--kubeconfig", metavar="PATH", help="explain the live cluster of this kubeconfig")
    parser.add_argument("--context", help="kubeconfig context")
    parser.add_argument("--cluster-queue", metavar="CQ", help="explain one ClusterQueue")
    parser.add_argument("--timeout", type=seconds, default="10s", metavar="DURATION",
                        help="the most each API request may take (default 10s)")
    parser.add_argument("--fair-sharing", action="store_true",
                        help="live: Kueue's Configuration has fairSharing (default: as read from its "
                        "ConfigMap kueue-system/kueue-manager-config)")
    parser.add_argument("--allow-unverified-kueue", action="store_true",
                        help="live: explain a Kueue of a version the differential does not verify (a warning "
                        "instead of a refusal)")
    parser.set_defaults(handler=run, explain_parser=parser)


def run(args: argparse.Namespace) -> int:
    from fairshare.errors import InputError
    from fairshare.manifests import parse_time
    from qm.cli import UserError

    try:
        now = parse_time(args.now) if args.now else None
    except InputError:
        raise UserError(f"--now: not an RFC 3339 time: {args.now!r}") from None
    if args.kubeconfig is not None:
        lines = _live(args, now)
    else:
        if args.target is None:  # a usage error, as argparse reports a missing argument (exit 2)
            args.explain_parser.error("give a FILE, - (stdin), or --kubeconfig PATH for the live cluster")
        if args.fair_sharing or args.context or args.allow_unverified_kueue:
            raise UserError("--fair-sharing, --allow-unverified-kueue and --context are for the live cluster "
                            "(--kubeconfig)")
        lines = _offline(args.target, args.cluster_queue, now)
    for line in lines:
        print(line)
    return 0


def _offline(target: str, cluster_queue: str | None, now: float | None) -> list[str]:
    from fairshare.explain import (
        explain_cluster_queue,
        explain_file,
        explain_text,
        render,
        render_cluster_queue,
    )
    from fairshare.models import ClusterQueueName
    from fairshare.yamlfile import MAX_FILE_BYTES, decode_text

    if target == "-":
        data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            from fairshare.errors import InputError, Location

            raise InputError(f"input too large: more than {MAX_FILE_BYTES:,} bytes",
                             location=Location(file="<stdin>"))
        ex = explain_text(decode_text(data, file="<stdin>"), file="<stdin>", now=now)
    else:
        ex = explain_file(target, now=now)
    from qm.kueue_setup import effective_quota_lines

    effective = [f"# {line}" for line in effective_quota_lines(ex.state)] if ex.state is not None else []
    if cluster_queue is None:
        return effective + render(ex)
    if ex.state is None:  # explain_state always keeps it
        raise ValueError("the explanation lost its state")
    queue = ClusterQueueName(cluster_queue)
    return effective + render_cluster_queue(explain_cluster_queue(ex.state, queue, now=ex.now,
                                                                  config=ex.config))


def _live(args: argparse.Namespace, now: float | None) -> list[str]:
    from fairshare.errors import InputError, Location
    from fairshare.explain import (
        explain_cluster_queue,
        explain_state,
        explain_workload,
        render,
        render_cluster_queue,
        render_workload,
    )
    from fairshare.scheduler import SchedulerConfig
    from qm.cli import UserError
    from qm.live import connect

    target = args.target
    if target is not None and (target == "-" or target.count("/") != 1 or not all(target.split("/"))):
        raise UserError(f"with --kubeconfig, the target is NAMESPACE/WORKLOAD (got {target!r})")
    if target is not None and args.cluster_queue is not None:
        raise UserError("give NAMESPACE/WORKLOAD or --cluster-queue, not both")
    from qm.kueue_setup import effective_quota_lines, read_setup, verdict

    with connect(args.kubeconfig, args.context, timeout=args.timeout) as reader:
        live = reader.read_cluster(with_policies=False)
        setup = read_setup(reader)
    checked = verdict(setup, allow_unverified=args.allow_unverified_kueue)
    if checked.refuse is not None:
        raise UserError(checked.refuse)
    if checked.warning is not None:
        print(checked.warning, file=sys.stderr)
    from fairshare.timestamps import rfc3339

    config = setup.scheduler_config()
    if args.fair_sharing and not config.fair_sharing:
        config = SchedulerConfig(fair_sharing=True)
    at = live.read_at if now is None else now
    lines = [f"# {live.server}: {len(live.state.cluster_queues)} ClusterQueues, "
             f"{len(live.state.workloads)} Workloads, read at {rfc3339(live.read_at)}", f"# {checked.line}"]
    lines += [f"# {line}" for line in effective_quota_lines(live.state)]
    lines += [f"# {s}" for s in live.skipped[:5]]
    if len(live.skipped) > 5:
        lines.append(f"# ... and {len(live.skipped) - 5} more objects left out")
    if target is not None:
        if target not in live.state.workloads:
            why = next((s for s in live.skipped if f" {target} " in f"{s} "), None)
            raise InputError(why or "no such Workload", location=Location(file=live.server), value=target)
        return lines + render_workload(explain_workload(live.state, target, now=at, config=config))
    if args.cluster_queue is not None:
        return lines + render_cluster_queue(explain_cluster_queue(live.state, args.cluster_queue, now=at,
                                                                  config=config))
    return lines + render(explain_state(live.state, now=at, config=config))

