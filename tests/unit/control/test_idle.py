"""Idle GPUs (spec.idle, fairshare.control.idle): the verdict on a workload's activity (idle, busy, unknown:
missing and stale telemetry is never idle), the reduction of a series' samples, and the rule over decisions:
warned, then reclaimed through the victim machinery; busy again lifts the warning; unknown keeps it and
reclaims nothing; protected work is never touched; keep-idle within the policy's limit; dry-run; budget."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from fairshare.control import (
    HistoryBook,
    MarkIdle,
    Observed,
    PolicyRules,
    RequestEviction,
    UnmarkIdle,
    decide,
)
from fairshare.control.actions import AuditAction, RecordAudit
from fairshare.control.idle import Activity, IdleRules, keep_extension, verdict
from fairshare.control.observed import PendingWorkload
from fairshare.control.telemetry import ActivityReading, GpuReading, read_series
from fairshare.manifests import parse_manifests
from fairshare.models import Workload
from fairshare.policy import parse_policy, render
from fairshare.policy.status import EvictionKind, QuotaPolicyStatus, VictimState
from fairshare.snapshot import Snapshot
from fairshare.workload import WorkloadInfo
from tests.builders import WorkloadBuilder
from tests.unit.policy.helpers import sample

GPU = "nvidia.com/gpu"
RESEARCH, BUSINESS = "ai-frontier-research", "biz-model-serving"
EXP, BIZ = "low-priority-experiment", "high-priority-business"
T0 = 1_800_000_000.0  # admissions
NOW = T0 + 3600.0  # the first decision: an hour after
WINDOW, GRACE, SCRAPE, STALE = 600.0, 300.0, 30.0, 90.0


def policy(**idle: Any) -> Any:
    doc = sample()
    doc["spec"]["idle"] = {"enabled": True, "dryRun": False, "thresholdPercent": 5, "window": "10m",
                           "grace": "5m", "scrapeInterval": "30s", "staleAfterScrapes": 3,
                           "keep": {"maxDuration": "1h"}, **idle}
    doc["spec"]["preemption"]["minRuntime"] = "10m"
    return parse_policy(doc)


def idle_rules(**idle: Any) -> IdleRules:
    rules = PolicyRules.of(policy(**idle)).idle
    assert rules is not None
    return rules


def gpu(pod: str, index: int, *, first: float, last: float, value: float = 0.0, busy: float | None = None,
        gap: float = SCRAPE, invalid: int = 0) -> GpuReading:
    valid = int((last - first) // SCRAPE) + 1
    return GpuReading(pod, str(index), valid, invalid, first, last, value, busy, gap)


def zeros(pod: str, gpus: int, at: float) -> tuple[GpuReading, ...]:
    """`gpus` GPUs reporting 0% every scrape over the whole window before `at`."""
    return tuple(gpu(pod, i, first=at - WINDOW, last=at) for i in range(gpus))


def reading(at: float, **workloads: tuple[GpuReading, ...]) -> ActivityReading:
    return ActivityReading(measured_at=at, window=WINDOW, threshold=5.0,
                           workloads={k.replace("__", "/"): v for k, v in workloads.items()})


KEY = "ns/w"


@pytest.mark.parametrize(
    ("readings", "devices", "now", "activity", "reason"),
    [
        pytest.param(reading(NOW, ns__w=zeros("p", 2, NOW)), 2, NOW, Activity.IDLE, "all 2 GPU(s) below 5%",
                     id="every GPU reports real zeros over the whole window: idle"),
        pytest.param(reading(NOW, ns__w=(*zeros("p", 1, NOW), gpu("p", 1, first=NOW - WINDOW, last=NOW,
                                                                  value=1, busy=NOW - 120))),
                     2, NOW, Activity.BUSY, "a GPU at or above 5%",
                     id="one sample of one GPU at the threshold two minutes ago: busy"),
        pytest.param(reading(NOW, ns__w=(gpu("p", 0, first=NOW - WINDOW, last=NOW, value=80, busy=NOW),)),
                     4, NOW, Activity.BUSY, "a GPU at or above 5%",
                     id="busy evidence wins over GPUs that do not report"),
        pytest.param(reading(NOW), 2, NOW, Activity.UNKNOWN, "no DCGM series for its pods (absent)",
                     id="no series at all (not mapped, or vanished): unknown, never idle"),
        pytest.param(reading(NOW, ns__w=zeros("p", 2, NOW)), 4, NOW, Activity.UNKNOWN,
                     "2 of its 4 GPUs report",
                     id="two of its four GPUs report zeros: unknown"),
        pytest.param(reading(NOW, ns__w=(gpu("p", 0, first=NOW - WINDOW, last=NOW, invalid=1),)), 1, NOW,
                     Activity.UNKNOWN, "1 sample(s) not a number in 0-100%",
                     id="a NaN sample among zeros: unknown"),
        pytest.param(reading(NOW, ns__w=(gpu("p", 0, first=NOW - WINDOW, last=NOW - 120),)), 1, NOW,
                     Activity.UNKNOWN, "last sample 2m old (stale)",
                     id="the last sample two minutes old (stale after 90s): unknown"),
        pytest.param(reading(NOW, ns__w=(gpu("p", 0, first=NOW - WINDOW, last=NOW, gap=180),)), 1, NOW,
                     Activity.UNKNOWN, "a gap of 3m between samples",
                     id="a three-minute gap in the series: unknown"),
        pytest.param(reading(NOW, ns__w=(gpu("p", 0, first=NOW - 200, last=NOW),)), 1, NOW,
                     Activity.UNKNOWN, "does not cover the window yet",
                     id="a new pod reporting for 200s of a 10m window: unknown"),
        pytest.param(reading(NOW - 120, ns__w=zeros("p", 1, NOW - 120)), 1, NOW, Activity.UNKNOWN,
                     "the last reading is 2m old",
                     id="zeros, but the reading itself is two minutes old: unknown"),
        pytest.param(ActivityReading(NOW, WINDOW, 5.0, error="prometheus: answer is not JSON"), 1, NOW,
                     Activity.UNKNOWN, "telemetry not read: prometheus: answer is not JSON",
                     id="the source could not be read: unknown"),
        pytest.param(ActivityReading(NOW, WINDOW, 10.0, {KEY: zeros("p", 1, NOW)}), 1, NOW, Activity.UNKNOWN,
                     "made for other spec.idle settings",
                     id="a reading reduced with another threshold: unknown"),
        pytest.param(None, 1, NOW, Activity.UNKNOWN, "no telemetry read yet",
                     id="no reading at all: unknown"),
    ],
)
def test_the_verdict_tells_idle_from_busy_and_missing_or_stale_telemetry_is_unknown(
    readings: ActivityReading | None, devices: int, now: float, activity: Activity, reason: str
) -> None:
    v = verdict(idle_rules(), readings, KEY, devices, now)
    assert (v.activity, reason in v.reason) == (activity, True), v.reason


def test_a_busy_workload_whose_gpus_are_all_below_the_threshold_now_says_when_it_becomes_idle() -> None:
    last_busy = NOW - 100
    r = reading(NOW, ns__w=(gpu("p", 0, first=NOW - WINDOW, last=NOW, value=1, busy=last_busy),))
    assert verdict(idle_rules(), r, KEY, 1, NOW).idle_at == last_busy + WINDOW
    r = reading(NOW, ns__w=(gpu("p", 0, first=NOW - WINDOW, last=NOW, value=50, busy=NOW),))
    assert verdict(idle_rules(), r, KEY, 1, NOW).idle_at is None  # busy now: not foreseeable


@pytest.mark.parametrize(
    ("samples", "scale", "expected"),
    [
        pytest.param([(0, 0.0), (30, 0.0), (60, 3.0)], 1.0, (3, 0, 0.0, 60.0, 3.0, None, 30.0),
                     id="percent samples below 5%: no busy sample"),
        pytest.param([(0, 0.9), (30, 0.02), (90, 0.01)], 100.0, (3, 0, 0.0, 90.0, 1.0, 0.0, 60.0),
                     id="a ratio metric read as percent: 90% at 0s is busy, the gap is 60s"),
        pytest.param([(0, 0.0), (30, math.nan), (60, -1.0), (90, 101.0), (120, 0.0)], 1.0,
                     (2, 3, 0.0, 120.0, 0.0, None, 120.0), id="NaN, negative and above 100% are not samples"),
        pytest.param([], 1.0, (0, 0, math.inf, -math.inf, math.nan, None, 0.0), id="no sample"),
    ],
)
def test_read_series_keeps_real_zeros_and_sets_aside_what_is_not_a_sample(
    samples: list[tuple[float, float]], scale: float, expected: tuple[Any, ...]
) -> None:
    r = read_series(samples, pod="p", gpu="0", scale=scale, threshold=5.0)
    got = (r.valid, r.invalid, r.first, r.last, r.last_value, r.last_busy, r.gap)
    def shown(xs: tuple[Any, ...]) -> list[str]:  # (NaN is not equal to itself)
        return [str(x if x is None else float(x)) for x in xs]

    assert shown(got) == shown(expected)


@pytest.mark.parametrize(
    ("value", "seconds", "shown"),
    [
        pytest.param(None, 0.0, None, id="no annotation"),
        pytest.param("30m", 1800.0, "kept 30m more", id="half an hour asked, within the hour allowed"),
        pytest.param("4h", 3600.0, "kept 1h more (spec.idle.keep.maxDuration)",
                     id="four hours asked: capped at the policy's hour"),
        pytest.param("true", 3600.0, "kept 1h more", id="true: the policy's maximum"),
        pytest.param("forever", 0.0, "ignored: not a duration", id="not a duration: nothing added, said so"),
    ],
)
def test_a_keep_idle_annotation_delays_reclamation_within_the_policys_limit(
    value: str | None, seconds: float, shown: str | None
) -> None:
    got, text = keep_extension(idle_rules(), value)
    assert got == seconds
    assert (text is None) == (shown is None) and (shown is None or shown in (text or "")), text


# ------------------------------------------------------------------------------------------- over decisions


def workload(name: str, *, gpus: int = 1, team: str = RESEARCH, cls: str = EXP, at: float = T0) -> Workload:
    prio = 100 if cls == EXP else 1000000
    return (WorkloadBuilder(team, name).queue(team).priority(prio).priority_class(cls).owner("Job", name)
            .request(GPU, str(gpus)).request("cpu", "1").created(at).admitted(team, "gpu-a100", at=at)
            .build())


class World:
    """The sample policy with spec.idle on, its teams' Kueue objects and admitted workloads; `decide` called
    as a shell does, feeding back the status."""

    def __init__(self, workloads: list[Workload], **idle: Any) -> None:
        self.policy = policy(**idle)
        self.rules = PolicyRules.of(self.policy)
        self.workloads = {w.key: w for w in workloads}
        self.status: QuotaPolicyStatus | None = None
        self.book = HistoryBook.new(self.policy, T0)

    def observed(self, activity: ActivityReading | None) -> Observed:
        state = parse_manifests(render(self.policy), check_references=False)
        admitted = {k: w for k, w in self.workloads.items() if w.admission is not None}
        state = dataclasses.replace(state, workloads=admitted)
        snap = Snapshot.from_state(state)
        pending = {k: PendingWorkload(WorkloadInfo.pending(w, w.queue_name), w.creation_timestamp, w.active)
                   for k, w in self.workloads.items() if w.admission is None}
        return Observed(snap, pending, self.book.graph, activity=activity)

    def decide(self, now: float, activity: ActivityReading | None) -> Any:
        d = decide(self.rules, self.observed(activity), self.status, now, history=self.book)
        self.status = d.status
        return d

    def deactivate(self, key: str) -> None:
        """The shell carried out an eviction request (spec.active=false); Kueue has not released it yet."""
        self.workloads[key] = dataclasses.replace(self.workloads[key], active=False)

    def release(self, key: str) -> None:
        """Kueue evicted it (deactivated): it holds no quota and is not active."""
        w = self.workloads[key]
        self.workloads[key] = dataclasses.replace(w, admission=None, active=False, conditions=())


def acts(d: Any) -> list[tuple[str, str]]:
    out = []
    for a in d.actions:
        if isinstance(a, MarkIdle | UnmarkIdle):
            out.append((type(a).__name__, a.workload))
        elif isinstance(a, RequestEviction):
            out.append((f"evict {a.kind}" + (" dry-run" if a.dry_run else ""), a.victim))
        elif isinstance(a, RecordAudit) and a.action in (AuditAction.IDLE_BLOCKED,
                                                         AuditAction.PREEMPT_VERIFIED):
            out.append((str(a.action), f"{a.target.namespace}/{a.target.name}"))
    return out


R = f"{RESEARCH}/"


def three(at: float, *, idle: str = "idle", busy: str = "busy",
          **extra: tuple[GpuReading, ...]) -> ActivityReading:
    """idle reports zeros, busy 80%, missing nothing."""
    ws = {R + idle: zeros("idle-pod", 1, at),
          R + busy: (gpu("busy-pod", 0, first=at - WINDOW, last=at, value=80, busy=at),)}
    ws.update({R + k: v for k, v in extra.items()})
    return ActivityReading(at, WINDOW, 5.0, ws)


def test_an_idle_experiment_is_warned_then_reclaimed_and_busy_and_unknown_ones_are_untouched() -> None:
    w = World([workload("idle"), workload("busy"), workload("missing"), workload("serve", cls=BIZ)])
    # The business workload reports zeros too: protected, never a candidate.
    d = w.decide(NOW, ActivityReading(NOW, WINDOW, 5.0, {**three(NOW).workloads,
                                                         f"{BUSINESS}/serve": zeros("serve-pod", 1, NOW)}))
    assert acts(d) == [("MarkIdle", R + "idle")]
    [mark] = [a for a in d.actions if isinstance(a, MarkIdle)]
    assert (mark.reclaim_at, mark.dry_run) == (NOW + GRACE, False)
    assert mark.owner is not None and (mark.owner.kind, mark.owner.name) == ("Job", "idle")
    assert [r.workload for r in d.status.idle_workloads] == [R + "idle"]
    t = d.status.telemetry
    assert (t.idle, t.busy, t.unknown) == (1, 1, 1)
    assert t.unknown_reasons == [f"{R}missing: no DCGM series for its pods (absent)"]
    assert d.wake_at == NOW + GRACE
    # Within the grace: nothing more.
    assert acts(w.decide(NOW + 60, three(NOW + 60))) == []
    # The grace passed, still idle: evicted through the victim machinery (kind idle-gpus).
    d = w.decide(NOW + GRACE, three(NOW + GRACE))
    assert acts(d) == [("evict idle-gpus", R + "idle")]
    [req] = [a for a in d.actions if isinstance(a, RequestEviction)]
    assert req.lost == (("cpu", 1083), (GPU, 1083))  # 1 GPU x 65 minutes held
    [rec] = d.status.last_preemptions
    assert (rec.victim, rec.kind, rec.state, rec.beneficiary) == (R + "idle", EvictionKind.IDLE,
                                                                   VictimState.REQUESTED, "")
    assert d.status.idle_workloads == []
    # Kueue released it: verified, then Reclaimed (it stays deactivated: no reactivation).
    w.release(R + "idle")
    d = w.decide(NOW + GRACE + 5, three(NOW + GRACE + 5))
    assert acts(d) == [("preemption-verified", R + "idle")]
    assert [r.state for r in d.status.last_preemptions] == [VictimState.RECLAIMED]
    assert not any(type(a).__name__ == "Reactivate" for a in d.actions)


def test_busy_again_within_the_grace_lifts_the_warning() -> None:
    w = World([workload("idle"), workload("busy")])
    w.decide(NOW, three(NOW))
    back = three(NOW + 60, idle="busy", busy="idle")  # they swap: the warned one works again
    d = w.decide(NOW + 60, back)
    assert acts(d) == [("MarkIdle", R + "busy"), ("UnmarkIdle", R + "idle")]  # in key order
    assert [r.workload for r in d.status.idle_workloads] == [R + "busy"]


def test_unknown_activity_at_the_reclaim_time_reclaims_nothing_and_the_warning_stands() -> None:
    w = World([workload("idle"), workload("busy")])
    w.decide(NOW, three(NOW))
    stale = ActivityReading(NOW + GRACE, WINDOW, 5.0, {R + "idle": (gpu("idle-pod", 0, first=NOW - WINDOW,
                                                                           last=NOW + GRACE - 200),)})
    d = w.decide(NOW + GRACE, stale)
    assert acts(d) == []
    assert [r.workload for r in d.status.idle_workloads] == [R + "idle"]
    d = w.decide(NOW + GRACE + 10, ActivityReading(NOW + GRACE + 10, WINDOW, 5.0, error="timed out after 5s"))
    assert acts(d) == [] and d.status.telemetry.unknown == 2
    # Read again and still idle: reclaimed (the warning's time stands).
    assert acts(w.decide(NOW + GRACE + 20, three(NOW + GRACE + 20))) == [("evict idle-gpus", R + "idle")]


def test_a_keep_annotation_delays_the_reclamation_at_most_by_the_policys_limit() -> None:
    w = World([workload("idle"), workload("busy")])
    r = dataclasses.replace(three(NOW), keep={R + "idle": "4h"})
    d = w.decide(NOW, r)
    [mark] = [a for a in d.actions if isinstance(a, MarkIdle)]
    assert mark.reclaim_at == NOW + GRACE + 3600
    assert d.status.idle_workloads[0].keep == "kept 1h more (spec.idle.keep.maxDuration)"
    assert acts(w.decide(NOW + GRACE, dataclasses.replace(three(NOW + GRACE), keep=r.keep))) == []
    # The annotation removed: the reclamation time moves back (and is said again), then it is due.
    d = w.decide(NOW + GRACE + 1, three(NOW + GRACE + 1))
    assert acts(d) == [("MarkIdle", R + "idle"), ("evict idle-gpus", R + "idle")]


def test_dry_run_warns_and_reports_the_would_be_reclamation_once() -> None:
    w = World([workload("idle"), workload("busy")], dryRun=True)
    d = w.decide(NOW, three(NOW))
    marks = [(type(a).__name__, a.dry_run) for a in d.actions if isinstance(a, MarkIdle)]
    assert marks == [("MarkIdle", True)]
    d = w.decide(NOW + GRACE, three(NOW + GRACE))
    assert acts(d) == [("evict idle-gpus dry-run", R + "idle")]
    assert [r.state for r in d.status.last_preemptions] == [VictimState.REPORTED]
    assert acts(w.decide(NOW + GRACE + 30, three(NOW + GRACE + 30))) == []


def test_the_idle_budget_reclaims_at_most_its_victims_per_window_and_says_so_once() -> None:
    w = World([workload("a"), workload("b"), workload("busy")], budget={"maxVictims": 1, "window": "1h"})
    both = ActivityReading(NOW, WINDOW, 5.0, {R + "a": zeros("a", 1, NOW), R + "b": zeros("b", 1, NOW)})
    w.decide(NOW, both)
    later = dataclasses.replace(both, measured_at=NOW + GRACE, workloads={
        R + "a": zeros("a", 1, NOW + GRACE), R + "b": zeros("b", 1, NOW + GRACE)})
    d = w.decide(NOW + GRACE, later)
    assert acts(d) == [("idle-reclaim-blocked", R + "b"), ("evict idle-gpus", R + "a")]  # records first
    assert d.wake_at == NOW + GRACE + 3600
    w.deactivate(R + "a")
    assert acts(w.decide(NOW + GRACE + 1, dataclasses.replace(later, measured_at=NOW + GRACE + 1))) == []


def test_min_runtime_comes_first_even_for_an_idle_workload() -> None:
    # minRuntime 10m; window 10m, grace 5m: a workload admitted 12 minutes ago at warning time...
    young = workload("idle", at=NOW - 400)
    w = World([young, workload("busy")], window="5m", grace="1m")
    reading_now = ActivityReading(NOW, 300.0, 5.0, {R + "idle": (gpu("p", 0, first=NOW - 300, last=NOW),)})
    d = w.decide(NOW, reading_now)
    assert acts(d) == [("MarkIdle", R + "idle")]
    d = w.decide(NOW + 60, dataclasses.replace(reading_now, measured_at=NOW + 60, workloads={
        R + "idle": (gpu("p", 0, first=NOW - 240, last=NOW + 60),)}))
    assert acts(d) == [] and d.wake_at == NOW - 400 + 600  # 10 minutes after its admission
