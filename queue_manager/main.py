"""Start one operator process: logging, client, metrics endpoint, kopf."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import kopf
from kubernetes import client as k8s
from prometheus_client import start_http_server

from .config import OperatorConfig
from .events import EVENT_LABELS
from .forecast import ForecastBook, ForecastSetup
from .handlers import build_registry
from .kube import Reader, load_configuration
from .leader import LeaderElector, Timing, default_identity
from .ledger_feed import LedgerFeed
from .logs import configure_logging
from .operator import Operator
from .telemetry import POD_SET_LABEL, TelemetryFeed
from .writer import Writer

log = logging.getLogger("queue_manager")


def build_operator(config: OperatorConfig) -> tuple[Operator, k8s.Configuration]:
    client_config = load_configuration(config.kubeconfig, config.context)
    return Operator(config, k8s.ApiClient(client_config)), client_config


def _exit_on_lost_leadership() -> None:
    """controller-runtime's answer to "leader election lost": exit, so no handler of this process acts
    after another replica may have taken over; the Deployment restarts it as a follower."""
    logging.shutdown()
    os._exit(1)


def run_operator(config: OperatorConfig, *, stop_flag: threading.Event | None = None,
                 ready_flag: threading.Event | None = None, configure_logs: bool = True,
                 on_lost_leadership: Callable[[], None] = _exit_on_lost_leadership,
                 forecasting: ForecastSetup | None = None) -> Operator:
    """Run until SIGINT/SIGTERM (or `stop_flag`); returns the operator after a clean stop. With leader
    election, kopf starts only once this replica holds the Lease (queue_manager/leader.py). `forecasting`:
    how to forecast transitions (queue_manager/forecast.py; `qm run` builds it), None for no forecasts."""
    # The client configuration first: a kubeconfig it cannot use is one error line, before any logging.
    op, client_config = build_operator(config)
    if configure_logs:
        configure_logging(config.log_format, config.log_level)
    if config.metrics_port:
        start_http_server(config.metrics_port, addr=config.bind_address, registry=op.metrics.registry)
    if not config.leader_elect:
        op.metrics.leader.set(1)  # the only replica, by the operator's word: it reconciles
        _run_kopf(config, op, client_config, stop_flag=stop_flag, ready_flag=ready_flag,
                  forecasting=forecasting)
        return op
    elector = build_elector(config, client_config)
    leader = op.metrics.leader  # qm_leader: 1 on the replica that holds the Lease (and reconciles)
    leader.set(0)
    with passive_health(config):
        if not elector.acquire(stop_flag):
            return op
    leader.set(1)
    elector.start_renewing(on_lost_leadership)
    try:
        _run_kopf(config, op, client_config, stop_flag=stop_flag, ready_flag=ready_flag,
                  forecasting=forecasting)
    finally:
        elector.stop_and_release()
        leader.set(0)
    return op


@contextlib.contextmanager
def attached_ledger(config: OperatorConfig, op: Operator) -> Iterator[None]:
    """The ledger, opened by the replica that reconciles (one writer of a spool), before the first event
    (docs/ledger.md); closed (flushed for up to 10 s; the rest stays spooled) after kopf stops."""
    if not config.ledger_enabled:
        yield
        return
    feed = LedgerFeed.open(config, op.state, op.metrics, op.clock)
    feed.configure_from(op.reader)
    recover_reported(feed, op)
    op.attach_ledger(feed)
    feed.resync(op.reader)
    try:
        yield
    finally:
        op.attach_ledger(None)
        feed.close()


def recover_reported(feed: LedgerFeed, op: Operator) -> None:
    """Before the first reconcile: the ledger rows of every fact an earlier leader reported (its Events),
    re-recorded with their original times. That leader's spool died with it when it was on an emptyDir
    (the Deployment's), so rows the database had not taken yet would otherwise be lost (docs/ledger.md,
    "Failover"). The API's Events live an hour (kube-apiserver --event-ttl): a replica that takes over
    within that loses nothing. A failed list is logged, never fatal (the resync still runs)."""
    try:
        events = op.reader.events(label_selector=",".join(f"{k}={v}" for k, v in EVENT_LABELS.items()))
    except Exception as err:  # the API or RBAC: start anyway, say what could not be recovered
        log.warning("ledger: could not list the operator's Events to re-record their facts (%s)", err)
        return
    op.writer.known_posted(feed.recover(events))


@contextlib.contextmanager
def attached_forecasts(op: Operator, setup: ForecastSetup | None) -> Iterator[None]:
    """The forecast runner (after the ledger: scoring flushes it first), stopped when kopf stops."""
    if setup is None:
        yield
        return
    feed = op.ledger
    # Scoring reads the database: what the spool still holds of the window goes in first (bounded).
    runner = setup.runner(metrics=op.metrics,
                          flush=(lambda: feed.ledger.flush(30.0)) if feed is not None else None)
    op.reconciler.forecasts = ForecastBook(runner, scoring=setup.scorer is not None and feed is not None)
    try:
        yield
    finally:
        op.reconciler.forecasts = None
        runner.close()


@contextlib.contextmanager
def attached_telemetry(config: OperatorConfig, op: Operator) -> Iterator[None]:
    """The reader of the GPUs' activity (spec.idle; queue_manager/telemetry.py): a thread that reads each
    policy with spec.idle.enabled every scrapeInterval, and none otherwise; stopped when kopf stops."""
    reader = op.reader
    ledger = op.ledger.ledger if op.ledger is not None else None  # what the GPUs did goes to the ledger too
    feed = TelemetryFeed(lambda ns: reader.pods(ns, label_selector=POD_SET_LABEL), op.state.workloads,
                         op.metrics, op.clock, url=config.prometheus_url,
                         record=ledger.record_activity if ledger is not None else None)
    op.reconciler.telemetry = feed
    try:
        yield
    finally:
        op.reconciler.telemetry = None
        feed.close()


def _run_kopf(config: OperatorConfig, op: Operator, client_config: k8s.Configuration, *,
              stop_flag: threading.Event | None, ready_flag: threading.Event | None,
              forecasting: ForecastSetup | None = None) -> None:
    with attached_ledger(config, op), attached_forecasts(op, forecasting), attached_telemetry(config, op):
        _run_kopf_loop(config, op, client_config, stop_flag=stop_flag, ready_flag=ready_flag)


def _run_kopf_loop(config: OperatorConfig, op: Operator, client_config: k8s.Configuration, *,
                   stop_flag: threading.Event | None, ready_flag: threading.Event | None) -> None:
    liveness = f"http://{config.bind_address}:{config.health_port}/healthz" if config.health_port else None
    memo: Any = kopf.Memo(operator=op, client_config=client_config)
    log.info("queue-manager operator starting", extra={"qm": {
        "metricsPort": config.metrics_port, "healthPort": config.health_port, "dryRun": config.dry_run,
        "tickSeconds": config.tick_seconds}})
    coro = kopf.operator(registry=build_registry(config), memo=memo, standalone=True, clusterwide=True,
                         liveness_endpoint=liveness, stop_flag=stop_flag, ready_flag=ready_flag)
    asyncio.run(coro)


def build_elector(config: OperatorConfig, client_config: k8s.Configuration) -> LeaderElector:
    """The elector on its own API client (its own connection pool: a busy reconcile never delays a
    renewal), writing through a Writer as every write does."""
    api = k8s.ApiClient(client_config)
    return LeaderElector(Reader(api), Writer(api, clock=time.time), namespace=config.lease_namespace,
                         name=config.lease_name, identity=default_identity(),
                         timing=Timing.of(config.lease_duration_seconds))


class _Healthz(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        ok = self.path.split("?")[0] == "/healthz"
        body = b'{"leader": false}' if ok else b"not found"
        self.send_response(200 if ok else 404)
        self.send_header("Content-Type", "application/json" if ok else "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        del format, args  # the kubelet probes every few seconds: no log line per probe


@contextlib.contextmanager
def passive_health(config: OperatorConfig) -> Iterator[None]:
    """/healthz while standing by (kopf serves it once leading): a follower is alive, not failing its
    liveness probe; the port is released before kopf binds it."""
    if not config.health_port:
        yield
        return
    server = ThreadingHTTPServer((config.bind_address, config.health_port), _Healthz)
    thread = threading.Thread(target=server.serve_forever, name="passive-healthz", daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
