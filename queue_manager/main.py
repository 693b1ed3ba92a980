"""Start one operator process: logging, client, metrics endpoint, kopf."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import kopf
from kubernetes import client as k8s
from prometheus_client import start_http_server

from .config import OperatorConfig
from .handlers import build_registry
from .kube import load_configuration
from .logs import configure_logging
from .operator import Operator

log = logging.getLogger("queue_manager")


def build_operator(config: OperatorConfig) -> tuple[Operator, k8s.Configuration]:
    client_config = load_configuration(config.kubeconfig, config.context)
    return Operator(config, k8s.ApiClient(client_config)), client_config


def run_operator(config: OperatorConfig, *, stop_flag: threading.Event | None = None,
                 ready_flag: threading.Event | None = None, configure_logs: bool = True) -> Operator:
    """Run until SIGINT/SIGTERM (or `stop_flag`); returns the operator after a clean stop."""
    if configure_logs:
        configure_logging(config.log_format, config.log_level)
    op, client_config = build_operator(config)
    if config.metrics_port:
        start_http_server(config.metrics_port, addr=config.bind_address, registry=op.metrics.registry)
    liveness = f"http://{config.bind_address}:{config.health_port}/healthz" if config.health_port else None
    memo: Any = kopf.Memo(operator=op, client_config=client_config)
    log.info("queue-manager operator starting", extra={"qm": {
        "metricsPort": config.metrics_port, "healthPort": config.health_port, "dryRun": config.dry_run,
        "tickSeconds": config.tick_seconds}})
    coro = kopf.operator(registry=build_registry(config), memo=memo, standalone=True, clusterwide=True,
                         liveness_endpoint=liveness, stop_flag=stop_flag, ready_flag=ready_flag)
    asyncio.run(coro)
    return op
