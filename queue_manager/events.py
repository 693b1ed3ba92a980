"""Pure builders of core/v1 Event bodies (what `kubectl describe` shows)."""

from __future__ import annotations

import contextlib
from typing import Any

from fairshare.timestamps import rfc3339

from .refs import ObjectRef, kind_of

REPORTING_COMPONENT = "queue-manager"
# Every Event the operator posts carries this label (a new leader lists them: queue_manager/ledger_feed.py
# `recover`), and an Event that reports an audit record carries the ledger's rows of it in the annotation.
EVENT_LABELS = {"app.kubernetes.io/managed-by": "queue-manager"}
LEDGER_ANNOTATION = "queuemanager.dev/ledger-records"
# Events of cluster-scoped objects live in "default", as kubectl and the kubelet expect.
CLUSTER_EVENT_NAMESPACE = "default"


def event_body(target: ObjectRef, *, reason: str, message: str, event_type: str, now: float,
               name_suffix: str, reporting_instance: str,
               ledger_records: str | None = None) -> dict[str, Any]:
    """A core/v1 Event about `target`. `name_suffix` makes the name unique (the caller
    passes a counter or random hex; names need not be meaningful). `ledger_records`: the ledger's rows of
    the fact it reports (JSON), kept with it for a new leader whose spool is gone."""
    namespace = target.namespace or CLUSTER_EVENT_NAMESPACE
    involved: dict[str, Any] = {"kind": target.kind, "name": target.name}
    with contextlib.suppress(KeyError):
        involved["apiVersion"] = kind_of(target.kind).api_version
    if target.namespace:
        involved["namespace"] = target.namespace
    if target.uid:
        involved["uid"] = target.uid
    stamp = rfc3339(now)
    metadata: dict[str, Any] = {"name": f"{target.name}.{name_suffix}"[:253], "namespace": namespace,
                                "labels": dict(EVENT_LABELS)}
    if ledger_records is not None:
        metadata["annotations"] = {LEDGER_ANNOTATION: ledger_records}
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": metadata,
        "involvedObject": involved,
        "reason": reason,
        "message": message,
        "type": event_type,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "source": {"component": REPORTING_COMPONENT},
        "reportingComponent": REPORTING_COMPONENT,
        "reportingInstance": reporting_instance,
    }
