"""The operator process's malloc: at most MALLOC_ARENAS arenas.

glibc gives each thread that contends for the heap an arena of its own, up to 8 per core, and memory
freed in one arena is not reused by another. The operator's threads (kopf's handler pool, the reconcile's
writes, fanout.py) all allocate: each arena kept its own freed but unreturned pages. With 20,000 Workloads
and 1,000 ClusterQueues the operator grew from idle by 149 MiB with glibc's default and by 124 MiB with
two arenas, and ended 8 edits later at 361 and 334 MiB (one run each, docs/benchmarks.md). The CPU cost
of the contention is not measurable at the operator's load."""

from __future__ import annotations

import ctypes
import ctypes.util
import os

MALLOC_ARENAS = 2
_M_ARENA_MAX = -8  # glibc malloc.h


def cap_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """mallopt(M_ARENA_MAX, arenas) unless MALLOC_ARENA_MAX is set (the deployer's choice stands); whether
    the cap is in force. False on a libc without mallopt (musl, macOS): nothing to cap there."""
    if os.environ.get("MALLOC_ARENA_MAX"):
        return True  # glibc read it at start
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_ARENA_MAX, arenas))
