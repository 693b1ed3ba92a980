"""Requests to the API server several at a time, answered in the order asked.

A new 500-team policy makes 1,500 applies and as many Events, each a round trip of 20-30 ms that the
reconcile spent waiting: 43 s one after the other (issue 38). Each call's answer, or the exception it
raised, comes back in the order of `items`: the caller records what was done and reports it as one at a
time would, before it raises the first failure (a connection lost on one call must not lose the record of
the calls that succeeded)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from kubernetes.client.exceptions import ApiException

T = TypeVar("T")
R = TypeVar("R")

SERIAL_UP_TO = 4  # no threads for this few
WORKERS = 8


def fan_out(call: Callable[[T], R], items: Sequence[T]) -> list[R | Exception]:
    """call(item) for each item, WORKERS at a time when there are more than SERIAL_UP_TO; the exception a
    call raised is returned in its place."""
    def one(item: T) -> R | Exception:
        try:
            return call(item)
        except Exception as err:  # returned to the caller, which raises the first once it has recorded
            return err

    if len(items) <= SERIAL_UP_TO:
        return [one(item) for item in items]
    with ThreadPoolExecutor(min(WORKERS, len(items)), thread_name_prefix="qm-fan-out") as pool:
        return list(pool.map(one, items))


def busy(err: ApiException) -> bool:
    """No verdict on the object: the API server is busy or away (the next reconcile retries)."""
    return err.status is None or err.status >= 500 or err.status in (408, 409, 429)
