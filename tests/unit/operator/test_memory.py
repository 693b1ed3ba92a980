"""The operator caps glibc's malloc arenas (queue_manager/memory.py), unless the deployer chose a number."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import subprocess
import sys

import pytest

from queue_manager import memory


def test_the_cap_is_set_through_mallopt_on_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    calls: list[tuple[int, int]] = []

    class Libc:
        def __init__(self, name: str) -> None:
            self.mallopt = self

        def __call__(self, param: int, value: int) -> int:
            calls.append((param, value))
            return 1

    monkeypatch.setattr(ctypes.util, "find_library", lambda name: "libc.so.6")
    monkeypatch.setattr(ctypes, "CDLL", Libc)
    assert memory.cap_malloc_arenas() is True
    assert calls == [(-8, memory.MALLOC_ARENAS)]


def test_a_deployers_malloc_arena_max_stands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    monkeypatch.setattr(ctypes, "CDLL", lambda name: pytest.fail("mallopt called"))
    assert memory.cap_malloc_arenas() is True


def test_without_a_libc_that_has_mallopt_nothing_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    assert memory.cap_malloc_arenas() is False

    def no_libc(name: str) -> None:
        raise OSError("not found")

    monkeypatch.setattr(ctypes.util, "find_library", lambda name: "libc.so")
    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert memory.cap_malloc_arenas() is False


def test_the_real_glibc_accepts_the_cap() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    done = subprocess.run([sys.executable, "-c", "from queue_manager.memory import cap_malloc_arenas as c; "
                           "print(c())"], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == ("True" if ctypes.util.find_library("c") else "False")
