"""report.html: the recommendation, the objectives each variant met or missed, the comparison table
(variant names as headers, better / worse marked from the paired CIs), and the four plots (simulations/
plots.py). HTML from a jinja2 template (simulations/templates/report.html, autoescaped), never by string
concatenation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .outputs import variant_slug
from .plots import plot_evictions, plot_pending, plot_usage, plot_wait_cdf
from .record import RunDigest, RunResult, digest
from .summary import Interval, Summary, VariantSummary
from .whatif import Verdict, fmt, ordered, verdict

TEMPLATES = Path(__file__).parent / "templates"


@dataclass(frozen=True)
class Cell:
    text: str  # the variant's mean (± CI for the baseline)
    delta: str  # "Δ +0.21 ±0.45" or ""
    verdict: str  # better | worse | n.s. | unknown | "" (baseline)


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    cells: list[Cell]


def _mean(iv: Interval | None, *, ci: bool) -> str:
    if iv is None or iv.mean is None:
        return "–"
    text = fmt(iv.mean)
    if ci and iv.ci95 is not None:
        text += f" ±{fmt(iv.ci95)}"
    return text


def rows(summary: Summary) -> list[Row]:
    cols = ordered(summary.variants)
    base = cols[0]
    out = []
    for key in base.metrics:
        if all(v.metrics.get(key) is None or v.metrics[key].mean is None for v in cols):
            continue
        info = summary.metric_info.get(key)
        direction = info.direction if info else 0
        cells = [Cell(_mean(base.metrics.get(key), ci=True), "", "")]
        for v in cols[1:]:
            d = v.deltas.get(key)
            delta = ""
            if d is not None and d.mean is not None:
                delta = f"Δ {fmt(d.mean, sign=True)}" + (f" ±{fmt(d.ci95)}" if d.ci95 is not None else "")
            cells.append(Cell(_mean(v.metrics.get(key), ci=False), delta, verdict(d, direction).value))
        out.append(Row(key, info.label if info else key, cells))
    return out


def write_report(
    out: Path,
    summary: Summary,
    runs: Sequence[RunResult],
    *,
    digests: Sequence[RunDigest] | None = None,
    change_times: Mapping[str, Sequence[float]] | None = None,
    template: str = "report.html",
    template_dirs: Sequence[Path] = (),
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write the PNGs and report.html into `out`; returns the HTML path. `runs`: replication 1 of each
    variant; `digests`: every replication (default: those of `runs`). `template` (looked up in
    `template_dirs`, then here) may extend report.html and fill its `preface` block with `extra`'s values
    (qm plan's report: qm/planning/templates/plan.html)."""
    from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

    all_runs = list(digests) if digests is not None else [digest(r) for r in runs]
    changes = dict(change_times or {})
    cols: list[VariantSummary] = ordered(summary.variants)
    names = [v.name for v in cols]
    by_name = {r.variant: r for r in runs}
    first = [by_name[n] for n in names if n in by_name]
    plots = {
        "usage": "usage.png",
        "pending": "pending.png",
        "waits": "wait-cdf.png",
        "evictions": "evictions.png",
    }
    plot_usage(out / plots["usage"], first, changes)
    plot_pending(out / plots["pending"], all_runs, names, changes)
    plot_wait_cdf(out / plots["waits"], all_runs, names)
    plot_evictions(out / plots["evictions"], all_runs, names, changes)
    env = Environment(
        loader=FileSystemLoader([*template_dirs, TEMPLATES]),
        autoescape=select_autoescape(["html"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    rec = summary.recommendation
    verdicts = {v.name: v for v in rec.ranking} if rec else {}
    html = env.get_template(template).render(
        **dict(extra or {}),
        summary=summary,
        variants=cols,
        rows=rows(summary),
        recommendation=rec,
        verdicts=verdicts,
        plots=plots,
        slugs={n: variant_slug(n) for n in names},
        change_days={n: [f"{t / 86400.0:g}" for t in changes.get(n, [])] for n in names},
        horizon_days=f"{summary.horizon_seconds / 86400.0:g}",
        Verdict=Verdict,
    )
    path = out / "report.html"
    path.write_text(html, encoding="utf-8")
    return path
