"""The types of a workload's accounted life (pure data; the rules that produce them are in
:mod:`ledger.accounting`).

A life is a sequence of *attempts*: an attempt starts when Kueue reserves quota (condition
``QuotaReserved=True``) and ends when the workload finishes (the attempt was *useful*), or when the quota
is released after an eviction, or the workload is deleted before it finished (the attempt was *lost*:
the service has no checkpoint model, so an evicted attempt's work is thrown away). An attempt holds one
*part* per flavor-resource; a part is split when the held quantity changes mid-attempt (reclaimable pods).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from enum import StrEnum

from fairshare.models import FlavorResource

from .facts import Held, Identity, PodSetFacts
from .records import Millis

# milli-units x milliseconds in one unit-hour
MILLI_MS_PER_UNIT_HOUR = 1000 * 3_600_000
# Money is exact until a part closes; a part's cost is then rounded half-even to 1e-9 (a nano-unit of
# currency): far below what any report prints, and it keeps sums exact decimals.
COST_QUANTUM = Decimal("1e-9")


class Phase(StrEnum):
    PENDING = "pending"  # no quota held (not admitted yet, or requeued after an eviction)
    RUNNING = "running"  # quota reserved
    EVICTING = "evicting"  # Evicted=True seen, quota not released yet
    FINISHED = "finished"
    DELETED = "deleted"


class Kind(StrEnum):
    """Lifecycle transitions (one row each, keyed by (uid, seq))."""

    SUBMITTED = "submitted"
    ADMITTED = "admitted"  # quota reserved: an attempt starts
    RESIZED = "resized"  # the held quantity changed within an attempt (reclaimable pods)
    EVICTED = "evicted"
    RELEASED = "released"  # quota released after an eviction: the attempt ends, lost
    FINISHED = "finished"
    DELETED = "deleted"


class Outcome(StrEnum):
    RUNNING = "running"
    USEFUL = "useful"
    LOST = "lost"


class Source(StrEnum):
    OBSERVED = "observed"  # from a condition the service saw change
    INFERRED = "inferred"  # reconstructed from Kueue's status after the service missed it (see accounting)


UNKNOWN_FLAVOR = ""  # lost time Kueue reports for an attempt whose admission the service never saw


def part_cost(quantity: int, duration_ms: int, price: Decimal | None, base: int = 1) -> Decimal:
    """Cost of holding ``quantity`` milli-units (of the resource's Kubernetes base unit: bytes, cores,
    devices) for ``duration_ms`` at ``price`` per unit-hour of the resource's unit, which holds ``base``
    base units (2^30 for a GiB: fairshare.resource_units)."""
    if price is None or quantity == 0 or duration_ms == 0:
        return Decimal(0)
    with localcontext() as ctx:
        ctx.prec = 80  # exact: the one rounding is the quantize below
        exact = Decimal(quantity * duration_ms) * price / (MILLI_MS_PER_UNIT_HOUR * base)
        return exact.quantize(COST_QUANTUM, rounding=ROUND_HALF_EVEN)


@dataclass(frozen=True, slots=True)
class Part:
    """A part of the current attempt: open (``end_ms`` None) or ended by a resize (outcome not known yet)."""

    attempt: int
    part: int
    flavor: str
    resource: str
    quantity: int
    price: Decimal | None
    start_ms: Millis
    end_ms: Millis | None = None
    dims: Dims | None = None  # the reporting dimensions of its segment (fixed when it opened)
    currency: str = ""  # of its price


@dataclass(frozen=True, slots=True)
class Totals:
    """Per flavor-resource of a life: milli-unit-milliseconds of closed attempts, and their cost."""

    held: int = 0
    useful: int = 0
    lost: int = 0
    cost_useful: Decimal = Decimal(0)
    cost_lost: Decimal = Decimal(0)

    def add(self, outcome: Outcome, milli_ms: int, cost: Decimal) -> Totals:
        if outcome is Outcome.USEFUL:
            return Totals(self.held + milli_ms, self.useful + milli_ms, self.lost,
                          self.cost_useful + cost, self.cost_lost)
        return Totals(self.held + milli_ms, self.useful, self.lost + milli_ms,
                      self.cost_useful, self.cost_lost + cost)


@dataclass(frozen=True, slots=True)
class LifeState:
    """Everything the rules need to know of a life so far (stored as its row, its parts and totals)."""

    uid: str
    identity: Identity
    pod_sets: tuple[PodSetFacts, ...]
    phase: Phase
    seq: int
    submitted_ms: Millis
    first_seen_ms: Millis
    observed_ms: Millis
    attempts: int = 0
    parts: tuple[Part, ...] = ()  # of the current attempt
    attempt_start_ms: Millis | None = None
    first_admitted_ms: Millis | None = None
    last_admitted_ms: Millis | None = None
    last_evicted_ms: Millis | None = None
    finished_ms: Millis | None = None
    deleted_ms: Millis | None = None
    finish_reason: str | None = None
    eviction_reason: str | None = None
    evictions: int = 0
    eviction_stats: tuple[tuple[str, str, int], ...] = ()
    accumulated_s: int | None = None
    recovered: bool = False
    totals: tuple[tuple[FlavorResource, Totals], ...] = ()

    @property
    def open_parts(self) -> tuple[Part, ...]:
        return tuple(p for p in self.parts if p.end_ms is None)

    @property
    def ended_ms(self) -> Millis | None:
        """When the life ended (finished, else deleted): what retention counts from."""
        return self.finished_ms if self.finished_ms is not None else self.deleted_ms


@dataclass(frozen=True, slots=True)
class Dims:
    """The reporting dimensions of a segment, fixed when it opens."""

    team: str
    namespace: str
    local_queue: str
    priority_class: str
    project: str
    cost_center: str

    @classmethod
    def of(cls, identity: Identity) -> Dims:
        # "" rather than NULL: a GROUP BY key and a CLI cell both read "" as "not set".
        return cls(identity.team or "", identity.namespace, identity.local_queue,
                   identity.priority_class or "", identity.project or "", identity.cost_center or "")


@dataclass(frozen=True, slots=True)
class Transition:
    uid: str
    seq: int
    kind: Kind
    at_ms: Millis
    attempt: int
    source: Source
    reason: str = ""
    message: str = ""
    held: tuple[Held, ...] = ()


@dataclass(frozen=True, slots=True)
class Segment:
    """A part to insert (open, or already closed when it is inferred)."""

    uid: str
    attempt: int
    part: int
    flavor: str
    resource: str
    quantity: int
    price: Decimal | None
    start_ms: Millis
    end_ms: Millis | None
    outcome: Outcome
    reason: str
    source: Source
    dims: Dims
    currency: str = ""


@dataclass(frozen=True, slots=True)
class SegmentEnd:
    uid: str
    attempt: int
    part: int
    flavor: str
    resource: str
    end_ms: Millis


@dataclass(frozen=True, slots=True)
class AttemptOutcome:
    uid: str
    attempt: int
    outcome: Outcome
    reason: str


@dataclass(frozen=True, slots=True)
class FinalPart:
    """A segment whose interval and outcome became final (for the daily rollup, ledger.rollup): written
    once, when its attempt ends (or at once for an inferred one)."""

    flavor: str
    resource: str
    quantity: int
    price: Decimal | None
    start_ms: Millis
    end_ms: Millis
    outcome: Outcome
    dims: Dims
    currency: str = ""


@dataclass(frozen=True, slots=True)
class ClosedUsage:
    """Usage that became final (for the Prometheus counters)."""

    team: str
    project: str
    flavor: str
    resource: str
    outcome: Outcome
    milli_ms: int
    cost: Decimal
    currency: str = ""


@dataclass(frozen=True, slots=True)
class Advance:
    """What one observation changes: the new state and the rows to write."""

    state: LifeState
    transitions: tuple[Transition, ...] = ()
    opened: tuple[Segment, ...] = ()
    ended: tuple[SegmentEnd, ...] = ()
    outcomes: tuple[AttemptOutcome, ...] = ()
    closed: tuple[ClosedUsage, ...] = ()
    changed: bool = False
    finals: tuple[FinalPart, ...] = ()
