"""report.html: its structure (not its pixels), from a real run of a small scenario."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from qm.cli import main
from tests.unit.sim.test_cli import SCENARIO


class _Page(HTMLParser):
    """Tables by id (header cells, rows of (attributes, text) cells), images, the text of h2 sections."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, dict[str, Any]] = {}
        self.images: list[str] = []
        self.tags: list[str] = []
        self.text: list[str] = []
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._attrs: dict[str, str | None] = {}
        self._row: list[tuple[dict[str, str | None], str]] | None = None
        self._in_head = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        a = dict(attrs)
        if tag == "table":
            self._table = a.get("id") or ""
            self.tables[self._table] = {"head": [], "rows": []}
        elif tag == "thead":
            self._in_head = True
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell, self._attrs = [], a
        elif tag == "img":
            self.images.append(a.get("src") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append((self._attrs, " ".join(" ".join(self._cell).split())))
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table is not None:
            t = self.tables[self._table]
            if self._in_head:
                t["head"] = [text for _, text in self._row]
            else:
                t["rows"].append(self._row)
            self._row = None
        elif tag == "thead":
            self._in_head = False
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, _Page, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("report")
    scenario = tmp / "tiny.yaml"
    scenario.write_text(
        SCENARIO
        + "objectives: [{metric: 'wait_p95[hi]', goal: minimize}, {metric: lost_gpu_hours, max: 50}]\n"
    )
    out = tmp / "out"
    assert main(["simulate", str(scenario), "--out", str(out), "--quiet", "--no-progress"]) == 0
    page = _Page()
    page.feed((out / "report.html").read_text(encoding="utf-8"))
    return out, page, json.loads((out / "summary.json").read_text())


def test_the_comparison_is_an_html_table_headed_by_the_variant_names(
    report: tuple[Path, _Page, dict[str, Any]],
) -> None:
    _, page, summary = report
    assert "pre" not in page.tags  # not the terminal table pasted in
    table = page.tables["comparison"]
    assert table["head"] == ["metric", "keep (baseline)", "abrupt cut"]
    variants = summary["variants"]
    assert isinstance(variants, list)
    keys = list(variants[0]["metrics"])
    rows = table["rows"]
    assert [r[0][1] for r in rows] == [summary["metric_info"][k]["label"] for k in keys]


def test_every_variant_cell_is_marked_better_worse_or_not_significant_from_its_paired_ci(
    report: tuple[Path, _Page, dict[str, Any]],
) -> None:
    _, page, summary = report
    info = summary["metric_info"]
    cut = summary["variants"][1]
    keys = list(cut["metrics"])
    for key, row in zip(keys, page.tables["comparison"]["rows"], strict=True):
        base_cell, cut_cell = row[1], row[2]
        assert base_cell[0]["data-verdict"] == ""
        delta = cut["deltas"][key]
        expected = "n.s."
        if delta["mean"] is not None and delta["ci95"] is not None and abs(delta["mean"]) > delta["ci95"]:
            good = delta["mean"] * info[key]["direction"] > 0
            expected = "n.s." if info[key]["direction"] == 0 else "better" if good else "worse"
        assert cut_cell[0]["data-verdict"] == expected, key
        assert (cut_cell[0]["class"] or "").split()[-1] == (expected if expected != "n.s." else "num")


def test_the_recommendation_and_each_objective_per_variant_are_shown(
    report: tuple[Path, _Page, dict[str, Any]],
) -> None:
    _, page, summary = report
    rec = summary["recommendation"]
    text = " ".join(" ".join(page.text).split())
    assert f"Recommended: {rec['variant']}" in text
    assert " ".join(rec["paragraph"].split()) in text
    objectives = page.tables["objectives"]
    assert objectives["head"] == ["objective", "keep", "abrupt cut"]
    assert [r[0][1] for r in objectives["rows"]] == ["wait_p95[hi]: minimize", "lost_gpu_hours <= 50.0 GPU-h"]
    for row in objectives["rows"]:
        for _, cell in row[1:]:
            assert cell.split()[0] in {"met", "missed", "uncertain", "reference"}


def test_the_four_plots_exist_and_the_captions_name_the_change_and_the_replications(
    report: tuple[Path, _Page, dict[str, Any]],
) -> None:
    out, page, _ = report
    assert page.images == ["usage.png", "pending.png", "wait-cdf.png", "evictions.png"]
    for image in page.images:
        assert (out / image).stat().st_size > 10_000
    text = " ".join(" ".join(page.text).split())
    assert "policy edits (abrupt cut: day 1)" in text
    assert "Replication 1 of each variant" in text and "All replications pooled" in text
