"""The commands of README.md and docs/*.md that a test runs: a fenced ```bash block preceded by the line
`<!-- runnable -->` (an HTML comment: invisible on the rendered page). tests/integration/
test_docs_runnable.py runs each page's marked blocks in order, in one shell (as a reader types them in one
terminal), in a fresh HOME: a new user's machine, with only the control-plane binaries already built."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- runnable -->"
_FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass(frozen=True)
class Block:
    page: str  # path relative to the repository
    line: int  # 1-based line of the opening fence
    language: str
    text: str


class MarkerError(ValueError):
    """A marker not followed by a fenced block."""


def blocks(page: Path) -> list[Block]:
    """The marked blocks of one page, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    rel = str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else str(page)
    out = []
    for i, line in enumerate(lines):
        if line.strip() != MARKER:
            continue
        fence = _FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if fence is None:
            raise MarkerError(f"{rel}:{i + 1}: {MARKER} must be followed by a fenced code block")
        end = next((j for j in range(i + 2, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            raise MarkerError(f"{rel}:{i + 2}: the marked block is never closed")
        out.append(Block(rel, i + 2, fence.group(1), "\n".join(lines[i + 2:end]) + "\n"))
    return out


def pages() -> list[Path]:
    """README.md, then docs/*.md by name."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def marked() -> dict[str, list[Block]]:
    """Page -> its marked blocks, for every page that has some."""
    return {str(p.relative_to(ROOT)): found for p in pages() if (found := blocks(p))}
