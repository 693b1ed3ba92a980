"""Leader election on a `coordination.k8s.io/v1` Lease: of the replicas of `qm run`, one reconciles.

The protocol is client-go's (`k8s.io/client-go/tools/leaderelection/leaderelection.go`,
`tryAcquireOrRenew`), so `kubectl get lease` reads as it does for kube-controller-manager:

- the holder writes `renewTime` every `retry_period`; a replica that is not the holder waits until the
  record has been unchanged for a whole `leaseDurationSeconds` of ITS OWN monotonic clock ("a client
  needs to wait a full LeaseDuration without observing a change to the record before it can attempt to
  take over"), so clock skew between nodes does not matter, only their rates. One refinement: the
  follower dates a change at its PREVIOUS read (the last moment it saw the old record), not at the read
  that saw the new one; so a dead leader is replaced within one lease duration of its death, not up to a
  poll later. Safe because a leader gives up at the latest `renew_deadline` (2/3 of the lease) after its
  last renewal, and a follower's clock starts at most one `retry_period` (2/15) before that renewal:
  2/15 < 1/3, with 1/5 of a lease to spare;
- every write is a replace carrying the resourceVersion it was decided on: of two replicas that both
  see an expired lease, the API server lets one win (the other gets 409 Conflict);
- a holder that could not renew for `renew_deadline` (2/3 of the lease) stops leading, and exits; every
  Lease request has a timeout of one retry period, and no renewal starts that could end after the
  deadline, so a hung API call cannot keep a leader acting past it. It exits (controller-runtime's
  manager exits on "leader election lost" too): its in-memory state and in-flight handlers die with it,
  and the Deployment restarts it as a follower;
- a holder that stops cleanly releases the lease (client-go's ReleaseOnCancel): empty holder, so the
  follower takes over on its next poll instead of after a whole lease.

Why not kopf's peering: it is priority-based, not an election. Replicas of one Deployment have equal
priorities, and kopf then freezes ALL of them ("If two operators run with the same priority, all
operators issue a warning and freeze", docs.kopf.dev/en/latest/peering); it also needs its own CRD
and RBAC beyond a Lease. Why gate kopf instead of returning early in handlers: a passive replica then
watches nothing and holds no state that could be stale when it takes over; taking over is exactly
a restart, which the transition code already resumes from status (tests/integration, kill
mid-transition).

The decisions (`observe`, `decide`, `lease_body`) are pure; `LeaderElector` does the I/O through
`Reader.lease` and the `Writer` (the only module that writes to the API).
"""

from __future__ import annotations

import logging
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol

from kubernetes.client.exceptions import ApiException

from fairshare.errors import QueueManagerError

log = logging.getLogger("queue_manager.leader")


class LeaderElectionError(QueueManagerError):
    """The Lease cannot be used at all (its namespace is missing, RBAC forbids it): a setup error."""


@dataclass(frozen=True, slots=True)
class Timing:
    """client-go's three durations, derived from the lease duration in its default proportions
    (15 s / 10 s / 2 s for kube-controller-manager)."""

    lease_duration: float
    renew_deadline: float
    retry_period: float

    @classmethod
    def of(cls, lease_duration: float) -> Timing:
        return cls(lease_duration, lease_duration * 2 / 3, lease_duration * 2 / 15)


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The fields of a Lease that the election reads."""

    holder: str  # "" when released or never held
    duration_seconds: int
    acquire_time: str | None
    renew_time: str | None
    transitions: int
    resource_version: str | None

    @classmethod
    def of(cls, lease: dict[str, Any]) -> LeaseRecord:
        spec = lease.get("spec") or {}
        meta = lease.get("metadata") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
            resource_version=meta.get("resourceVersion"),
        )


@dataclass(frozen=True, slots=True)
class Observation:
    """A record and when (this replica's monotonic clock) it was first seen as it is."""

    record: LeaseRecord | None
    observed_at: float


class Decision(StrEnum):
    CREATE = "create"  # no Lease yet
    TAKE = "take"  # released, or expired: unchanged for a whole lease duration
    RENEW = "renew"  # ours
    WAIT = "wait"  # another replica holds it


def observe(previous: Observation | None, record: LeaseRecord | None, now: float,
            last_read: float | None = None) -> Observation:
    """The new observation: the clock restarts only when the record changed (client-go's observedTime),
    dated at the previous read `last_read` when there was one (the change happened after it)."""
    if previous is not None and previous.record == record:
        return previous
    return Observation(record, last_read if previous is not None and last_read is not None else now)


def decide(identity: str, observation: Observation, now: float) -> Decision:
    record = observation.record
    if record is None:
        return Decision.CREATE
    if record.holder == identity:
        return Decision.RENEW
    if not record.holder:
        return Decision.TAKE
    if now >= observation.observed_at + record.duration_seconds:
        return Decision.TAKE
    return Decision.WAIT


def expires_in(observation: Observation, now: float) -> float:
    """Seconds until another holder's lease may be taken (0 when it may be now)."""
    record = observation.record
    if record is None or not record.holder:
        return 0.0
    return max(0.0, observation.observed_at + record.duration_seconds - now)


def micro_time(epoch: float) -> str:
    """A Kubernetes MicroTime (RFC 3339 with microseconds)."""
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_body(*, namespace: str, name: str, identity: str, duration_seconds: int, record: LeaseRecord | None,
               now: float, release: bool = False) -> dict[str, Any]:
    """The Lease to write for a decision: a new holder counts a transition and sets acquireTime; a renewal
    keeps them; a release empties the holder (and a 1 s duration, as client-go's release writes)."""
    renewing = record is not None and record.holder == identity
    transitions = (record.transitions if record is not None else 0) + (0 if renewing or record is None else 1)
    spec: dict[str, Any] = {
        "holderIdentity": None if release else identity,
        "leaseDurationSeconds": 1 if release else duration_seconds,
        "acquireTime": record.acquire_time if renewing and record is not None else micro_time(now),
        "renewTime": micro_time(now),
        "leaseTransitions": transitions,
    }
    metadata: dict[str, Any] = {"name": name, "namespace": namespace,
                                "labels": {"app.kubernetes.io/name": "queue-manager"}}
    if record is not None and record.resource_version:
        metadata["resourceVersion"] = record.resource_version
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}


def default_identity() -> str:
    """The pod name (a pod's hostname) plus a random suffix: two processes on one host differ too."""
    return f"{socket.gethostname()}_{secrets.token_hex(4)}"


class LeaseReader(Protocol):
    def lease(self, namespace: str, name: str, *, timeout: float | None = None) -> dict[str, Any] | None: ...


class LeaseWriter(Protocol):
    def create_lease(self, namespace: str, body: dict[str, Any], *,
                     timeout: float | None = None) -> dict[str, Any]: ...

    def replace_lease(self, namespace: str, body: dict[str, Any], *,
                      timeout: float | None = None) -> dict[str, Any]: ...


class LeaderElector:
    """Acquire (blocking), then renew in a thread until stopped; the I/O around the pure decisions."""

    def __init__(self, reader: LeaseReader, writer: LeaseWriter, *, namespace: str, name: str,
                 identity: str, timing: Timing, clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.reader, self.writer = reader, writer
        self.namespace, self.name, self.identity, self.timing = namespace, name, identity, timing
        self.clock, self.monotonic = clock, monotonic
        self.observation: Observation | None = None
        self.last_read: float | None = None  # monotonic time of the last successful read of the Lease
        self.is_leader = False
        self._renewer: threading.Thread | None = None
        self._stop = threading.Event()

    @property
    def where(self) -> str:
        return f"Lease {self.namespace}/{self.name}"

    def _duration_seconds(self) -> int:
        return max(1, round(self.timing.lease_duration))

    def try_acquire_or_renew(self) -> bool:
        """One round of client-go's tryAcquireOrRenew: True when this replica holds the lease after it."""
        timeout = self.timing.retry_period
        stored = self.reader.lease(self.namespace, self.name, timeout=timeout)
        record = LeaseRecord.of(stored) if stored is not None else None
        read_at = self.monotonic()
        self.observation = observe(self.observation, record, read_at, self.last_read)
        self.last_read = read_at
        decision = decide(self.identity, self.observation, self.monotonic())
        if decision is Decision.WAIT:
            return False
        body = lease_body(namespace=self.namespace, name=self.name, identity=self.identity,
                          duration_seconds=self._duration_seconds(), record=record, now=self.clock())
        try:
            if decision is Decision.CREATE:
                written = self.writer.create_lease(self.namespace, body, timeout=timeout)
            else:
                written = self.writer.replace_lease(self.namespace, body, timeout=timeout)
        except ApiException as err:
            if err.status == 409:  # another replica wrote first: it leads (or renewed); look again next round
                return False
            raise
        self.observation = Observation(LeaseRecord.of(written) if written else None, self.monotonic())
        return True

    def _setup_error(self, err: ApiException) -> LeaderElectionError:
        hint = ("its namespace does not exist: create it or pass --lease-namespace (or --no-leader-elect)"
                if err.status == 404 else
                "RBAC forbids it: grant get, create and update on leases "
                "(manifests/rbac/leader-election.yaml)")
        return LeaderElectionError(f"leader election: cannot use {self.where}: {hint}")

    def acquire(self, stop: threading.Event | None = None) -> bool:
        """Block until this replica leads (True) or `stop` is set (False). API errors other than a setup
        error are logged and retried, as a follower must outlive an API server restart."""
        waiting_logged = False
        while stop is None or not stop.is_set():
            try:
                if self.try_acquire_or_renew():
                    self.is_leader = True
                    record = self.observation.record if self.observation else None
                    log.info("leader election: acquired %s as %s", self.where, self.identity, extra={"qm": {
                        "lease": self.where, "identity": self.identity,
                        "transitions": record.transitions if record else 0}})
                    return True
            except ApiException as err:
                if err.status in (403, 404):
                    raise self._setup_error(err) from None
                log.warning("leader election: %s: API error %s %s; retrying", self.where, err.status,
                            err.reason)
            except Exception as err:  # the API server unreachable or slow (timeouts): a follower waits it out
                log.warning("leader election: %s: %s; retrying", self.where, " ".join(str(err).split())[:300])
            if not waiting_logged and self.observation is not None and self.observation.record is not None:
                log.info("leader election: %s is held by %s; standing by", self.where,
                         self.observation.record.holder, extra={"qm": {"lease": self.where,
                                                                       "identity": self.identity}})
                waiting_logged = True
            # Poll every retry period, and exactly when the holder's lease would expire.
            pause = self.timing.retry_period
            if self.observation is not None:
                left = expires_in(self.observation, self.monotonic())
                pause = min(pause, left) if left > 0 else pause
            if stop is not None:
                stop.wait(pause)
            else:
                time.sleep(pause)
        return False

    def start_renewing(self, on_lost: Callable[[], None]) -> None:
        """Renew every retry period in a daemon thread; `on_lost` when no renewal succeeded for the renew
        deadline (or another replica took the lease)."""

        def loop() -> None:
            last_ok = self.monotonic()
            while not self._stop.wait(self.timing.retry_period):
                # An attempt lasts up to one retry period (its timeout): none may end past the deadline.
                if self.monotonic() - last_ok + self.timing.retry_period > self.timing.renew_deadline:
                    self._lose(f"no renewal for {self.monotonic() - last_ok:.1f} s", on_lost)
                    return
                try:
                    if self.try_acquire_or_renew():
                        last_ok = self.monotonic()
                        continue
                    record = self.observation.record if self.observation else None
                    taken = record is not None and record.holder not in ("", self.identity)
                    reason = f"{record.holder} holds it" if taken and record else "a conflicting write"
                except Exception as err:  # any failure counts against the deadline; never kill the thread
                    taken, reason = False, f"renewal failed: {err}"
                if not taken:
                    log.warning("leader election: %s: %s; retrying", self.where, reason)
                    continue
                self._lose(reason, on_lost)
                return

        self._renewer = threading.Thread(target=loop, name="lease-renewer", daemon=True)
        self._renewer.start()

    def _lose(self, reason: str, on_lost: Callable[[], None]) -> None:
        if self._stop.is_set():
            return
        self.is_leader = False
        log.error("leader election: lost %s (%s); stopping", self.where, reason,
                  extra={"qm": {"lease": self.where, "identity": self.identity}})
        on_lost()

    def stop_and_release(self) -> None:
        """Stop renewing and, if still the holder, release the lease so a follower takes over at once."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(self.timing.retry_period + 5)
        if not self.is_leader:
            return
        self.is_leader = False
        try:
            stored = self.reader.lease(self.namespace, self.name, timeout=self.timing.retry_period)
            record = LeaseRecord.of(stored) if stored is not None else None
            if record is None or record.holder != self.identity:
                return
            self.writer.replace_lease(self.namespace, lease_body(
                namespace=self.namespace, name=self.name, identity=self.identity, duration_seconds=1,
                record=record, now=self.clock(), release=True), timeout=self.timing.retry_period)
            log.info("leader election: released %s", self.where)
        except Exception as err:  # unreachable, refused, timed out: the lease then expires by itself
            log.warning("leader election: could not release %s: %s", self.where,
                        " ".join(str(err).split())[:300])
