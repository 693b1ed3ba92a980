"""Scheduling-cycle cases (../shared/conformance/FORMAT.md): load, run one cycle, compare.

Extensions of the header (docs/core.md "Case format extensions"), so that states read from a
real Kueue between its cycles can be cases (the differential harness saves them):

- ``spec.parked: [ns/name, ...]``: pending workloads Kueue holds in its inadmissible lists (a
  BestEffortFIFO workload it tried and parked); they are not heads until a cohort event.
- An eviction in progress is a Workload with ``Evicted=True`` that still holds quota
  (``status.admission`` and ``QuotaReserved=True``), as Kueue shows it: it is charged, it is an
  "already evicted" preemption candidate (ordered first), and it is not preempted again.
- ``spec.cycles: UntilSettled`` runs cycles until nothing changes, with Kueue's timing between
  them (:mod:`fairshare.settle`); then ``expect.admitted`` lists every workload holding quota at
  the end, ``expect.preempted`` every workload evicted on the way (the reason of its last
  eviction), and ``expect.livelock`` (a list of workloads) says the cycles never settle.
  ``spec.timing`` (``requeueBatchPeriod``, a duration; ``releaseVictims``: Together | OneByOne |
  OneByOneLastFirst; ``requeueOnStatusChange``: true | false, see ``KueueTiming``) sets that timing.
- ``spec.expectedFailure: "reason"``: a known disagreement with Kueue, kept as Kueue behaves; the
  case passes as XFAIL while the model disagrees and FAILS (XPASS) once it agrees, so that the
  mark is removed.

Pure: reads files through :mod:`fairshare.manifests`, never the clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from .durations import seconds_of
from .errors import InputError, Location, QueueManagerError
from .manifests import StateBuilder, load_yaml_documents, parse_time
from .models import ClusterState, PreemptionReason, Workload, WorkloadKey
from .queues import schedule_pending
from .scheduler import (
    LESS_THAN_INITIAL_SHARE,
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    AdmissionFairSharingConfig,
    CycleResult,
    SchedulerConfig,
    schedule_cycle,
)
from .settle import KueueModel, KueueTiming
from .snapshot import Snapshot

CASE_API = "conformance.queuemanager.dev/v1"
CASE_KIND = "CycleCase"

ExpectedFlavors = dict[str, dict[str, str]] | None  # podSet -> resource -> flavor; None = don't check
ONE_CYCLE, UNTIL_SETTLED = "One", "UntilSettled"
RELEASE_TOGETHER, RELEASE_ONE_BY_ONE, RELEASE_LAST_FIRST = "Together", "OneByOne", "OneByOneLastFirst"


@dataclass(frozen=True)
class Case:
    name: str
    file: str
    now: float
    config: SchedulerConfig
    state: ClusterState
    source: str = ""
    expect_admitted: Mapping[WorkloadKey, ExpectedFlavors] = field(default_factory=dict)
    expect_preempted: Mapping[WorkloadKey, str] = field(default_factory=dict)
    cycles: str = ONE_CYCLE
    parked: tuple[WorkloadKey, ...] = ()
    timing: KueueTiming = field(default_factory=KueueTiming)
    expect_livelock: tuple[WorkloadKey, ...] | None = None
    expected_failure: str = ""


@dataclass(frozen=True)
class CaseResult:
    name: str
    file: str
    passed: bool
    message: str = ""
    result: CycleResult | None = None
    expected_failure: str = ""  # set: a known disagreement (passed means it still disagrees: XFAIL)


def parse_duration(text: object, *, loc: Location) -> float:
    """A duration ("10s", "1h30m", "168h"; fairshare.durations, the project's one grammar) or a
    non-negative number of seconds, in seconds."""
    try:
        return seconds_of(text, allow_number=True)
    except ValueError as err:
        raise InputError(str(err), location=loc, value=text) from None


def _as_map(value: object, loc: Location) -> dict[str, object]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError("must be a mapping", location=loc, value=value)
    return cast(dict[str, object], value)


def _reject_unknown(raw: Mapping[str, object], allowed: Sequence[str], loc: Location) -> None:
    """A misspelt key of the case header (``expext:``) would silently drop an expectation: refuse it."""
    unknown = sorted(str(k) for k in raw if k not in allowed)
    if unknown:
        field_ = f"{loc.field}.{unknown[0]}" if loc.field else unknown[0]
        raise InputError(
            f"unknown field (expected one of {', '.join(allowed)})",
            location=Location(loc.file, loc.document, field_),
        )


def parse_config(raw: Mapping[str, object], *, file: str, document: str) -> SchedulerConfig:
    """The case's ``spec.config`` (a subset of Kueue's Configuration)."""

    def loc(field_: str) -> Location:
        return Location(file, document, f"spec.config.{field_}")

    fair = "fairSharing" in raw
    strategies: tuple[str, ...] = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)
    fs = _as_map(raw.get("fairSharing"), loc("fairSharing"))
    _reject_unknown(fs, ("preemptionStrategies",), loc("fairSharing"))
    if fs.get("preemptionStrategies") is not None:
        lst = fs["preemptionStrategies"]
        allowed = (
            [LESS_THAN_OR_EQUAL_TO_FINAL_SHARE],
            [LESS_THAN_INITIAL_SHARE],
            [LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE],
        )
        if not isinstance(lst, list) or lst not in allowed:
            raise InputError(
                "must be [LessThanOrEqualToFinalShare], [LessThanInitialShare] or both in that order",
                location=loc("fairSharing.preemptionStrategies"),
                value=lst,
            )
        strategies = tuple(str(s) for s in lst)
    afs_cfg = None
    if "admissionFairSharing" in raw:
        afs = _as_map(raw.get("admissionFairSharing"), loc("admissionFairSharing"))
        _reject_unknown(
            afs,
            ("usageHalfLifeTime", "usageSamplingInterval", "resourceWeights"),
            loc("admissionFairSharing"),
        )
        weights = _as_map(afs.get("resourceWeights"), loc("admissionFairSharing.resourceWeights"))
        w: dict[str, float] = {}
        for k, v in weights.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf:
                # NaN fails both comparisons; an infinite weight would make every usage infinite.
                raise InputError(
                    "must be a finite non-negative number",
                    location=loc(f"admissionFairSharing.resourceWeights.{k}"),
                    value=v,
                )
            w[str(k)] = float(v)
        afs_cfg = AdmissionFairSharingConfig(
            usage_half_life_seconds=parse_duration(
                afs.get("usageHalfLifeTime", "0s"), loc=loc("admissionFairSharing.usageHalfLifeTime")
            ),
            usage_sampling_interval_seconds=parse_duration(
                afs.get("usageSamplingInterval", "5m"), loc=loc("admissionFairSharing.usageSamplingInterval")
            ),
            resource_weights=w,
        )
    unknown = sorted(set(raw) - {"fairSharing", "admissionFairSharing"})
    if unknown:
        raise InputError(f"unsupported: spec.config.{unknown[0]}", location=loc(unknown[0]))
    return SchedulerConfig(
        fair_sharing=fair, fair_sharing_strategies=strategies, admission_fair_sharing=afs_cfg
    )


def load_case(path: str | Path) -> Case:
    """Parse one case file (header + Kueue objects); InputError on anything invalid."""
    return load_case_documents(load_yaml_documents(path), file=str(path))


def load_case_documents(docs: Sequence[dict[str, object]], *, file: str) -> Case:
    """A case from documents already read (`qm explain -` reads them from stdin); `file` names them."""
    headers = [(i, d) for i, d in enumerate(docs) if d.get("kind") == CASE_KIND]
    if len(headers) != 1:
        raise InputError(
            f"a case file needs exactly one {CASE_KIND} document (found {len(headers)})",
            location=Location(file=file),
        )
    index, header = headers[0]
    meta = _as_map(header.get("metadata"), Location(file, f"document {index + 1} ({CASE_KIND})", "metadata"))
    name = meta.get("name")
    doc = f"document {index + 1} ({CASE_KIND} {name})"
    if header.get("apiVersion") != CASE_API:
        raise InputError(
            f"apiVersion must be {CASE_API}",
            location=Location(file, doc, "apiVersion"),
            value=header.get("apiVersion"),
        )
    name_loc = Location(file, doc, "metadata.name")
    if name is None or name == "":
        raise InputError("required field is missing (a sentence)", location=name_loc)
    if not isinstance(name, str):
        raise InputError("must be a string (a sentence)", location=name_loc, value=name)
    _reject_unknown(header, ("apiVersion", "kind", "metadata", "spec"), Location(file, doc))
    spec = _as_map(header.get("spec"), Location(file, doc, "spec"))
    _reject_unknown(
        spec,
        ("source", "now", "config", "expect", "cycles", "parked", "timing", "expectedFailure"),
        Location(file, doc, "spec"),
    )
    if spec.get("now") is None:
        raise InputError("required field is missing", location=Location(file, doc, "spec.now"))
    try:
        now = parse_time(spec["now"])
    except InputError as err:
        raise InputError(err.message, location=Location(file, doc, "spec.now"), value=err.value) from None
    config = parse_config(
        _as_map(spec.get("config"), Location(file, doc, "spec.config")), file=file, document=doc
    )
    expect = _as_map(spec.get("expect"), Location(file, doc, "spec.expect"))
    cycles = spec.get("cycles", ONE_CYCLE)
    if cycles not in (ONE_CYCLE, UNTIL_SETTLED):
        raise InputError(
            f"must be {ONE_CYCLE} or {UNTIL_SETTLED}",
            location=Location(file, doc, "spec.cycles"),
            value=cycles,
        )
    _reject_unknown(
        expect,
        ("admitted", "preempted", "livelock") if cycles == UNTIL_SETTLED else ("admitted", "preempted"),
        Location(file, doc, "spec.expect"),
    )
    admitted: dict[WorkloadKey, ExpectedFlavors] = {}
    for key, flv in _as_map(expect.get("admitted"), Location(file, doc, "spec.expect.admitted")).items():
        floc = Location(file, doc, f"spec.expect.admitted.{key}")
        if flv is None:
            admitted[key] = None
            continue
        per_ps: dict[str, dict[str, str]] = {}
        for ps, res in _as_map(flv, floc).items():
            per_ps[str(ps)] = {str(r): str(f) for r, f in _as_map(res, floc).items()}
        admitted[key] = per_ps
    preempted: dict[WorkloadKey, str] = {}
    reasons = {r.value for r in PreemptionReason}
    for key, reason in _as_map(expect.get("preempted"), Location(file, doc, "spec.expect.preempted")).items():
        if not isinstance(reason, str) or reason not in reasons:  # a list or map is unhashable
            raise InputError(
                f"reason must be one of {', '.join(sorted(reasons))}",
                location=Location(file, doc, f"spec.expect.preempted.{key}"),
                value=reason,
            )
        preempted[key] = str(reason)
    parked = _keys(spec.get("parked"), Location(file, doc, "spec.parked"))
    livelock = None
    if "livelock" in expect:
        livelock = _keys(expect.get("livelock"), Location(file, doc, "spec.expect.livelock"))
    tloc = Location(file, doc, "spec.timing")
    timing = _timing(_as_map(spec.get("timing"), tloc), tloc)
    xfail = spec.get("expectedFailure", "")
    if not isinstance(xfail, str):
        raise InputError(
            "must be a string (why the model disagrees)",
            location=Location(file, doc, "spec.expectedFailure"),
            value=xfail,
        )
    builder = StateBuilder()
    builder.add_documents(docs, file=file, skip_kinds=[CASE_KIND])
    state = builder.build()
    for key in parked:
        wl = state.workloads.get(key)
        if wl is None or wl.has_quota_reservation:
            raise InputError(
                "must name a pending workload defined in the file",
                location=Location(file, doc, "spec.parked"),
                value=key,
            )
    for key in [*admitted, *preempted, *(livelock or ())]:
        if key not in state.workloads:
            raise InputError(
                f"expected workload {key!r} is not defined in the file",
                location=Location(file, doc, "spec.expect"),
                value=key,
            )
    return Case(
        name=name,
        file=file,
        now=now,
        config=config,
        state=state,
        source=str(spec.get("source") or ""),
        expect_admitted=admitted,
        expect_preempted=preempted,
        cycles=str(cycles),
        parked=parked,
        timing=timing,
        expect_livelock=livelock,
        expected_failure=xfail,
    )


def _keys(raw: object, loc: Location) -> tuple[WorkloadKey, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(k, str) and "/" in k for k in raw):
        raise InputError("must be a list of workload keys (namespace/name)", location=loc, value=raw)
    return tuple(sorted(str(k) for k in raw))


def _timing(raw: Mapping[str, object], loc: Location) -> KueueTiming:
    """``spec.timing``: Kueue's asynchronous timing between cycles (UntilSettled cases)."""
    _reject_unknown(raw, ("requeueBatchPeriod", "releaseVictims", "requeueOnStatusChange"), loc)
    batch = KueueTiming().requeue_batch_seconds
    if "requeueBatchPeriod" in raw:
        batch = parse_duration(
            raw["requeueBatchPeriod"], loc=Location(loc.file, loc.document, f"{loc.field}.requeueBatchPeriod")
        )
    release = raw.get("releaseVictims", RELEASE_TOGETHER)
    if release not in (RELEASE_TOGETHER, RELEASE_ONE_BY_ONE, RELEASE_LAST_FIRST):
        raise InputError(
            f"must be {RELEASE_TOGETHER}, {RELEASE_ONE_BY_ONE} or {RELEASE_LAST_FIRST}",
            location=Location(loc.file, loc.document, f"{loc.field}.releaseVictims"),
            value=release,
        )
    on_status = raw.get("requeueOnStatusChange", False)
    if not isinstance(on_status, bool):
        raise InputError(
            "must be true or false",
            location=Location(loc.file, loc.document, f"{loc.field}.requeueOnStatusChange"),
            value=on_status,
        )
    return KueueTiming(
        requeue_batch_seconds=batch,
        release_victims_one_by_one=release in (RELEASE_ONE_BY_ONE, RELEASE_LAST_FIRST),
        release_victims_last_first=release == RELEASE_LAST_FIRST,
        requeue_on_status_change=on_status,
    )


def run_case(case: Case) -> CaseResult:
    """Run the case (one cycle, or cycles until settled) and compare with the expectation. With
    ``expectedFailure`` a disagreement passes (XFAIL) and an agreement fails (XPASS)."""
    if case.cycles == UNTIL_SETTLED:
        problems, result = _run_settled(case)
    else:
        if case.parked:
            snapshot = Snapshot.from_state(case.state)
            model = KueueModel.from_state(case.state, case.config, parked=case.parked)
            heads = model.queues.heads(case.now)
            result = schedule_cycle(snapshot, now=case.now, config=case.config, heads=heads)
        else:
            result = schedule_pending(Snapshot.from_state(case.state), now=case.now, config=case.config)
        problems = compare(case, result)
    if case.expected_failure:
        if problems:
            return CaseResult(case.name, case.file, True, "; ".join(problems), result, case.expected_failure)
        return CaseResult(
            case.name,
            case.file,
            False,
            f"expected to fail ({case.expected_failure}) but the model now agrees: "
            "remove spec.expectedFailure",
            result,
            case.expected_failure,
        )
    return CaseResult(case.name, case.file, not problems, "; ".join(problems), result)


def _run_settled(case: Case) -> tuple[list[str], CycleResult | None]:
    model = KueueModel.from_state(case.state, case.config, parked=case.parked, timing=case.timing)
    run = model.run(case.now)
    problems: list[str] = []
    if case.expect_livelock is not None:
        if run.livelock is None:
            problems.append(f"expected a preemption livelock of {', '.join(case.expect_livelock)}, got none")
        elif not set(case.expect_livelock) <= set(run.livelock.workloads):
            got_l, want_l = ", ".join(run.livelock.workloads), ", ".join(case.expect_livelock)
            problems.append(f"livelock of {got_l}, expected {want_l}")
        return problems, run.cycles[-1] if run.cycles else None
    if run.livelock is not None:
        problems.append(run.livelock.message())
        return problems, run.cycles[-1] if run.cycles else None
    got = model.admitted()
    want_keys, got_keys = set(case.expect_admitted), set(got)
    if want_keys - got_keys:
        problems.append("expected holding quota but not: " + ", ".join(sorted(want_keys - got_keys)))
    if got_keys - want_keys:
        problems.append("holding quota but not expected: " + ", ".join(sorted(got_keys - want_keys)))
    for key, want in sorted(case.expect_admitted.items()):
        if want is None or key not in got:
            continue
        for ps, res in sorted(want.items()):
            for r, f in sorted(res.items()):
                actual = got[key].get(ps, {}).get(r)
                if actual != f:
                    problems.append(f"{key} pod set {ps} resource {r}: expected flavor {f}, got {actual}")
    last: dict[str, str] = {}
    for p in run.evictions:
        last[p.victim] = p.reason.value
    if last != dict(case.expect_preempted):
        want_s = ", ".join(f"{k}: {v}" for k, v in sorted(case.expect_preempted.items())) or "none"
        got_s = ", ".join(f"{k}: {v}" for k, v in sorted(last.items())) or "none"
        problems.append(f"preempted: expected {{{want_s}}}, got {{{got_s}}}")
    return problems, run.cycles[-1] if run.cycles else None


def compare(case: Case, result: CycleResult) -> list[str]:
    problems: list[str] = []
    got = {a.key: a.flavors for a in result.admissions}
    missing = sorted(set(case.expect_admitted) - set(got))
    extra = sorted(set(got) - set(case.expect_admitted))
    if missing:
        reasons = []
        for k in missing:
            o = result.outcome(k)
            reasons.append(f"{k} ({o.reason})" if o is not None else f"{k} (not a head this cycle)")
        problems.append("expected admitted but not: " + ", ".join(reasons))
    if extra:
        problems.append("admitted but not expected: " + ", ".join(extra))
    for key, want in sorted(case.expect_admitted.items()):
        if want is None or key not in got:
            continue
        have = got[key]
        for ps, res in sorted(want.items()):
            for r, f in sorted(res.items()):
                actual = have.get(ps, {}).get(r)
                if actual != f:
                    problems.append(f"{key} pod set {ps} resource {r}: expected flavor {f}, got {actual}")
    # A target already being evicted is not a new preemption: Kueue counts it and issues nothing
    # (pkg/scheduler/preemption/preemption.go IssuePreemptions, "Preemption ongoing").
    ongoing = {k for k, w in case.state.workloads.items() if w.has_quota_reservation and _evicted(w)}
    got_p = {p.victim: p.reason.value for p in result.preemptions if p.victim not in ongoing}
    if got_p != dict(case.expect_preempted):
        want_s = ", ".join(f"{k}: {v}" for k, v in sorted(case.expect_preempted.items())) or "none"
        got_s = ", ".join(f"{k}: {v}" for k, v in sorted(got_p.items())) or "none"
        problems.append(f"preempted: expected {{{want_s}}}, got {{{got_s}}}")
    return problems


def _evicted(wl: Workload) -> bool:
    cond = wl.condition("Evicted")
    return cond is not None and cond.status


def case_files(paths: Sequence[str | Path]) -> list[Path]:
    """Every .yaml/.yml file under the paths (directories recursively), sorted; missing paths kept
    (they become failed cases)."""
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = sorted(f for f in path.rglob("*") if f.suffix in (".yaml", ".yml") and f.is_file())
            if not found:  # a mistyped directory must not pass as "0 passed, 0 failed"
                raise InputError(
                    "no case files (*.yaml, *.yml) in this directory", location=Location(file=str(p))
                )
            out.extend(found)
        else:
            out.append(path)
    return out


def run_paths(paths: Sequence[str | Path]) -> list[CaseResult]:
    """Run every case under the paths; an unreadable or invalid file is a failed case."""
    results = []
    for f in case_files(paths):
        results.append(run_file(f))
    return results


def run_file(path: str | Path) -> CaseResult:
    try:
        case = load_case(path)
    except QueueManagerError as err:
        return CaseResult(str(path), str(path), False, str(err))
    try:
        return run_case(case)
    except QueueManagerError as err:
        return CaseResult(case.name, case.file, False, str(err))


def summary_lines(results: Iterable[CaseResult]) -> list[str]:
    lines = []
    passed = failed = 0
    for r in results:
        if r.passed and r.expected_failure:
            passed += 1
            lines.append(f"XFAIL {r.name}: {r.expected_failure} ({r.message})")
        elif r.passed:
            passed += 1
            lines.append(f"PASS {r.name}")
        else:
            failed += 1
            lines.append(f"FAIL {r.name}: {r.message}")
    lines.append(f"{passed} passed, {failed} failed")
    return lines
