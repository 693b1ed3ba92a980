"""What-if comparison: headline metrics per variant over replications, deltas vs the baseline.

Replication r of every variant uses the same random streams (common random numbers),
so deltas are paired per replication: the CI of the mean paired difference is much
tighter than the difference of two independent CIs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from .stats import mean_ci95
from .summary import NO_CLASS, Interval, RunSummary, VariantSummary

Metric = tuple[str, Callable[[RunSummary], float | None]]


def headline_metrics(sample: RunSummary) -> list[Metric]:
    """The compared figures: waits per priority class, GPU-hours per queue, cluster-wide figures."""
    metrics: list[Metric] = []
    for pc in sample.priority_classes:
        metrics.append((f"wait mean [{pc}] (h)", _wait(pc, "mean")))
        metrics.append((f"wait p95 [{pc}] (h)", _wait(pc, "p95")))
    for cq in sample.queues:
        metrics.append((f"GPU-hours [{cq}]", _cq_hours(cq)))
        metrics.append((f"finished [{cq}]", _cq_finished(cq)))
    metrics.extend(
        [
            ("cluster utilization (%)", lambda s: 100.0 * s.cluster.utilization_of_cluster),
            ("preemptions", lambda s: float(s.lost_work.preemptions)),
            ("lost GPU-hours", lambda s: s.lost_work.gpu_hours),
            ("Jain fairness", lambda s: s.fairness.jain_index),
        ]
    )
    return metrics


def _wait(pc: str, which: str) -> Callable[[RunSummary], float | None]:
    def get(s: RunSummary) -> float | None:
        group = s.priority_classes.get(pc)
        if group is None:
            return None
        value: float | None = getattr(group.wait, which)
        return None if value is None else value / 3600.0

    return get


def _cq_hours(cq: str) -> Callable[[RunSummary], float | None]:
    return lambda s: s.queues[cq].gpu_hours if cq in s.queues else None


def _cq_finished(cq: str) -> Callable[[RunSummary], float | None]:
    return lambda s: float(s.queues[cq].finished) if cq in s.queues else None


def _interval(values: Sequence[float | None]) -> Interval:
    present = [v for v in values if v is not None and not math.isnan(v)]
    mean, ci = mean_ci95(present)
    return Interval(mean=mean, ci95=ci, n=len(present))


def compare(
    arms: Sequence[tuple[str, str, bool, list[RunSummary]]],
) -> list[VariantSummary]:
    """arms: (name, description, is_baseline, replications). Returns summaries with deltas."""
    baseline = next((a for a in arms if a[2]), arms[0])
    names: list[str] = []
    getters: dict[str, Callable[[RunSummary], float | None]] = {}
    for arm in arms:
        for name, get in headline_metrics(arm[3][0]):
            if name not in getters:
                names.append(name)
                getters[name] = get
    out: list[VariantSummary] = []
    for name, description, is_base, runs in arms:
        metrics = {m: _interval([getters[m](r) for r in runs]) for m in names}
        deltas: dict[str, Interval] = {}
        for m in names:
            pairs: list[float | None] = []
            for r, b in zip(runs, baseline[3], strict=False):
                v, w = getters[m](r), getters[m](b)
                pairs.append(None if v is None or w is None else v - w)
            deltas[m] = _interval(pairs)
        out.append(
            VariantSummary(
                name=name,
                description=description,
                baseline=is_base,
                metrics=metrics,
                deltas=deltas,
                replications=list(runs),
            )
        )
    return out


def _fmt(value: float | None, ci: float | None = None, *, sign: bool = False) -> str:
    if value is None:
        return "-"
    text = f"{value:+.2f}" if sign else f"{value:.2f}"
    if ci is not None:
        text += f" ±{ci:.2f}"
    return text


def comparison_table(variants: Sequence[VariantSummary]) -> str:
    """Side-by-side text table: baseline values, then each variant's value and delta with 95% CIs."""
    if not variants:
        return ""
    base = next((v for v in variants if v.baseline), variants[0])
    metric_names = list(base.metrics)
    for v in variants:
        metric_names.extend(m for m in v.metrics if m not in metric_names)
    header = ["metric", f"{base.name} (baseline)"]
    others = [v for v in variants if v is not base]
    for v in others:
        header.extend([v.name, "Δ vs baseline"])
    rows = [header]
    for m in metric_names:
        if NO_CLASS in m and all(
            v.metrics.get(m, Interval(mean=None, ci95=None, n=0)).mean is None for v in variants
        ):
            continue
        b = base.metrics.get(m)
        row = [m, _fmt(b.mean, b.ci95) if b else "-"]
        for v in others:
            val = v.metrics.get(m)
            d = v.deltas.get(m)
            row.append(_fmt(val.mean, val.ci95) if val else "-")
            row.append(_fmt(d.mean, d.ci95, sign=True) if d else "-")
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = []
    for k, r in enumerate(rows):
        lines.append("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    n = len(base.replications)
    lines.append(
        f"({n} replication{'s' if n != 1 else ''}; ± = 95% t-interval half-width over replications; "
        "Δ paired by replication)"
    )
    return "\n".join(lines)
