"""The units a person reads a resource in, and the unit its price is per (docs/ledger.md, "Units").

Kubernetes counts memory in bytes and CPU in cores; a finance team reads GPU-hours, core-hours and
GiB-hours. One rule, used by the ledger, the budgets (both shells) and every report:

- a GPU (any ``*/gpu`` resource, e.g. ``nvidia.com/gpu``), a TPU (``*/tpu``) and a CPU core (``cpu``) are
  counted one by one: usage in GPU-hours / TPU-hours / core-hours;
- byte resources (``memory``, ``ephemeral-storage``, ``hugepages-*``) in GiB (2^30 bytes): usage in
  GiB-hours, and ``pricePerUnitHour`` prices one GiB for one hour;
- any other resource (e.g. ``example.com/fpga``) one by one, named after itself (``fpga-hours``).

A price is per unit-hour of that unit. A byte resource's price below :data:`MIN_BYTE_PRICE` per GiB-hour is
refused: it is a price per byte-hour (0.004 per GiB-hour is 0.0000000000037 per byte-hour), and read per
GiB-hour it would bill almost nothing, read per byte-hour it bills millions (the issue this rule closes).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

GIB = 2**30
# A nonzero price of a byte resource below this, per GiB-hour, is a per-byte-hour price (see above): the
# geometric middle of realistic prices of memory per GiB-hour (about 0.001 to 0.05) and per byte-hour
# (about 1e-12 to 5e-11) is near 1e-7 to 1e-6, six orders of magnitude from either.
MIN_BYTE_PRICE = Decimal("0.000001")
_BYTE_RESOURCES = ("memory", "ephemeral-storage")


@dataclass(frozen=True, slots=True)
class ResourceUnit:
    """What one unit of a resource is: ``name`` (GPU, core, GiB...) and how many of the resource's
    Kubernetes base units (bytes, cores, devices) it holds."""

    name: str
    base: int = 1

    @property
    def hours(self) -> str:
        """The usage unit, short: "GPU-h", "core-h", "GiB-h"."""
        return f"{self.name}-h"

    @property
    def hours_long(self) -> str:
        """The usage unit in words: "GPU-hours", "core-hours", "GiB-hours"."""
        return f"{self.name}-hours"

def is_byte_resource(resource: str) -> bool:
    return resource in _BYTE_RESOURCES or resource.startswith("hugepages-")


def unit_of(resource: str) -> ResourceUnit:
    """The unit of a resource name (``nvidia.com/gpu`` -> GPU, ``cpu`` -> core, ``memory`` -> GiB)."""
    if is_byte_resource(resource):
        return ResourceUnit("GiB", GIB)
    if resource == "cpu":
        return ResourceUnit("core")
    name = resource.rsplit("/", 1)[-1]
    if name.lower() in ("gpu", "tpu"):
        return ResourceUnit(name.upper())
    return ResourceUnit(name)


def price_problem(resource: str, price: Decimal) -> str | None:
    """Why ``price`` (per unit-hour of ``resource``'s unit) cannot be meant as written, or None."""
    if is_byte_resource(resource) and 0 < price < MIN_BYTE_PRICE:
        per_gib = (price * GIB).normalize()
        return (f"{resource} is priced per GiB-hour; {price:f} looks like a price per byte-hour (per "
                f"GiB-hour that is {per_gib:f}): write the price of one GiB for one hour")
    return None
