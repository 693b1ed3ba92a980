"""What-if comparison: headline metrics per variant over replications, deltas vs the baseline, and the
side-by-side terminal table.

Replication r of every variant uses the same random streams (common random numbers), so deltas are paired
per replication: the CI of the mean paired difference is much tighter than the difference of two
independent CIs. A delta is significant when its 95% CI excludes zero; with the metric's direction
(simulations/metrics.py) it is then better or worse than the baseline.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from enum import StrEnum

from .metrics import Direction, MetricRef, headline, parse_ref
from .stats import mean_ci95
from .summary import Interval, MetricInfo, RunSummary, Summary, VariantSummary


class Verdict(StrEnum):
    BETTER = "better"
    WORSE = "worse"
    NOT_SIGNIFICANT = "n.s."  # the paired 95% CI contains zero
    UNKNOWN = "unknown"  # one replication: no CI


def significant(delta: Interval | None) -> bool | None:
    """The paired 95% CI excludes zero (None: no CI, fewer than 2 replications)."""
    if delta is None or delta.mean is None:
        return None
    if delta.ci95 is None:
        return None
    return abs(delta.mean) > delta.ci95 and delta.mean != 0.0


def verdict(delta: Interval | None, direction: int) -> Verdict:
    sig = significant(delta)
    if sig is None:
        return Verdict.UNKNOWN
    if not sig or direction == Direction.NEUTRAL or delta is None or delta.mean is None:
        return Verdict.NOT_SIGNIFICANT
    return Verdict.BETTER if delta.mean * direction > 0 else Verdict.WORSE


def _interval(values: Sequence[float | None]) -> Interval:
    present = [v for v in values if v is not None and not math.isnan(v)]
    mean, ci = mean_ci95(present)
    return Interval(mean=mean, ci95=ci, n=len(present))


Arm = tuple[str, str, bool, list[RunSummary]]  # (name, description, is_baseline, replications)


def _rows(arms: Sequence[Arm], extra: Sequence[MetricRef] = ()) -> list[MetricRef]:
    """Headline rows of every arm (a class or team present in one variant only still gets its row), then
    the extra metrics (those the objectives name beyond the headline)."""
    refs: dict[str, MetricRef] = {}
    for arm in arms:
        for ref in headline(arm[3][0]):
            refs.setdefault(ref.key, ref)
    for ref in extra:
        refs.setdefault(ref.key, ref)
    return list(refs.values())


def metric_info(
    arms: Sequence[Arm], *, window: str, extra: Sequence[MetricRef] = ()
) -> dict[str, MetricInfo]:
    return {
        r.key: MetricInfo(label=r.label(window=window), unit=r.kind.unit, direction=int(r.kind.direction))
        for r in _rows(arms, extra)
    }


def compare(arms: Sequence[Arm], extra: Sequence[MetricRef] = ()) -> list[VariantSummary]:
    """Summaries with paired deltas, keyed by metric reference (`wait_p95[high-priority-business]`), for
    the headline metrics and `extra`. A headline row whose every value is zero and whose kind says so (no
    planner evictions anywhere, no quota beyond capacity) is left out."""
    baseline = next((a for a in arms if a[2]), arms[0])
    wanted = {r.key for r in extra}
    kept: list[MetricRef] = []
    for ref in _rows(arms, extra):
        values = [ref.value(r) for arm in arms for r in arm[3]]
        if ref.kind.hide_when_zero and ref.key not in wanted and all(v is None or v == 0.0 for v in values):
            continue
        kept.append(ref)
    out: list[VariantSummary] = []
    for name, description, is_base, runs in arms:
        metrics = {ref.key: _interval([ref.value(r) for r in runs]) for ref in kept}
        deltas: dict[str, Interval] = {}
        for ref in kept:
            pairs: list[float | None] = []
            for r, b in zip(runs, baseline[3], strict=False):
                v, w = ref.value(r), ref.value(b)
                pairs.append(None if v is None or w is None else v - w)
            deltas[ref.key] = _interval(pairs)
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


def short_label(label: str) -> str:
    """The label without its trailing unit, for sentences: 'wait p95 [hi] (h)' -> 'wait p95 [hi]'."""
    head, sep, tail = label.rpartition(" (")
    return head if sep and tail.endswith(")") else label


def fmt(value: float, *, sign: bool = False) -> str:
    """Compact: 3 significant figures for small values, no decimals from 100 up, thousands separated."""
    mag = abs(value)
    digits = 0 if mag >= 100 else 1 if mag >= 10 else 2
    if 0 < mag < 0.01:  # two significant figures, so that a small difference never reads "-0.00"
        digits = min(6, 1 - math.floor(math.log10(mag)))
    return f"{value:+,.{digits}f}" if sign else f"{value:,.{digits}f}"


_MARK = {Verdict.BETTER: "*", Verdict.WORSE: "!", Verdict.NOT_SIGNIFICANT: " ", Verdict.UNKNOWN: " "}


def _cell(value: Interval | None, delta: Interval | None = None, direction: int = 0) -> str:
    if value is None or value.mean is None:
        return "-"
    text = fmt(value.mean)
    if delta is None:
        return text + (f" ±{fmt(value.ci95)}" if value.ci95 is not None else "")
    if delta.mean is not None:
        ci = f"±{fmt(delta.ci95)}" if delta.ci95 is not None else ""
        text += f" ({fmt(delta.mean, sign=True)}{ci})"
    return text + _MARK[verdict(delta, direction)]


def ordered(variants: Sequence[VariantSummary]) -> list[VariantSummary]:
    """The baseline first, then the others in scenario order."""
    base = next((v for v in variants if v.baseline), variants[0])
    return [base, *[v for v in variants if v is not base]]


def comparison_table(
    variants: Sequence[VariantSummary], info: dict[str, MetricInfo] | None = None, *, width: int = 22
) -> str:
    """Side-by-side text table, one column per variant headed by its name (wrapped): the baseline as
    `mean ±95% CI`, each other variant as `mean (Δ vs baseline ±95% CI)` followed by `*` when the paired
    CI says better, `!` when it says worse."""
    if not variants:
        return ""
    cols = ordered(variants)
    base = cols[0]
    keys = list(base.metrics)
    for v in variants:
        keys.extend(m for m in v.metrics if m not in keys)
    body: list[list[str]] = []
    for key in keys:
        if all(v.metrics.get(key) is None or v.metrics[key].mean is None for v in cols):
            continue
        meta = (info or {}).get(key) or _info(key)
        direction = meta.direction
        row = [meta.label, _cell(base.metrics.get(key))]
        row.extend(_cell(v.metrics.get(key), v.deltas.get(key), direction) for v in cols[1:])
        body.append(row)
    names = [f"{v.name} (baseline)" if v is base else v.name for v in cols]
    widths = [max([len("metric"), *(len(r[0]) for r in body)])]
    for i, _ in enumerate(cols):
        widths.append(max([min(width, max(len(n) for n in names)), *(len(r[i + 1]) for r in body)]))
    header_lines = [textwrap.wrap(n, widths[i + 1]) or [""] for i, n in enumerate(names)]
    depth = max(len(h) for h in header_lines)
    lines: list[str] = []
    for k in range(depth):
        cells = ["metric" if k == depth - 1 else ""]
        for h in header_lines:
            pad = depth - len(h)  # names sit on the last lines, next to "metric"
            cells.append(h[k - pad] if k >= pad else "")
        lines.append(_line(cells, widths))
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(_line(r, widths) for r in body)
    n = len(base.replications)
    lines.append(
        f"({n} replication{'s' if n != 1 else ''} per variant, same arrivals in every variant; ± = 95% "
        "t-interval half-width; Δ = variant - baseline, paired by replication; * = better, ! = worse than "
        "the baseline (the paired CI excludes 0); waits count never-admitted work at its wait so far, a "
        "lower bound while 'never admitted' is not 0)"
    )
    return "\n".join(lines)


STORM_LINES = 5  # storms listed per variant in the terminal (summary.json and the report have them all)


def storm_lines(summary: Summary) -> list[str]:
    """Each replication's eviction storms, one line each (at most STORM_LINES per variant): the workloads,
    the count and the rate."""
    out: list[str] = []
    for v in summary.variants:
        storms = [(r.replication, s) for r in v.replications for s in r.storms]
        for rep, s in storms[:STORM_LINES]:
            day = s.start_seconds / 86400.0
            out.append(f"{v.name}, replication {rep + 1}, day {day:.2f}: {s.message}")
        if len(storms) > STORM_LINES:
            out.append(f"{v.name}: {len(storms) - STORM_LINES} more in summary.json")
    return out


def _info(key: str) -> MetricInfo:
    """A metric's label and direction from its reference alone (a table built without metric_info)."""
    ref = parse_ref(key)
    return MetricInfo(label=ref.label(), unit=ref.kind.unit, direction=int(ref.kind.direction))


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(cells))
