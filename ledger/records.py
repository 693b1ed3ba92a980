"""What the operator hands the ledger: typed, frozen records (no ``dict[str, Any]`` for our own data).

- :class:`WorkloadObservation`: a Kueue Workload as the operator saw it at ``observed_at`` (every watch
  event, the periodic resync, and the last state of a deleted object).
- :class:`QuotaChange`: the quota in force for a team's flavor-resource from ``at`` on.
- :class:`AuditEntry`: one action of the service (what, why, on behalf of which policy generation).
- :class:`PriceTable` and :class:`LabelKeys`: the policy's prices (``flavors[].pricePerUnitHour``) and the
  workload labels that are accounted (``project``, ``team``, ``cost-center`` and any the policy lists).

Times are float seconds since the Unix epoch (UTC), as everywhere in ``fairshare``; the ledger stores them
as integer milliseconds. Quantities are integer milli-units; money is :class:`decimal.Decimal`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from fairshare.errors import InputError, Location
from fairshare.models import FlavorResource, Milli, Workload
from fairshare.resource_units import price_problem

Millis = int  # milliseconds since the Unix epoch (UTC)


def to_millis(seconds: float) -> Millis:
    """Epoch seconds (Kubernetes times are whole seconds; the observation clock may be finer) as ms."""
    return round(seconds * 1000)


@dataclass(frozen=True, slots=True)
class WorkloadObservation:
    """A Workload as observed. ``cluster_queue`` is the ClusterQueue its LocalQueue points at (the team
    of a workload that was never admitted; an admission's ClusterQueue wins); ``user`` is the creator
    when the caller knows it; ``deleted`` is True for the last state of a deleted object (then the
    deletion time is ``metadata.deletionTimestamp``, else ``observed_at``)."""

    workload: Workload
    observed_at: float
    cluster_queue: str | None = None
    user: str | None = None
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class QuotaChange:
    """The quota of ``team`` (a ClusterQueue) on ``flavor``/``resource`` from ``at`` on (milli-units;
    None = no limit set). ``policy``/``generation`` name the QuotaPolicy that set it, when known."""

    team: str
    flavor: str
    resource: str
    nominal: Milli
    borrowing_limit: Milli | None
    lending_limit: Milli | None
    at: float
    policy: str | None = None
    generation: int | None = None


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One action of the service: ``what`` happened to ``target_kind``/``target_namespace``/``target_name``
    and ``why``, on behalf of ``policy`` at ``policy_generation``; ``editor`` is who last edited the policy
    (managedFields manager or the user of the last update) when known; ``team`` is the ClusterQueue the
    action concerns, when there is one (``qm audit --team``). An action on a workload also names its
    ``local_queue`` ("namespace/name"), its ``project`` (the policy's project label) and the ``user`` who
    submitted it (as stamped at admission; empty until something stamps it)."""

    at: float
    action: str
    target_kind: str
    target_name: str
    what: str
    why: str
    policy: str
    target_namespace: str | None = None
    policy_generation: int | None = None
    editor: str | None = None
    team: str | None = None
    fact: str | None = None  # the identity of the fact reported (the operator's Event name), if it has one
    local_queue: str | None = None
    project: str | None = None
    user: str | None = None

    @property
    def key(self) -> str:
        """The idempotency key: a hash of every field, so a replayed record is the same row; a record of a
        named fact is the same row however often (and whenever) it is recorded."""
        if self.fact is not None:
            return hashlib.sha256(f"fact|{self.policy}|{self.fact}".encode()).hexdigest()[:32]
        fields: list[object] = [to_millis(self.at), self.action, self.target_kind, self.target_namespace,
                                self.target_name, self.what, self.why, self.policy, self.policy_generation,
                                self.editor, self.team]
        if (self.local_queue, self.project, self.user) != (None, None, None):
            # Only when set, so a record spooled before these fields existed keeps its key.
            fields += [self.local_queue, self.project, self.user]
        canonical = json.dumps(fields, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class WorkloadGone:
    """A life the ledger holds open whose Workload no longer exists (deleted while the service was down,
    found by the resync at start): it ends at ``at``, lost, marked inferred (the deletion time is not
    known; ``at`` is when the service found it gone, an upper bound)."""

    uid: str
    at: float


LedgerRecord = WorkloadObservation | QuotaChange | AuditEntry | WorkloadGone


# --- prices ----------------------------------------------------------------------------------------------

# k8s.io/apimachinery/pkg/api/resource/quantity.go suffixes, read exactly (no rounding to milli-units:
# a price per core-hour may be below 1m).
_DECIMAL_SUFFIX = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIX = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_PRICE = re.compile(r"^\+?(\d+(?:\.\d*)?|\.\d+)(?:([eE][+-]?\d{1,2})|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$")


def parse_price(text: str | Decimal, *, field_path: str = "pricePerUnitHour") -> Decimal:
    """A price per unit-hour written as a Kubernetes quantity ("2.5", "250m", "3e-3"), exactly (per the
    resource's unit: GPU-hour, core-hour, GiB-hour)."""
    if isinstance(text, Decimal):
        if not text.is_finite() or text < 0:
            raise InputError("a price must be a finite, non-negative number", value=str(text),
                             location=_loc(field_path))
        return text
    match = _PRICE.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise InputError("a price must be a non-negative Kubernetes quantity such as 2.5 or 250m",
                         value=text, location=_loc(field_path))
    try:
        number = Decimal(match.group(1))
    except InvalidOperation:  # pragma: no cover - the pattern admits only decimal digits
        raise InputError("not a number", value=text, location=_loc(field_path)) from None
    if match.group(2):
        return number.scaleb(int(match.group(2)[1:]))
    suffix = match.group(3) or ""
    if suffix in _BINARY_SUFFIX:
        return number * _BINARY_SUFFIX[suffix]
    return number.scaleb(_DECIMAL_SUFFIX[suffix])


def _loc(field_path: str) -> Location:
    return Location(field=field_path)


DEFAULT_CURRENCY = "USD"  # spec.ledger.currency's default


@dataclass(frozen=True)
class PriceTable:
    """Price of one unit of a resource for one hour on a flavor (``flavors[].pricePerUnitHour``), per the
    resource's unit (fairshare/resource_units.py: GPU-hour, core-hour, GiB-hour), in the currency of the
    flavor's policy (``spec.ledger.currency``)."""

    prices: Mapping[FlavorResource, Decimal] = field(default_factory=dict)
    currencies: Mapping[str, str] = field(default_factory=dict)  # flavor -> currency (else the default)
    default_currency: str = DEFAULT_CURRENCY

    def price(self, flavor: str, resource: str) -> Decimal | None:
        return self.prices.get(FlavorResource(flavor, resource))

    def currency(self, flavor: str) -> str:
        return self.currencies.get(flavor, self.default_currency)

    @classmethod
    def of(cls, table: Mapping[str, Mapping[str, str | Decimal]],
           currencies: Mapping[str, str] | None = None) -> PriceTable:
        """From flavor -> resource -> price text (the policy's ``pricePerUnitHour`` maps); a byte resource's
        price that can only be meant per byte-hour is refused (fairshare.resource_units.price_problem)."""
        out: dict[FlavorResource, Decimal] = {}
        for flavor in sorted(table):
            for resource in sorted(table[flavor]):
                path = f"flavors[{flavor}].pricePerUnitHour.{resource}"
                price = parse_price(table[flavor][resource], field_path=path)
                problem = price_problem(resource, price)
                if problem is not None:
                    raise InputError(problem, value=str(table[flavor][resource]), location=_loc(path))
                out[FlavorResource(flavor, resource)] = price
        return cls(out, dict(currencies or {}))


@dataclass(frozen=True, slots=True)
class LabelKeys:
    """Workload labels the ledger keeps: three with their own indexed columns, plus any the policy lists;
    and the label that names the user when the observer does not know it (`user`)."""

    project: str = "project"
    team: str = "team"
    cost_center: str = "cost-center"
    extra: tuple[str, ...] = ()
    # Kubernetes keeps no creator in an object (the authenticated user is in the API server's audit log
    # only), so the user is whatever an admission policy stamped on the Job, copied to its Workload by
    # Kueue's integrations.labelKeysToCopy (docs/ledger.md, "What is recorded").
    user: str = "queuemanager.dev/user"

    def all(self) -> tuple[str, ...]:
        seen: list[str] = []
        for key in (self.project, self.team, self.cost_center, *self.extra):
            if key not in seen:
                seen.append(key)
        return tuple(seen)


DEFAULT_RETENTION_SECONDS = 180 * 86400.0
