"""The report's four plots (matplotlib, Agg backend: no display). One figure per plot, every variant in it,
saved once: the report's cost is four savefig calls whatever the number of replications.

Every plot over time marks the policy edits of each variant (vertical dashed red lines, `change_times`)
and says which replications it draws: usage vs quota and capacity is replication 1 (one run's step
functions do not average meaningfully); pending demand, wait CDFs and evictions are all replications.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .record import EvictedBy, RunDigest, RunResult

DAY = 86400.0
DPI = 100


def pyplot() -> Any:  # matplotlib.pyplot, imported lazily (slow import) with the Agg backend
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _margins(fig: Any, *, left: float, right: float, top: float, bottom: float, hspace: float = 0.0) -> None:
    """Fixed margins in inches (what tight_layout would find, without its cost: it measured every text
    twice and took a third of the report's time)."""
    w, h = fig.get_size_inches()
    fig.subplots_adjust(left=left / w, right=1 - right / w, top=1 - top / h, bottom=bottom / h, hspace=hspace)


def _text_inches(labels: Sequence[str], points: float) -> float:
    """About how wide the longest label is at `points` (DejaVu Sans averages ~0.55 em per character)."""
    return max((len(t) for t in labels), default=0) * points * 0.55 / 72.0


def _mark_changes(ax: Any, times: Sequence[float], *, label: bool) -> None:
    for k, t in enumerate(times):
        ax.axvline(
            t / DAY,
            color="tab:red",
            linestyle="--",
            linewidth=1.0,
            alpha=0.8,
            label="policy edit" if label and k == 0 else None,
        )


def plot_usage(path: Path, runs: Sequence[RunResult], change_times: Mapping[str, Sequence[float]]) -> None:
    """Per variant (one panel each, shared axes): each team's usage stacked, its nominal quota dashed, the
    quota handed out (Σ nominal) and the capacity present; replication 1."""
    plt = pyplot()
    fig, axes = plt.subplots(
        len(runs), 1, figsize=(12, 1.2 + 2.3 * len(runs)), sharex=True, squeeze=False
    )
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for row, run in enumerate(runs):
        ax = axes[row][0]
        queues = sorted({s.cluster_queue for s in run.samples})
        times = sorted({s.time for s in run.samples})
        t_days = [t / DAY for t in times]
        usage = {cq: [0.0] * len(times) for cq in queues}
        nominal = {cq: [0.0] * len(times) for cq in queues}
        index = {t: i for i, t in enumerate(times)}
        for s in run.samples:
            usage[s.cluster_queue][index[s.time]] = s.usage_milli / 1000.0
            nominal[s.cluster_queue][index[s.time]] = s.nominal_milli / 1000.0
        if times:
            ax.stackplot(
                t_days,
                [usage[cq] for cq in queues],
                colors=[colors[k % len(colors)] for k in range(len(queues))],
                alpha=0.45,
                step="post",
                labels=[f"{cq} usage" for cq in queues],
            )
        # The quota lines are stacked like the usage: a team's band is compared with its own quota.
        stacked = [0.0] * len(times)
        for k, cq in enumerate(queues):
            stacked = [a + b for a, b in zip(stacked, nominal[cq], strict=True)]
            ax.step(
                t_days, stacked, where="post", color=colors[k % len(colors)], linestyle="--",
                linewidth=1.2, label=f"{cq} nominal quota (stacked)",
            )
        cap = run.capacity_samples
        if cap:
            ct = [c.time / DAY for c in cap]
            ax.step(ct, [c.capacity_milli / 1000.0 for c in cap], where="post", color="black", linewidth=1.4,
                    label="capacity present")
            ax.step(ct, [c.quota_milli / 1000.0 for c in cap], where="post", color="dimgray", linewidth=1.0,
                    linestyle=":", label="quota handed out (Σ nominal)")
        _mark_changes(ax, change_times.get(run.variant, ()), label=True)
        ax.set_title(f"{run.variant} (replication 1)", fontsize=9, loc="left")
        ax.set_ylabel(run.primary_resource, fontsize=8)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=8)
        if row == 0:
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0.0)
    axes[-1][0].set_xlabel("simulated time (days)")
    axes[0][0].set_xlim(0, max(r.horizon for r in runs) / DAY)
    fig.suptitle("usage vs quota and capacity, per variant", fontsize=10)
    legend = axes[0][0].get_legend_handles_labels()[1]
    _margins(fig, left=0.8, right=0.35 + _text_inches(legend, 7) + 0.5, top=0.55, bottom=0.55, hspace=0.35)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def plot_pending(
    path: Path,
    digests: Sequence[RunDigest],
    variants: Sequence[str],
    change_times: Mapping[str, Sequence[float]],
) -> None:
    """Pending demand (GPUs requested by pending workloads) over time: per variant the mean over its
    replications, with the range of all replications shaded."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(12, 3.6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    horizon = 0.0
    marked = False
    counts = {}
    for k, name in enumerate(variants):
        runs = [d for d in digests if d.variant == name and d.capacity_samples]
        counts[name] = len(runs)
        if not runs:
            continue
        n = min(len(d.capacity_samples) for d in runs)
        t = [runs[0].capacity_samples[i].time / DAY for i in range(n)]
        series = [[d.capacity_samples[i].pending_milli / 1000.0 for i in range(n)] for d in runs]
        mean = [sum(col) / len(col) for col in zip(*series, strict=True)]
        lo = [min(col) for col in zip(*series, strict=True)]
        hi = [max(col) for col in zip(*series, strict=True)]
        color = colors[k % len(colors)]
        ax.fill_between(t, lo, hi, step="post", color=color, alpha=0.15, linewidth=0)
        ax.step(t, mean, where="post", color=color, linewidth=1.2, label=f"{name} (mean of {len(runs)})")
        horizon = max(horizon, max(d.horizon for d in runs))
        _mark_changes(ax, change_times.get(name, ()), label=not marked)
        marked = marked or bool(change_times.get(name))
    reps = sorted(set(counts.values()))
    ax.set_title(
        f"pending demand over time: mean and range of all {'/'.join(str(r) for r in reps)} replications",
        fontsize=10,
    )
    ax.set_xlabel("simulated time (days)")
    ax.set_ylabel("GPUs pending")
    ax.set_xlim(0, horizon / DAY if horizon else 1)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0.0)
    _margins(fig, left=0.8, right=0.35 + _text_inches(labels, 7) + 0.5, top=0.4, bottom=0.55)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def plot_wait_cdf(path: Path, digests: Sequence[RunDigest], variants: Sequence[str]) -> None:
    """Per priority class, per variant, pooled over all replications: the fraction of the workloads created
    after the warm-up that were admitted within x hours. Never-admitted work is in the denominator, so a
    curve that stops below 1 shows the share never admitted (printed in the panel, variant by variant)."""
    plt = pyplot()
    classes = sorted({pc for d in digests for pc in d.waits})
    fig, axes = plt.subplots(1, max(1, len(classes)), figsize=(12, 4.2), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for c, pc in enumerate(classes):
        ax = axes[0][c]
        xmax = 0.0
        never_lines = []
        for k, name in enumerate(variants):
            runs = [d.waits[pc] for d in digests if d.variant == name and pc in d.waits]
            created = sum(w.created for w in runs)
            points = sorted({x for w in runs for x in w.sample})
            if not created or not points:
                continue
            ys = [sum(w.admitted_within(x) for w in runs) / created for x in points]
            hours = [x / 3600.0 for x in points]
            never = 1.0 - sum(w.admitted for w in runs) / created
            color = colors[k % len(colors)]
            ax.step(hours, ys, where="post", color=color, linewidth=1.2, label=name if c == 0 else None)
            never_lines.append((f"never admitted {100 * never:.1f}%", color))
            xmax = max(xmax, hours[-1])
        for row, (text, color) in enumerate(never_lines):
            ax.text(0.98, 0.05 + 0.07 * (len(never_lines) - 1 - row), text, transform=ax.transAxes,
                    ha="right", va="bottom", fontsize=7, color=color)
        ax.set_xscale("symlog", linthresh=0.1)
        ax.set_xlim(0, max(xmax, 0.2))
        ax.set_ylim(0, 1.02)
        ax.set_title(pc, fontsize=9)
        ax.set_xlabel("wait until admission (hours)", fontsize=8)
        ax.tick_params(labelsize=8)
        if c == 0:
            ax.set_ylabel("share of created workloads admitted", fontsize=8)
        ax.grid(alpha=0.3)
    n = len({(d.variant, d.replication) for d in digests}) // max(1, len(variants))
    fig.suptitle(f"wait CDFs, all {n} replications pooled; never-admitted work counted", fontsize=10)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8, frameon=False)
    _margins(fig, left=0.9, right=0.2, top=0.6, bottom=1.05)
    fig.subplots_adjust(wspace=0.2)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


_KINDS = (
    (EvictedBy.KUEUE, "|", "tab:blue", "Kueue cycle"),
    (EvictedBy.PLANNER, "x", "tab:red", "experiment planner"),
    (EvictedBy.TRANSITION, "s", "tab:green", "transition deadline"),
)


def plot_evictions(
    path: Path,
    digests: Sequence[RunDigest],
    variants: Sequence[str],
    change_times: Mapping[str, Sequence[float]],
) -> None:
    """Every eviction of every replication over time: a band per variant, one line per replication in it."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(12, 1.4 + 0.55 * max(1, len(variants))))
    labelled: set[str] = set()
    horizon = max((d.horizon for d in digests), default=DAY)
    reps = max((d.replication for d in digests), default=0) + 1
    for row, name in enumerate(variants):
        mine = sorted((d for d in digests if d.variant == name), key=lambda d: d.replication)
        for d in mine:
            y = row + (d.replication - (reps - 1) / 2) * (0.7 / max(1, reps))
            for by, marker, color, label in _KINDS:
                ts = [t / DAY for t, who in d.evictions if who == by]
                if ts:
                    ax.scatter(ts, [y] * len(ts), marker=marker, s=14, color=color, linewidths=0.7,
                               label=label if by not in labelled else None)
                    labelled.add(by)
        for t in change_times.get(name, ()):
            ax.plot([t / DAY, t / DAY], [row - 0.45, row + 0.45], color="tab:red", linestyle="--",
                    linewidth=1.0, label="policy edit" if "edit" not in labelled else None)
            labelled.add("edit")
    ax.set_yticks(range(len(variants)), list(variants), fontsize=8)
    ax.set_ylim(-0.6, len(variants) - 0.4)
    ax.invert_yaxis()
    ax.set_xlim(0, horizon / DAY)
    ax.set_xlabel("simulated time (days)")
    ax.set_title(f"evictions over time, all {reps} replications (one line each within a variant's band)",
                 fontsize=10)
    ax.grid(alpha=0.3)
    if labelled:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0.0)
    left = 0.3 + _text_inches(list(variants), 8)
    _margins(fig, left=left, right=1.7, top=0.4, bottom=0.55)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
