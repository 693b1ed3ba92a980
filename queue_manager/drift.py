"""Drift: a hand edit of an owned Kueue object is reverted and reported (DESIGN.md).

Each apply remembers the stored spec, API-server defaults included, and the resourceVersions and
(uid, generation) it produced. A version of an owned object that we did not write, not older than our last
write, whose content differs from that copy, is a hand edit: the object is re-applied with force, fields the
edit added are merge-patched away, and one `DriftCorrected` Event goes on the object and on the policy.

Two paths see a hand edit, and both correct it here: the watch event of the edit (`check_drift`), and the
reconcile, which reads the watch cache and may get to the edited object first (`Reconciler.ensure`: the
cache is updated before the event is checked, under the policy's lock, by its holder or the handler:
`Operator.check_drift_events`). Before, the reconcile re-applied
the object as an ordinary update: our fields came back, but a field the edit added (`stopPolicy: Hold`)
stayed, and the stored copy it remembered then counted that field as ours, so the edit's own event,
handled next, no longer saw it (a CI failure: the quota reverted, the ClusterQueue left held)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fairshare.control import AuditAction
from fairshare.policy import ObjectKey

from .cache import PolicyRuntime, policy_ref
from .ownership import managed_content, restore_patch, spec_drift
from .refs import key_of, ref_of

if TYPE_CHECKING:
    from .reconcile import Reconciler


def check_drift(rec: Reconciler, rt: PolicyRuntime, event_type: str | None, body: dict[str, Any]) -> bool:
    """A version of an owned object (a watch event's, or the watch cache's when the reconcile reads it):
    revert it if it is a hand edit; whether it was."""
    key = key_of(body)
    paths = hand_edit(rt, key, event_type, body)
    if paths:
        revert_hand_edit(rec, rt, key, event_type, body, paths)
    return bool(paths)


def hand_edit(rt: PolicyRuntime, key: ObjectKey, event_type: str | None, body: dict[str, Any]) -> list[str]:
    """The paths a hand edit changed in this version of an owned object; [] when the version is one we
    wrote, older than our last write of the object, or the same as what we wrote."""
    if key not in rt.desired:
        return []
    meta = body.get("metadata") or {}
    rv = str(meta.get("resourceVersion", ""))
    if event_type != "DELETED":
        if rv in rt.own_versions.get(key, set()):
            return []  # our own write (possibly a late event for an older one)
        uid, generation = str(meta.get("uid", "")), meta.get("generation")
        ours = [g for u, g in rt.own_generations.get(key, set()) if u == uid]  # generations we wrote
        if isinstance(generation, int) and ours and generation <= max(ours):
            # Another controller's write on top of one of ours (Kueue's status write for a held ClusterQueue
            # between a correction's apply and its patch) has the content we wrote; a generation older than
            # our last write is an event the watch delivers late: what it shows was overwritten since.
            return []
    applied = rt.applied.get(key)
    if not applied:  # nothing known to compare with (never a reason to wipe an object)
        return []
    if event_type == "DELETED":
        return ["(object deleted)"]
    return [p.lstrip(".") for p in spec_drift(applied, managed_content(body), path="")]


def revert_hand_edit(rec: Reconciler, rt: PolicyRuntime, key: ObjectKey, event_type: str | None,
                     body: dict[str, Any], paths: list[str]) -> None:
    """Report the edit once, re-apply what the policy implies, and patch away what the edit added."""
    meta = body.get("metadata") or {}
    applied = rt.applied[key]
    changed = ", ".join(paths[:8]) + (" ..." if len(paths) > 8 else "")
    stored = rec.apply(rt, key, rt.desired[key])
    # Its watch event, and a controller's status write on top of it, may come on their own (kopf batches
    # only events within its batch window): still ours.
    rt.remember_version(key, stored)
    content = managed_content(stored)
    leftover = restore_patch(applied, content) if spec_drift(applied, content) else {}
    if leftover and event_type != "DELETED":
        # Fields someone else added that our apply does not own: remove them by patch.
        stored = rec.writer.merge_patch(ref_of(key), leftover)
        content = managed_content(stored)
    rt.remember_write(key, stored, content)
    # Reported once it is reverted (never before: the revert may be refused), once per edit: named after
    # the object's uid and the generation the edit made. Not the resourceVersion: a controller's status
    # write after the edit (Kueue marks a held ClusterQueue inactive) is a new resourceVersion of the same
    # edit, while every change of the content we own bumps metadata.generation (CRDs: anything but metadata
    # and status; our revert bumps it too). A second sighting of the same edit (its event after the
    # reconcile reverted it, or a restart in between) posts nothing more.
    edit = "deleted" if event_type == "DELETED" else f"generation {meta.get('generation', '')}"
    rec.actuator(rt).audit(AuditAction.DRIFT, ref_of(key), f"reverted hand edit of {ref_of(key).describe()}: "
                           f"{changed}", "owned by the policy; edit the QuotaPolicy instead",
                           also_on=policy_ref(rt), once=f"drift|{key}|{meta.get('uid', '')}|{edit}")
    rec.metrics.drift_corrections.labels(key.kind).inc()
