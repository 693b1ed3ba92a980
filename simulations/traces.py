"""Trace importers: openb (Alibaba 2023), ITP (Microsoft 2021), SWF, and generic CSV.

Each importer yields `TraceJob`s (submit time, run time, GPUs in milli-units, the
columns a queue rule may read); `import_trace` then applies the scenario's time
scale, queue-assignment rule and priority mapping and returns JobSpecs plus an
`ImportReport`: rows read, skipped (by reason) and kept, and exact totals (jobs and
GPU-milli-seconds as ints) so replays can be checked against the published figures. A
malformed row is an error naming file, line, column and value, never a silent drop. File formats:
the traces' own READMEs (vendored under tests/) and
https://www.cs.huji.ac.il/labs/parallel/workload/swf.html (SWF v2, 18 fields).
"""

from __future__ import annotations

import csv
import glob
import math
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from fairshare.errors import InputError, Location
from fairshare.quantity import parse_quantity

from .jobs import JobSpec
from .scenario import QueueRule, TraceSpec, WorkloadSource

_MILLI = 1000
# SWF v2 field positions (0-based): the fields a replay needs.
_SWF_FIELDS = (
    "job",
    "submit",
    "wait",
    "runtime",
    "procs",
    "cpu",
    "mem",
    "req_procs",
    "req_time",
    "req_mem",
    "status",
    "user",
    "group",
    "executable",
    "queue",
    "partition",
    "preceding",
    "think",
)
_SWF_ATTRS = ("user", "group", "queue", "partition", "executable", "status")
_OPENB_ATTRS = ("qos", "gpu_spec", "pod_phase")
# A CSV line longer than this is not a trace row (the csv module's own field limit is 128 KiB).
_MAX_LINE = 1024 * 1024


@dataclass(frozen=True, slots=True)
class TraceJob:
    id: str
    submit: float
    duration: float
    gpu_milli: int
    attrs: dict[str, str]
    exact_gpu_milli_seconds: int  # duration (integer seconds in the file) x GPUs, exactly


class SkipReason(StrEnum):
    """Why a row of a trace is not replayed (a closed set: each is counted in the ImportReport)."""

    NEVER_SCHEDULED = "never scheduled"  # openb: no scheduled_time (the pod never ran)
    UNKNOWN_SIZE = "unknown run time or size"  # SWF: -1 in the run time or both processor fields
    NO_GPU = "requests no GPU"
    NO_QUEUE = "no queue for the job"  # the queue rule maps the job nowhere
    BEYOND_LIMIT = "beyond trace.limit"


@dataclass
class ImportReport:
    """What one import read, skipped (by reason) and kept; exact totals of the jobs the files hold.

    `rows` counts data rows (not headers, comments or blank lines); `jobs` the rows that are jobs
    (rows minus the rows skipped while reading); `kept` the JobSpecs `import_trace` returns.
    """

    files: list[str] = field(default_factory=list)
    rows: int = 0
    jobs: int = 0
    kept: int = 0
    gpu_milli_seconds: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def gpu_hours(self) -> float:
        return self.gpu_milli_seconds / _MILLI / 3600.0

    def skip(self, reason: SkipReason) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1

    def summary_line(self, source: str) -> str:
        """One line for the runner to print: `trace itp: 1,000 rows read, 40 skipped (...), 960 kept`."""
        skipped = sum(self.skipped.values())
        ordered = sorted(self.skipped.items(), key=lambda kv: (-kv[1], kv[0]))
        reasons = ", ".join(f"{n:,} {r}" for r, n in ordered)
        files = f"{len(self.files)} file{'s' if len(self.files) != 1 else ''}"
        return (f"trace {source}: {self.rows:,} rows read from {files}, {skipped:,} skipped"
                + (f" ({reasons})" if reasons else "") + f", {self.kept:,} kept")


def _bad(path: str, line: int, message: str, value: object) -> InputError:
    return InputError(
        message, location=Location(file=path, document=f"line {line}"), value=value, has_value=True
    )


def _int(text: str, path: str, line: int, column: str, *, minimum: int = 0) -> int:
    try:
        value = int(text)
    except ValueError:
        raise _bad(path, line, f"column {column} is not an integer", text) from None
    if value < minimum:
        raise _bad(path, line, f"column {column} must be >= {minimum}", text)
    return value


def _seconds(text: str, path: str, line: int, column: str) -> float:
    """A time or a duration in seconds: a finite number >= 0 (`inf`, `nan` and `-600` are not)."""
    try:
        value = float(text)
    except ValueError:
        raise _bad(path, line, f"column {column} is not a number", text) from None
    if not math.isfinite(value):
        raise _bad(path, line, f"column {column} must be a finite number of seconds", text)
    if value < 0:
        raise _bad(path, line, f"column {column} must be >= 0 seconds", text)
    return value


def _exact_milli_seconds(duration_text: str, gpu_milli: int) -> int:
    """GPU-milli-seconds exactly when the duration is an integer; else rounded to the nearest."""
    try:
        return int(duration_text) * gpu_milli
    except ValueError:
        return round(float(duration_text) * gpu_milli)


class _Lines:
    """A trace file's lines, decoded one by one, so that a bad byte names its line (the csv module and
    a text-mode file would raise UnicodeDecodeError or "line contains NUL" with no position)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.number = 0

    def __iter__(self) -> Iterator[str]:
        try:
            handle = open(self.path, "rb")  # noqa: SIM115 - closed by the with below
        except OSError as err:
            raise InputError(f"cannot read trace: {err.strerror}",
                             location=Location(file=self.path)) from None
        with handle:
            while True:
                raw = handle.readline(_MAX_LINE + 1)
                if not raw:
                    return
                self.number += 1
                if len(raw) > _MAX_LINE:
                    raise _bad(self.path, self.number, f"a line longer than {_MAX_LINE:,} bytes", raw[:40])
                if b"\x00" in raw:
                    raise InputError("binary data, not a text trace (a NUL byte)",
                                     location=Location(file=self.path, document=f"line {self.number}"))
                try:
                    yield raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    raise InputError(
                        f"not UTF-8 text (byte 0x{raw[err.start]:02x} at column {err.start + 1})",
                        location=Location(file=self.path, document=f"line {self.number}")) from None


def _rows(path: str, required: tuple[str, ...], report: ImportReport) -> Iterator[tuple[int, dict[str, str]]]:
    """(line, row) of a CSV trace with a header; every row has exactly the header's fields."""
    lines = _Lines(path)
    reader = csv.reader(lines, strict=True)
    try:
        header = next(reader, None)
        if header is None:
            raise InputError("the trace is empty (no header line)", location=Location(file=path))
        missing = [c for c in required if c not in header]
        if missing:
            raise InputError(f"trace has no column(s) {', '.join(missing)}", location=Location(file=path),
                             value=header, has_value=True)
        rows = 0
        for fields in reader:
            if not fields:  # a blank line
                continue
            rows += 1
            report.rows += 1
            if len(fields) != len(header):
                absent = header[len(fields):]
                detail = f"; column {absent[0]} is missing" if absent else ""
                raise _bad(path, lines.number, f"the row has {len(fields)} fields, the header "
                           f"{len(header)}{detail}", ",".join(fields)[:200])
            yield lines.number, dict(zip(header, fields, strict=True))
        if rows == 0:
            raise InputError("the trace has a header but no rows", location=Location(file=path))
    except csv.Error as err:
        # "unexpected end of data" (an unterminated quote), "field larger than field limit (131072)"...
        raise InputError(f"not a CSV trace: {err}",
                         location=Location(file=path, document=f"line {lines.number}")) from None


def read_itp(path: str, stats: ImportReport) -> Iterator[TraceJob]:
    for line, row in _rows(path, ("job_id", "submission_time", "duration", "num_gpu"), stats):
        gpus = _int(row["num_gpu"], path, line, "num_gpu")
        dur = row["duration"]
        duration = _seconds(dur, path, line, "duration")
        submit = _seconds(row["submission_time"], path, line, "submission_time")
        exact = _exact_milli_seconds(dur, gpus * _MILLI)
        stats.jobs += 1
        stats.gpu_milli_seconds += exact
        yield TraceJob(row["job_id"], submit, duration, gpus * _MILLI, {}, exact)


def read_openb(path: str, stats: ImportReport) -> Iterator[TraceJob]:
    """openb pods: GPUs = num_gpu x gpu_milli (share of one GPU); run time = deletion - scheduled."""
    cols = ("name", "num_gpu", "gpu_milli", "qos", "creation_time", "deletion_time", "scheduled_time")
    for line, row in _rows(path, cols, stats):
        if not row["scheduled_time"]:
            stats.skip(SkipReason.NEVER_SCHEDULED)
            continue
        num = _int(row["num_gpu"], path, line, "num_gpu")
        share = _int(row["gpu_milli"], path, line, "gpu_milli") if row["gpu_milli"] else 0
        gpu_milli = num * share
        start = _int(row["scheduled_time"], path, line, "scheduled_time")
        end = _int(row["deletion_time"], path, line, "deletion_time")
        if end < start:
            raise _bad(path, line, "column deletion_time is before scheduled_time", row["deletion_time"])
        duration = end - start
        created = _int(row["creation_time"], path, line, "creation_time")
        stats.jobs += 1
        stats.gpu_milli_seconds += duration * gpu_milli
        attrs = {name: row.get(name, "") for name in _OPENB_ATTRS}
        yield TraceJob(row["name"], float(created), float(duration), gpu_milli, attrs, duration * gpu_milli)


def read_swf(path: str, stats: ImportReport) -> Iterator[TraceJob]:
    """SWF v2: submit (2), run time (4), allocated processors (5, else requested 8); -1 = unknown."""
    lines = _Lines(path)
    records = 0
    for text in lines:
        line = lines.number
        text = text.strip()
        if not text or text.startswith(";"):
            continue
        records += 1
        stats.rows += 1
        parts = text.split()
        if len(parts) != len(_SWF_FIELDS):
            raise _bad(path, line, f"an SWF record has {len(_SWF_FIELDS)} fields", len(parts))
        rec = dict(zip(_SWF_FIELDS, parts, strict=True))
        runtime = _int(rec["runtime"], path, line, "run time", minimum=-1)
        procs = _int(rec["procs"], path, line, "allocated processors", minimum=-1)
        if procs <= 0:
            procs = _int(rec["req_procs"], path, line, "requested processors", minimum=-1)
        if runtime < 0 or procs <= 0:
            stats.skip(SkipReason.UNKNOWN_SIZE)
            continue
        submit = _int(rec["submit"], path, line, "submit time")
        stats.jobs += 1
        stats.gpu_milli_seconds += runtime * procs * _MILLI
        attrs = {k: rec[k] for k in _SWF_ATTRS}
        yield TraceJob(rec["job"], float(submit), float(runtime), procs * _MILLI, attrs,
                       runtime * procs * _MILLI)
    if records == 0:
        why = " (only comments)" if lines.number else " (the file is empty)"
        raise InputError(f"the trace has no SWF records{why}", location=Location(file=path))


def read_csv(path: str, spec: TraceSpec, stats: ImportReport) -> Iterator[TraceJob]:
    cols = spec.columns
    if cols is None:  # pragma: no cover - the schema requires columns for csv
        raise InputError("format csv needs columns", location=Location(field="trace.columns"))
    required = tuple(c for c in (cols.id, cols.submit, cols.duration, cols.gpus, cols.priority) if c)
    rule_column = spec.queues.column if spec.queues.rule == "column" else None
    if rule_column:
        required += (rule_column,)
    try:
        for line, row in _rows(path, required, stats):
            gpu_milli = parse_gpus(row[cols.gpus], path, line, cols.gpus)
            dur = row[cols.duration]
            duration = _seconds(dur, path, line, cols.duration)
            submit = _seconds(row[cols.submit], path, line, cols.submit)
            exact = _exact_milli_seconds(dur, gpu_milli)
            stats.jobs += 1
            stats.gpu_milli_seconds += exact
            job_id = row[cols.id] if cols.id else str(line - 1)
            yield TraceJob(job_id, submit, duration, gpu_milli, dict(row), exact)
    except InputError as err:
        if rule_column and err.message.startswith("trace has no column(s)") and rule_column in err.message:
            raise _missing_rule_column(path, rule_column, err.value) from None
        raise


def _missing_rule_column(path: str, column: str, header: object) -> InputError:
    return InputError(f"queues.column names a column the trace does not have ({column!r}); it has: "
                      f"{', '.join(str(h) for h in header) if isinstance(header, list) else header}",
                      location=Location(file=path, field="trace.queues.column"), value=column)


def parse_gpus(text: str, path: str, line: int, column: str) -> int:
    try:
        value = parse_quantity(text)
    except InputError:
        raise _bad(path, line, f"column {column} is not a quantity", text) from None
    if value < 0:
        raise _bad(path, line, f"column {column} must be >= 0", text)
    return value


def assign_queue(rule: QueueRule, job: TraceJob) -> str | None:
    """The LocalQueue ("namespace/name") of a trace job under the scenario's rule (None: unmapped)."""
    if rule.rule == "single":
        return rule.local_queue
    if rule.rule == "hash":
        # crc32: stable across runs and Python versions (unlike hash()).
        return rule.local_queues[zlib.crc32(job.id.encode()) % len(rule.local_queues)]
    if rule.rule == "column":
        value = job.attrs.get(rule.column or "", "")
        return rule.map.get(value, rule.default)
    for size in rule.sizes:
        if job.gpu_milli <= size.max_gpus * _MILLI:
            return size.local_queue
    return None


def expand_paths(spec: TraceSpec, base_dir: Path) -> list[str]:
    """The files of `trace.paths` (globs, relative to the scenario's folder); each pattern must match."""
    out: list[str] = []
    for pattern in spec.paths:
        full = pattern if Path(pattern).is_absolute() else str(base_dir / pattern)
        matches = sorted(glob.glob(full))
        if not matches:
            raise InputError("no trace file matches", location=Location(field="trace.paths"), value=pattern)
        out.extend(matches)
    return out


def read_trace(spec: TraceSpec, base_dir: Path) -> tuple[list[TraceJob], ImportReport]:
    """Every job of the files, exact totals in the report (no time shift, no assignment)."""
    stats = ImportReport()
    jobs: list[TraceJob] = []
    for path in expand_paths(spec, base_dir):
        stats.files.append(path)
        if spec.format == "itp":
            jobs.extend(read_itp(path, stats))
        elif spec.format == "openb":
            jobs.extend(read_openb(path, stats))
        elif spec.format == "swf":
            jobs.extend(read_swf(path, stats))
        else:
            jobs.extend(read_csv(path, spec, stats))
    return jobs, stats


# The columns a queue rule can read in each fixed format (csv: every column of the file).
_RULE_COLUMNS = {"itp": (), "openb": _OPENB_ATTRS, "swf": _SWF_ATTRS}


def _check_rule(spec: TraceSpec) -> None:
    """The queue rule must be able to work: `rule: column` on a column the format has, and every
    LocalQueue written namespace/name (else every job would silently go to the default, or nowhere)."""
    rule = spec.queues
    fixed = _RULE_COLUMNS.get(spec.format)
    if rule.rule == "column" and fixed is not None and rule.column not in fixed:
        have = ", ".join(fixed) or "none"
        raise InputError(f"format {spec.format} has no column {rule.column!r} to assign queues by (columns a "
                         f"rule can read: {have})", location=Location(field="trace.queues.column"),
                         value=rule.column)
    named: list[tuple[str, str | None]] = [("localQueue", rule.local_queue), ("default", rule.default)]
    named += [(f"localQueues[{i}]", q) for i, q in enumerate(rule.local_queues)]
    named += [(f"map[{k!r}]", q) for k, q in rule.map.items()]
    named += [(f"sizes[{i}].localQueue", s.local_queue) for i, s in enumerate(rule.sizes)]
    for where, queue in named:
        if queue is not None and (queue.count("/") != 1 or not all(queue.split("/"))):
            raise InputError("a LocalQueue is written namespace/name", location=Location(
                field=f"trace.queues.{where}"), value=queue)


def import_trace(source: WorkloadSource, base_dir: Path) -> tuple[list[JobSpec], ImportReport]:
    """JobSpecs of a trace source, by submission time (stable), after scaling and assignment; the report
    says how many rows were read, skipped (by reason) and kept."""
    spec = source.trace
    if spec is None:  # pragma: no cover - the caller checks
        raise ValueError("not a trace source")
    _check_rule(spec)
    jobs, stats = read_trace(spec, base_dir)
    jobs.sort(key=lambda j: j.submit)  # sort is stable: file order breaks ties
    if spec.limit is not None and len(jobs) > spec.limit:
        for _ in range(len(jobs) - spec.limit):
            stats.skip(SkipReason.BEYOND_LIMIT)
        jobs = jobs[: spec.limit]
    offset = jobs[0].submit if jobs and spec.align_start else 0.0
    extra = tuple((r, parse_quantity(q)) for r, q in spec.per_gpu.items())
    priority_column = "qos" if spec.format == "openb" else (spec.columns.priority if spec.columns else None)
    out: list[JobSpec] = []
    for i, job in enumerate(jobs):
        if job.gpu_milli <= 0:
            stats.skip(SkipReason.NO_GPU)
            continue
        queue = assign_queue(spec.queues, job)
        if queue is None:
            stats.skip(SkipReason.NO_QUEUE)
            continue
        namespace, lq = queue.split("/", 1)
        requests = {spec.resource: job.gpu_milli}
        for resource, per in extra:
            requests[resource] = requests.get(resource, 0) + per * job.gpu_milli // _MILLI
        pc = spec.priority_class
        if priority_column is not None and spec.priority_map:
            pc = spec.priority_map.get(job.attrs.get(priority_column, ""), pc)
        out.append(
            JobSpec(
                name=f"{source.name}-{i:07d}",
                namespace=namespace,
                local_queue=lq,
                arrival=(job.submit - offset) * spec.time_scale,
                duration=job.duration * spec.time_scale,
                count=1,
                requests=tuple(sorted(requests.items())),
                priority_class=pc,
                source=source.name,
            )
        )
    stats.kept = len(out)
    return out, stats


# ---------------------------------------------------------------- jobs that can never fit


@dataclass(frozen=True)
class Oversized:
    """The largest request of a queue's jobs that can never be admitted, against the queue's limit."""

    local_queue: str  # namespace/name
    resource: str
    request: int  # milli-units, the whole job (pods x per-pod request)
    limit: int  # the most this queue can ever be admitted with (milli-units)


@dataclass(frozen=True)
class NeverFit:
    """Jobs that request more than their LocalQueue can ever be admitted with (so they wait forever)."""

    jobs: int
    total: int
    gpu_milli_seconds: int  # the work they hold (requests x duration)
    largest: Oversized | None


def never_fit(jobs: Iterable[JobSpec], limits: Mapping[str, Mapping[str, int]]) -> NeverFit:
    """Count the jobs whose request exceeds what their LocalQueue can ever be admitted with.

    `limits`: "namespace/name" -> resource -> milli-units, the most a workload of that queue can hold
    (its ClusterQueue's nominal quota plus what it may borrow from its cohort: Kueue never admits a
    workload beyond that, `pkg/scheduler/flavorassigner`'s "insufficient quota" for every flavor). A
    resource a queue has no quota for has limit 0. Pure: the caller computes the limits from its model.
    """
    count = total = held = 0
    largest: Oversized | None = None
    for job in jobs:
        total += 1
        queue = f"{job.namespace}/{job.local_queue}"
        limit = limits.get(queue, {})
        worst: Oversized | None = None
        for resource, per_pod in job.requests:
            request = per_pod * job.count
            cap = limit.get(resource, 0)
            if request > cap and (worst is None or request - cap > worst.request - worst.limit):
                worst = Oversized(queue, resource, request, cap)
        if worst is None:
            continue
        count += 1
        held += round(dict(job.requests).get(worst.resource, 0) * job.count * job.duration)
        if largest is None or (worst.request, worst.local_queue) > (largest.request, largest.local_queue):
            largest = worst
    return NeverFit(count, total, held, largest)


def never_fit_warning(source: str, found: NeverFit) -> str | None:
    """The one warning line for jobs that can never fit (None when every job can); the caller prints it
    and still exits 0: the replay is valid, those jobs wait for ever and count as never admitted."""
    if found.jobs == 0 or found.largest is None:
        return None
    big = found.largest
    share = 100.0 * found.jobs / found.total if found.total else 0.0
    return (f"warning: trace {source}: {found.jobs:,} of {found.total:,} jobs ({share:.1f}%) can never be "
            f"admitted: they request more than their queue can ever hold (largest: "
            f"{format_milli(big.request)} {big.resource} in {big.local_queue}, which can hold at most "
            f"{format_milli(big.limit)})")


def format_milli(value: int) -> str:
    """Milli-units as a person writes them: 16, 0.5, 1.25 (not 16000m)."""
    whole, rest = divmod(value, _MILLI)
    return f"{whole:,}" if rest == 0 else f"{value / _MILLI:,.3f}".rstrip("0")
