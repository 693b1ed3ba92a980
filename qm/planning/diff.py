"""What applying the new policy changes now, field by field (semantic.py), and the transitions it starts.

The QuotaPolicy: its labels, annotations and spec as the file sets them against the live ones, after the
API server's defaults on both sides (`policy_diff`): `kubectl diff -f FILE` shows the same changes, and
metadata.generation.

The objects are the ones the operator would apply at this instant: the policy controller's decision for
the new policy over the live observation (the operator's own step, `fairshare.control.PolicyController`,
with the live status, usage history and budget consumption) and the objects its actions put in force,
compared with the live objects by the operator's own test (`queue_manager.ownership.differs_from_desired`:
a live object that already carries every value the policy sets is not applied). A live object the policy owns
but no longer renders is pruned (deleted). `merged` is the live object with the policy's fields set (as
server-side apply with the operator's field manager leaves it: fields others set, Kueue's defaults
among them, are kept on both sides); server-set metadata (uid, resourceVersion, generation, timestamps,
managedFields) and status are left out of both sides, as they are not the policy's to change.

The transitions it starts, step by step, are qm/planning/transitions.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from fairshare.control import (
    BudgetUsage,
    ClusterView,
    Decision,
    HistoryBook,
    Observed,
    PolicyController,
    PolicyRules,
    Reply,
    StepFailed,
    kueue_objects,
)
from fairshare.policy import ObjectKey, QuotaPolicy
from queue_manager.ownership import differs_from_desired, managed_content

from .inputs import Live, PolicyFile
from .semantic import Change, changes, defaulted, leaves, policy_spec_schema

Action = Literal["create", "update", "delete", "unchanged"]
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"  # kubectl's bookkeeping, not the policy
MAX_DECISIONS = 2000
_SERVER_SET = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink",
               "deletionTimestamp", "deletionGracePeriodSeconds", "finalizers", "ownerReferences")


@dataclass(frozen=True)
class ObjectDiff:
    key: ObjectKey
    api_version: str
    action: Action
    changes: tuple[Change, ...]  # field by field (qm/planning/semantic.py)
    live: dict[str, Any] | None
    merged: dict[str, Any] | None
    note: str = ""  # said after the action in the header (e.g. the generation)

    @property
    def text(self) -> str:
        """The header line, then one line per change."""
        where = f"{self.key.namespace}/{self.key.name}" if self.key.namespace else self.key.name
        head = f"{self.key.kind} {where}: {self.action}" + (f" ({self.note})" if self.note else "")
        return "".join(f"{line}\n" for line in [head, *(f"  {c.line()}" for c in self.changes)])

    def document(self) -> dict[str, Any]:
        return {"kind": self.key.kind, "namespace": self.key.namespace or None, "name": self.key.name,
                "action": self.action, "diff": self.text, "changes": [c.document() for c in self.changes]}


@dataclass(frozen=True)
class Now:
    """The controller's decision for the new policy at the read's time, and what it was decided over."""

    decision: Decision
    observed: Observed
    book: HistoryBook
    generation: int
    at: float
    reply: Reply  # the whole step: the objects the decision puts in force


def _book(policy: QuotaPolicy, live: Live) -> HistoryBook:
    stored = (live.doc.get("status") or {}).get("history")
    book, _ = HistoryBook.restore(policy, stored if isinstance(stored, Mapping) else None, live.now)
    return book


def decide_now(new: PolicyFile, live: Live, budgets: Mapping[str, BudgetUsage]) -> Now:
    """The operator's reconcile of the new policy at `live.now`, up to its decision (queue_manager/
    reconcile.py steps 2-3): the same trip into the core (fairshare.control.cluster): observe, sync the
    usage history, decide, and what the decision puts in force."""
    book = _book(new.policy, live)
    changed = new.doc.get("spec") != live.doc.get("spec")
    generation = live.generation + 1 if changed else live.generation
    view = ClusterView(live.lookup, live.workloads(), live.scheduler, budget_usage=dict(budgets) or None)
    try:
        reply = PolicyController().step(PolicyRules.of(new.policy), view, live.status, live.now, history=book,
                                        generation=generation)
    except StepFailed as err:
        raise err.cause from None
    return Now(reply.decision, reply.observed, reply.history, generation, live.now, reply)


# ------------------------------------------------------------------------------------------------- objects


def _shown(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _SERVER_SET}
    out: dict[str, Any] = {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": meta}
    out.update(managed_content(obj))
    return out


def overlay(live: Any, desired: Any) -> Any:
    """`live` with every value `desired` sets (a value the operator's test finds equal keeps its live
    text: "4" and "4000m" are one quota)."""
    if isinstance(desired, Mapping) and isinstance(live, Mapping):
        out = dict(live)
        for k, v in desired.items():
            out[k] = overlay(live[k], v) if k in live else v
        return out
    if isinstance(desired, list) and isinstance(live, list) and len(desired) == len(live):
        return [overlay(a, b) for a, b in zip(live, desired, strict=True)]
    return live if not differs_from_desired(desired, live) else desired


def object_diffs(now: Now, live: Live, *, final: bool = False) -> list[ObjectDiff]:
    """Every object the operator would create, update or prune now, in its apply order (deletions last);
    `final`: once every transition has reached its target (the spec's quotas, rendered with the weights
    and stop policies of the decision)."""
    reply = now.reply
    settings = reply.settings
    if final:  # every quota at the spec's; spec.tenancy's objects do not depend on transitions
        settings = dataclasses.replace(settings, quotas=dict(reply.decision.rules.targets))
    desired = kueue_objects(reply.decision.rules, settings) if final else reply.objects
    out: list[ObjectDiff] = []
    for key, want in desired.items():
        have = live.lookup(key)
        api_version = str(want.get("apiVersion"))
        if have is not None and not differs_from_desired(managed_content(want), managed_content(have)) \
                and not differs_from_desired(_labels(want), _labels(have)):
            continue
        if have is None:
            merged = _shown(want)
            out.append(ObjectDiff(key, api_version, "create", tuple(changes({}, _content(merged))), None,
                                  merged))
            continue
        shown = _shown(have)
        merged = overlay(shown, _shown(want))
        out.append(ObjectDiff(key, api_version, "update", tuple(changes(_content(shown), _content(merged))),
                              shown, merged))
    for key, have in sorted(live.owned().items()):
        if key in desired:
            continue
        api_version = str(have.get("apiVersion"))
        shown = _shown(have)
        out.append(ObjectDiff(key, api_version, "delete", tuple(changes(_content(shown), {})), shown, None))
    return out


def _content(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What a diff compares: labels, annotations and the content (the kind and name are the header's)."""
    meta = obj.get("metadata") or {}
    out: dict[str, Any] = {}
    kept = {k: meta[k] for k in ("labels", "annotations") if meta.get(k)}
    if kept:
        out["metadata"] = kept
    out.update(managed_content(obj))
    return out


def _labels(obj: Mapping[str, Any]) -> dict[str, Any]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def policy_diff(new: PolicyFile, live: Live, new_generation: int) -> ObjectDiff:
    """The QuotaPolicy itself as applying the file changes it (its labels, annotations and spec), after the
    API server's defaults on both sides (semantic.py): exactly the fields the edit changes, an added one as
    the file writes it."""
    key = ObjectKey("QuotaPolicy", "", new.policy.name)
    schema = policy_spec_schema()
    have = _shown({k: v for k, v in live.doc.items() if k != "status"})
    merged = overlay(have, _shown(new.doc))  # labels and annotations the file sets; others are kept
    before = _policy_content(have, schema)
    after = _policy_content(merged, schema)
    after["spec"] = defaulted(new.doc.get("spec") or {}, schema)  # apply replaces the spec it owns
    shape = {"properties": {"spec": schema}}
    # A field the edit adds shows as the file writes it: the defaults the server fills in around it (a new
    # budget's dryRun: false) are not the user's change. (Defaults on fields both sides have cancel out.)
    written = {path for path, _ in leaves({"spec": new.doc.get("spec") or {}}, shape)}
    found = tuple(c for c in changes(before, after, shape) if c.op != "+" or not c.path.startswith("spec.")
                  or c.path in written)
    note = f"generation {live.generation} -> {new_generation}" if found else ""
    return ObjectDiff(key, str(new.doc.get("apiVersion") or have.get("apiVersion")),
                      "update" if found else "unchanged", found, have, merged, note)


def _policy_content(obj: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    out: dict[str, Any] = {}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != LAST_APPLIED}
    kept = {k: v for k, v in (("labels", meta.get("labels")), ("annotations", annotations)) if v}
    if kept:
        out["metadata"] = kept
    out["spec"] = defaulted(obj.get("spec") or {}, schema)
    return out
