"""kopf handlers: thin adapters from watch events and timers to `Operator` methods.

Registered on a fresh `kopf.OperatorRegistry` (no module-level registry); the
`Operator` arrives as `memo.operator`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import kopf
from kubernetes.client.exceptions import ApiException

from fairshare.policy import MANAGED_BY_LABEL, MANAGED_BY_VALUE

from .config import OperatorConfig
from .failures import api_message
from .kube import connection_info
from .operator import Operator
from .refs import OWNED_KINDS, QUOTA_POLICY, WORKLOAD

log = logging.getLogger("queue_manager.handlers")


def _operator(memo: Any) -> Operator:
    op = getattr(memo, "operator", None)
    if not isinstance(op, Operator):
        raise kopf.PermanentError("operator state missing from memo")
    return op


def _raw(event: Any) -> tuple[str | None, dict[str, Any]]:
    obj = event.get("object") if isinstance(event, dict) else None
    kind = event.get("type") if isinstance(event, dict) else None
    return (str(kind) if kind else None), (dict(obj) if isinstance(obj, dict) else {})


def _guard(op: Operator, handler: str, fn: Callable[[], None]) -> None:
    """Count and log a failed handler run. Nothing is retried here, and nothing needs to be: kopf does not
    retry its low-level `on.event` handlers (it tracks only the high-level ones, docs.kopf.dev "Error
    handling"), and the policy's timer reconciles again every `--tick` from what it then observes (every
    reconcile is level-triggered and idempotent). So a failure is counted, logged with the API server's
    own message, and dropped; the next tick is the retry. Bugs (not API errors) still surface."""
    try:
        fn()
    except ApiException as err:
        op.metrics.reconcile_errors.labels(handler).inc()
        log.error("%s: API error %s %s: %s (the next tick retries)", handler, err.status, err.reason,
                  api_message(err))
    except Exception:
        op.metrics.reconcile_errors.labels(handler).inc()
        raise


def build_registry(config: OperatorConfig) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    managed = {MANAGED_BY_LABEL: MANAGED_BY_VALUE}

    @kopf.on.login(registry=registry)
    def login(memo: Any, **_: Any) -> kopf.ConnectionInfo:
        cfg = getattr(memo, "client_config", None)
        if cfg is None:
            raise kopf.PermanentError("no client configuration")
        return connection_info(cfg)

    @kopf.on.startup(registry=registry)
    def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        # Our Writer posts every Event (audit records); kopf must not post its own.
        settings.posting.enabled = False
        settings.watching.server_timeout = 270
        settings.watching.client_timeout = 300
        settings.persistence.finalizer = "queuemanager.dev/timer"
        # No CRD/namespace watching: the resources are fixed, and the ClusterRole grants no CRD access.
        settings.scanning.disabled = True

    @kopf.on.cleanup(registry=registry)
    def cleanup(memo: Any, **_: Any) -> None:
        _operator(memo).shutdown()

    @kopf.on.event(QUOTA_POLICY.group, QUOTA_POLICY.version, QUOTA_POLICY.plural, registry=registry)
    def policy_event(event: Any, memo: Any, **_: Any) -> None:
        op = _operator(memo)
        kind, body = _raw(event)
        _guard(op, "policy", lambda: op.policy_event(kind, body))

    @kopf.timer(QUOTA_POLICY.group, QUOTA_POLICY.version, QUOTA_POLICY.plural, registry=registry,
                interval=config.tick_seconds, sharp=False)
    def policy_timer(body: Any, memo: Any, **_: Any) -> None:
        op = _operator(memo)
        raw = dict(body)
        _guard(op, "timer", lambda: op.policy_tick(raw))

    @kopf.on.event(WORKLOAD.group, WORKLOAD.version, WORKLOAD.plural, registry=registry)
    def workload_event(event: Any, memo: Any, **_: Any) -> None:
        op = _operator(memo)
        kind, body = _raw(event)
        _guard(op, "workload", lambda: op.workload_event(kind, body))

    for kind in OWNED_KINDS:
        def owned_event(event: Any, memo: Any, **_: Any) -> None:
            op = _operator(memo)
            kind_, body = _raw(event)
            _guard(op, "owned", lambda: op.owned_event(kind_, body))

        kopf.on.event(kind.group, kind.version, kind.plural, labels=managed, registry=registry,
                      id=f"owned-{kind.plural}")(owned_event)
    return registry
