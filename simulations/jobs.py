"""What a workload source produces: a job to submit at a time, with its true run time."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class JobSpec:
    """One workload to create in a LocalQueue at `arrival`, needing `duration` seconds of work."""

    name: str  # unique within the namespace (the Workload's metadata.name)
    namespace: str
    local_queue: str
    arrival: float
    duration: float
    count: int  # pods in the single podSet
    requests: tuple[tuple[str, int], ...]  # per-pod requests in milli-units, sorted by resource
    priority_class: str | None
    source: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def total(self, resource: str) -> int:
        for r, q in self.requests:
            if r == resource:
                return q * self.count
        return 0
