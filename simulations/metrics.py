"""The headline metrics: one vocabulary for the comparison table, the report, summary.json's keys and the
objectives a scenario declares.

A metric is named by a reference `name` or `name[argument]`, the argument a priority class (`wait_p95[
high-priority-business]`) or a team, i.e. a ClusterQueue (`goodput[ai-frontier-research]`). The grammar
is parsed, never evaluated: `NAME` is one of `KINDS`, the argument is any text without brackets.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum, StrEnum

from .record import EvictedBy
from .summary import GroupStats, RunSummary


class Direction(IntEnum):
    LOWER = -1  # lower is better
    NEUTRAL = 0
    HIGHER = 1


class Arg(StrEnum):
    NONE = "none"  # cluster-wide
    CLASS = "priority class"
    CLASS_OPTIONAL = "priority class or none"  # none: every workload
    TEAM = "team"  # a ClusterQueue
    TEAM_OPTIONAL = "team or none"


Getter = Callable[[RunSummary, str | None], float | None]


@dataclass(frozen=True)
class Kind:
    name: str
    arg: Arg
    label: str  # "{arg}" is replaced by the argument
    unit: str
    direction: Direction
    get: Getter
    hide_when_zero: bool = False  # a row that is 0 everywhere says nothing (e.g. no planner at all)


def _hours(v: float | None) -> float | None:
    return None if v is None else v / 3600.0


def _group(s: RunSummary, arg: str | None, *, by_class: bool) -> GroupStats | None:
    if arg is None:
        return s.cluster
    return (s.priority_classes if by_class else s.queues).get(arg)


def _wait(which: str, *, by_class: bool = True) -> Getter:
    def get(s: RunSummary, arg: str | None) -> float | None:
        g = _group(s, arg, by_class=by_class)
        return None if g is None else _hours(getattr(g.wait, which))

    return get


def _never_admitted(s: RunSummary, arg: str | None) -> float | None:
    g = _group(s, arg, by_class=True)
    if g is None or g.wait.count == 0:
        return None
    return 100.0 * g.wait.censored / g.wait.count


def _team(field: str) -> Getter:
    def get(s: RunSummary, arg: str | None) -> float | None:
        g = _group(s, arg, by_class=False)
        return None if g is None else float(getattr(g, field))

    return get


def _demand_met(s: RunSummary, arg: str | None) -> float | None:
    if arg is None:
        return None
    v = s.fairness.demand_met.get(arg)
    return None if v is None else 100.0 * v


def _active(which: str) -> Getter:
    """A group's active GPU-hours, or its allocated-but-idle ones (held - active); None when not modelled."""

    def get(s: RunSummary, arg: str | None) -> float | None:
        g = _group(s, arg, by_class=False)
        if g is None or g.active_gpu_hours is None:
            return None
        return g.active_gpu_hours if which == "active" else g.gpu_hours - g.active_gpu_hours

    return get


def _pct(v: float | None) -> float | None:
    return None if v is None else 100.0 * v


def _median_delay_minutes(s: RunSummary, _: str | None) -> float | None:
    p = s.planner
    if p.evictions == 0:
        return None
    # never admitted beyond the median: the median is infinite; shown as the horizon (a lower bound)
    d = p.median_delay_seconds
    return (d if d is not None else s.run.simulated_seconds) / 60.0


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("wait_mean", Arg.CLASS_OPTIONAL, "wait mean [{arg}] (h)", "h", Direction.LOWER, _wait("mean")),
        Kind("wait_p95", Arg.CLASS_OPTIONAL, "wait p95 [{arg}] (h)", "h", Direction.LOWER, _wait("p95")),
        Kind("wait_p50", Arg.CLASS_OPTIONAL, "wait p50 [{arg}] (h)", "h", Direction.LOWER, _wait("p50")),
        Kind(
            "never_admitted", Arg.CLASS_OPTIONAL, "never admitted [{arg}] (%)", "%", Direction.LOWER,
            _never_admitted,
        ),
        Kind(
            "goodput", Arg.TEAM_OPTIONAL, "goodput [{arg}] (GPU-h finished)", "GPU-h", Direction.HIGHER,
            _team("goodput_gpu_hours"),
        ),
        Kind(
            "finished", Arg.TEAM_OPTIONAL, "finished [{arg}]", "workloads", Direction.HIGHER,
            _team("finished"),
        ),
        Kind(
            "useful_gpu_hours", Arg.TEAM_OPTIONAL, "useful GPU-h [{arg}]", "GPU-h", Direction.HIGHER,
            _team("useful_gpu_hours"),
        ),
        Kind(
            "lost_gpu_hours", Arg.TEAM_OPTIONAL, "lost GPU-h [{arg}]", "GPU-h", Direction.LOWER,
            _team("lost_gpu_hours"),
        ),
        # A team's waits and evictions (qm plan's forecast per team; the class ones above are wait_*).
        Kind(
            "team_wait_p50", Arg.TEAM, "wait p50 of team [{arg}] (h)", "h", Direction.LOWER,
            _wait("p50", by_class=False),
        ),
        Kind(
            "team_wait_p95", Arg.TEAM, "wait p95 of team [{arg}] (h)", "h", Direction.LOWER,
            _wait("p95", by_class=False),
        ),
        Kind(
            "evictions", Arg.TEAM_OPTIONAL, "evictions [{arg}]", "evictions", Direction.LOWER,
            _team("preempted"),
        ),
        Kind("demand_met", Arg.TEAM, "demand met [{arg}] (%)", "%", Direction.HIGHER, _demand_met),
        Kind(
            "utilization", Arg.NONE, "utilization of capacity present (%)", "%", Direction.HIGHER,
            lambda s, _: 100.0 * s.capacity.utilization,
        ),
        # What the GPUs did (workloads[].activity), beside what was allocated: null when not modelled.
        Kind(
            "utilization_active", Arg.NONE, "utilization active, what the GPUs did (%)", "%",
            Direction.HIGHER,
            lambda s, _: _pct(s.capacity.utilization_active),
        ),
        Kind(
            "active_gpu_hours", Arg.TEAM_OPTIONAL, "active GPU-h [{arg}]", "GPU-h", Direction.HIGHER,
            _active("active"),
        ),
        Kind(
            "allocated_idle_gpu_hours", Arg.TEAM_OPTIONAL, "allocated but idle GPU-h [{arg}]", "GPU-h",
            Direction.LOWER, _active("idle"),
        ),
        Kind(
            "idle_reclaimed", Arg.NONE, "idle workloads reclaimed", "workloads", Direction.NEUTRAL,
            lambda s, _: float(s.lost_work.by.get(EvictedBy.IDLE, 0)), hide_when_zero=True,
        ),
        Kind(
            "stranded_gpu_hours", Arg.NONE, "capacity in no quota (GPU-h)", "GPU-h", Direction.LOWER,
            lambda s, _: s.capacity.stranded_gpu_hours,
        ),
        Kind(
            "overcommitted_gpu_hours", Arg.NONE, "quota beyond capacity (GPU-h)", "GPU-h", Direction.LOWER,
            lambda s, _: s.capacity.overcommitted_gpu_hours, hide_when_zero=True,
        ),
        Kind(
            "idle_while_pending_gpu_hours", Arg.NONE, "idle while work pending (GPU-h)", "GPU-h",
            Direction.LOWER, lambda s, _: s.capacity.idle_while_pending_gpu_hours,
        ),
        Kind(
            "preemptions", Arg.NONE, "evictions", "evictions", Direction.LOWER,
            lambda s, _: float(s.lost_work.preemptions),
        ),
        Kind(
            "evictions_max", Arg.NONE, "most evictions of one workload", "evictions", Direction.LOWER,
            lambda s, _: float(s.cluster.evictions.max),
        ),
        Kind(
            "policy_evictions_max", Arg.NONE, "most evictions of one workload by the policy", "evictions",
            Direction.LOWER, lambda s, _: float(s.lost_work.policy_max), hide_when_zero=True,
        ),
        Kind(
            "kueue_evictions", Arg.NONE, "evictions by Kueue", "evictions", Direction.LOWER,
            lambda s, _: float(s.lost_work.by.get(EvictedBy.KUEUE, 0)),
        ),
        Kind(
            "policy_evictions", Arg.NONE, "evictions by the policy", "evictions", Direction.LOWER,
            lambda s, _: float(sum(n for by, n in s.lost_work.by.items() if by != EvictedBy.KUEUE)),
            hide_when_zero=True,
        ),
        Kind(
            "restart_gpu_hours", Arg.NONE, "of lost GPU-h: restart cost", "GPU-h", Direction.LOWER,
            lambda s, _: s.lost_work.restart_gpu_hours, hide_when_zero=True,
        ),
        Kind(
            "kueue_evictions_max", Arg.NONE, "most evictions of one workload by Kueue", "evictions",
            Direction.LOWER, lambda s, _: float(s.lost_work.kueue_max),
        ),
        Kind(
            "storms", Arg.NONE, "eviction storms", "storms", Direction.LOWER,
            lambda s, _: float(len(s.storms)), hide_when_zero=True,
        ),
        Kind(
            "evictions_p95", Arg.NONE, "evictions p95 (of evicted workloads)", "evictions", Direction.LOWER,
            lambda s, _: s.cluster.evictions.p95,
        ),
        Kind(
            "evicted_3plus", Arg.NONE, "workloads evicted >= 3 times", "workloads", Direction.LOWER,
            lambda s, _: float(s.cluster.evictions.evicted_3plus),
        ),
        Kind(
            "fairness_min_demand_met", Arg.NONE, "fairness: least share of demand met (%)", "%",
            Direction.HIGHER, lambda s, _: _pct(s.fairness.max_min_demand_met),
        ),
        Kind(
            "fairness_jain", Arg.NONE, "fairness: Jain over demand met", "", Direction.HIGHER,
            lambda s, _: s.fairness.jain_demand_met,
        ),
        Kind(
            "fairness_jain_entitlement", Arg.NONE, "fairness: Jain over used / entitled GPU-h", "",
            Direction.HIGHER, lambda s, _: s.fairness.jain_entitlement,
        ),
        Kind(
            "planner_beneficiary_admitted",
            Arg.NONE,
            "planner evictions, beneficiary admitted within {window} (%)",
            "%",
            Direction.HIGHER,
            lambda s, _: _pct(s.planner.share_within_window),
            hide_when_zero=True,
        ),
        Kind(
            "planner_beneficiary_delay", Arg.NONE, "planner evictions, median delay (min; never = horizon)",
            "min", Direction.LOWER, _median_delay_minutes, hide_when_zero=True,
        ),
    )
}

_REF = re.compile(r"^([a-z][a-z0-9_]*)(?:\[([^\[\]]+)\])?$")


@dataclass(frozen=True)
class MetricRef:
    kind: Kind
    arg: str | None

    @property
    def key(self) -> str:
        return self.kind.name if self.arg is None else f"{self.kind.name}[{self.arg}]"

    def label(self, *, window: str = "1s") -> str:
        text = self.kind.label.replace("{window}", window)
        return text.replace("{arg}", self.arg) if self.arg is not None else text.replace(" [{arg}]", "")

    def value(self, s: RunSummary) -> float | None:
        v = self.kind.get(s, self.arg)
        return None if v is None or math.isnan(v) else v


def parse_ref(text: str) -> MetricRef:
    """`name` or `name[argument]`; ValueError with the vocabulary when it is neither."""
    m = _REF.match(text.strip())
    if m is None:
        raise ValueError("must be NAME or NAME[ARGUMENT], e.g. wait_p95[high-priority-business]")
    name, arg = m.group(1), m.group(2)
    kind = KINDS.get(name)
    if kind is None:
        raise ValueError(f"unknown metric {name!r}; known: {', '.join(sorted(KINDS))}")
    if arg is not None:
        arg = arg.strip()
    if kind.arg in (Arg.CLASS, Arg.TEAM) and not arg:
        raise ValueError(f"{name} needs a {kind.arg.value} in brackets, e.g. {name}[NAME]")
    if kind.arg == Arg.NONE and arg is not None:
        raise ValueError(f"{name} is cluster-wide: write it without brackets")
    return MetricRef(kind, arg)


def headline(sample: RunSummary) -> list[MetricRef]:
    """The rows of the comparison, in order: per priority class, per team, then cluster-wide."""
    rows: list[MetricRef] = []
    for pc in sample.priority_classes:
        for name in ("wait_mean", "wait_p95", "never_admitted"):
            rows.append(MetricRef(KINDS[name], pc))
    for cq in sample.queues:
        for name in ("goodput", "finished", "useful_gpu_hours", "lost_gpu_hours"):
            rows.append(MetricRef(KINDS[name], cq))
    activity = ("utilization_active", "active_gpu_hours", "allocated_idle_gpu_hours", "idle_reclaimed")
    for name in (
        "wait_mean",
        "wait_p95",
        "utilization",
        *(activity if sample.capacity.utilization_active is not None else ()),
        "goodput",
        "stranded_gpu_hours",
        "overcommitted_gpu_hours",
        "idle_while_pending_gpu_hours",
        "lost_gpu_hours",
        "restart_gpu_hours",
        "preemptions",
        "kueue_evictions",
        "policy_evictions",
        "evictions_max",
        "kueue_evictions_max",
        "policy_evictions_max",
        "storms",
        "evictions_p95",
        "evicted_3plus",
        "fairness_min_demand_met",
        "fairness_jain",
        "planner_beneficiary_admitted",
        "planner_beneficiary_delay",
    ):
        rows.append(MetricRef(KINDS[name], None))
    return rows
