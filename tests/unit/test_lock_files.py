"""The lock files pin what pyproject.toml asks for (a dependency added without `make lock` fails here),
and the image's lock (requirements.lock) holds no simulator or dev-cluster dependency."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _name(requirement: str) -> str:
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement).group(0)).lower()  # type: ignore[union-attr]


def _wanted(extras: list[str]) -> set[str]:
    """Direct requirements of the base install plus these extras (self-references expanded)."""
    out = {_name(r) for r in PROJECT["dependencies"]}
    todo, seen = list(extras), set()
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for req in PROJECT["optional-dependencies"][extra]:
            if _name(req) == "queue-manager":
                todo.extend(re.search(r"\[(.*)\]", req).group(1).split(","))  # type: ignore[union-attr]
            else:
                out.add(_name(req))
    return out


def _pinned(lock: str) -> set[str]:
    return {_name(line) for line in (ROOT / lock).read_text().splitlines() if re.match(r"^[A-Za-z0-9]", line)}


def test_the_image_lock_pins_every_base_dependency_and_nothing_of_the_simulator() -> None:
    pinned = _pinned("requirements.lock")
    assert _wanted([]) - pinned == set()
    assert pinned & {"matplotlib", "numpy", "cryptography", "ray", "pytest"} == set()
    # The operator writes the ledger (SQLite or PostgreSQL) and evaluates budget periods in a time zone.
    assert {"sqlalchemy", "alembic", "psycopg", "tzdata"} <= pinned


def test_the_dev_lock_pins_every_dev_dependency() -> None:
    assert _wanted(["dev"]) - _pinned("requirements-dev.lock") == set()
