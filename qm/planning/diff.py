"""What applying the new policy changes now, as `kubectl diff` shows it, and the transitions it starts.

The objects are the ones the operator would apply at this instant: the policy controller's decision for
the new policy over the live observation (`fairshare.control.decide`, with the live status, usage
history and budget consumption: the operator's own inputs) and its `desired_objects()`, compared with
the live objects by the operator's own test (`queue_manager.ownership.differs_from_desired`: a live
object that already carries every value the policy sets is not applied). A live object the policy owns
but no longer renders is pruned (deleted). `merged` is the live object with the policy's fields set (as
server-side apply with the operator's field manager leaves it: fields others set are kept); server-set
metadata (uid, resourceVersion, generation, timestamps, managedFields) and status are left out of both
sides, as they are not the policy's to change.

The transition plan is asked of the controller too (`schedule`): its decision now, then one at each
wake-up it asks for, until the horizon, with the quota steps it applies in force in between and its
deadline evictions carried out, and nothing else changing (no workload starts or finishes on its own):
the schedule the controller makes; when drain lets a step land depends on running work finishing, which
the forecast simulates.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from fairshare.control import (
    AdvanceTransition,
    ApplyQuota,
    BlockTransition,
    BudgetUsage,
    CancelTransition,
    Decision,
    FinishTransition,
    HistoryBook,
    Observed,
    PendingWorkload,
    PlanMemo,
    PolicyRules,
    RequestEviction,
    StartTransition,
    WaitForDrain,
    decide,
)
from fairshare.models import QuotaKey
from fairshare.policy import ObjectKey, QuotaPolicy, object_key, render_index
from fairshare.policy.tenancy import render_tenancy
from fairshare.quantity import describe_quantity
from fairshare.workload import WorkloadInfo
from queue_manager import history_store
from queue_manager.observe import observe
from queue_manager.ownership import differs_from_desired, managed_content

from .inputs import Live, PolicyFile

Action = Literal["create", "update", "delete"]
MAX_DECISIONS = 2000
_SERVER_SET = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink",
               "deletionTimestamp", "deletionGracePeriodSeconds", "finalizers", "ownerReferences")


@dataclass(frozen=True)
class ObjectDiff:
    key: ObjectKey
    api_version: str
    action: Action
    text: str  # the unified diff, kubectl diff's way
    live: dict[str, Any] | None
    merged: dict[str, Any] | None


@dataclass(frozen=True)
class Now:
    """The controller's decision for the new policy at the read's time, and what it was decided over."""

    decision: Decision
    observed: Observed
    book: HistoryBook
    generation: int
    at: float


def _book(policy: QuotaPolicy, live: Live) -> HistoryBook:
    stored = (live.doc.get("status") or {}).get("history")
    book, _ = HistoryBook.restore(policy, stored if isinstance(stored, Mapping) else None, live.now)
    return book


def decide_now(new: PolicyFile, live: Live, budgets: Mapping[str, BudgetUsage]) -> Now:
    """The operator's reconcile of the new policy at `live.now`, up to its decision (queue_manager/
    reconcile.py steps 2-3): observe, sync the usage history, decide."""
    book = _book(new.policy, live)
    workloads = live.workloads()
    observed = observe(new.policy, live.lookup, workloads, book.graph)
    history_store.sync(book, observed.snapshot, workloads, live.now)
    if budgets:
        observed = dataclasses.replace(observed, budget_usage=dict(budgets))
    changed = new.doc.get("spec") != live.doc.get("spec")
    generation = live.generation + 1 if changed else live.generation
    decision = decide(PolicyRules.of(new.policy), observed, live.status, live.now, history=book,
                      generation=generation, memo=PlanMemo())
    return Now(decision, observed, book, generation, live.now)


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


def _yaml(obj: Mapping[str, Any] | None) -> list[str]:
    if obj is None:
        return []
    return yaml.safe_dump(dict(obj), sort_keys=False, default_flow_style=False).splitlines(keepends=True)


def unified(live: Mapping[str, Any] | None, merged: Mapping[str, Any] | None, key: ObjectKey,
            api_version: str) -> str:
    """kubectl diff's output for one object: `diff -u -N LIVE/... MERGED/...` and the unified diff."""
    group, _, version = api_version.rpartition("/")
    name = f"{group or 'core'}.{version}.{key.kind}.{key.namespace}.{key.name}"
    a, b = f"LIVE/{name}", f"MERGED/{name}"
    body = "".join(difflib.unified_diff(_yaml(live), _yaml(merged), fromfile=a, tofile=b))
    return f"diff -u -N {a} {b}\n{body}" if body else ""


def object_diffs(now: Now, live: Live, *, final: bool = False) -> list[ObjectDiff]:
    """Every object the operator would create, update or prune now, in its apply order (deletions last);
    `final`: once every transition has reached its target (the spec's quotas, rendered with the weights
    and stop policies of the decision)."""
    d = now.decision
    desired = (render_index(d.policy, weights=d.weights, stop_policies=d.stop_policies) if final
               else d.desired_objects())
    if final:  # spec.tenancy's admission rules and RoleBindings do not depend on transitions
        desired.update((object_key(m), m) for m in render_tenancy(d.policy))
    out: list[ObjectDiff] = []
    for key, want in desired.items():
        have = live.lookup(key)
        api_version = str(want.get("apiVersion"))
        if have is not None and not differs_from_desired(managed_content(want), managed_content(have)) \
                and not differs_from_desired(_labels(want), _labels(have)):
            continue
        if have is None:
            merged = _shown(want)
            out.append(ObjectDiff(key, api_version, "create", unified(None, merged, key, api_version), None,
                                  merged))
            continue
        shown = _shown(have)
        merged = overlay(shown, _shown(want))
        out.append(ObjectDiff(key, api_version, "update", unified(shown, merged, key, api_version), shown,
                              merged))
    for key, have in sorted(live.owned().items()):
        if key in desired:
            continue
        api_version = str(have.get("apiVersion"))
        shown = _shown(have)
        text = unified(shown, None, key, api_version)
        out.append(ObjectDiff(key, api_version, "delete", text, shown, None))
    return out


def _labels(obj: Mapping[str, Any]) -> dict[str, Any]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def policy_diff(new: PolicyFile, live: Live) -> str:
    """The QuotaPolicy itself, as `kubectl diff -f NEW_POLICY.yaml` shows it (spec and labels)."""
    key = ObjectKey("QuotaPolicy", "", new.policy.name)
    have = _shown({k: v for k, v in live.doc.items() if k != "status"})
    merged = overlay(have, _shown(new.doc))
    merged["spec"] = new.doc.get("spec")  # apply replaces the spec it owns: lists are replaced
    return unified(have, merged, key, str(new.doc.get("apiVersion") or have.get("apiVersion")))


# ----------------------------------------------------------------------------------------------- schedule


@dataclass(frozen=True)
class Step:
    """One thing the controller does at `at` (seconds since the epoch) for a quota, or an eviction."""

    at: float
    key: QuotaKey | None
    kind: str  # start | step | wait | finish | cancel | blocked | evict
    what: str


def _quantity(milli: int, resource: str) -> str:
    return describe_quantity(milli, resource)


def schedule(now: Now, until: float) -> list[Step]:
    """The controller's transition plan from `now` to `until` (module docstring): its own steps, asked
    for decision by decision; the live observation is restored afterwards."""
    decision = now.decision
    observed = now.observed
    snap = observed.snapshot
    rules = decision.rules
    pending: dict[str, PendingWorkload] = dict(observed.pending)
    out: list[Step] = []
    t = now.at
    with snap.transaction():
        for _ in range(MAX_DECISIONS):
            for a in decision.actions:
                step = _step(a, t)
                if step is not None:
                    out.append(step)
                if isinstance(a, ApplyQuota):
                    cq = snap.cluster_queues.get(a.key.team)
                    if cq is not None and cq.node.quota(a.key.flavor_resource) != a.quota:
                        snap.set_quota(a.key.team, a.key.flavor_resource, a.quota)
                elif isinstance(a, RequestEviction) and not a.dry_run and a.victim in snap.workloads:
                    info = snap.remove_workload(a.victim)
                    wl = info.workload.after_eviction("Deactivated")
                    held = WorkloadInfo.pending(wl, info.cluster_queue)
                    pending[a.victim] = PendingWorkload(held, t, queued=False)
            wake = decision.wake_at
            if wake is None or wake > until:
                break
            t = wake
            seen = dataclasses.replace(observed, pending=dict(pending))
            decision = decide(rules, seen, decision.status, t, history=now.book, generation=now.generation,
                              memo=PlanMemo())
    return out


def _step(a: object, t: float) -> Step | None:
    if isinstance(a, StartTransition):
        r = a.key.resource
        return Step(t, a.key, "start", f"{_quantity(a.before, r)} -> {_quantity(a.target, r)} in "
                                       f"{a.steps} step(s): {a.why}")
    if isinstance(a, AdvanceTransition):
        r = a.key.resource
        return Step(t, a.key, "step", f"step {a.step}/{a.total}: {_quantity(a.before, r)} -> "
                                      f"{_quantity(a.after, r)}")
    if isinstance(a, WaitForDrain):
        return Step(t, a.key, "wait", f"waits for drain: {a.why}")
    if isinstance(a, FinishTransition):
        return Step(t, a.key, "finish", "target reached")
    if isinstance(a, CancelTransition):
        r = a.key.resource
        return Step(t, a.key, "cancel", f"the transition to {_quantity(a.old_target, r)} is cancelled at "
                                        f"{_quantity(a.at_value, r)}; new target "
                                        f"{_quantity(a.new_target, r)}")
    if isinstance(a, BlockTransition):
        return Step(t, a.key, "blocked", a.why)
    if isinstance(a, RequestEviction) and a.beneficiary is None:
        return Step(t, None, "evict", f"{'would evict (dry run)' if a.dry_run else 'evicts'} {a.victim}: "
                                      f"{a.reason}")
    return None


def keys_of(steps: Sequence[Step]) -> list[QuotaKey]:
    seen: list[QuotaKey] = []
    for s in steps:
        if s.key is not None and s.key not in seen:
            seen.append(s.key)
    return seen
