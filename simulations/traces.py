"""Trace importers: openb (Alibaba 2023), ITP (Microsoft 2021), SWF, and generic CSV.

Each importer yields `TraceJob`s (submit time, run time, GPUs in milli-units, the
columns a queue rule may read); `import_trace` then applies the scenario's time
scale, queue-assignment rule and priority mapping and returns JobSpecs plus exact
totals (jobs and GPU-milli-seconds as ints) so replays can be checked against the
published figures. File formats: /work/shared/traces/README.md and
https://www.cs.huji.ac.il/labs/parallel/workload/swf.html (SWF v2, 18 fields).
"""

from __future__ import annotations

import csv
import glob
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
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


@dataclass(frozen=True, slots=True)
class TraceJob:
    id: str
    submit: float
    duration: float
    gpu_milli: int
    attrs: dict[str, str]
    exact_gpu_milli_seconds: int  # duration (integer seconds in the file) x GPUs, exactly


@dataclass
class ImportStats:
    """Exact totals of one import, before queue assignment (what the file holds)."""

    files: list[str] = field(default_factory=list)
    jobs: int = 0
    gpu_milli_seconds: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def gpu_hours(self) -> float:
        return self.gpu_milli_seconds / _MILLI / 3600.0

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def _bad(path: str, line: int, message: str, value: object) -> InputError:
    return InputError(
        message, location=Location(file=path, document=f"line {line}"), value=value, has_value=True
    )


def _int(text: str, path: str, line: int, column: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise _bad(path, line, f"column {column} is not an integer", text) from None


def _num(text: str, path: str, line: int, column: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise _bad(path, line, f"column {column} is not a number", text) from None


def _exact_milli_seconds(duration_text: str, gpu_milli: int) -> int:
    """GPU-milli-seconds exactly when the duration is an integer; else rounded to the nearest."""
    try:
        return int(duration_text) * gpu_milli
    except ValueError:
        return round(float(duration_text) * gpu_milli)


def _rows(path: str, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    try:
        handle = open(path, newline="", encoding="utf-8")  # noqa: SIM115 - closed by the with below
    except OSError as err:
        raise InputError(f"cannot read trace: {err.strerror}", location=Location(file=path)) from None
    with handle:
        reader = csv.DictReader(handle)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(
                f"trace has no column(s) {', '.join(missing)}",
                location=Location(file=path),
                value=reader.fieldnames,
                has_value=True,
            )
        yield from enumerate(reader, start=2)


def read_itp(path: str, stats: ImportStats) -> Iterator[TraceJob]:
    for line, row in _rows(path, ("job_id", "submission_time", "duration", "num_gpu")):
        gpus = _int(row["num_gpu"], path, line, "num_gpu")
        dur = row["duration"]
        exact = _exact_milli_seconds(dur, gpus * _MILLI)
        stats.jobs += 1
        stats.gpu_milli_seconds += exact
        yield TraceJob(
            row["job_id"],
            _num(row["submission_time"], path, line, "submission_time"),
            _num(dur, path, line, "duration"),
            gpus * _MILLI,
            {},
            exact,
        )


def read_openb(path: str, stats: ImportStats) -> Iterator[TraceJob]:
    """openb pods: GPUs = num_gpu x gpu_milli (share of one GPU); run time = deletion - scheduled."""
    cols = ("name", "num_gpu", "gpu_milli", "qos", "creation_time", "deletion_time", "scheduled_time")
    for line, row in _rows(path, cols):
        if not row["scheduled_time"]:
            stats.skip("never scheduled")
            continue
        num = _int(row["num_gpu"], path, line, "num_gpu")
        share = _int(row["gpu_milli"], path, line, "gpu_milli") if row["gpu_milli"] else 0
        gpu_milli = num * share
        start = _int(row["scheduled_time"], path, line, "scheduled_time")
        end = _int(row["deletion_time"], path, line, "deletion_time")
        duration = end - start
        stats.jobs += 1
        stats.gpu_milli_seconds += duration * gpu_milli
        attrs = {
            "qos": row["qos"],
            "gpu_spec": row.get("gpu_spec", ""),
            "pod_phase": row.get("pod_phase", ""),
        }
        yield TraceJob(
            row["name"],
            float(_int(row["creation_time"], path, line, "creation_time")),
            float(duration),
            gpu_milli,
            attrs,
            duration * gpu_milli,
        )


def read_swf(path: str, stats: ImportStats) -> Iterator[TraceJob]:
    """SWF v2: submit (2), run time (4), allocated processors (5, else requested 8); -1 = unknown."""
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115 - closed by the with below
    except OSError as err:
        raise InputError(f"cannot read trace: {err.strerror}", location=Location(file=path)) from None
    with handle:
        for line, text in enumerate(handle, start=1):
            text = text.strip()
            if not text or text.startswith(";"):
                continue
            parts = text.split()
            if len(parts) != len(_SWF_FIELDS):
                raise _bad(path, line, f"an SWF record has {len(_SWF_FIELDS)} fields", len(parts))
            rec = dict(zip(_SWF_FIELDS, parts, strict=True))
            runtime = _int(rec["runtime"], path, line, "run time")
            procs = _int(rec["procs"], path, line, "allocated processors")
            if procs <= 0:
                procs = _int(rec["req_procs"], path, line, "requested processors")
            if runtime < 0 or procs <= 0:
                stats.skip("unknown run time or size")
                continue
            stats.jobs += 1
            stats.gpu_milli_seconds += runtime * procs * _MILLI
            attrs = {k: rec[k] for k in ("user", "group", "queue", "partition", "executable", "status")}
            yield TraceJob(
                rec["job"],
                float(_int(rec["submit"], path, line, "submit time")),
                float(runtime),
                procs * _MILLI,
                attrs,
                runtime * procs * _MILLI,
            )


def read_csv(path: str, spec: TraceSpec, stats: ImportStats) -> Iterator[TraceJob]:
    cols = spec.columns
    if cols is None:  # pragma: no cover - the schema requires columns for csv
        raise InputError("format csv needs columns", location=Location(field="trace.columns"))
    required = tuple(c for c in (cols.id, cols.submit, cols.duration, cols.gpus, cols.priority) if c)
    for line, row in _rows(path, required):
        gpu_milli = parse_gpus(row[cols.gpus], path, line, cols.gpus)
        dur = row[cols.duration]
        exact = _exact_milli_seconds(dur, gpu_milli)
        stats.jobs += 1
        stats.gpu_milli_seconds += exact
        job_id = row[cols.id] if cols.id else str(line - 1)
        yield TraceJob(
            job_id,
            _num(row[cols.submit], path, line, cols.submit),
            _num(dur, path, line, cols.duration),
            gpu_milli,
            dict(row),
            exact,
        )


def parse_gpus(text: str, path: str, line: int, column: str) -> int:
    try:
        return parse_quantity(text)
    except InputError:
        raise _bad(path, line, f"column {column} is not a quantity", text) from None


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
    out: list[str] = []
    for pattern in spec.paths:
        full = pattern if Path(pattern).is_absolute() else str(base_dir / pattern)
        matches = sorted(glob.glob(full))
        if not matches:
            raise InputError("no trace file matches", location=Location(field="trace.paths"), value=pattern)
        out.extend(matches)
    return out


def read_trace(spec: TraceSpec, base_dir: Path) -> tuple[list[TraceJob], ImportStats]:
    """Every job of the files, exact totals in the stats (no time shift, no assignment)."""
    stats = ImportStats()
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


def import_trace(source: WorkloadSource, base_dir: Path) -> tuple[list[JobSpec], ImportStats]:
    """JobSpecs of a trace source, by submission time (stable), after scaling and assignment."""
    spec = source.trace
    if spec is None:  # pragma: no cover - the caller checks
        raise ValueError("not a trace source")
    jobs, stats = read_trace(spec, base_dir)
    jobs.sort(key=lambda j: j.submit)  # sort is stable: file order breaks ties
    if spec.limit is not None:
        jobs = jobs[: spec.limit]
    offset = jobs[0].submit if jobs and spec.align_start else 0.0
    extra = tuple((r, parse_quantity(q)) for r, q in spec.per_gpu.items())
    priority_column = "qos" if spec.format == "openb" else (spec.columns.priority if spec.columns else None)
    out: list[JobSpec] = []
    for i, job in enumerate(jobs):
        if job.gpu_milli <= 0:
            stats.skip("requests no GPU")
            continue
        queue = assign_queue(spec.queues, job)
        if queue is None:
            stats.skip("no queue for the job")
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
    return out, stats
