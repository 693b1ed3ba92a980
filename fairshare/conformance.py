"""Scheduling-cycle cases (../shared/conformance/FORMAT.md): load, run one cycle, compare.

Pure: reads files through :mod:`fairshare.manifests`, never the clock.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from .errors import InputError, Location, QueueManagerError
from .manifests import StateBuilder, load_yaml_documents, parse_time
from .models import ClusterState, PreemptionReason, WorkloadKey
from .queues import schedule_pending
from .scheduler import (
    LESS_THAN_INITIAL_SHARE,
    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    AdmissionFairSharingConfig,
    CycleResult,
    SchedulerConfig,
)
from .snapshot import Snapshot

CASE_API = "conformance.queuemanager.dev/v1"
CASE_KIND = "CycleCase"
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}

ExpectedFlavors = dict[str, dict[str, str]] | None  # podSet -> resource -> flavor; None = don't check


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


@dataclass(frozen=True)
class CaseResult:
    name: str
    file: str
    passed: bool
    message: str = ""
    result: CycleResult | None = None


def parse_duration(text: object, *, loc: Location) -> float:
    """A Go duration ("10s", "1h30m", "168h") in seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if not 0 <= text < math.inf:
            raise InputError("not a duration: must be a finite non-negative number of seconds", location=loc,
                             value=text)
        return float(text)
    if not isinstance(text, str) or not text:
        raise InputError("not a duration", location=loc, value=text)
    pos = 0
    total = 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if pos != len(text) or not math.isfinite(total):
        raise InputError("not a duration (e.g. 10s, 5m, 168h)", location=loc, value=text)
    return total


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
    file = str(path)
    docs = load_yaml_documents(path)
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
    _reject_unknown(spec, ("source", "now", "config", "expect"), Location(file, doc, "spec"))
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
    _reject_unknown(expect, ("admitted", "preempted"), Location(file, doc, "spec.expect"))
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
    builder = StateBuilder()
    builder.add_documents(docs, file=file, skip_kinds=[CASE_KIND])
    state = builder.build()
    for key in [*admitted, *preempted]:
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
    )


def run_case(case: Case) -> CaseResult:
    """Run one cycle from the case's state and compare with the expectation."""
    snapshot = Snapshot.from_state(case.state)
    result = schedule_pending(snapshot, now=case.now, config=case.config)
    problems = compare(case, result)
    return CaseResult(case.name, case.file, not problems, "; ".join(problems), result)


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
    got_p = {p.victim: p.reason.value for p in result.preemptions}
    if got_p != dict(case.expect_preempted):
        want_s = ", ".join(f"{k}: {v}" for k, v in sorted(case.expect_preempted.items())) or "none"
        got_s = ", ".join(f"{k}: {v}" for k, v in sorted(got_p.items())) or "none"
        problems.append(f"preempted: expected {{{want_s}}}, got {{{got_s}}}")
    return problems


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
        if r.passed:
            passed += 1
            lines.append(f"PASS {r.name}")
        else:
            failed += 1
            lines.append(f"FAIL {r.name}: {r.message}")
    lines.append(f"{passed} passed, {failed} failed")
    return lines
