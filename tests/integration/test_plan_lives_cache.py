"""qm plan's lives cache on a real ledger, a SQLite file and a PostgreSQL database (tests/ledger_db.py): a
plan through the cache reads the same lives, in the same order, as one that reads the whole window, however
the ledger changed between the two plans (qm/planning/lives_cache.py)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, delete, insert, update

from ledger import schema as t
from ledger.db import resolve_url
from ledger.ledger import open_ledger
from qm.planning.inputs import History, read_history

DAY = 86400.0
NOW = 1_800_000_000.0
GPU = "nvidia.com/gpu"


def _life(uid: str, submitted: float, *, gpus: int = 1, admitted: float | None = None,
          finished: float | None = None, deleted: float | None = None, evictions: int = 0,
          pod_sets: bool = True) -> dict[str, Any]:
    ms = round(submitted * 1000)
    end = finished if finished is not None else deleted
    return dict(
        uid=uid, namespace="research", name=uid, local_queue="research", team="research", owner_kind=None,
        owner_name=None, user_name=None, priority_class="experiment", priority=10, project=None,
        team_label=None, cost_center=None, labels={},
        pod_sets=[{"name": "main", "count": 1, "requests": {GPU: gpus * 1000}}] if pod_sets else [],
        phase="Finished" if finished is not None else "Admitted" if admitted is not None else "Pending",
        seq=1, attempts=1 if admitted is not None else 0, submitted_ms=ms, first_seen_ms=ms, observed_ms=ms,
        first_admitted_ms=None if admitted is None else round(admitted * 1000),
        last_admitted_ms=None if admitted is None else round(admitted * 1000),
        attempt_start_ms=None if admitted is None or end is not None else round(admitted * 1000),
        last_evicted_ms=None, eviction_reason=None, evictions=evictions, eviction_stats=[],
        accumulated_s=None,
        finished_ms=None if finished is None else round(finished * 1000),
        finish_reason=None if finished is None else "Succeeded",
        deleted_ms=None if deleted is None else round(deleted * 1000),
        ended_ms=None if end is None else round(end * 1000), recovered=False)


class Ledger:
    """The ledger's workloads table, written as the operator's ledger would leave it."""

    def __init__(self, url: str, spool: Path) -> None:
        open_ledger(url, spool_dir=spool).close()  # the schema, migrated
        self.url = url
        self.engine = create_engine(resolve_url(url))

    def add(self, *lives: dict[str, Any]) -> None:
        with self.engine.begin() as c:
            c.execute(insert(t.workloads), list(lives))

    def change(self, uid: str, **values: Any) -> None:
        with self.engine.begin() as c:
            c.execute(update(t.workloads).where(t.workloads.c.uid == uid).values(**values))

    def remove(self, uid: str) -> None:
        with self.engine.begin() as c:
            c.execute(delete(t.workloads).where(t.workloads.c.uid == uid))


def _history(url: str, until: float, cache: Path | None) -> History:
    return read_history(url, since=until - 28 * DAY, until=until, look_back=until - 56 * DAY, cache=cache)


def _same(url: str, until: float, cache: Path) -> History:
    """The read through the cache, checked against the whole window read."""
    cached, whole = _history(url, until, cache), _history(url, until, None)
    assert cached.lives == whole.lives
    assert whole.reused == 0
    return cached


def _month(rng: random.Random, until: float) -> list[dict[str, Any]]:
    """60 days of lives up to `until`: ended, running, waiting, deleted; some submitted at the same ms."""
    out = []
    for i in range(400):
        submitted = until - 60 * DAY + (i // 2) * (60 * DAY / 200)  # pairs share a submission time
        uid = f"w-{rng.randrange(10**9):09d}"
        kind = rng.random()
        if submitted > until - DAY and kind < 0.5:
            out.append(_life(uid, submitted, gpus=rng.choice((1, 2, 4))))  # waiting
        elif submitted > until - DAY:
            out.append(_life(uid, submitted, admitted=submitted + 60))  # running
        elif kind < 0.05:
            out.append(_life(uid, submitted, deleted=submitted + 30))  # deleted while waiting
        elif kind < 0.08:
            out.append(_life(uid, submitted, admitted=submitted + 5, finished=submitted + 90, pod_sets=False))
        else:
            out.append(_life(uid, submitted, admitted=submitted + 10, finished=submitted + 3600))
    return out


@pytest.fixture
def ledger(ledger_url: str, tmp_path: Path) -> Ledger:
    return Ledger(ledger_url, tmp_path / "spool")


def test_a_second_plan_reuses_the_ended_lives_and_reads_what_changed(ledger: Ledger, tmp_path: Path) -> None:
    rng = random.Random(3)
    lives = _month(rng, NOW)
    ledger.add(*lives)
    cache = tmp_path / "cache"
    first = _same(ledger.url, NOW, cache)
    assert first.reused == 0 and len(first.lives) > 300
    # An hour later: the running ones finished, a waiting one started, one was deleted while running,
    # new ones arrived.
    running = [w for w in lives if w["attempt_start_ms"] is not None]
    waiting = [w for w in lives if w["first_admitted_ms"] is None and w["ended_ms"] is None]
    for w in running[:-1]:
        ledger.change(w["uid"], finished_ms=round((NOW + 600) * 1000), ended_ms=round((NOW + 600) * 1000),
                      attempt_start_ms=None, phase="Finished", finish_reason="Succeeded")
    gone = round((NOW + 700) * 1000)
    ledger.change(running[-1]["uid"], deleted_ms=gone, ended_ms=gone)
    ledger.change(waiting[0]["uid"], first_admitted_ms=round((NOW + 60) * 1000),
                  last_admitted_ms=round((NOW + 60) * 1000), attempt_start_ms=round((NOW + 60) * 1000),
                  attempts=1, phase="Admitted")
    ledger.add(*(_life(f"new-{i}", NOW + 100 * i, admitted=NOW + 100 * i + 5) for i in range(10)))
    second = _same(ledger.url, NOW + 3600, cache)
    look_back_ms = round((NOW + 3600 - 56 * DAY) * 1000)
    ended_before = sum(1 for w in lives if w["ended_ms"] is not None and w["pod_sets"]
                       and w["submitted_ms"] >= look_back_ms)
    assert second.reused == ended_before
    # Once more, with nothing changed, and with what the first plan left open now ended.
    third = _same(ledger.url, NOW + 3600, cache)
    assert third.reused > second.reused


@pytest.mark.parametrize("how", ["recorded late", "pruned", "replaced", "rewritten"])
def test_a_ledger_changed_inside_the_reused_span_is_read_again_whole(
    ledger: Ledger, tmp_path: Path, how: str
) -> None:
    rng = random.Random(5)
    lives = _month(rng, NOW)
    ledger.add(*lives)
    cache = tmp_path / "cache"
    _same(ledger.url, NOW, cache)
    ended = [w for w in lives if w["ended_ms"] is not None and w["submitted_ms"] > (NOW - 50 * DAY) * 1000]
    if how == "recorded late":  # the operator's spool delivers a life submitted two weeks ago
        ledger.add(_life("late", NOW - 14 * DAY, admitted=NOW - 14 * DAY + 5, finished=NOW - 13 * DAY))
    elif how == "pruned":
        ledger.remove(ended[10]["uid"])
    elif how == "rewritten":  # an ended life's end corrected in place
        finished = next(w for w in ended if w["finished_ms"] is not None)
        ledger.change(finished["uid"], finished_ms=finished["finished_ms"] + 1000)
    else:  # another ledger at the same URL: as many lives, other ones
        for w in ended[:3]:
            ledger.remove(w["uid"])
        ledger.add(*(_life(f"other-{i}", NOW - 20 * DAY + i, admitted=NOW - 20 * DAY + i + 1,
                           finished=NOW - 19 * DAY) for i in range(3)))
    again = _same(ledger.url, NOW + 60, cache)
    assert again.reused == 0


def test_a_cache_that_is_not_ours_or_older_than_the_window_is_a_miss(ledger: Ledger, tmp_path: Path) -> None:
    rng = random.Random(7)
    ledger.add(*_month(rng, NOW))
    cache = tmp_path / "cache"
    _same(ledger.url, NOW, cache)
    (written,) = cache.iterdir()
    written.write_text('{"version": 1, "finals": [["x"]]')
    assert _same(ledger.url, NOW + 60, cache).reused == 0
    assert _same(ledger.url, NOW + 120, cache).reused > 0
    # A longer look-back than the cached read's: read whole.
    wider = read_history(ledger.url, since=NOW - 40 * DAY, until=NOW + 180, look_back=NOW - 80 * DAY,
                         cache=cache)
    whole = read_history(ledger.url, since=NOW - 40 * DAY, until=NOW + 180, look_back=NOW - 80 * DAY)
    assert (wider.lives, wider.reused) == (whole.lives, 0)
