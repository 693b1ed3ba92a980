"""Drift: a hand edit of an owned Kueue object is reverted and reported (DESIGN.md).

Each apply remembers the stored spec, API-server defaults included, and the resourceVersions it produced.
A watch event for an owned object with a resourceVersion we did not write, whose content differs from
that copy, is a hand edit: the object is re-applied with force, fields the edit added are merge-patched
away, and one `DriftCorrected` Event goes on the object and on the policy."""

from __future__ import annotations

from typing import Any

from fairshare.control import AuditAction

from .cache import PolicyRuntime
from .metrics import Metrics
from .ownership import managed_content, restore_patch, spec_drift
from .reconcile import Reconciler, key_of, policy_ref, ref_of
from .writer import Writer


def check_drift(rec: Reconciler, rt: PolicyRuntime, event_type: str | None, body: dict[str, Any]) -> None:
    key = key_of(body)
    if key not in rt.desired:
        return
    meta = body.get("metadata") or {}
    rv = str(meta.get("resourceVersion", ""))
    if event_type != "DELETED" and rv in rt.own_versions.get(key, set()):
        return  # our own write (possibly a late event for an older one)
    written = (str(meta.get("uid", "")), meta.get("generation"))
    if event_type != "DELETED" and written in rt.own_generations.get(key, set()):
        # Another controller's write on top of one of ours (Kueue's status write for a held ClusterQueue
        # between a correction's apply and its patch): the content is what we wrote, not another edit.
        return
    applied = rt.applied.get(key)
    if not applied:  # nothing known to compare with (never a reason to wipe an object)
        return
    if event_type == "DELETED":
        paths = ["(object deleted)"]
    else:
        paths = [p.lstrip(".") for p in spec_drift(applied, managed_content(body), path="")]
    if not paths:
        return
    writer: Writer = rec.writer
    metrics: Metrics = rec.metrics
    changed = ", ".join(paths[:8]) + (" ..." if len(paths) > 8 else "")
    # Reported before it is reverted, once per edit: named after the object's uid and the generation the
    # edit made. Not the resourceVersion: a controller's status write after the edit (Kueue marks a held
    # ClusterQueue inactive) is a new resourceVersion of the same edit, while every change of the content
    # we own bumps metadata.generation (CRDs: anything but metadata and status; our revert bumps it too).
    # A second watch event for the same edit, or a restart in between, posts nothing more.
    edit = "deleted" if event_type == "DELETED" else f"generation {meta.get('generation', rv)}"
    rec.actuator(rt).audit(AuditAction.DRIFT, ref_of(key), f"reverted hand edit of {ref_of(key).describe()}: "
                           f"{changed}", "owned by the policy; edit the QuotaPolicy instead",
                           also_on=policy_ref(rt), once=f"drift|{key}|{meta.get('uid', '')}|{edit}")
    stored = writer.apply(rt.desired[key])
    # Its watch event, and a controller's status write on top of it, may come on their own (kopf batches
    # only events within its batch window): still ours.
    rt.remember_version(key, stored)
    content = managed_content(stored)
    leftover = restore_patch(applied, content) if spec_drift(applied, content) else {}
    if leftover and event_type != "DELETED":
        # Fields someone else added that our apply does not own: remove them by patch.
        stored = writer.merge_patch(ref_of(key), leftover)
        content = managed_content(stored)
    rt.remember_write(key, stored, content)
    metrics.drift_corrections.labels(key.kind).inc()
