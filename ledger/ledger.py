"""The ledger the operator writes and ``qm usage``/``qm cost``/``qm audit`` read.

Writing never waits for the database: ``record_*`` reduces each record to its facts, appends it to the
spool (fsync'd) and returns; a writer thread applies the spool to the database in order, in batches, one
transaction each, and retries with backoff while the database does not answer. ``flush`` waits until the
spool is empty (tests, shutdown). Queries go to the database directly.

A writer opened with ``tolerate_unavailable`` starts even when the server does not answer (the operator
must not stop scheduling because its ledger is down): records are spooled and the writer thread checks
and migrates the schema once the server answers. The same thread prunes (``prune_every_s``) between
batches, so that the database has one writer.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import SQLAlchemyError

from . import queries
from .activity import ActivityRecord
from .codec import SpoolItem
from .db import (
    check_engine,
    connect_checked,
    describe,
    first_line,
    is_sqlite,
    make_engine,
    resolve_url,
    transient,
)
from .errors import LedgerError, LedgerUnavailable
from .facts import facts_of
from .life import ClosedUsage
from .metrics import LedgerMetrics
from .queries import AuditQuery, LifeRecord, PruneCounts, QuotaRow, UsageQuery, UsageRow
from .records import (
    DEFAULT_RETENTION_SECONDS,
    AuditEntry,
    LabelKeys,
    PriceTable,
    QuotaChange,
    WorkloadGone,
    WorkloadObservation,
    to_millis,
)
from .spool import Spool
from .store import apply_batch

log = logging.getLogger("queue_manager.ledger")
T = TypeVar("T")

_SAFE = re.compile(r"[^A-Za-z0-9._-]")
BATCH = 1000
_BACKOFF_MIN_S = 0.2
_BACKOFF_MAX_S = 5.0


@dataclass(frozen=True, slots=True)
class LedgerConfig:
    """What the policy decides for the ledger: prices, accounted labels and retention."""

    prices: PriceTable = field(default_factory=PriceTable)
    labels: LabelKeys = field(default_factory=LabelKeys)
    retention_seconds: float = DEFAULT_RETENTION_SECONDS


_transient = transient


class Ledger:
    def __init__(self, engine: Engine, url: URL, spool: Spool | None, config: LedgerConfig,
                 metrics: LedgerMetrics | None, *, schema_checked: bool = True,
                 prune_every_s: float | None = None, clock: Callable[[], float] = time.time) -> None:
        self._engine = engine
        self.url = url
        self._spool = spool
        self._config = config
        self._metrics = metrics
        self._wake = threading.Condition()
        self._stop = False
        self._idle = threading.Event()
        self._last_error: str | None = None
        self._thread: threading.Thread | None = None
        self._schema_checked = schema_checked
        self._prune_every = prune_every_s
        self._clock = clock
        self._next_prune = clock() + (prune_every_s or 0.0)
        self.last_prune: PruneCounts | None = None
        if spool is not None:
            self._thread = threading.Thread(target=self._run, name="ledger-writer", daemon=True)
            self._thread.start()

    # --- configuration -----------------------------------------------------------------------------------

    @property
    def config(self) -> LedgerConfig:
        return self._config

    def configure(self, config: LedgerConfig) -> None:
        """New prices, labels or retention (a policy change); applies to records from now on."""
        self._config = config

    # --- writing (never blocks on the database) ---------------------------------------------------------

    def record_workloads(self, observations: Iterable[WorkloadObservation], *, sync: bool = True) -> None:
        """``sync=False``: spooled without an fsync (see Spool.append), for observations the API can give
        again (the operator lists every Workload at its next start)."""
        cfg = self._config
        self._append([facts_of(o, cfg.prices, cfg.labels) for o in observations], sync=sync)

    def record_gone(self, uids: Iterable[str], at: float) -> None:
        """Lives held open whose Workloads no longer exist (see WorkloadGone)."""
        self._append([WorkloadGone(uid, at) for uid in uids])

    def record_quotas(self, changes: Iterable[QuotaChange]) -> None:
        self._append(list(changes))

    def record_audit(self, entries: Iterable[AuditEntry]) -> None:
        self._append(list(entries))

    def record_activity(self, records: Iterable[ActivityRecord]) -> None:
        """What the GPUs did (ledger.activity): spooled without an fsync, as a reading repeats what is still
        in its window (a minute lost to a crash is read again, if still in the window, or is unmeasured)."""
        self._append([r for r in records if r.parts], sync=False)

    def _append(self, items: Sequence[SpoolItem], *, sync: bool = True) -> None:
        if self._spool is None:
            raise LedgerError(f"{describe(self.url)} was opened read-only")
        if not items:
            return
        self._spool.append(items, sync=sync)
        with self._wake:
            self._idle.clear()
            self._wake.notify_all()
        self._report()

    def _report(self) -> None:
        if self._metrics is not None:
            self._metrics.report(self.pending(), self._last_error is None)

    def pending(self) -> int:
        """Records handed over and not in the database yet."""
        return 0 if self._spool is None else self._spool.pending()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every record handed over is in the database; False on timeout."""
        if self._spool is None:
            return True
        deadline = None if timeout is None else time.monotonic() + timeout
        while self._spool.pending():
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            self._idle.wait(0.05 if remaining is None else min(0.05, remaining))
        return True

    def _run(self) -> None:
        spool = self._spool
        if spool is None:  # pragma: no cover - the thread only starts with a spool
            return
        backoff = _BACKOFF_MIN_S
        while True:
            with self._wake:
                while not self._stop and not spool.pending() and not self._prune_due():
                    self._idle.set()
                    self._wake.wait(self._until_prune())
                if self._stop:
                    return
            if not self._schema_checked:
                try:
                    check_engine(self._engine, self.url, migrate=True)
                except LedgerError as err:  # unavailable, or a schema this version cannot use
                    if not isinstance(err, LedgerUnavailable) and self._last_error != str(err):
                        log.error("ledger: %s; records stay spooled", err)
                    self._down(str(err))
                    self._sleep(backoff)
                    backoff = min(backoff * 2, _BACKOFF_MAX_S)
                    continue
                self._schema_checked = True
            if self._prune_due():
                self._prune_now()
            if not spool.pending():
                continue
            items, token = spool.peek(BATCH)
            if token is None:
                continue
            try:
                closed = self._apply(items)
            except SQLAlchemyError as err:
                if _transient(err):
                    self._down(first_line(err))
                    self._sleep(backoff)
                    backoff = min(backoff * 2, _BACKOFF_MAX_S)
                    continue
                self._isolate(spool)
                continue
            spool.commit(token)
            self._up()
            backoff = _BACKOFF_MIN_S
            if self._metrics is not None:
                self._metrics.observe(closed)
            self._report()

    def _prune_due(self) -> bool:
        return self._prune_every is not None and self._schema_checked and self._clock() >= self._next_prune

    def _until_prune(self) -> float | None:
        if self._prune_every is None:
            return None
        return max(0.05, self._next_prune - self._clock())

    def _prune_now(self) -> None:
        """Retention, on the writer thread (one writer); a failure is logged and tried at the next period."""
        now = self._clock()
        self._next_prune = now + (self._prune_every or 0.0)
        try:
            self.last_prune = self.prune(self._config.retention_seconds, now)
        except LedgerError as err:
            log.warning("ledger: pruning failed (tried again in %.0f s): %s", self._prune_every or 0.0, err)
            return
        counts = self.last_prune
        if counts.workloads or counts.audit or counts.quotas:
            log.info("ledger: pruned %d lives, %d audit rows, %d quota rows older than the retention",
                     counts.workloads, counts.audit, counts.quotas)

    def _apply(self, items: Sequence[SpoolItem]) -> list[ClosedUsage]:
        retention_ms = to_millis(self._config.retention_seconds)
        with self._engine.begin() as conn:
            return apply_batch(conn, items, retention_ms=retention_ms)

    def _isolate(self, spool: Spool) -> None:
        """A batch failed for a reason other than the connection: apply its records one at a time and
        set aside (``rejected.jsonl``) the ones the database refuses, so one bad record cannot stall the
        rest."""
        for _ in range(BATCH):
            items, token = spool.peek(1)
            if token is None:
                return
            try:
                closed = self._apply(items)
            except SQLAlchemyError as err:
                if _transient(err):
                    return
                spool.reject(items[0], f"the database refused the record: {first_line(err)}")
                log.error("ledger: a record was refused by %s and set aside: %s", describe(self.url),
                          first_line(err))
                closed = []
            spool.commit(token)
            if self._metrics is not None:
                self._metrics.observe(closed)

    def unavailable(self) -> str | None:
        """Why the database does not take records now (None: it does); records wait in the spool."""
        return self._last_error

    def _down(self, why: str) -> None:
        if self._last_error is None:
            log.warning("ledger database %s unavailable (%s); spooling records", describe(self.url), why)
        self._last_error = why
        self._report()

    def _up(self) -> None:
        if self._last_error is not None:
            log.info("ledger database %s available again; spool flushed in order", describe(self.url))
        self._last_error = None

    def _sleep(self, seconds: float) -> None:
        with self._wake:
            if not self._stop:
                self._wake.wait(seconds)

    # --- reading -------------------------------------------------------------------------------------------

    def usage(self, query: UsageQuery) -> list[UsageRow]:
        return self._read(lambda c: queries.usage(c, query))

    def audit(self, query: AuditQuery) -> list[AuditEntry]:
        return self._read(lambda c: queries.audit(c, query))

    def quotas(self, *, since: float, until: float, team: str | None = None) -> list[QuotaRow]:
        return self._read(lambda c: queries.quotas(c, since_ms=to_millis(since), until_ms=to_millis(until),
                                                    team=team))

    def life(self, uid: str) -> LifeRecord | None:
        return self._read(lambda c: queries.life(c, uid))

    def lives(self, *, since: float, until: float) -> list[queries.LifeSummary]:
        """The workload lives submitted in ``[since, until)`` (epoch seconds), in submission order."""
        return self._read(lambda c: queries.lives(c, submitted_since_ms=to_millis(since),
                                                   submitted_until_ms=to_millis(until)))

    def lives_of(self, uids: Sequence[str]) -> list[queries.LifeSummary]:
        """The lives of these uids that exist, in submission order."""
        return self._read(lambda c: queries.lives_of(c, uids))

    def lives_digest(self, *, since_ms: int, until_ms: int) -> tuple[int, int, int]:
        """Of the lives submitted in ``[since_ms, until_ms)``: how many, and sums of their submission and end
        times (queries.lives_digest)."""
        return self._read(lambda c: queries.lives_digest(c, submitted_since_ms=since_ms,
                                                         submitted_until_ms=until_ms))

    def open_lives(self, *, observed_before: float) -> list[tuple[str, str, str]]:
        """(uid, namespace, name) of the lives not ended, last observed before ``observed_before``."""
        return self._read(lambda c: queries.open_lives(c, to_millis(observed_before)))

    def prune(self, retention_seconds: float, now: float) -> PruneCounts:
        """Delete what ended more than ``retention_seconds`` before ``now`` (see queries.prune)."""
        cutoff = to_millis(now - retention_seconds)
        try:
            with self._engine.begin() as conn:
                return queries.prune(conn, cutoff_ms=cutoff)
        except SQLAlchemyError as err:
            raise LedgerUnavailable(f"cannot prune {describe(self.url)}: {first_line(err)}") from None

    def _read(self, fn: Callable[[Connection], T]) -> T:
        try:
            with self._engine.connect() as conn:
                return fn(conn)
        except SQLAlchemyError as err:
            raise LedgerUnavailable(f"cannot read {describe(self.url)}: {first_line(err)}") from None

    # --- lifetime ----------------------------------------------------------------------------------------

    def close(self, flush_timeout: float | None = 10.0) -> None:
        """Stop the writer (after trying to flush for ``flush_timeout`` s); what is left stays spooled."""
        if self._thread is not None:
            if flush_timeout:
                self.flush(flush_timeout)
            with self._wake:
                self._stop = True
                self._wake.notify_all()
            self._thread.join()
            self._thread = None
        if self._spool is not None:
            self._spool.close()
        self._engine.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def default_spool_dir(url: URL) -> Path:
    """Next to a SQLite file (``ledger.db.spool``); for a server, under the user's data directory."""
    if is_sqlite(url):
        return Path(f"{url.database}.spool")
    # Host and database only (never the credentials), as one safe directory name: no "/", no "..".
    name = _SAFE.sub("_", f"{url.host or 'local'}-{url.port or 5432}-{url.database}").lstrip(".")[:200]
    return Path("~/.local/share/queue-manager/spool").expanduser() / (name or "ledger")


def open_ledger(url: str | None = None, *, spool_dir: str | Path | None = None,
                config: LedgerConfig | None = None, metrics: LedgerMetrics | None = None,
                read_only: bool = False, tolerate_unavailable: bool = False,
                prune_every_s: float | None = None, clock: Callable[[], float] = time.time) -> Ledger:
    """Open (and migrate, unless read-only) the ledger at ``url``.

    One :class:`LedgerError` line for a bad URL, a server that does not answer, or a schema from a newer
    version. A read-only ledger (the CLI) neither migrates nor writes, and needs no spool. With
    ``tolerate_unavailable`` (the operator) a server that does not answer is no error: records are spooled
    and the schema is checked once it answers (a schema from a newer version is then logged and the
    records stay spooled). ``prune_every_s``: the writer applies the retention that often.
    """
    resolved = resolve_url(url)
    checked = True
    try:
        engine = connect_checked(resolved, migrate=not read_only)
    except LedgerUnavailable as err:
        if read_only or not tolerate_unavailable:
            raise
        log.warning("ledger: %s; starting anyway, records are spooled until it answers", err)
        engine, checked = make_engine(resolved), False
    spool = None
    if not read_only:
        try:
            spool = Spool(spool_dir if spool_dir is not None else default_spool_dir(resolved))
        except LedgerError:
            engine.dispose()
            raise
    ledger = Ledger(engine, resolved, spool, config or LedgerConfig(), metrics, schema_checked=checked,
                    prune_every_s=prune_every_s, clock=clock)
    if not checked:
        ledger._down("the database did not answer at start")
    return ledger
