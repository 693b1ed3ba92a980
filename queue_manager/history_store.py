"""Persistence of each policy's usage history graph in `status.history`: restored on the first reconcile
after a start, written every `--history-persist` seconds and on shutdown; its metrics. The layout, the
charging rules and the feeding from the Workloads on every reconcile are the core's
(fairshare.control.history, fairshare.control.cluster.sync_history)."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from fairshare.control import HistoryBook
from fairshare.history import NodePath, fair_tree
from fairshare.policy import QuotaPolicy

from .cache import PolicyRuntime
from .metrics import Metrics

log = logging.getLogger("queue_manager.history")

# Prometheus has no exact infinity for a gauge that dashboards divide by; LF = inf (no usage) is exported
# as this large finite number.
LF_INFINITE = 1e9


def book_of(rt: PolicyRuntime, policy: QuotaPolicy, now: float) -> HistoryBook:
    """The policy's history as last kept, restored from status on first use."""
    book = rt.history
    if book is None:
        stored = (rt.body.get("status") or {}).get("history")
        book, warning = HistoryBook.restore(policy, stored if isinstance(stored, Mapping) else None, now)
        if warning:
            log.warning("%s: %s", policy.name, warning)
        rt.history = book
        rt.history_persisted_at = now  # what was restored is already persisted
    return book


def keep(rt: PolicyRuntime, book: HistoryBook, policy: str) -> None:
    """The book a step returned (HistoryBook.follow): another one means the half-life changed."""
    if book is not rt.history:
        log.info("half-life of %s changed: usage history restarts", policy)
        rt.history = book
        rt.history_persisted_at = 0.0  # write the new one soon


def export_metrics(book: HistoryBook, policy: str, metrics: Metrics, now: float) -> None:
    """Fair Tree factor, level fair share and decayed usage of every node (see metrics.py)."""
    at = book.clamp(now)
    usage = book.graph.usage_all(at)
    result = fair_tree(book.graph, at, usage=usage)
    for path, node in result.nodes.items():
        if path == NodePath.root():
            continue
        name = str(path)
        metrics.fair_share.labels(policy, name).set(float(node.factor))
        lf = node.level_fs
        metrics.level_fair_share.labels(policy, name).set(LF_INFINITE if lf is None else float(lf))
        for fr, milli in usage.get(path, {}).items():
            metrics.decayed_usage.labels(policy, name, fr.flavor, fr.resource).set(milli / 1000)
