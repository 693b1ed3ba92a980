"""What-if comparison: headline metrics per variant over replications, deltas vs the baseline.

Replication r of every variant uses the same random streams (common random numbers),
so deltas are paired per replication: the CI of the mean paired difference is much
tighter than the difference of two independent CIs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from .stats import mean_ci95
from .summary import Interval, RunSummary, VariantSummary

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


def _num(value: float, *, sign: bool = False) -> str:
    """Compact: 3 significant figures for small values, no decimals from 100 up."""
    mag = abs(value)
    digits = 0 if mag >= 100 else 1 if mag >= 10 else 2
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def _cell(value: Interval | None, delta: Interval | None = None) -> str:
    if value is None or value.mean is None:
        return "-"
    text = _num(value.mean)
    if delta is None:
        return text + (f" ±{_num(value.ci95)}" if value.ci95 is not None else "")
    if delta.mean is not None:
        ci = f"±{_num(delta.ci95)}" if delta.ci95 is not None else ""
        text += f" ({_num(delta.mean, sign=True)}{ci})"
    return text


def comparison_table(variants: Sequence[VariantSummary]) -> str:
    """Side-by-side text table: the baseline (mean ±95% CI), then each variant as
    `mean (Δ vs baseline ±95% CI)`; columns are numbered, the legend names them."""
    if not variants:
        return ""
    base = next((v for v in variants if v.baseline), variants[0])
    ordered = [base, *[v for v in variants if v is not base]]
    metric_names = list(base.metrics)
    for v in variants:
        metric_names.extend(m for m in v.metrics if m not in metric_names)
    header = ["metric", "[0] baseline"] + [f"[{i}] (Δ ±CI)" for i in range(1, len(ordered))]
    rows = [header]
    for m in metric_names:
        if all(v.metrics.get(m) is None or v.metrics[m].mean is None for v in ordered):
            continue
        row = [m, _cell(base.metrics.get(m))]
        row.extend(_cell(v.metrics.get(m), v.deltas.get(m)) for v in ordered[1:])
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [f"[{i}] {v.name}" + (" (baseline)" if v is base else "") for i, v in enumerate(ordered)]
    lines.append("")
    for k, r in enumerate(rows):
        lines.append("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(r)))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    n = len(base.replications)
    lines.append(
        f"({n} replication{'s' if n != 1 else ''} per variant, same arrivals in every variant; "
        "± = 95% t-interval half-width; Δ = variant - baseline, paired by replication)"
    )
    return "\n".join(lines)
