"""The spool: a durable, ordered journal of records not yet in the database.

Every record goes through it: ``append`` writes JSON lines to ``spool-NNNNNNNNNN.jsonl`` and fsyncs them
before returning, so a record the caller handed over survives a crash of the process or of the database;
the ledger's writer thread reads the oldest records (``peek``), writes them in one transaction, and only
then ``commit``s them: the files and lines already written are forgotten (a position file, replaced
atomically, marks a file consumed part-way). A crash between the database commit and the spool commit
replays a batch the database already has: the writes are idempotent (``ledger.store``), so nothing is
doubled, and nothing is lost.

A line that cannot be read (damaged, or written by another version) is moved to ``rejected.jsonl`` with
the reason and logged; a torn last line (the process died inside ``append``, which therefore never
returned) is dropped. One process at a time owns a spool directory (an exclusive lock).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .codec import CodecError, SpoolItem, decode, encode
from .errors import LedgerError

log = logging.getLogger("queue_manager.ledger")

_ROTATE_BYTES = 8 << 20
_POSITION = "position.json"
_REJECTED = "rejected.jsonl"
_LOCK = "lock"


@dataclass(frozen=True, slots=True)
class _Entry:
    file: int
    end: int  # byte offset just after this record's line
    item: SpoolItem


@dataclass(frozen=True, slots=True)
class Token:
    """What ``peek`` handed out: ``count`` records, the last ending at ``file``/``end``."""

    count: int
    file: int
    end: int


def _name(n: int) -> str:
    return f"spool-{n:010d}.jsonl"


class Spool:
    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory).expanduser()
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._lock_file: IO[bytes] = open(self.dir / _LOCK, "ab")  # noqa: SIM115 - held for life
        except OSError as err:
            raise LedgerError(f"cannot use the spool directory {self.dir}: {err.strerror}") from None
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock_file.close()
            raise LedgerError(f"the spool directory {self.dir} is in use by another process "
                              "(give each ledger writer its own)") from None
        self._mutex = threading.Lock()
        self._queue: deque[_Entry] = deque()
        self._load()
        files = self._files()
        self._current = files[-1] + 1 if files else 1
        self._out: IO[bytes] | None = None
        self._size = 0

    # --- startup -----------------------------------------------------------------------------------------

    def _files(self) -> list[int]:
        out = []
        for p in self.dir.glob("spool-*.jsonl"):
            try:
                out.append(int(p.name[6:-6]))
            except ValueError:
                continue
        return sorted(out)

    def _position(self) -> tuple[int, int]:
        try:
            raw = json.loads((self.dir / _POSITION).read_text())
            return int(raw["file"]), int(raw["offset"])
        except (OSError, ValueError, KeyError, TypeError):
            return 0, 0

    def _load(self) -> None:
        pos_file, pos_offset = self._position()
        files = self._files()
        for n in files:
            if n < pos_file:
                (self.dir / _name(n)).unlink(missing_ok=True)  # consumed before a crash
                continue
            data = (self.dir / _name(n)).read_bytes()
            start = pos_offset if n == pos_file else 0
            offset = 0
            for line in data.splitlines(keepends=True):
                end = offset + len(line)
                if end > start:
                    if not line.endswith(b"\n") and n == files[-1]:
                        log.warning("spool: dropping a torn last line of %s (the writer died in append)",
                                    _name(n))
                        break
                    self._read_line(n, end, line)
                offset = end

    def _read_line(self, n: int, end: int, line: bytes) -> None:
        try:
            item = decode(json.loads(line))
        except (ValueError, CodecError) as err:
            self._reject(line, f"{_name(n)} at byte {end - len(line)}: {err}")
            return
        self._queue.append(_Entry(n, end, item))

    def _reject(self, line: bytes, why: str) -> None:
        log.error("spool: record moved to %s: %s", self.dir / _REJECTED, why)
        with open(self.dir / _REJECTED, "ab") as out:
            out.write(json.dumps({"why": why, "line": line.decode("utf-8", "replace").rstrip("\n")}).encode()
                      + b"\n")
            out.flush()
            os.fsync(out.fileno())

    # --- the journal -------------------------------------------------------------------------------------

    def append(self, items: Sequence[SpoolItem], *, sync: bool = True) -> None:
        """Write ``items`` at the end of the journal, durably (fsync) unless ``sync`` is False: then they
        survive a crash of the process (the kernel has them) but not of the machine; for records that
        can be observed again (a Workload still in the API is listed again at the next start)."""
        if not items:
            return
        lines = [json.dumps(encode(i), separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
                 for i in items]
        with self._mutex:
            if self._out is None or self._size >= _ROTATE_BYTES:
                self._rotate()
            out = self._out
            if out is None:  # pragma: no cover - _rotate opened it
                raise LedgerError(f"spool {self.dir}: no journal file open")
            entries = []
            for item, line in zip(items, lines, strict=True):
                self._size += len(line)
                entries.append(_Entry(self._current, self._size, item))
            try:
                out.write(b"".join(lines))
                out.flush()
                if sync:
                    os.fsync(out.fileno())
            except OSError as err:
                raise LedgerError(f"cannot write the spool {self.dir}: {err.strerror}") from None
            self._queue.extend(entries)

    def _rotate(self) -> None:
        if self._out is not None:
            self._out.close()
            self._current += 1
        path = self.dir / _name(self._current)
        self._out = open(path, "ab")  # noqa: SIM115 - closed at rotation or close()
        self._size = path.stat().st_size
        _fsync_dir(self.dir)

    def peek(self, limit: int) -> tuple[list[SpoolItem], Token | None]:
        """The oldest ``limit`` records not committed yet, and the token to commit them."""
        with self._mutex:
            entries = [self._queue[i] for i in range(min(limit, len(self._queue)))]
        if not entries:
            return [], None
        last = entries[-1]
        return [e.item for e in entries], Token(len(entries), last.file, last.end)

    def commit(self, token: Token) -> None:
        """Forget the records of ``token`` (they are in the database)."""
        with self._mutex:
            for _ in range(token.count):
                self._queue.popleft()
            done_through = token.file - 1
            if not self._queue and self._out is not None and token.file == self._current:
                # Everything written is in the database: start the next file afresh.
                self._out.close()
                self._out = None
                self._current += 1
                done_through = token.file
            for n in self._files():
                if n <= done_through:
                    (self.dir / _name(n)).unlink(missing_ok=True)
            if done_through < token.file:
                self._write_position(token.file, token.end)
            else:
                self._write_position(self._current, 0)

    def _write_position(self, file: int, offset: int) -> None:
        tmp = self.dir / (_POSITION + ".tmp")
        with open(tmp, "w") as out:
            json.dump({"file": file, "offset": offset}, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, self.dir / _POSITION)
        _fsync_dir(self.dir)

    def pending(self) -> int:
        with self._mutex:
            return len(self._queue)

    def reject(self, item: SpoolItem, why: str) -> None:
        """Keep a record the database refused (not a connection fault) for a person to look at."""
        self._reject(json.dumps(encode(item)).encode(), why)

    def close(self) -> None:
        with self._mutex:
            if self._out is not None:
                self._out.close()
                self._out = None
        self._lock_file.close()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
