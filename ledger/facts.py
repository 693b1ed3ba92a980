"""What the accounting rules read from one observation of a Workload (pure; no database, no clock).

An observation is reduced at record time to :class:`WorkloadFacts`: the identity, the requests, the
admission (with the price in force of each flavor-resource it holds) and the status conditions with their
times. The facts are what the spool keeps, so a replay after an outage computes exactly what the live
write would have (prices and label keys are those of the moment of observation).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from fairshare.models import Condition, FlavorResource, Workload

from .records import LabelKeys, Millis, PriceTable, WorkloadObservation, to_millis


@dataclass(frozen=True, slots=True)
class Cond:
    """A status condition (metav1.Condition): status, reason, message and lastTransitionTime (ms)."""

    status: bool
    reason: str
    message: str
    at_ms: Millis


@dataclass(frozen=True, slots=True)
class Held:
    """One flavor-resource an admission holds: milli-units, and its price per unit-hour of the resource's
    unit (GPU-hour, core-hour, GiB-hour; None = unpriced) in ``currency``."""

    flavor: str
    resource: str
    quantity: int
    price: Decimal | None
    currency: str = ""


@dataclass(frozen=True, slots=True)
class PodSetFacts:
    """One pod set: ``count`` pods each requesting ``requests``; ``flavors``: resource -> assigned flavor."""

    name: str
    count: int
    requests: tuple[tuple[str, int], ...]
    flavors: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Identity:
    """Who and what a workload is. ``team`` is the ClusterQueue (the admission's, else the LocalQueue's)."""

    namespace: str
    name: str
    local_queue: str
    team: str | None = None
    owner_kind: str | None = None
    owner_name: str | None = None
    user: str | None = None
    priority_class: str | None = None
    priority: int = 0
    project: str | None = None
    team_label: str | None = None
    cost_center: str | None = None
    labels: tuple[tuple[str, str], ...] = ()  # the configured label keys that are present


@dataclass(frozen=True, slots=True)
class WorkloadFacts:
    uid: str
    identity: Identity
    pod_sets: tuple[PodSetFacts, ...]
    submitted_ms: Millis
    observed_ms: Millis
    held: tuple[Held, ...] = ()  # the admission's usage per flavor-resource, sorted; () = no admission
    # status.admission's usage before the reclaimable-pods scaling: the size the attempt was admitted at
    # (held is () once every pod finished for good, e.g. a Job done while the service was down).
    reserved: tuple[Held, ...] = ()
    quota_reserved: Cond | None = None
    admitted: Cond | None = None
    evicted: Cond | None = None
    preempted: Cond | None = None
    finished: Cond | None = None
    deleted_ms: Millis | None = None
    accumulated_s: int | None = None  # status.accumulatedPastExecutionTimeSeconds
    evictions: tuple[tuple[str, str, int], ...] = ()  # status.schedulingStats.evictions

    @property
    def attempt_size(self) -> tuple[Held, ...]:
        """What the current admission holds, else (every pod reclaimable) the size it was admitted at."""
        return self.held or self.reserved

    @property
    def evictions_total(self) -> int:
        return sum(count for _, _, count in self.evictions)

    def is_true(self, cond: Cond | None) -> bool:
        return cond is not None and cond.status

    @property
    def end_ms(self) -> Millis | None:
        """When the life ended (finished, else deleted), if it did."""
        if self.finished is not None and self.finished.status:
            return self.finished.at_ms
        return self.deleted_ms


def _cond(c: Condition | None) -> Cond | None:
    if c is None:
        return None
    # A condition message is free text from Kueue; 1 KiB keeps the why without bloating the ledger.
    return Cond(c.status, c.reason, c.message[:1024], to_millis(c.last_transition_time))


def facts_of(obs: WorkloadObservation, prices: PriceTable, labels: LabelKeys) -> WorkloadFacts:
    """The facts of one observation (prices and label keys as in force now)."""
    wl: Workload = obs.workload
    present = dict(wl.labels)
    kept = tuple((k, present[k]) for k in sorted(labels.all()) if k in present)
    team = wl.admission.cluster_queue if wl.admission is not None else obs.cluster_queue
    identity = Identity(
        namespace=wl.namespace,
        name=wl.name,
        local_queue=wl.queue_name,
        team=team,
        owner_kind=wl.owner_kind,
        owner_name=wl.owner_name,
        user=obs.user if obs.user is not None else present.get(labels.user),
        priority_class=wl.priority_class,
        priority=wl.effective_priority,
        project=present.get(labels.project),
        team_label=present.get(labels.team),
        cost_center=present.get(labels.cost_center),
        labels=kept,
    )
    assigned: dict[str, tuple[tuple[str, str], ...]] = {}
    held: tuple[Held, ...] = ()
    reserved: tuple[Held, ...] = ()
    if wl.admission is not None:
        assigned = {psa.name: psa.flavors for psa in wl.admission.pod_set_assignments}
        # Kueue charges status.admission's resourceUsage (pkg/workload totalRequestsFromAdmission),
        # scaled down for reclaimable pods: the quota the workload holds right now.
        def priced(usage: Mapping[FlavorResource, int]) -> tuple[Held, ...]:
            return tuple(Held(fr.flavor, fr.resource, qty, prices.price(fr.flavor, fr.resource),
                              prices.currency(fr.flavor))
                         for fr, qty in sorted(usage.items()) if qty > 0)

        held = priced(wl.admitted_usage())
        reserved = held if not wl.reclaimable_pods else priced(wl.admission.usage())
    pod_sets = tuple(
        PodSetFacts(ps.name, ps.count, ps.requests, assigned.get(ps.name, ())) for ps in wl.pod_sets
    )
    deleted_ms: Millis | None = None
    if obs.deleted:
        when = wl.deletion_timestamp if wl.deletion_timestamp is not None else obs.observed_at
        deleted_ms = to_millis(when)
    return WorkloadFacts(
        uid=wl.uid or f"{wl.namespace}/{wl.name}",
        identity=identity,
        pod_sets=pod_sets,
        submitted_ms=to_millis(wl.creation_timestamp),
        observed_ms=to_millis(obs.observed_at),
        held=held,
        reserved=reserved,
        quota_reserved=_cond(wl.condition("QuotaReserved")),
        admitted=_cond(wl.condition("Admitted")),
        evicted=_cond(wl.condition("Evicted")),
        preempted=_cond(wl.condition("Preempted")),
        finished=_cond(wl.condition("Finished")),
        deleted_ms=deleted_ms,
        accumulated_s=wl.accumulated_past_execution_seconds,
        evictions=wl.eviction_stats,
    )
