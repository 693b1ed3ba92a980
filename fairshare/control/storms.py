"""Eviction storms: the same workloads preempted and re-admitted again and again, across instants.

Kueue can keep preempting one set of workloads for a pending preemptor that never gets in: with fair sharing,
the preemptor's share once admitted (its ClusterQueue's DRS with it) can exceed the share its victims'
ClusterQueue falls to once they are gone, so the requeued victims win the next fair-sharing tournament
(pkg/scheduler/fair_sharing_iterator.go: lower DRS first) and take the freed quota back; the preemptor does
not fit any more, is parked, and Kueue's batched requeue (1 s, pkg/cache/queue/inadmissible_workloads.go)
brings it back to preempt the same victims (docs/control.md, "Eviction storms"). One instant's cycles do not
show it (fairshare.livelock sees one settle): a storm is seen across instants, from the evictions
themselves. Both shells feed this module the evictions they observe (the simulator from its model of Kueue,
the operator from the Workloads' eviction counts and `Preempted` conditions); the rule is here, once:

- a workload evicted `STORM_EVICTIONS` times within `STORM_WINDOW` seconds, whoever asked;
- or the same preemptor evicting the same set of victims `STORM_REPEATS` times within the window.

A storm is named by its preemptor (the workload the evictions were for, when known) and lists its victims.
`find_storms` reads a whole run's evictions and returns each storm as an episode (first and last eviction,
count, rate), for the simulator's reports; `detect_storms` returns the storms in the window ending now, for
the controller (fairshare.control.decide acts on them).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from fairshare.models import Workload, WorkloadKey, preemption_note

# A loop evicts about once a second (Kueue's 1 s batched requeue); Kueue's ordinary reclaim in a morning rush
# can evict one workload 5 or 6 times within 10 minutes (measured on storm-80gpu.yaml), never 5 in 2.
STORM_EVICTIONS = 5  # evictions of one workload ...
STORM_WINDOW = 120.0  # ... within this many seconds
STORM_REPEATS = 3  # or the same preemptor evicting the same victims this many times within the window
PREEMPTED = "Preempted"  # kueue.WorkloadEvictedByPreemption: the Evicted reason of Kueue's own preemptions
DEACTIVATED = "InactiveWorkload"  # kueue.WorkloadEvictedByDeactivation: spec.active=false (the policy's)


class EvictionSource(StrEnum):
    """Who asked for an eviction: Kueue (its own preemption: reclaim, fair sharing, within a ClusterQueue) or
    the policy controller (an experiment victim, a transition past its deadline)."""

    KUEUE = "kueue"
    POLICY = "policy"


@dataclass(frozen=True, slots=True)
class Eviction:
    """One eviction as a shell observed it."""

    workload: WorkloadKey
    at: float
    source: EvictionSource
    preemptor: str = ""  # the workload it was evicted for ("" when unknown, e.g. a transition's)
    reason: str = ""  # Kueue's preemption reason (InCohortFairSharing, ...) or the policy's kind


@dataclass(frozen=True, slots=True)
class Storm:
    """Repeated evictions of `victims` (for `preemptor`, "" when the evictions name none)."""

    preemptor: str
    victims: tuple[WorkloadKey, ...]
    evictions: int  # evictions of the victims counted in the storm
    first: float
    last: float
    sources: tuple[str, ...]  # EvictionSource values seen, sorted
    reasons: tuple[str, ...]  # reasons seen, sorted
    foreseen: bool = False  # seen at its first round: the model's cycles repeat it (storm_response)

    @property
    def key(self) -> str:
        """What the storm is about: its preemptor, or its first victim when the evictions name none."""
        return self.preemptor or self.victims[0]

    @property
    def per_minute(self) -> float:
        """Evictions per minute over the storm (at least one second long)."""
        return self.evictions * 60.0 / max(1.0, self.last - self.first)

    def message(self) -> str:
        who = f"for {self.preemptor}" if self.preemptor else "by the policy"
        by = " and ".join("Kueue" if s == EvictionSource.KUEUE else "the policy" for s in self.sources)
        why = f" ({', '.join(self.reasons)})" if self.reasons else ""
        if self.foreseen:
            return (
                f"eviction storm foreseen: {', '.join(self.victims)} evicted {who}, by {by}{why}, and the "
                "model's cycles from the state now evict for it again without admitting it (preempt, "
                "re-admit the victims, requeue the preemptor 1 s later)"
            )
        return (
            f"eviction storm: {', '.join(self.victims)} evicted {self.evictions} times "
            f"{who} in {_span(self.last - self.first)} ({self.per_minute:.1f} a minute), by {by}{why}"
        )


def _span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _hot(window: Sequence[Eviction]) -> set[WorkloadKey]:
    """The victims the rule catches in `window` (one window's evictions, in time order)."""
    counts: dict[WorkloadKey, int] = {}
    rounds: dict[tuple[str, float], list[WorkloadKey]] = {}
    for e in window:
        counts[e.workload] = counts.get(e.workload, 0) + 1
        if e.preemptor:
            rounds.setdefault((e.preemptor, e.at), []).append(e.workload)
    hot = {w for w, n in counts.items() if n >= STORM_EVICTIONS}
    repeats: dict[tuple[str, tuple[WorkloadKey, ...]], int] = {}
    for (preemptor, _), victims in rounds.items():
        k = (preemptor, tuple(sorted(set(victims))))
        repeats[k] = repeats.get(k, 0) + 1
    for (_, named), n in repeats.items():
        if n >= STORM_REPEATS:
            hot.update(named)
    return hot


def _preemptor_of(evictions: Iterable[Eviction], victim: WorkloadKey) -> str:
    """The preemptor that evicted `victim` most often (ties: the latest), "" if none is named."""
    counts: dict[str, int] = {}
    last: dict[str, float] = {}
    for e in evictions:
        if e.workload == victim and e.preemptor:
            counts[e.preemptor] = counts.get(e.preemptor, 0) + 1
            last[e.preemptor] = e.at
    if not counts:
        return ""
    return max(counts, key=lambda p: (counts[p], last[p], p))


def detect_storms(evictions: Sequence[Eviction], now: float) -> list[Storm]:
    """The storms in the window ending at `now` (evictions in (now - STORM_WINDOW, now]), ordered by key."""
    window = [e for e in evictions if now - STORM_WINDOW < e.at <= now]
    hot = _hot(window)
    if not hot:
        return []
    groups: dict[str, set[WorkloadKey]] = {}
    for victim in hot:
        groups.setdefault(_preemptor_of(window, victim), set()).add(victim)
    out: list[Storm] = []
    for preemptor, victims in groups.items():
        mine = [e for e in window if e.workload in victims]
        out.append(_storm(preemptor, victims, mine))
    return sorted(out, key=lambda s: s.key)


def _storm(preemptor: str, victims: Iterable[WorkloadKey], evictions: Sequence[Eviction]) -> Storm:
    return Storm(
        preemptor=preemptor,
        victims=tuple(sorted(victims)),
        evictions=len(evictions),
        first=min(e.at for e in evictions),
        last=max(e.at for e in evictions),
        sources=tuple(sorted({str(e.source) for e in evictions})),
        reasons=tuple(sorted({e.reason for e in evictions if e.reason})),
    )


def find_storms(evictions: Iterable[Eviction]) -> list[Storm]:
    """Every storm of a run, as episodes: the rule applied at each eviction over the window ending there;
    an episode (per storm key) starts when the rule first catches a victim, counts the window's evictions of
    its victims, and goes on while its victims are evicted again within STORM_WINDOW of its last eviction.
    In the order they started."""
    window: deque[Eviction] = deque()
    # key -> (preemptor, victims, evictions, first, last, sources, reasons)
    open_: dict[str, _Episode] = {}
    done: list[_Episode] = []
    owner: dict[WorkloadKey, str] = {}  # a victim -> the open episode it belongs to
    for e in sorted(evictions, key=lambda x: (x.at, x.workload)):
        window.append(e)
        while window and window[0].at <= e.at - STORM_WINDOW:
            window.popleft()
        owned = owner.get(e.workload)
        if owned is not None:
            mine = open_[owned]
            if e.at - mine.last <= STORM_WINDOW:
                mine.add(e)
                continue
            done.append(open_.pop(owned))
            for v in mine.victims:
                owner.pop(v, None)
        if e.workload not in _hot_for(window, e):
            continue
        preemptor = _preemptor_of(window, e.workload)
        key = preemptor or e.workload
        ep = open_.get(key)
        if ep is None or e.at - ep.last > STORM_WINDOW:
            if ep is not None:
                done.append(ep)
            ep = open_[key] = _Episode(preemptor)
            for x in window:
                if x.workload == e.workload or (preemptor and x.preemptor == preemptor):
                    ep.add(x)
        else:
            ep.add(e)
        for v in ep.victims:
            owner[v] = key
    done.extend(open_.values())
    return [ep.storm() for ep in sorted(done, key=lambda ep: (ep.first, ep.preemptor))]


def _hot_for(window: Sequence[Eviction], e: Eviction) -> set[WorkloadKey]:
    """`_hot` restricted to what concerns `e` (its workload's evictions, its preemptor's rounds): cheaper
    than the whole window on a long storm."""
    mine = [x for x in window if x.workload == e.workload or (e.preemptor and x.preemptor == e.preemptor)]
    return _hot(mine)


class _Episode:
    __slots__ = ("evictions", "first", "last", "preemptor", "reasons", "sources", "victims")

    def __init__(self, preemptor: str) -> None:
        self.preemptor = preemptor
        self.victims: set[WorkloadKey] = set()
        self.evictions = 0
        self.first = float("inf")
        self.last = float("-inf")
        self.sources: set[str] = set()
        self.reasons: set[str] = set()

    def add(self, e: Eviction) -> None:
        self.victims.add(e.workload)
        self.evictions += 1
        self.first = min(self.first, e.at)
        self.last = max(self.last, e.at)
        self.sources.add(str(e.source))
        if e.reason:
            self.reasons.add(e.reason)

    def storm(self) -> Storm:
        return Storm(self.preemptor, tuple(sorted(self.victims)), self.evictions, self.first, self.last,
                     tuple(sorted(self.sources)), tuple(sorted(self.reasons)))


class EvictionWindow:
    """A shell's memory of the evictions it observed within the last STORM_WINDOW seconds (what `Observed.
    evictions` carries to the controller)."""

    __slots__ = ("_kept",)

    def __init__(self) -> None:
        self._kept: deque[Eviction] = deque()

    def add(self, eviction: Eviction) -> None:
        self._kept.append(eviction)

    def recent(self, now: float) -> tuple[Eviction, ...]:
        """The evictions in (now - STORM_WINDOW, now], in the order observed; older ones are forgotten."""
        kept = self._kept
        while kept and kept[0].at <= now - STORM_WINDOW:
            kept.popleft()
        return tuple(kept)


# --- the operator's observation: evictions from the Workloads' own records ---------------------------------


@dataclass(frozen=True)
class EvictionCounts:
    """What `observe_evictions` remembers between two observations: each Workload's eviction count per
    reason (status.schedulingStats.evictions) as last seen, and the Workload object it was read from (the
    same object again has the same counts: nothing to read)."""

    counts: Mapping[WorkloadKey, Mapping[str, int]]
    objects: Mapping[WorkloadKey, Workload] = field(default_factory=dict)


def eviction_counts(wl: Workload) -> dict[str, int]:
    """status.schedulingStats.evictions by reason (pkg/workload workloadEvictionStateInc counts every
    eviction under its reason and underlying cause)."""
    out: dict[str, int] = {}
    for reason, _, n in wl.eviction_stats:
        out[reason] = out.get(reason, 0) + n
    return out


def observe_evictions(
    before: EvictionCounts | None, workloads: Iterable[Workload], now: float
) -> tuple[EvictionCounts, list[Eviction]]:
    """The evictions since the last observation, from the Workloads: a count risen under reason Preempted
    is Kueue's preemption (its preemptor read from the Preempted condition, its reason that condition's
    reason), under InactiveWorkload the policy's deactivation; each dated `now` (the observation's
    resolution). A workload seen for the first time is a baseline (a restarted operator does not know when
    its past evictions were); workloads no longer observed are forgotten."""
    listed = list(workloads)
    counts: dict[WorkloadKey, Mapping[str, int]] = {}
    objects: dict[WorkloadKey, Workload] = {}
    changed: list[Workload] = []
    for wl in listed:
        key = wl.key
        objects[key] = wl
        if before is not None and before.objects.get(key) is wl:
            counts[key] = before.counts[key]  # the same object: the same counts, no eviction since
        else:
            changed.append(wl)
    return _counted(before, counts, objects, changed, now)


def evictions_since(before: EvictionCounts, owned: Mapping[WorkloadKey, Workload],
                    keys: Iterable[WorkloadKey], now: float) -> tuple[EvictionCounts, list[Eviction]]:
    """observe_evictions(before, owned.values(), now) when only the Workloads of `keys` can differ from
    those `before` counted (added, replaced or gone): costs what changed, not every Workload (the operator's
    observation kept by delta, fairshare.control.standing)."""
    counts = dict(before.counts)
    objects = dict(before.objects)
    changed: list[Workload] = []
    for key in keys:
        wl = owned.get(key)
        if wl is None:
            counts.pop(key, None)
            objects.pop(key, None)
            continue
        if objects.get(key) is wl and key in counts:
            continue
        objects[key] = wl
        changed.append(wl)
    return _counted(before, counts, objects, changed, now)


def _counted(before: EvictionCounts | None, counts: dict[WorkloadKey, Mapping[str, int]],
             objects: dict[WorkloadKey, Workload], changed: list[Workload],
             now: float) -> tuple[EvictionCounts, list[Eviction]]:
    """The counts of the `changed` Workloads read, and the evictions their counts rose by since `before`."""
    by_uid: dict[str, WorkloadKey] | None = None  # (read only for a preemption seen)
    out: list[Eviction] = []
    for wl in sorted(changed, key=lambda w: w.key):
        now_counts = eviction_counts(wl)
        counts[wl.key] = now_counts
        seen = before.counts.get(wl.key) if before is not None else None
        if seen is None:
            continue
        for reason in sorted(now_counts):
            new = now_counts[reason] - seen.get(reason, 0)
            if new <= 0:
                continue
            if reason == PREEMPTED:
                # The preemptor and Kueue's reason from the Preempted condition, True or already reset by
                # the victim's re-admission (a loop's victims are back within the second: models.
                # preemption_note reads the reason back from the words of the message).
                cond = wl.condition("Preempted")
                note = preemption_note(cond)
                why = (note.reason if note is not None and note.reason else
                       cond.reason if cond is not None and cond.status and cond.reason else PREEMPTED)
                uid = note.preemptor_uid if note is not None else ""
                if by_uid is None:
                    by_uid = {w.uid: w.key for w in objects.values() if w.uid}
                e = Eviction(wl.key, now, EvictionSource.KUEUE, by_uid.get(uid, "") if uid else "", why)
            elif reason == DEACTIVATED:
                e = Eviction(wl.key, now, EvictionSource.POLICY, "", DEACTIVATED)
            else:
                e = Eviction(wl.key, now, EvictionSource.KUEUE, "", reason)
            out.extend([e] * new)
    return EvictionCounts(counts, objects), out
