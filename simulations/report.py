"""report.html with PNG plots (matplotlib, Agg backend: no display needed).

Plots (replication 0 of each variant): usage vs nominal quota per ClusterQueue over
time (the quota shift shows as the dashed line stepping down), wait-time CDFs per
priority class, and the preemption timeline.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .outputs import variant_slug
from .record import RunResult
from .summary import NO_CLASS, Summary
from .whatif import comparison_table


def _pyplot() -> Any:  # matplotlib.pyplot, imported lazily (slow import, Agg backend)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_usage(path: Path, run: RunResult) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.6))
    queues = sorted({s.cluster_queue for s in run.samples})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, cq in enumerate(queues):
        pts = [s for s in run.samples if s.cluster_queue == cq]
        t = [s.time / 86400.0 for s in pts]
        color = colors[k % len(colors)]
        ax.step(t, [s.usage_milli / 1000.0 for s in pts], where="post", color=color, label=f"{cq} usage")
        ax.step(
            t,
            [s.nominal_milli / 1000.0 for s in pts],
            where="post",
            color=color,
            linestyle="--",
            label=f"{cq} nominal quota",
        )
    ax.set_xlabel("simulated time (days)")
    ax.set_ylabel(run.primary_resource)
    ax.set_title(f"{run.variant}: usage vs quota")
    ax.legend(fontsize=7, loc="upper right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_wait_cdf(path: Path, run: RunResult) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    classes: dict[str, list[float]] = {}
    for i, job in enumerate(run.jobs):
        adm = run.admitted_at[i]
        if not math.isnan(adm) and job.arrival >= run.warmup:
            classes.setdefault(job.priority_class or NO_CLASS, []).append((adm - job.arrival) / 3600.0)
    for pc, waits in sorted(classes.items()):
        waits.sort()
        n = len(waits)
        ax.step(waits, [(k + 1) / n for k in range(n)], where="post", label=f"{pc} (n={n})")
    ax.set_xscale("symlog", linthresh=0.01)
    ax.set_xlabel("wait until admission (hours)")
    ax.set_ylabel("fraction admitted")
    ax.set_title(f"{run.variant}: wait CDF")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_preemptions(path: Path, runs: Sequence[RunResult]) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.45 * max(1, len(runs))))
    kinds = (
        ("kueue", "|", "tab:blue", "Kueue cycle"),
        ("planner", "x", "tab:red", "experiment planner"),
        ("transition", "s", "tab:green", "transition deadline"),
    )
    for k, run in enumerate(runs):
        for by, marker, color, label in kinds:
            ts = [p.time / 86400.0 for p in run.preemptions if p.by == by]
            if ts:
                ax.scatter(
                    ts,
                    [k] * len(ts),
                    marker=marker,
                    s=30,
                    color=color,
                    linewidths=0.8,
                    label=label if k == 0 or by != "kueue" else None,
                )
    ax.set_yticks(range(len(runs)), [r.variant for r in runs], fontsize=7)
    ax.set_ylim(-0.6, len(runs) - 0.4)
    ax.set_xlim(0, max(r.horizon for r in runs) / 86400.0)
    ax.set_xlabel("simulated time (days)")
    ax.set_title("preemptions over time (replication 1)")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=False))
    if unique:
        ax.legend(unique.values(), unique.keys(), fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def write_report(out: Path, summary: Summary, runs: Sequence[RunResult]) -> Path:
    """Write the PNGs and report.html into `out`; returns the HTML path."""
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(summary.scenario)}: simulation report</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto}"
        "pre{background:#f6f6f6;padding:1em;overflow-x:auto}img{max-width:100%}</style></head><body>",
        f"<h1>{html.escape(summary.scenario)}</h1><p>{html.escape(summary.description)}</p>",
        f"<p>Horizon {summary.horizon_seconds / 86400.0:.1f} days, {summary.replications} replication(s) per "
        "variant; the same random arrivals in every variant (common random numbers).</p>",
        "<h2>Comparison</h2>",
        f"<pre>{html.escape(comparison_table(summary.variants))}</pre>",
    ]
    preempt_png = out / "preemptions.png"
    plot_preemptions(preempt_png, runs)
    parts.append(f"<h2>Preemption timeline</h2><img src='{preempt_png.name}' alt='preemption timeline'>")
    for run in runs:
        slug = variant_slug(run.variant)
        usage_png = out / f"usage-{slug}.png"
        wait_png = out / f"wait-cdf-{slug}.png"
        plot_usage(usage_png, run)
        plot_wait_cdf(wait_png, run)
        parts.append(f"<h2>{html.escape(run.variant)}</h2>")
        parts.append(
            f"<img src='{usage_png.name}' alt='usage vs quota'><img src='{wait_png.name}' alt='wait CDF'>"
        )
        parts.append(
            f"<p>Data: <a href='{slug}/workloads.csv'>workloads.csv</a>, "
            f"<a href='{slug}/timeseries.csv'>timeseries.csv</a>, "
            f"<a href='{slug}/preemptions.csv'>preemptions.csv</a>, "
            f"<a href='{slug}/quota.csv'>quota.csv</a></p>"
        )
    parts.append(
        "<p>All figures: <a href='summary.json'>summary.json</a> "
        "(schema: <a href='summary.schema.json'>summary.schema.json</a>).</p></body></html>"
    )
    path = out / "report.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path
