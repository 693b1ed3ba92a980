"""`qm run`: the QuotaPolicy operator (kopf), cluster-scoped.

Imports nothing of the simulator or matplotlib (tests/unit/operator/test_run_imports.py): the operator
image installs the base dependencies only.
"""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING

from qm.cli import UserError
from qm.flags import bounded_seconds

if TYPE_CHECKING:
    from queue_manager.forecast import ForecastSetup


# The most each duration flag may be: past these, a flag is a unit mistake, and dates computed from it
# (a lease's renew deadline, a hold's end) would leave the years a timestamp can hold (issue 33). The
# policy overrides take the policy's own bound (fairshare/policy/units.py MAX_DURATION).
TICK_MAX, PERSIST_MAX, REFRESH_MAX, TIMEOUT_MAX = "1d", "1d", "1d", "1d"
LEASE_MIN, LEASE_MAX = "3s", "1h"


def _policy_bound() -> str:
    from fairshare.policy.units import MAX_DURATION

    return MAX_DURATION


def _port(text: str) -> int:
    if not re.fullmatch(r"[+-]?[0-9]+", text):  # int() also takes " 80", "8_0" and "٨٠"
        raise argparse.ArgumentTypeError(f"not a port: {text!r}")
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port out of range: {text!r}")
    return value


def _lease_seconds(text: str) -> float:
    # At least 3 s: the renew period is 2/15 of it, under 3 s a leader renews every 0.4 s for nothing.
    return bounded_seconds(LEASE_MAX, least=LEASE_MIN)(text)


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def _dns_name(text: str) -> str:
    if not _DNS_LABEL.fullmatch(text) or len(text) > 63:
        raise argparse.ArgumentTypeError(f"not a DNS label (lowercase letters, digits and '-'): {text!r}")
    return text


def _prometheus_url(text: str) -> str:
    from fairshare.policy.idle_spec import PROMETHEUS_URL

    if len(text) > 2048 or not re.fullmatch(PROMETHEUS_URL, text):
        raise argparse.ArgumentTypeError(f"not an http(s) URL such as http://prometheus:9090: {text[:80]!r}")
    return text


class _DefaultsShown(argparse.HelpFormatter):
    """`qm run --help` shows every default that exists (not "default: None")."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "%(default)" in text or action.default in (None, argparse.SUPPRESS) or not action.option_strings:
            return text
        # A flag that stores a constant (--no-ledger, --dry-run) says what it does; "(default: True)" on
        # --no-ledger would read as "no ledger by default".
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            return text
        return f"{text} (default: %(default)s)"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "run", help="run the QuotaPolicy operator against a cluster with Kueue",
        formatter_class=_DefaultsShown,
        description="Render QuotaPolicies into Kueue objects, roll out quota changes step by step, account "
        "usage history and preempt experiments for starved protected work. Durations: 500ms, 2s, 1m "
        "(or a number of seconds).")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster service account, else "
                   "$KUBECONFIG or ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context")
    p.add_argument("--metrics-port", type=_port, default=9090, help="Prometheus /metrics port, 0 = off")
    p.add_argument("--health-port", type=_port, default=8080, help="/healthz port, 0 = off")
    p.add_argument("--bind-address", default="127.0.0.1",
                   help="address of the metrics and health endpoints (the Deployment sets 0.0.0.0)")
    dry = p.add_mutually_exclusive_group()
    dry.add_argument("--dry-run", dest="dry_run", action="store_const", const=True, default=None,
                     help="never evict: report would-be preemptions only (overrides every policy)")
    dry.add_argument("--no-dry-run", dest="dry_run", action="store_const", const=False,
                     help="evict even if a policy says preemption.dryRun")
    p.add_argument("--log-format", choices=["json", "text"], default="json", help="log line format")
    p.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"], default="INFO",
                   help="log level")
    p.add_argument("--tick", type=bounded_seconds(TICK_MAX), default="1s", metavar="DURATION",
                   help="reconcile period of each QuotaPolicy (bounds how late a transition step applies)")
    p.add_argument("--history-persist", type=bounded_seconds(PERSIST_MAX), default="60s", metavar="DURATION",
                   help="how often the usage history is written to status (also on shutdown)")
    p.add_argument("--starvation-grace", type=bounded_seconds(_policy_bound()), default=None,
                   metavar="DURATION",
                   help="override every policy's spec.preemption.starvationGrace: how long protected work "
                   "waits for Kueue before experiments are preempted for it (default: the policy's)")
    p.add_argument("--victim-hold", type=bounded_seconds(_policy_bound()), default=None, metavar="DURATION",
                   help="override every policy's spec.preemption.victimHold: how long a victim stays "
                   "deactivated at most, waiting for its beneficiary (default: the policy's)")
    p.add_argument("--kueue-fair-sharing", nargs="?", choices=("auto", "on", "off"), const="on",
                   default="auto", metavar="auto|on|off",
                   help="whether Kueue runs with fairSharing (default strategies): the controller's model of "
                   "Kueue follows it (experiment victims, the what-if that checks every weight push for "
                   "preemption loops). auto (default): read from Kueue's Configuration, ConfigMap "
                   "kueue-system/kueue-manager-config, every minute; on (the bare flag) or off: as said")
    p.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True,
                   help="hold a coordination.k8s.io Lease before reconciling, so that of several replicas "
                   "one acts and the others stand by")
    p.add_argument("--lease-namespace", type=_dns_name, default="queue-manager", metavar="NAMESPACE",
                   help="namespace of the leader-election Lease")
    p.add_argument("--lease-name", type=_dns_name, default="queue-manager", metavar="NAME",
                   help="name of the leader-election Lease (one per operator installation)")
    p.add_argument("--lease-duration", type=_lease_seconds, default="15s", metavar="DURATION",
                   help="how long a follower waits without seeing the leader renew before taking over "
                   "(the leader renews every 2/15 of it and gives up after 2/3 of it without a renewal)")
    p.add_argument("--ledger", metavar="URL", default=None,
                   help="the ledger's database: a SQLite file path, sqlite:///PATH or "
                   "postgresql+psycopg://USER:PASSWORD@HOST:PORT/DB (default: $QM_LEDGER_URL, else "
                   "~/.local/share/queue-manager/ledger.db; docs/ledger.md)")
    p.add_argument("--ledger-spool", metavar="DIR", default=None,
                   help="the ledger's spool directory, on durable storage (default: next to a SQLite file, "
                   "else ~/.local/share/queue-manager/spool/HOST-PORT-DB)")
    p.add_argument("--no-ledger", dest="ledger_enabled", action="store_false", default=True,
                   help="keep no ledger (no accounting, no audit rows, no budgets)")
    p.add_argument("--budget-refresh", type=bounded_seconds(REFRESH_MAX), default="30s", metavar="DURATION",
                   help="how often each budget's consumption is measured in the ledger")
    p.add_argument("--prometheus-url", type=_prometheus_url, default=None, metavar="URL",
                   help="the Prometheus HTTP API that scrapes dcgm-exporter, for every policy with spec.idle "
                   "(default: each policy's spec.idle.prometheus.url)")
    p.add_argument("--forecasts", action=argparse.BooleanOptionalAction, default=True,
                   help="forecast the transitions of policies with spec.forecasts.enabled, in a background "
                   "process (the simulator, calibrated from the ledger), and score them against the ledger")
    p.add_argument("--forecast-timeout", type=bounded_seconds(TIMEOUT_MAX), default="10m", metavar="DURATION",
                   help="the most one forecast (or its scoring) may take; it is then killed and reported")
    p.add_argument("--forecast-history", type=bounded_seconds(_policy_bound()), default="28d",
                   metavar="DURATION",
                   help="how much of the ledger's history a forecast calibrates arrivals and run times from")
    p.set_defaults(handler=_run)


def _check_kubeconfig(path: str) -> None:
    """The file, read by the project's one file reader (binary, huge, not UTF-8, duplicate keys), and its
    shape: what the Kubernetes client would otherwise report as a Python exception."""
    from fairshare.errors import InputError, Location
    from fairshare.yamlfile import load_yaml_one

    doc = load_yaml_one(path, what="a kubeconfig (kind: Config)")
    for key in ("clusters", "contexts", "users"):
        entries = doc.get(key)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise InputError("must be a list", location=Location(file=path, field=key),
                             value=type(entries).__name__)
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                raise InputError("must be a mapping with a name",
                                 location=Location(file=path, field=f"{key}[{i}]"), value=entry)
            body = entry.get(key[:-1])
            if body is not None and not isinstance(body, dict):
                raise InputError("must be a mapping",
                                 location=Location(file=path, field=f"{key}[{i}].{key[:-1]}"),
                                 value=type(body).__name__)
    current = doc.get("current-context")
    if current is not None and not isinstance(current, str):
        raise InputError("must be a string", location=Location(file=path, field="current-context"),
                         value=current)


def _forecasting(args: argparse.Namespace) -> ForecastSetup | None:
    """The forecaster and scorer (qm/forecaster.py: the simulator and the ledger, run in a child process;
    imported there, never at the operator's start)."""
    if not args.forecasts:
        return None
    from qm.forecaster import LedgerScorer, LiveForecaster
    from queue_manager.forecast import ForecastSetup

    forecaster = LiveForecaster(args.kubeconfig, args.context, ledger=args.ledger_enabled,
                                ledger_url=args.ledger, history_s=args.forecast_history)
    scorer = LedgerScorer(args.ledger) if args.ledger_enabled else None
    return ForecastSetup(forecaster, scorer, timeout_s=args.forecast_timeout)


def _run(args: argparse.Namespace) -> int:
    import os

    from queue_manager.config import LogFormat, OperatorConfig
    from queue_manager.main import run_operator
    from queue_manager.memory import cap_malloc_arenas

    if args.ledger_enabled and args.ledger is not None and not args.ledger.strip():
        # An empty value is a mistake (an unset variable in a manifest), not a request for the default.
        raise UserError("--ledger: empty; give a SQLite path or a database URL (leave the flag out for "
                        "$QM_LEDGER_URL or the default, or --no-ledger)")
    if args.kubeconfig:
        if not os.path.isfile(args.kubeconfig):
            raise UserError(f"--kubeconfig: no such file: {args.kubeconfig}")
        _check_kubeconfig(args.kubeconfig)
    if args.ledger_enabled:
        from ledger.db import check_sqlite_path, is_sqlite, resolve_url


        # A URL that is not one, or a SQLite path that can never work (a directory, no permission): one
        # line now, not once leading, and never spooled forever as if a server were down.
        url = resolve_url(args.ledger)
        if is_sqlite(url):
            check_sqlite_path(url, writer=True)
    config = OperatorConfig(
        kubeconfig=args.kubeconfig, context=args.context, metrics_port=args.metrics_port,
        health_port=args.health_port, bind_address=args.bind_address, dry_run=args.dry_run,
        log_format=LogFormat(args.log_format), log_level=args.log_level, tick_seconds=args.tick,
        history_persist_seconds=args.history_persist, starvation_grace_seconds=args.starvation_grace,
        victim_hold_seconds=args.victim_hold,
        kueue_fair_sharing=None if args.kueue_fair_sharing == "auto" else args.kueue_fair_sharing == "on",
        leader_elect=args.leader_elect, lease_namespace=args.lease_namespace, lease_name=args.lease_name,
        lease_duration_seconds=args.lease_duration, ledger_enabled=args.ledger_enabled,
        ledger_url=args.ledger, ledger_spool=args.ledger_spool, budget_refresh_seconds=args.budget_refresh,
        prometheus_url=args.prometheus_url)
    cap_malloc_arenas()  # before kopf starts its threads (queue_manager/memory.py)
    try:
        run_operator(config, forecasting=_forecasting(args))
    except OSError as err:  # e.g. a port already in use
        raise UserError(str(err)) from err
    return 0
