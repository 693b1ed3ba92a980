"""The futile-eviction check (issue 31, item 1 seam (e) and item 4): a workload the policy evicts must not be
admitted again while its team holds more than its (new) quota. Such an eviction freed nothing for anyone:
Kueue gave the victim its quota straight back by borrowing, and the work it had done was lost for nothing.

One check for every source of facts:

- the simulator records each re-admission of a workload its policy controller evicted, with its team's
  usage and quota then (`simulations.record.Readmission`, `RunResult.readmissions`): `from_simulation`;
- a live cluster gives the evictions (the policy's `status.lastPreemptions`, or the PreemptionRequested
  Events) and Kueue's Events on the Workloads (`QuotaReserved` starts an admission; `Evicted*` and
  `Preempted` end one, as the workload's deletion or `Finished` does): `holdings_from_events` and
  `readmissions` turn them into the same records, the team's usage counted from every holding of the
  team at the instant of the re-admission.

`futile_evictions(readmissions, within=...)` returns the futile ones; `assert_no_futile_evictions` fails with
one line per eviction, naming the workload, when it was evicted and re-admitted, and the team's usage and
quota then.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fairshare.quantity import describe_quantity

GPU = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class Readmission:
    """A workload the policy evicted at `evicted_at`, admitted again at `at` while its team (ClusterQueue)
    held `usage` (with it) of the resource against a quota in force of `quota` (milli-units)."""

    workload: str
    team: str
    evicted_at: float
    at: float
    usage: int
    quota: int

    def describe(self, resource: str = GPU) -> str:
        return (f"{self.workload} evicted at {self.evicted_at:.1f} s was re-admitted "
                f"{self.at - self.evicted_at:.1f} s later while {self.team} held "
                f"{describe_quantity(self.usage, resource)} against its quota of "
                f"{describe_quantity(self.quota, resource)}")


def futile_evictions(readmissions: Iterable[Readmission], *, within: float) -> list[Readmission]:
    """The evictions undone within `within` seconds while the team stayed above its quota."""
    return [r for r in readmissions if r.at - r.evicted_at <= within and r.usage > r.quota]


def assert_no_futile_evictions(readmissions: Iterable[Readmission], *, within: float,
                               resource: str = GPU) -> None:
    futile = futile_evictions(readmissions, within=within)
    if futile:
        lines = "\n".join("  " + r.describe(resource) for r in futile)
        raise AssertionError(
            f"{len(futile)} futile eviction(s) (undone by Kueue within {within:g} s):\n{lines}")


def from_simulation(run: Any) -> list[Readmission]:
    """The simulator's records (`RunResult.readmissions`, simulated seconds), as Readmissions."""
    return [Readmission(x.victim, x.cluster_queue, x.evicted_at, x.time, x.usage_milli, x.nominal_milli)
            for x in run.readmissions]


# --- a live cluster --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Holding:
    """One admission of a workload: it held `milli` of the resource in `team` from `start` to `end`
    (None: still holding)."""

    workload: str
    team: str
    milli: int
    start: float
    end: float | None


def _event_time(e: Any) -> float:
    """An Event's time in epoch seconds (events.k8s.io's eventTime, else core/v1's lastTimestamp or the
    creation time), from a kubernetes client object or a dict as the API returns it."""
    for attr in ("event_time", "last_timestamp", "first_timestamp"):
        value = getattr(e, attr, None) if not isinstance(e, Mapping) else e.get(_camel(attr))
        if value:
            return _seconds(value)
    meta = e.metadata if not isinstance(e, Mapping) else e.get("metadata", {})
    created = meta.creation_timestamp if not isinstance(meta, Mapping) else meta.get("creationTimestamp")
    return _seconds(created)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


def _seconds(value: Any) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def _field(e: Any, name: str) -> Any:
    """A field of an Event: the client object's attribute (snake_case), or the API dict's (camelCase)."""
    return e.get(_camel(name), e.get(name)) if isinstance(e, Mapping) else getattr(e, name)


def holdings_from_events(events: Iterable[Any], team_of: Callable[[str], str | None],
                         milli_of: Callable[[str], int], ended: Mapping[str, float] | None = None
                         ) -> list[Holding]:
    """Admissions from Kueue's Events on Workloads (`namespace/name` keys): QuotaReserved starts one; an
    Evicted* or Preempted Event ends it, as does `ended[workload]` (finished or deleted at). `team_of`:
    the workload's ClusterQueue (None: not a team's, left out); `milli_of`: what it holds of the resource."""
    timeline: dict[str, list[tuple[float, bool]]] = {}
    for e in events:
        obj = _field(e, "involved_object")
        if (obj.get("kind") if isinstance(obj, Mapping) else obj.kind) != "Workload":
            continue
        ns = obj.get("namespace") if isinstance(obj, Mapping) else obj.namespace
        name = obj.get("name") if isinstance(obj, Mapping) else obj.name
        reason = _field(e, "reason") or ""
        if reason == "QuotaReserved":
            starts = True
        elif reason.startswith("Evicted") or reason == "Preempted":
            starts = False
        else:
            continue
        timeline.setdefault(f"{ns}/{name}", []).append((_event_time(e), starts))
    out: list[Holding] = []
    for key, marks in sorted(timeline.items()):
        team = team_of(key)
        if team is None:
            continue
        start: float | None = None
        for t, starts in sorted(marks, key=lambda m: (m[0], m[1])):  # an end before a start at one second
            if starts and start is None:
                start = t
            elif not starts and start is not None:
                out.append(Holding(key, team, milli_of(key), start, t))
                start = None
        if start is not None:
            end = (ended or {}).get(key)
            kept = end if end is not None and end >= start else None
            out.append(Holding(key, team, milli_of(key), start, kept))
    return out


def readmissions(evictions: Sequence[tuple[str, float]], holdings: Sequence[Holding],
                 quota_at: Callable[[str, float], int]) -> list[Readmission]:
    """Each eviction (`(workload, at)`) followed by an admission of the same workload: its Readmission,
    the team's usage summed over the holdings at that instant (with it), `quota_at(team, t)` its quota."""
    out: list[Readmission] = []
    for workload, at in evictions:
        later = sorted((h for h in holdings if h.workload == workload and h.start > at),
                       key=lambda h: h.start)
        if not later:
            continue
        back = later[0]
        usage = sum(h.milli for h in holdings if h.team == back.team and h.start <= back.start
                    and (h.end is None or h.end > back.start))
        out.append(Readmission(workload, back.team, at, back.start, usage, quota_at(back.team, back.start)))
    return out
