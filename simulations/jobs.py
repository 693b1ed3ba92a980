"""What a workload source produces: a job to submit at a time, with its true run time and, when the scenario
models it, what its GPUs do (`Profile`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Profile:
    """One job's activity: `utilization` percent while it works, `idle_utilization` after `idle_after`
    seconds of an attempt (None: it works to its end); `measured`: its GPUs report to DCGM."""

    utilization: float = 100.0
    idle_after: float | None = None
    idle_utilization: float = 0.0
    measured: bool = True

    def at(self, ran: float) -> float:
        """Utilization, percent, `ran` seconds into an attempt."""
        return self.utilization if self.idle_after is None or ran < self.idle_after else self.idle_utilization

    def active_seconds(self, ran: float) -> float:
        """Seconds at 100% equivalent to `ran` seconds of an attempt (x GPUs: active GPU-seconds)."""
        if self.idle_after is None or ran <= self.idle_after:
            return ran * self.utilization / 100.0
        return (self.idle_after * self.utilization + (ran - self.idle_after) * self.idle_utilization) / 100.0


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
    # What its GPUs do (scenario workloads[].activity; simulations/activity.py). None: not modelled (fully
    # active when the run models others' activity).
    activity: Profile | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def total(self, resource: str) -> int:
        for r, q in self.requests:
            if r == resource:
                return q * self.count
        return 0
