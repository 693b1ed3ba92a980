"""`qm run`: the QuotaPolicy operator (kopf), cluster-scoped."""

from __future__ import annotations

import argparse

from qm.cli import UserError


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from err
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not a port: {text!r}") from err
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range: {text!r}")
    return value


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "run", help="run the QuotaPolicy operator against a cluster with Kueue",
        description="Render QuotaPolicies into Kueue objects, roll out quota changes step by step, account "
        "usage history and preempt experiments for starved protected work.")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster service account, else "
                   "$KUBECONFIG or ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument("--metrics-port", type=_port, default=9090, help="Prometheus /metrics port, 0 = off")
    p.add_argument("--health-port", type=_port, default=8080, help="/healthz port, 0 = off")
    p.add_argument("--bind-address", default="0.0.0.0", help="address of the metrics and health endpoints")
    dry = p.add_mutually_exclusive_group()
    dry.add_argument("--dry-run", dest="dry_run", action="store_const", const=True, default=None,
                     help="never evict: report would-be preemptions only (overrides every policy)")
    dry.add_argument("--no-dry-run", dest="dry_run", action="store_const", const=False,
                     help="evict even if a policy says preemption.dryRun")
    p.add_argument("--log-format", choices=["json", "text"], default="json")
    p.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"], default="INFO")
    p.add_argument("--tick", type=_positive, default=1.0, metavar="SECONDS",
                   help="reconcile period of each QuotaPolicy (bounds how late a transition step applies)")
    p.add_argument("--history-persist", type=_positive, default=60.0, metavar="SECONDS",
                   help="how often the usage history is written to status (also on shutdown)")
    p.add_argument("--starvation-grace", type=_positive, default=5.0, metavar="SECONDS",
                   help="how long protected work waits for Kueue before we preempt for it")
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    import os

    from queue_manager.config import LogFormat, OperatorConfig
    from queue_manager.main import run_operator

    if args.kubeconfig and not os.path.isfile(args.kubeconfig):
        raise UserError(f"--kubeconfig: no such file: {args.kubeconfig}")
    config = OperatorConfig(
        kubeconfig=args.kubeconfig, context=args.context, metrics_port=args.metrics_port,
        health_port=args.health_port, bind_address=args.bind_address, dry_run=args.dry_run,
        log_format=LogFormat(args.log_format), log_level=args.log_level, tick_seconds=args.tick,
        history_persist_seconds=args.history_persist, starvation_grace_seconds=args.starvation_grace)
    try:
        run_operator(config)
    except OSError as err:  # e.g. a port already in use
        raise UserError(str(err)) from err
    return 0
