"""What a plan reads, once: the policy files, the live cluster (qm/live.py) and the ledger's history.

Every failure is one InputError line: a policy file, a policy name the cluster does not have, a
kubeconfig, a server that does not answer within the timeout, an identity that may not read what the plan
needs, a ledger URL.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fairshare.control import BudgetUsage
from fairshare.errors import InputError, Location
from fairshare.models import Workload
from fairshare.policy import ObjectKey, QuotaPolicy, parse_policy
from fairshare.policy.render import MANAGED_BY_LABEL, MANAGED_BY_VALUE, POLICY_LABEL
from fairshare.policy.status import QuotaPolicyStatus, read_status
from fairshare.scheduler import SchedulerConfig
from fairshare.yamlfile import load_yaml_one
from qm.live import LiveCluster, LiveReader
from simulations.calibrate import RecordedLife

PRIMARY = "nvidia.com/gpu"


@dataclass(frozen=True)
class PolicyFile:
    path: str
    doc: dict[str, Any]  # apiVersion, kind, metadata, spec as written
    policy: QuotaPolicy

    @property
    def label(self) -> str:
        return Path(self.path).name


@dataclass(frozen=True)
class Live:
    """The cluster as one read saw it, from the policy's point of view."""

    cluster: LiveCluster
    now: float  # the read's time, whole seconds (t=0 of the forecast)
    doc: dict[str, Any]  # the live QuotaPolicy, status included
    current: QuotaPolicy
    status: QuotaPolicyStatus
    generation: int
    capacity: int | None  # Σ allocatable of the primary resource over the Nodes (milli), when readable
    warnings: tuple[str, ...] = ()
    index: dict[ObjectKey, dict[str, Any]] = field(default_factory=dict)  # every Kueue object but Workloads
    # The Configuration Kueue runs with, as far as scheduling goes (qm/kueue_setup.py: fairSharing and its
    # strategies): the decision, the transition plan and the forecast model it, as the operator does.
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)

    def lookup(self, key: ObjectKey) -> dict[str, Any] | None:
        return self.index.get(key)

    def owned(self) -> dict[ObjectKey, dict[str, Any]]:
        """The Kueue objects labelled as this policy's (what the operator prunes when no longer rendered)."""
        name = self.current.name
        out = {}
        for key, obj in self.index.items():
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE and labels.get(POLICY_LABEL) == name:
                out[key] = obj
        return out

    def workloads(self) -> dict[str, Workload]:
        return dict(self.cluster.state.workloads)

    def workload_documents(self) -> dict[str, dict[str, Any]]:
        out = {}
        for doc in self.cluster.documents:
            if doc.get("kind") == "Workload":
                meta = doc.get("metadata") or {}
                out[f"{meta.get('namespace')}/{meta.get('name')}"] = doc
        return out


def read_policy_file(path: str) -> PolicyFile:
    """A QuotaPolicy file: the project's one file reader and the operator's validation (one line)."""
    doc = load_yaml_one(path, what="a QuotaPolicy")
    policy = parse_policy(doc, file=path)
    kept: dict[str, Any] = {k: doc[k] for k in ("apiVersion", "kind", "metadata", "spec") if k in doc}
    return PolicyFile(path, kept, policy)


def object_key(doc: Mapping[str, Any]) -> ObjectKey:
    meta = doc.get("metadata") or {}
    return ObjectKey(str(doc.get("kind", "")), str(meta.get("namespace") or ""), str(meta.get("name", "")))


def read_live(reader: LiveReader, new: PolicyFile) -> Live:
    """The live QuotaPolicy of the new file's name, every Kueue object, the Nodes' capacity."""
    name = new.policy.name
    doc = reader.policy(name)
    if doc is None:
        known = sorted(str((p.get("metadata") or {}).get("name")) for p in reader.policies())
        raise InputError(
            f"no QuotaPolicy {name!r} in the cluster at {reader.server} (known: "
            f"{', '.join(known) or 'none'}); qm plan compares a change with the policy that runs",
            location=Location(file=new.path, field="metadata.name"), value=name)
    cluster = reader.read_cluster(with_policies=False)
    capacity = reader.capacity(PRIMARY)
    spec_doc = {k: v for k, v in doc.items() if k != "status"}
    try:
        current = parse_policy(spec_doc)
    except InputError as err:
        raise InputError(f"the live QuotaPolicy {name} does not parse (the operator rejects it too): "
                         f"{err.one_line()}", location=Location(file=reader.server)) from None
    status, warnings = read_status(doc.get("status"))
    generation = int((doc.get("metadata") or {}).get("generation") or 1)
    index = {object_key(d): d for d in cluster.documents if d.get("kind") != "Workload"}
    if new.policy.spec.tenancy is not None or current.spec.tenancy is not None:
        # The admission rules and RoleBindings of spec.tenancy, which the diff shows too (docs/tenancy.md).
        tenancy = reader.tenancy_objects()
        if tenancy is None:
            warnings.append("the tenancy's admission rules and RoleBindings are not readable by this "
                            "identity (manifests/rbac/planner-clusterrole.yaml grants it): the diff shows "
                            "them as new")
        index.update((object_key(d), d) for d in tenancy or [])
    return Live(cluster, float(math.floor(cluster.read_at)), doc, current, status, generation, capacity,
                tuple(warnings) + cluster.skipped, index)


# ------------------------------------------------------------------------------------------------ ledger


@dataclass(frozen=True)
class History:
    """The ledger's lives of the calibration window, as the simulator's calibration reads them."""

    since: float  # arrivals are fitted over [since, until)
    until: float
    look_back: float  # run times over lives submitted from here (<= since: long jobs count too)
    lives: tuple[RecordedLife, ...]
    source: str  # the ledger, as described to the user (no password)
    reused: int = 0  # lives taken from the cache (qm/planning/lives_cache.py)


def read_history(url: str | None, *, since: float, until: float, look_back: float,
                 cache: Path | None = None) -> History:
    """Lives submitted from `look_back` (<= since: run times of long jobs) to `until`; through the lives
    cache under the directory `cache` (None: the whole window is read)."""
    from ledger.db import describe, resolve_url
    from ledger.ledger import open_ledger

    from .lives_cache import cache_file, read_lives

    resolved = resolve_url(url)
    with open_ledger(url, read_only=True) as ledger:
        path = None if cache is None else cache_file(cache, resolved.render_as_string(hide_password=False))
        read = read_lives(ledger, look_back=look_back, until=until, path=path)
    return History(since, until, look_back, tuple(read.lives), describe(resolved), read.reused)


def recorded_lives(rows: Sequence[Any], *, until: float) -> list[RecordedLife]:
    """`ledger.queries.LifeSummary` rows as `RecordedLife`s (`recorded_life`), the rows without requests left
    out."""
    return [life for life in (recorded_life(row, until=until) for row in rows) if life is not None]


def recorded_life(life: Any, *, until: float) -> RecordedLife | None:
    """A `ledger.queries.LifeSummary` as a `RecordedLife`: the shape (one pod set: its count and per-pod
    requests; several: one pod of their totals), the attempt that ended the life (finished, else deleted
    while it held quota) or that runs at `until` (censored). None: no pod set with requests."""
    sets = [p for p in life.pod_sets if isinstance(p.get("requests"), dict)]
    if not sets:
        return None
    if len(sets) == 1:
        count = max(1, int(sets[0].get("count") or 1))
        requests = {str(r): int(m) for r, m in sets[0]["requests"].items()}
    else:
        count, requests = 1, {}
        for p in sets:
            for r, m in p["requests"].items():
                requests[str(r)] = requests.get(str(r), 0) + int(m) * max(1, int(p.get("count") or 1))
    started = life.last_admitted_ms / 1000 if life.last_admitted_ms is not None else None
    holding = started is not None and life.evictions < life.attempts  # its last attempt not evicted
    ended: float | None = None
    if life.finished_ms is not None:
        ended = life.finished_ms / 1000
    elif life.deleted_ms is not None and holding:
        ended = life.deleted_ms / 1000
    return RecordedLife(
        local_queue=f"{life.namespace}/{life.local_queue}", priority_class=life.priority_class,
        submitted=life.submitted_ms / 1000, count=count, requests=tuple(sorted(requests.items())),
        started=started if (ended is not None or holding) else None, ended=ended,
        running=holding and ended is None and started is not None and started < until)


def budget_usage(url: str | None, policy: QuotaPolicy, now: float) -> dict[str, BudgetUsage]:
    """Each budget's consumption in its period, measured in the ledger as the operator measures it."""
    if not policy.spec.budgets:
        return {}
    from fairshare.control.budgets import budget_rules
    from ledger.budgets import measure
    from ledger.ledger import open_ledger

    with open_ledger(url, read_only=True) as ledger:
        return measure(ledger, budget_rules(policy), now)
