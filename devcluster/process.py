"""Child processes in their own process groups, with logs, and teardown that leaves no orphan."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _die_with_parent() -> None:
    """preexec_fn: SIGKILL this child when the launching process dies, even by SIGKILL (Linux only)."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1 (all held open while choosing, so distinct)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def port_is_listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass(frozen=True, slots=True)
class Component:
    """A started child: its pid is also its process-group id (start_new_session=True)."""

    name: str
    pid: int
    log: Path


class Supervisor:
    """Starts components and stops them all, newest first."""

    def __init__(self, *, die_with_parent: bool) -> None:
        self._die_with_parent = die_with_parent
        self._procs: list[tuple[Component, subprocess.Popen[bytes]]] = []
        self._argv: dict[str, tuple[list[str], Path, dict[str, str] | None]] = {}  # to restart a component

    @property
    def components(self) -> list[Component]:
        return [c for c, _ in self._procs]

    def start(
        self, name: str, argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None
    ) -> Component:
        log.parent.mkdir(parents=True, exist_ok=True)
        self._argv[name] = (list(argv), log, dict(env) if env is not None else None)
        preexec: Callable[[], None] | None = _die_with_parent if self._die_with_parent else None
        with log.open("ab") as out:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                start_new_session=True,
                preexec_fn=preexec,
                close_fds=True,
            )
        comp = Component(name, proc.pid, log)
        self._procs.append((comp, proc))
        return comp

    def restart(self, name: str, grace: float = 5.0) -> Component:
        """Stop component ``name`` (SIGTERM, then SIGKILL after ``grace``) and start it again with the same
        command line and log (appended), in the same place of the stop order. For fault tests."""
        index = next(i for i, (c, _) in enumerate(self._procs) if c.name == name)
        comp, proc = self._procs.pop(index)
        kill_group(comp.pid, grace)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)
        argv, log, env = self._argv[name]
        new = self.start(name, argv, log, env)
        self._procs.insert(index, self._procs.pop())
        return new

    def signal(self, name: str, sig: int) -> None:
        """Send ``sig`` to component ``name``'s process group (SIGSTOP/SIGCONT pause and resume it)."""
        comp = next(c for c, _ in self._procs if c.name == name)
        os.killpg(comp.pid, sig)

    def exited(self) -> list[tuple[Component, int]]:
        """Components that have exited, with their return codes."""
        return [(c, rc) for c, p in self._procs if (rc := p.poll()) is not None]

    def stop_all(self, grace: float = 5.0) -> None:
        while self._procs:
            comp, proc = self._procs.pop()
            kill_group(comp.pid, grace)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=1.0)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError as err:
        return err.errno == errno.EPERM
    # A zombie still "exists"; treat it as dead.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def rss_kib(pid: int) -> int:
    """Resident set size of ``pid`` in KiB (VmRSS from /proc), 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return 0
    return 0


def kill_group(pgid: int, grace: float) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after ``grace`` seconds."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not pid_alive(pgid):
            break
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pgid, os.WNOHANG)
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
