"""Files written to --out DIR: summary.json (+ its JSON Schema, with the recommendation), and per variant
workloads.csv, timeseries.csv, capacity.csv, preemptions.csv, quota.csv, actions.csv. The CSVs are for
one run per variant (replication 1)."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path

from .record import RunResult
from .scenario import slug
from .summary import Summary, summary_json_schema


def variant_slug(name: str) -> str:
    return slug(name)


def _num(value: float) -> str:
    return "" if math.isnan(value) else f"{value:.3f}"


def write_summary(out: Path, summary: Summary) -> Path:
    path = out / "summary.json"
    path.write_text(json.dumps(summary.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    (out / "summary.schema.json").write_text(
        json.dumps(summary_json_schema(), indent=2) + "\n", encoding="utf-8"
    )
    return path


def write_workloads_csv(path: Path, run: RunResult) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "workload",
                "source",
                "local_queue",
                "cluster_queue",
                "priority_class",
                "priority",
                "pods",
                f"{run.primary_resource}",
                "created",
                "duration",
                "first_admitted",
                "finished",
                "wait",
                "evictions",
                "lost_seconds",
                "held_seconds",
                "running_at_horizon",
            ]
        )
        for i, job in enumerate(run.jobs):
            adm = run.admitted_at[i]
            w.writerow(
                [
                    job.key,
                    job.source,
                    f"{job.namespace}/{job.local_queue}",
                    run.cluster_queue[i],
                    job.priority_class or "",
                    run.priority[i],
                    job.count,
                    job.total(run.primary_resource) / 1000.0,
                    _num(job.arrival),
                    _num(job.duration),
                    _num(adm),
                    _num(run.finished_at[i]),
                    _num(adm - job.arrival),
                    run.evictions[i],
                    _num(run.lost_seconds[i]),
                    _num(run.held_seconds[i]),
                    int(run.running_at_end[i]),
                ]
            )


def write_timeseries_csv(path: Path, run: RunResult) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(
            ["time", "cluster_queue", "usage", "nominal_quota", "pending", "running", "pending_demand"]
        )
        for s in run.samples:
            w.writerow(
                [
                    f"{s.time:.3f}",
                    s.cluster_queue,
                    s.usage_milli / 1000.0,
                    s.nominal_milli / 1000.0,
                    s.pending,
                    s.running,
                    s.pending_milli / 1000.0,
                ]
            )


def write_capacity_csv(path: Path, run: RunResult) -> None:
    """The cluster per sample: capacity present, quota handed out (Σ nominal), usage, pending demand."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["time", "capacity", "quota", "usage", "pending_demand"])
        for c in run.capacity_samples:
            w.writerow(
                [
                    f"{c.time:.3f}",
                    c.capacity_milli / 1000.0,
                    c.quota_milli / 1000.0,
                    c.usage_milli / 1000.0,
                    c.pending_milli / 1000.0,
                ]
            )


def write_preemptions_csv(path: Path, run: RunResult) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "time",
                "victim",
                "cluster_queue",
                "by",
                "preemptor",
                "reason",
                "lost_seconds",
                "gpus",
                "beneficiary_admitted",
            ]
        )
        missing = len(run.preemptions) - len(run.beneficiary_admitted_at)
        admitted = run.beneficiary_admitted_at + [math.nan] * missing
        for p, beneficiary in zip(run.preemptions, admitted, strict=True):
            w.writerow(
                [
                    f"{p.time:.3f}",
                    p.victim,
                    p.victim_cluster_queue,
                    p.by,
                    p.preemptor,
                    p.reason,
                    f"{p.lost_seconds:.3f}",
                    p.gpus_milli / 1000.0,
                    _num(beneficiary),
                ]
            )


def write_quota_csv(path: Path, run: RunResult) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["time", "cluster_queue", "flavor", "resource", "nominal_quota", "note"])
        for q in run.quota_changes:
            w.writerow(
                [f"{q.time:.3f}", q.cluster_queue, q.flavor, q.resource, q.nominal_milli / 1000.0, q.note]
            )


def write_actions_csv(path: Path, run: RunResult) -> None:
    """The policy controller's actions, as the simulator applied them (the operator's audit records)."""
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["time", "action", "target", "detail"])
        for a in run.actions:
            w.writerow([f"{a.time:.3f}", a.kind, a.target, a.detail])


def write_run_files(out: Path, runs: Sequence[RunResult]) -> list[Path]:
    """Per-variant CSVs of the first replication: <variant>/workloads.csv, timeseries.csv, ..."""
    written: list[Path] = []
    for run in runs:
        d = out / slug(run.variant)
        d.mkdir(parents=True, exist_ok=True)
        for name, fn in (
            ("workloads.csv", write_workloads_csv),
            ("timeseries.csv", write_timeseries_csv),
            ("capacity.csv", write_capacity_csv),
            ("preemptions.csv", write_preemptions_csv),
            ("quota.csv", write_quota_csv),
            ("actions.csv", write_actions_csv),
        ):
            fn(d / name, run)
            written.append(d / name)
    return written
