"""The Workload cache: every Kueue Workload parsed into the core's model (`fairshare.models.Workload`) as
watch events arrive. A Workload the core cannot parse is logged once and left out (never a crash)."""

from __future__ import annotations

import logging
from typing import Any

from fairshare.control.idle import KEEP_ANNOTATION
from fairshare.errors import InputError
from fairshare.manifests import parse_object
from fairshare.models import Workload

from .cache import WorkloadCache
from .metrics import Metrics

log = logging.getLogger("queue_manager")


def on_workload_event(cache: WorkloadCache, metrics: Metrics, event_type: str | None,
                      body: dict[str, Any]) -> Workload | None:
    """Update the cache; the Workload as parsed (its last state for a deletion), for the ledger."""
    meta = body.get("metadata") or {}
    key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    if event_type == "DELETED":
        with cache.lock:
            cache.drop(key)
            cache.unparsable.pop(key, None)
            cache.keep.pop(key, None)
        metrics.workloads_tracked.set(len(cache.items))
        return _parsed(body)
    doc = dict(body)
    doc.setdefault("apiVersion", "kueue.x-k8s.io/v1beta2")
    doc.setdefault("kind", "Workload")
    try:
        parsed = parse_object(doc)
    except InputError as err:
        with cache.lock:
            first = key not in cache.unparsable
            cache.unparsable[key] = err.one_line()
        if first:
            log.warning("workload %s not tracked: %s", key, err.one_line())
        return None
    if not isinstance(parsed, Workload):
        return None
    annotations = meta.get("annotations")
    keep = annotations.get(KEEP_ANNOTATION) if isinstance(annotations, dict) else None
    with cache.lock:
        cache.put(key, parsed)
        cache.unparsable.pop(key, None)
        if isinstance(keep, str):
            cache.keep[key] = keep
        else:
            cache.keep.pop(key, None)
    metrics.workloads_tracked.set(len(cache.items))
    return parsed


def _parsed(body: dict[str, Any]) -> Workload | None:
    doc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", **body}
    try:
        parsed = parse_object(doc)
    except InputError:
        return None
    return parsed if isinstance(parsed, Workload) else None
