"""Idle GPUs (spec.idle): which experiments hold GPUs that do nothing, when they are warned, and when they are
reclaimed. The one rule; the operator and the simulator hand it the GPUs' activity (`Observed.activity`,
fairshare.control.telemetry) and apply what it returns.

The verdict on one workload holding quota (`verdict`), at the time `now` of the decision, from the reading
taken at `measured_at` over the window W before it (start = measured_at - W), with S = staleAfterScrapes x
scrapeInterval:

- **busy**: some GPU of it has a valid sample at or above thresholdPercent after `start`. Evidence of
  work wins over missing evidence.
- **unknown** (never idle), the first that applies: no reading yet, or the source could not be read; the
  reading is older than S (now - measured_at > S) or was made for another threshold or a shorter window; no
  series for its pods at all (absent: dcgm-exporter has not mapped them, or stopped reporting them); fewer
  series than the GPUs it holds; a series with a sample that is not a number in 0-100% (NaN, negative,
  above 100%); a series whose last sample is older than S (stale), or with a gap longer than S between two
  samples; a series that begins more than S after `start` (the window is not covered yet: a new pod).
- **idle**: otherwise: as many series as GPUs, each covering the window with fresh samples, all below the
  threshold. A real zero is a sample; an absent series is not.

What follows, for experiments only (the classes spec.preemption counts as experiments; protected classes are
never candidates, whatever their activity):

- idle and not warned: warned now (`MarkIdle`: an Event on the Workload and its Job; the annotation
  queuemanager.dev/idle-reclaim-at unless dry-run), due for reclamation at warning + grace + keep, where
  keep is what its queuemanager.dev/keep-idle annotation asks (a duration, or "true"), at most
  spec.idle.keep.maxDuration;
- busy while warned: the warning is lifted (`UnmarkIdle`); unknown while warned: the warning stays, and
  nothing is reclaimed while it is unknown;
- idle at or after its reclamation time: evicted through the victim machinery (`RequestEviction` of kind
  idle-gpus: the eviction lifecycle, its Events, audit rows and ledger), within spec.idle.budget and never
  before spec.preemption.minRuntime (counted over all its runs); it then stays deactivated (state
  Reclaimed) until its owner reactivates or deletes it. Dry-run: the would-be eviction is reported once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from fairshare.durations import format_duration, parse_duration
from fairshare.models import WorkloadKey
from fairshare.planners.budget import VictimBudget
from fairshare.policy import QuotaPolicy, preemption_settings, priority_values
from fairshare.policy.settings import IdleSettings, idle_settings
from fairshare.policy.status import EvictionKind, IdleWorkload, PreemptionRecord, TelemetryStatus, VictimState
from fairshare.timestamps import rfc3339
from fairshare.workload import WorkloadInfo

from .actions import Action, AuditAction, MarkIdle, RecordAudit, RequestEviction, Target, UnmarkIdle
from .observed import Observed, Overrides
from .telemetry import ActivityReading, GpuReading

KEEP_ANNOTATION = "queuemanager.dev/keep-idle"  # a user's opt-out: a duration, or "true" (the policy's max)
RECLAIM_ANNOTATION = "queuemanager.dev/idle-reclaim-at"  # set on a warned workload (RFC 3339)
MAX_REASONS = 20  # unknown verdicts listed in status.telemetry
_IN_LIFECYCLE = frozenset({VictimState.REQUESTED, VictimState.EVICTED, VictimState.REACTIVATED})


class Activity(StrEnum):
    IDLE = "idle"
    BUSY = "busy"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Verdict:
    activity: Activity
    reason: str
    # When the workload would become idle if its GPUs stay as they are now (all below the threshold, or
    # the window not covered yet): the simulator's wake-up. None: not foreseeable.
    idle_at: float | None = None


@dataclass(frozen=True)
class IdleRules:
    """spec.idle resolved (fairshare.policy.settings.IdleSettings), with who counts as an experiment."""

    settings: IdleSettings
    dry_run: bool
    budget: VictimBudget
    min_runtime_s: float
    protected_classes: frozenset[str]
    protected_priority: int | None  # the lowest protected class's value (work at or above is never touched)
    experiment_classes: frozenset[str]
    experiment_threshold: int | None  # spec.preemption.experimentPriorityThreshold
    experiment_below: int | None  # the experiment planner's bound (fairshare.control.rules), if any
    resource: str

    @staticmethod
    def of(policy: QuotaPolicy, overrides: Overrides, experiment_below: int | None) -> IdleRules | None:
        s = idle_settings(policy)
        if not s.enabled:
            return None
        ps = preemption_settings(policy)
        values = priority_values(policy)
        protected = [values[c] for c in sorted(ps.protected_classes) if c in values]
        return IdleRules(
            settings=s,
            dry_run=s.dry_run if overrides.dry_run is None else overrides.dry_run,
            budget=VictimBudget(s.max_victims, s.budget_window_s),
            min_runtime_s=ps.min_runtime_s,
            protected_classes=ps.protected_classes,
            protected_priority=min(protected) if protected else None,
            experiment_classes=ps.experiment_classes,
            experiment_threshold=ps.experiment_priority_threshold,
            experiment_below=experiment_below,
            resource=s.resource,
        )

    def candidate(self, w: WorkloadInfo) -> bool:
        """An experiment (its class is marked experiment, or its priority is below the experiment bound) that
        is not protected."""
        cls = w.workload.priority_class
        if cls is not None and cls in self.protected_classes:
            return False
        if self.protected_priority is not None and w.priority >= self.protected_priority:
            return False
        if cls is not None and cls in self.experiment_classes:
            return True
        if self.experiment_threshold is not None and w.priority < self.experiment_threshold:
            return True
        return self.experiment_below is not None and w.priority < self.experiment_below

    def devices(self, w: WorkloadInfo) -> int:
        """The GPUs (devices of the resource) the workload holds: one series each."""
        milli = sum(v for fr, v in w.usage.items() if fr.resource == self.resource)
        return math.ceil(milli / 1000)


def verdict(rules: IdleRules, reading: ActivityReading | None, key: WorkloadKey, devices: int,
            now: float) -> Verdict:
    """The workload's activity (module docstring)."""
    s = rules.settings
    stale = s.stale_s
    if reading is None:
        return Verdict(Activity.UNKNOWN, "no telemetry read yet")
    if reading.error is not None:
        return Verdict(Activity.UNKNOWN, f"telemetry not read: {reading.error}")
    age = now - reading.measured_at
    if age > stale:
        return Verdict(Activity.UNKNOWN, f"the last reading is {format_duration(age)} old (stale after "
                       f"{format_duration(stale)})")
    if reading.threshold != s.threshold_percent or reading.window < s.window_s:
        return Verdict(Activity.UNKNOWN, "the last reading was made for other spec.idle settings")
    start = reading.measured_at - s.window_s
    series = reading.workloads.get(key, ())
    busy = [r.last_busy for r in series if r.last_busy is not None and r.last_busy > start]
    if busy:
        last = max(busy)
        # All below the threshold now: idle once the last busy sample leaves the window (if nothing else
        # keeps it from being idle then).
        quiet = all(r.valid and r.last_value < s.threshold_percent for r in series)
        return Verdict(Activity.BUSY, f"a GPU at or above {s.threshold_percent:g}% at "
                       f"{format_duration(reading.measured_at - last)} before the reading",
                       last + s.window_s if quiet else None)
    if not series:
        return Verdict(Activity.UNKNOWN, "no DCGM series for its pods (absent)")
    if len(series) < devices:
        return Verdict(Activity.UNKNOWN, f"{len(series)} of its {devices} GPUs report")
    covered: float | None = None
    for r in sorted(series, key=_by_device):
        if r.invalid:
            return Verdict(Activity.UNKNOWN, f"{r.describe()}: {r.invalid} sample(s) not a number in 0-100%")
        if not r.valid:
            return Verdict(Activity.UNKNOWN, f"{r.describe()}: no sample in the window (absent)")
        if reading.measured_at - r.last > stale:
            return Verdict(Activity.UNKNOWN, f"{r.describe()}: last sample "
                           f"{format_duration(reading.measured_at - r.last)} old (stale)")
        if r.gap > stale:
            return Verdict(Activity.UNKNOWN, f"{r.describe()}: a gap of {format_duration(r.gap)} between "
                           "samples (stale)")
        if r.first - start > stale:
            at = r.first + s.window_s - stale
            covered = at if covered is None else max(covered, at)
    if covered is not None:
        return Verdict(Activity.UNKNOWN, "its telemetry does not cover the window yet", covered)
    return Verdict(Activity.IDLE, f"all {len(series)} GPU(s) below {s.threshold_percent:g}% for "
                   f"{format_duration(s.window_s)}")


def _by_device(r: GpuReading) -> tuple[str, str]:
    return (r.pod, r.gpu)


def keep_extension(rules: IdleRules, value: str | None) -> tuple[float, str | None]:
    """What a keep-idle annotation adds to the grace, in seconds, and how it is shown (None: no
    annotation). At most spec.idle.keep.maxDuration; a value that is not a duration nor "true" adds nothing
    and says so."""
    if value is None:
        return 0.0, None
    limit = rules.settings.keep_max_s
    text = value.strip()
    if text.lower() == "true":
        asked = limit
    else:
        try:
            asked = float(parse_duration(text))
        except ValueError:
            return 0.0, f"{KEEP_ANNOTATION}={value[:64]!r} ignored: not a duration (e.g. 4h) nor \"true\""
    if limit <= 0:
        return 0.0, f"{KEEP_ANNOTATION} ignored: spec.idle.keep.maxDuration is 0s"
    granted = min(asked, limit)
    capped = " (spec.idle.keep.maxDuration)" if asked > limit else ""
    return granted, f"kept {format_duration(granted)} more{capped}"


@dataclass
class IdleOutcome:
    records: list[IdleWorkload] = field(default_factory=list)  # status.idleWorkloads
    requests: list[RequestEviction] = field(default_factory=list)
    actions: list[Action] = field(default_factory=list)  # MarkIdle, UnmarkIdle, RecordAudit
    telemetry: TelemetryStatus = field(default_factory=TelemetryStatus)
    verdicts: dict[WorkloadKey, Verdict] = field(default_factory=dict)  # every candidate's
    wake: float | None = None

    def _wake(self, at: float | None, now: float) -> None:
        if at is not None and at > now and (self.wake is None or at < self.wake):
            self.wake = at


def step_idle(
    rules: IdleRules,
    observed: Observed,
    stored: Sequence[IdleWorkload],
    records: Sequence[PreemptionRecord],
    requested: set[WorkloadKey],
    past: list[float],
    teams: frozenset[str],
    now: float,
    policy: str,
) -> IdleOutcome:
    """One decision's idle step. `records`: the eviction records after their follow-up; `requested`: the
    victims this decision asks for already; `past`: the times of past real idle evictions (their budget)."""
    out = IdleOutcome()
    s = rules.settings
    reading = observed.activity
    out.telemetry = TelemetryStatus(source=reading.source if reading else s.prometheus_url,
                                    error=reading.error if reading else None)
    # Victims already in their lifecycle (not dry-run): not warned or asked for again.
    evicting = {r.victim for r in records if not r.dry_run and r.state in _IN_LIFECYCLE}
    warned = {r.workload: r for r in stored}
    snap = observed.snapshot
    keep_of: Mapping[WorkloadKey, str] = reading.keep if reading is not None else {}
    counts = {Activity.IDLE: 0, Activity.BUSY: 0, Activity.UNKNOWN: 0}
    reasons: list[str] = []
    for key in sorted(snap.workloads):
        w = snap.workloads[key]
        if w.cluster_queue not in teams or not rules.candidate(w) or key in evicting:
            continue
        devices = rules.devices(w)
        if devices == 0:
            continue
        v = verdict(rules, reading, key, devices, now)
        out.verdicts[key] = v
        counts[v.activity] += 1
        owner = _owner(w)
        record = warned.pop(key, None)
        if record is not None and record.dry_run != rules.dry_run:
            record = None  # warned under the other mode: warned again under this one
        if v.activity is Activity.UNKNOWN:
            if len(reasons) < MAX_REASONS:
                reasons.append(f"{key}: {v.reason}")
            if record is not None:
                out.records.append(record)  # the warning stands; nothing is reclaimed on unknown activity
            out._wake(v.idle_at, now)
            continue
        if v.activity is Activity.BUSY:
            if record is not None:
                out.actions.append(UnmarkIdle(key, owner, record.dry_run, f"busy again: {v.reason}"))
            out._wake(v.idle_at, now)
            continue
        extra, keep = keep_extension(rules, keep_of.get(key))
        if record is None:
            at = now
            reclaim = at + s.grace_s + extra
            record = IdleWorkload(workload=key, team=w.cluster_queue,
                                  idle_since=rfc3339(reading.measured_at - s.window_s) if reading else None,
                                  warned_at=rfc3339(at), at=at, reclaim_at=rfc3339(reclaim), keep=keep,
                                  dry_run=rules.dry_run)
            out.actions.append(MarkIdle(key, owner, reclaim, rules.dry_run, _warning(key, reclaim, rules),
                                        _why(v, keep)))
        else:
            at = record.at if record.at is not None else now
            reclaim = at + s.grace_s + extra
            if record.keep != keep or record.reclaim_at != rfc3339(reclaim):
                record = record.model_copy(update={"keep": keep, "reclaim_at": rfc3339(reclaim)})
                out.actions.append(MarkIdle(key, owner, reclaim, rules.dry_run, _warning(key, reclaim, rules),
                                            _why(v, keep)))
        if now < reclaim:
            out.records.append(record)
            out._wake(reclaim, now)
            continue
        started = w.run_start
        if started is not None and now - started < rules.min_runtime_s:
            out.records.append(record)
            out._wake(started + rules.min_runtime_s, now)
            continue
        if key in requested:
            out.records.append(record)
            continue
        reason = (f"GPUs idle: {v.reason}; warned at {record.warned_at}, still idle after the grace of "
                  f"{format_duration(s.grace_s)}" + (f" ({keep})" if keep else ""))
        if rules.dry_run:
            if not record.reported:
                out.requests.append(RequestEviction(key, None, reason, EvictionKind.IDLE, dry_run=True,
                                                    team=w.cluster_queue, lost=_lost(w, now)))
                record = record.model_copy(update={"reported": True})
            out.records.append(record)
            continue
        if rules.budget.remaining(past, now) <= 0:
            if not record.reported:
                out.actions.append(RecordAudit(
                    AuditAction.IDLE_BLOCKED, Target.workload(key), f"idle {key} not reclaimed yet",
                    f"the idle budget ({rules.budget.describe()}) is spent", also_on=Target.policy(policy)))
                record = record.model_copy(update={"reported": True})
            out.records.append(record)
            lo = [t for t in past if now - rules.budget.window < t <= now]
            out._wake(min(lo) + rules.budget.window if lo else None, now)
            continue
        past.append(now)
        out.requests.append(RequestEviction(key, None, reason, EvictionKind.IDLE, team=w.cluster_queue,
                                            lost=_lost(w, now)))
    # Warned workloads no longer candidates holding quota (finished, deleted, evicted by Kueue): forgotten;
    # one that still exists has its annotation removed (it no longer holds the GPUs it was warned for).
    for key, record in sorted(warned.items()):
        if key in evicting:
            continue
        if observed.exists(key) and not record.dry_run:
            pending = observed.pending.get(key)
            owner = _owner(pending.info) if pending is not None else None
            out.actions.append(UnmarkIdle(key, owner, record.dry_run, "it no longer holds quota"))
    out.telemetry = out.telemetry.model_copy(update={
        "idle": counts[Activity.IDLE], "busy": counts[Activity.BUSY], "unknown": counts[Activity.UNKNOWN],
        "unknown_reasons": reasons})
    return out


def _owner(w: WorkloadInfo) -> Target | None:
    wl = w.workload
    if wl.owner_kind is None or wl.owner_name is None:
        return None
    return Target(wl.owner_kind, wl.owner_name, wl.namespace)


def _warning(key: WorkloadKey, reclaim: float, rules: IdleRules) -> str:
    if rules.dry_run:
        return f"{key}'s GPUs are idle (dry-run: it would be reclaimed at {rfc3339(reclaim)})"
    return (f"{key}'s GPUs are idle: it is reclaimed at {rfc3339(reclaim)} unless busy again "
            f"(annotate it {KEEP_ANNOTATION}=DURATION to keep it longer)")


def _why(v: Verdict, keep: str | None) -> str:
    return v.reason + (f"; {keep}" if keep else "")


def _lost(w: WorkloadInfo, now: float) -> tuple[tuple[str, int], ...]:
    """Work the eviction loses (no checkpoints assumed): what it holds x how long it ran, milli-unit-hours,
    as the experiment gate counts it."""
    started = w.quota_reserved_time
    if started is None:
        return ()
    out: dict[str, int] = {}
    for fr, milli in w.usage.items():
        out[fr.resource] = out.get(fr.resource, 0) + round(milli * (now - started) / 3600)
    return tuple(sorted(out.items()))
