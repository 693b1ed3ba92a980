"""The operator: what the kopf handlers call. One `Operator` per process, created by `qm run` and handed to
kopf as `memo.operator` (no module globals). It only routes: the reconcile of a policy (reconcile.py), the
drift check of an owned object (drift.py), the Workload cache (workloads.py) and the history written on
shutdown (history_store.py). Every decision is `fairshare.control`'s; every write goes through `Writer`."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from .cache import PolicyRuntime, State
from .config import OperatorConfig
from .drift import check_drift
from .kube import Reader
from .ledger_feed import LedgerFeed
from .metrics import Metrics
from .ownership import owning_policy
from .reconcile import Reconciler, input_key
from .refs import WORKLOAD, key_of
from .workloads import on_workload_event
from .writer import Writer

log = logging.getLogger("queue_manager")


class Operator:
    """Reconciles QuotaPolicies into Kueue objects; see docs/operator.md."""

    def __init__(self, config: OperatorConfig, api: k8s.ApiClient, *, clock: Callable[[], float] = time.time,
                 metrics: Metrics | None = None) -> None:
        self.config = config
        self.clock = clock
        self.metrics = metrics or Metrics()
        self.state = State()
        self.reconciler = Reconciler(config, Writer(api, clock=clock), Reader(api), self.state, self.metrics,
                                     clock)
        self.ledger: LedgerFeed | None = None
        self._primed = False
        self._prime_lock = threading.Lock()
        self._ticking = threading.Lock()  # held by the one tick reconciling (reconcile_policy)

    def attach_ledger(self, feed: LedgerFeed | None) -> None:
        """The ledger this process writes (queue_manager/ledger_feed.py), or None."""
        self.ledger = feed
        self.reconciler.ledger = feed

    # The writer and reader are the reconciler's (tests may replace both with recording fakes).
    @property
    def writer(self) -> Writer:
        return self.reconciler.writer

    @writer.setter
    def writer(self, value: Writer) -> None:
        self.reconciler.writer = value

    @property
    def reader(self) -> Reader:
        return self.reconciler.reader

    @reader.setter
    def reader(self, value: Reader) -> None:
        self.reconciler.reader = value

    # --- QuotaPolicies ----------------------------------------------------------------------------------
    def policy_event(self, event_type: str | None, body: dict[str, Any]) -> None:
        name = str((body.get("metadata") or {}).get("name", ""))
        if not name:
            return
        if event_type == "DELETED" or _deleting(body):
            self.forget_policy(name, body)
            return
        rt = self.state.policies.get(name)
        if rt is not None and rt.policy is not None and rt.parsed_from == input_key(body):
            # Nothing a reconcile reads changed: our own status write coming back (every reconcile that
            # decides something writes one or two). The tick reconciles; reconciling each such event made
            # kopf's queue of the policy's events wait behind them, and an edit behind the queue (issue 38:
            # at 500 teams an edit's event reached its handler 3-5 s after the API server stored it).
            self.state.runtime(name, body)
            return
        self.reconcile_policy(name, body)

    def policy_tick(self, body: dict[str, Any]) -> None:
        name = str((body.get("metadata") or {}).get("name", ""))
        if name and not _deleting(body):
            self.reconcile_policy(name, body)

    def reconcile_policy(self, name: str, body: dict[str, Any]) -> None:
        """Reconcile now; a tick while a reconcile of the policy runs is dropped: the running one or the next
        tick covers it (at 50,000 Workloads a reconcile takes about 0.5 s, and queued ones made an edit wait
        behind them). One tick reconciles at a time in the process: a tick while another policy's tick runs
        is dropped too (the next covers it; every reconcile is level-triggered). With ten policies ticking,
        their reconciles shared the interpreter with an edit's (at 50,000 Workloads in ten policies, edit ->
        first step went from 3.8 s to 2.6 s median with the turn: docs/benchmarks.md). An edit
        takes no turn: it waits only for a running reconcile of its own policy, and is reconciled."""
        if not self._primed:
            self.prime_workloads()
        rt = self.state.runtime(name, body)
        tick = rt.policy is not None and rt.parsed_from == input_key(body)
        if tick:
            if not self._ticking.acquire(blocking=False):
                self.metrics.ticks_skipped.labels(name, "turn").inc()
                return
            if not rt.lock.acquire(blocking=False):
                self._ticking.release()
                self.metrics.ticks_skipped.labels(name, "own").inc()
                return
        else:
            rt.lock.acquire()
        try:
            self.reconciler.reconcile(rt)
        finally:
            rt.lock.release()
            if tick:
                self._ticking.release()
            self.check_drift_events(rt)

    def forget_policy(self, name: str, body: dict[str, Any] | None = None) -> None:
        """A deleted policy (or one being deleted: its deletionTimestamp is set, e.g. deleted while no
        operator ran, kopf's finalizer still on it): delete what it owned, found by its own label (a policy
        owns what carries its name, never another's), reported under its name; never reconciled again
        (nothing of a dying policy is applied). Kueue keeps running admitted work; queues vanish, so nothing
        new is admitted through them."""
        with self.state.lock:
            rt = self.state.policies.pop(name, None)
        if rt is not None and rt.changes is not None:
            self.state.workloads.unsubscribe(rt.changes)
        if rt is None:  # not reconciled by this process: its objects are still found by its label
            rt = PolicyRuntime(name=name, body=body or {"metadata": {"name": name}})
        with rt.lock:
            rt.desired = {}
            self.reconciler.prune(rt, self.reconciler.actuator(rt))

    # --- owned Kueue objects (drift) ---------------------------------------------------------------------
    def owned_event(self, event_type: str | None, body: dict[str, Any]) -> None:
        policy = owning_policy(body)
        if policy is None:
            return
        key = key_of(body)
        if event_type == "DELETED":
            self.state.live.pop(key, None)
        else:
            self.state.live[key] = (policy, body)
        rt = self.state.policies.get(policy)
        if rt is None:
            return
        rt.drift_events.append((event_type, body))
        self.check_drift_events(rt)

    def check_drift_events(self, rt: PolicyRuntime) -> None:
        """Check the owned objects' queued events for drift (drift.py), in order, unless the policy's lock
        is held: its holder checks them once it lets go (every holder calls this after releasing). A
        handler thread never waits for a reconcile: at 50,000 Workloads the owned objects' handlers spent
        79 thread-seconds in 50 s waiting for the lock, in kopf's pool of handler threads (6 on 2 cores),
        which the Workload and policy handlers share. An event queued while the holder lets go is seen by
        the holder's check after its release, or by this call's own attempt."""
        while rt.drift_events and rt.lock.acquire(blocking=False):
            try:
                while rt.drift_events:
                    event_type, body = rt.drift_events.popleft()
                    check_drift(self.reconciler, rt, event_type, body)
            finally:
                rt.lock.release()

    # --- Workloads ---------------------------------------------------------------------------------------
    def prime_workloads(self) -> None:
        """Fill the Workload cache with one LIST before the first decision. The watch delivers the Workloads
        as events after the start; a decision before them would take an in-flight victim for gone (its
        record would end Gone and the victim, deactivated, would never be reactivated: found by
        tests/integration/test_operator_faults.py). Watch events wait while the list is applied (they are
        newer). Raises while the API is away: the handler is retried."""
        with self._prime_lock:
            if self._primed:
                return
            items = self.reader.list(WORKLOAD)
            for body in items:
                on_workload_event(self.state.workloads, self.metrics, "ADDED", body)
            self._primed = True
        log.info("workload cache primed with %d workload(s)", len(items))

    def workload_event(self, event_type: str | None, body: dict[str, Any]) -> None:
        if not self._primed:
            with self._prime_lock:  # the first LIST is being applied: this event is newer, it goes after
                pass
        parsed = on_workload_event(self.state.workloads, self.metrics, event_type, body)
        if self.ledger is not None:
            self.ledger.workload(event_type, parsed)

    # --- lifecycle -----------------------------------------------------------------------------------------
    def persist_all_history(self) -> None:
        """On shutdown: write every policy's history (the periodic write may be up to history_persist
        seconds old)."""
        now = self.clock()
        with self.state.lock:
            runtimes = list(self.state.policies.values())
        for rt in runtimes:
            with rt.lock:
                if rt.history is None or rt.policy is None:
                    continue
                self.reconciler.sync_history(rt, now)
                status = self.reconciler.stored(rt).model_copy(update={"history": rt.history.serialize()})
                self.reconciler.write_status(rt, status, ["history"])
                self.metrics.history_persist_time.labels(rt.name).set(now)
            self.check_drift_events(rt)

    def shutdown(self) -> None:
        log.info("operator stopping: persisting usage history")
        try:
            self.persist_all_history()
        except ApiException as err:
            log.error("could not persist usage history on shutdown: %s", err.reason)


def _deleting(body: dict[str, Any]) -> bool:
    return bool((body.get("metadata") or {}).get("deletionTimestamp"))
