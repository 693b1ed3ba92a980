"""qm plan's cache of the ledger's lives: a plan reads only what changed since the last one.

A calibration window is weeks of lives (28 days of history plus as much again for long run times: about
230,000 lives on a 1,000-GPU cluster), and reading them is most of the ledger's part of a plan
(`make bench BENCH=plan` prints both reads). A life that has ended (finished, or deleted) no longer changes,
so the cache keeps those, as the calibration reads them (`RecordedLife`), with the lives still open at the
last read (uid and submission time only). The next plan reads from the ledger:

- the lives submitted since the last read's end;
- the lives open then, by uid (they may have ended since);
- a digest of the lives submitted in the span it reuses (how many, the sums of their submission and end
  times), which must be that of the cached lives of the span and of the open ones just read: a life recorded
  late (the operator's spool), pruned or changed, or another ledger at the same URL changes it, and the plan
  then reads the whole window again, as without a cache.

The result is the uncached read's, life for life and in the same order (submission time, then uid, ordered
here so that a database's collation does not matter): tests/integration/test_plan_lives_cache.py checks
it over ledgers that change between plans. A cache that cannot be read is a miss; one that cannot be
written is skipped. The file is the resolved URL's digest under $QM_CACHE_DIR/plan (no URL, no password,
in it).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from simulations.calibrate import RecordedLife

from .inputs import recorded_life

VERSION = 1


class LivesSource(Protocol):
    """What the cache reads from the ledger (ledger.ledger.Ledger)."""

    def lives(self, *, since: float, until: float) -> list[Any]: ...

    def lives_of(self, uids: Sequence[str]) -> list[Any]: ...

    def lives_digest(self, *, since_ms: int, until_ms: int) -> tuple[int, int, int]: ...


@dataclass(frozen=True, slots=True)
class Read:
    """The lives of the window, in submission order, and how many came from the cache."""

    lives: list[RecordedLife]
    reused: int  # lives (ended ones) taken from the cache; 0: the whole window was read


# (submitted_ms, uid, the life as the calibration reads it or None: no pod set with requests, when it ended
# (finished, else deleted; None: open))
_Row = tuple[int, str, RecordedLife | None, int | None]


def cache_file(directory: Path, resolved_url: str) -> Path:
    return directory / f"lives-{hashlib.sha256(resolved_url.encode()).hexdigest()[:24]}.json"


def read_lives(ledger: LivesSource, *, look_back: float, until: float, path: Path | None) -> Read:
    """The lives submitted in [look_back, until), as `qm.planning.inputs.recorded_lives` makes them,
    through the cache at `path` (None: no cache)."""
    from ledger.records import to_millis

    lo_ms, until_ms = to_millis(look_back), to_millis(until)
    cached = _load(path) if path is not None else None
    rows: list[_Row] | None = None
    reused = 0
    if cached is not None and cached.lo_ms <= lo_ms and cached.until_ms <= until_ms:
        span = cached.until_ms
        finals = [r for r in cached.finals if lo_ms <= r[0] < span]
        reopened = [_row(life, until) for life in ledger.lives_of(
            [uid for ms, uid in cached.open if lo_ms <= ms < span])]
        if ledger.lives_digest(since_ms=lo_ms, until_ms=span) == _digest([*finals, *reopened], lo_ms):
            fresh = [_row(life, until) for life in ledger.lives(since=span / 1000, until=until)]
            rows = [*finals, *reopened, *(r for r in fresh if r[0] < until_ms)]
            reused = sum(1 for r in finals if r[2] is not None)
    if rows is None:
        rows = [_row(life, until) for life in ledger.lives(since=look_back, until=until)]
    rows.sort(key=_order)
    if path is not None:
        _store(path, lo_ms, until_ms, rows)
    return Read([r[2] for r in rows if r[2] is not None], reused)


def _digest(rows: list[_Row], lo_ms: int) -> tuple[int, int, int]:
    """ledger.queries.lives_digest of these rows."""
    return (len(rows), sum(r[0] - lo_ms for r in rows),
            sum(r[3] - lo_ms for r in rows if r[3] is not None))


def _order(row: _Row) -> tuple[int, str]:
    return row[0], row[1]


def _row(life: Any, until: float) -> _Row:
    ended = life.finished_ms if life.finished_ms is not None else life.deleted_ms
    return life.submitted_ms, life.uid, recorded_life(life, until=until), ended


@dataclass(frozen=True, slots=True)
class _Cached:
    lo_ms: int
    until_ms: int
    finals: list[_Row]
    open: list[tuple[int, str]]


def _load(path: Path) -> _Cached | None:
    """The cache file: the ended lives as rows of indices into its tables of queues, priority classes and
    shapes (count and requests), which keeps it small and quick to read."""
    try:
        doc = json.loads(path.read_bytes())
        if doc.get("version") != VERSION:
            return None
        queues = [str(q) for q in doc["queues"]]
        classes = [None if c is None else str(c) for c in doc["classes"]]
        shapes = [(int(n), tuple((str(r), int(m)) for r, m in requests)) for n, requests in doc["shapes"]]
        finals: list[_Row] = []
        for item in doc["finals"]:
            if len(item) == 3:
                finals.append((int(item[0]), str(item[1]), None, int(item[2])))
                continue
            ms, uid, end_ms, q, c, k, started, ended = item
            count, requests = shapes[k]
            finals.append((int(ms), str(uid), RecordedLife(
                local_queue=queues[q], priority_class=classes[c], submitted=int(ms) / 1000, count=count,
                requests=requests, started=None if started is None else float(started),
                ended=None if ended is None else float(ended)), int(end_ms)))
        open_ = [(int(ms), str(uid)) for ms, uid in doc["open"]]
        return _Cached(int(doc["lo_ms"]), int(doc["until_ms"]), finals, open_)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, IndexError):
        return None  # missing, unreadable or not ours: a miss


def _store(path: Path, lo_ms: int, until_ms: int, rows: list[_Row]) -> None:
    finals: list[list[Any]] = []
    open_: list[list[Any]] = []
    queues: dict[str, int] = {}
    classes: dict[str | None, int] = {}
    shapes: dict[tuple[int, tuple[tuple[str, int], ...]], int] = {}
    for ms, uid, life, end_ms in rows:
        if end_ms is None:
            open_.append([ms, uid])
        elif life is None:
            finals.append([ms, uid, end_ms])
        else:
            q = queues.setdefault(life.local_queue, len(queues))
            c = classes.setdefault(life.priority_class, len(classes))
            k = shapes.setdefault((life.count, life.requests), len(shapes))
            finals.append([ms, uid, end_ms, q, c, k, life.started, life.ended])
    doc = {"version": VERSION, "lo_ms": lo_ms, "until_ms": until_ms, "queues": list(queues),
           "classes": list(classes), "shapes": [[n, [list(p) for p in req]] for n, req in shapes],
           "finals": finals, "open": open_}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".lives-")
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(doc, separators=(",", ":")))  # (json.dump encodes in Python: 10x slower)
        os.replace(tmp, path)
    except OSError:
        return  # a cache that cannot be written is skipped: the next plan reads the window again

