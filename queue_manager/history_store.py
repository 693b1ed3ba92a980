"""Persistence of each policy's usage history graph in `status.history`: restored on the first reconcile
after a start, fed level-triggered from the watch cache on every reconcile (fairshare.control.history),
written every `--history-persist` seconds and on shutdown. The layout and charging rules are the core's."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from fairshare.control import HistoryBook
from fairshare.history import NodePath, fair_tree
from fairshare.models import Workload
from fairshare.policy import QuotaPolicy, half_life_seconds
from fairshare.snapshot import Snapshot

from .cache import PolicyRuntime
from .metrics import Metrics

log = logging.getLogger("queue_manager.history")

# Prometheus has no exact infinity for a gauge that dashboards divide by; LF = inf (no usage) is exported
# as this large finite number.
LF_INFINITE = 1e9


def book_of(rt: PolicyRuntime, policy: QuotaPolicy, now: float) -> HistoryBook:
    """The policy's history, restored from status on first use; a new half-life restarts it."""
    book = rt.history
    if book is not None and abs(book.graph.half_life.seconds - half_life_seconds(policy)) >= 1e-3:
        log.info("half-life of %s changed: usage history restarts", policy.name)
        rt.history = HistoryBook.new(policy, now)
        rt.history_persisted_at = 0.0  # write the new one soon
        return rt.history
    if book is None:
        stored = (rt.body.get("status") or {}).get("history")
        book, warning = HistoryBook.restore(policy, stored if isinstance(stored, Mapping) else None, now)
        if warning:
            log.warning("%s: %s", policy.name, warning)
        rt.history = book
        rt.history_persisted_at = now  # what was restored is already persisted
    else:
        book.relayout(policy)
    return book


def sync(book: HistoryBook, snapshot: Snapshot, workloads: Mapping[str, Workload], now: float) -> None:
    """Open intervals == the workloads holding quota in the policy's ClusterQueues (the snapshot's)."""

    def ended_at(key: str) -> float | None:
        wl = workloads.get(key)
        cond = wl.condition("Finished") if wl is not None else None
        return cond.last_transition_time if cond is not None and cond.status else None

    book.sync(snapshot.workloads, ended_at, now)


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
