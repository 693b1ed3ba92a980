"""High availability on the real control plane: two `qm run` replicas elect a leader on a Lease, the
follower stands by, and when the leader is SIGKILLed mid-transition the follower takes over within the
lease duration and finishes the transition with no step applied twice or skipped."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from tests.integration.test_operator_harness import (  # noqa: F401 - the *_fixture names register fixtures
    Cluster,
    OperatorProcess,
    cluster_fixture,
    operator_factory_fixture,
    operator_kubeconfig_fixture,
    shipped,
    suffix,
    two_team_policy,
)
from tests.integration.test_operator_transitions import (
    FAST,
    _cut_research_to,
    _step_numbers,
    _transition,
    _watch_quota,
)

LEASE_SECONDS = 6.0
RETRY_SECONDS = LEASE_SECONDS * 2 / 15  # queue_manager.leader.Timing: client-go's proportions


def _lease(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    try:
        out = k8s.CoordinationV1Api(cluster.api).read_namespaced_lease(name, namespace)
    except ApiException as err:
        if err.status == 404:
            return {}
        raise
    spec = out.spec
    return {"holder": spec.holder_identity or "", "renew": spec.renew_time, "acquire": spec.acquire_time,
            "transitions": spec.lease_transitions or 0}


def _delete_lease(cluster: Cluster, namespace: str, name: str) -> None:
    try:
        k8s.CoordinationV1Api(cluster.api).delete_namespaced_lease(name, namespace)
    except ApiException as err:
        if err.status != 404:
            raise


def _new_holder(cluster: Cluster, namespace: str, name: str, old: str,
                since: float) -> tuple[dict[str, Any], float]:
    """The Lease once another replica holds it, and the seconds since `since` (polled every 50 ms)."""
    deadline = since + 3 * LEASE_SECONDS
    while time.monotonic() < deadline:
        now = _lease(cluster, namespace, name)
        if now["holder"] not in ("", old):
            return now, time.monotonic() - since
        time.sleep(0.05)
    pytest.fail(f"no replica took the Lease within {3 * LEASE_SECONDS:g} s", pytrace=False)


def _identity(op: OperatorProcess) -> str:
    for record in op.log_records():
        if str(record.get("message", "")).startswith("leader election: acquired"):
            return str(record["identity"])
    return ""


def _is_leader(op: OperatorProcess) -> bool | None:
    for line in op.metrics().splitlines():
        if line.startswith("qm_leader "):
            return float(line.split()[1]) == 1.0
    return None


def _reconciling(op: OperatorProcess) -> bool:
    return any(r.get("message") == "queue-manager operator starting" for r in op.log_records())


def test_the_follower_stands_by_then_takes_over_a_killed_leader_within_the_lease_and_finishes_the_transition(
    operator_factory: Callable[..., OperatorProcess], cluster: Cluster, wait_until: Callable[..., Any]
) -> None:
    s = suffix()
    namespace, lease = shipped("Role")["metadata"]["namespace"], f"qm-{s}"
    flags = ("--leader-elect", "--lease-namespace", namespace, "--lease-name", lease,
             "--lease-duration", f"{LEASE_SECONDS:g}s")
    cluster.cleanup.append(lambda: _delete_lease(cluster, namespace, lease))
    leader = operator_factory(*flags).start()
    wait_until(lambda: _identity(leader), timeout=20, what="the first replica acquires the Lease")
    follower = operator_factory(*flags).start()  # healthy (passive /healthz) while standing by
    wait_until(lambda: any("standing by" in str(r.get("message")) for r in follower.log_records()),
               timeout=20, what="the second replica stands by")

    policy = two_team_policy(s, research_ns=cluster.namespace("research"),
                             business_ns=cluster.namespace("business"), transition=FAST)
    cluster.create_policy(policy)
    name, cq, flavor = policy["metadata"]["name"], f"research-{s}", f"gpu-{s}"
    wait_until(lambda: cluster.gpu_quota(cq, flavor) == "4", timeout=30, what="ClusterQueue rendered")
    _cut_research_to(cluster, name, 1)
    wait_until(lambda: cluster.gpu_quota(cq, flavor) == "3", timeout=30, what="step 1 applied by the leader")
    # Passive: the follower never started kopf (no watch, no handler, no write) and says it is not leader.
    before = _lease(cluster, namespace, lease)
    assert (before["holder"], _is_leader(leader), _is_leader(follower), _reconciling(follower)) == (
        _identity(leader), True, False, False), (leader.log_text()[-3000:], follower.log_text()[-3000:])

    killed_at = time.monotonic()
    leader.kill()
    # The leader's LAST renewal is read after the kill: `before` was read earlier, and the leader renews every
    # 0.8 s while the checks above run (dating from it overstated the gap by a renewal period). 0.3 s lets a
    # write that was in flight at the SIGKILL land; the follower cannot take the lease that soon.
    time.sleep(0.3)
    last = _lease(cluster, namespace, lease)
    assert last["holder"] == before["holder"], last
    taken, takeover = _new_holder(cluster, namespace, lease, before["holder"], killed_at)
    last_renew_to_acquire = (taken["acquire"] - last["renew"]).total_seconds()
    print(f"\ntakeover after SIGKILL: {takeover:.2f} s; from the leader's last renewal to the follower's "
          f"acquireTime: {last_renew_to_acquire:.2f} s (lease {LEASE_SECONDS:g} s, renew every "
          f"{RETRY_SECONDS:.2f} s)")
    # Within the lease: the follower dates the last renewal at its read before it (queue_manager/leader.py),
    # and tries exactly when the lease runs out; plus one API round trip (and this loop's 50 ms poll).
    assert last_renew_to_acquire <= LEASE_SECONDS + 0.5, (takeover, last_renew_to_acquire)
    assert takeover <= LEASE_SECONDS + 0.5, (takeover, last_renew_to_acquire)
    # The follower logs its acquisition after its write returns; this loop may read the Lease before that.
    wait_until(lambda: _identity(follower), timeout=5, what="the follower logs that it acquired the Lease")
    assert (taken["holder"], taken["transitions"]) == (_identity(follower), before["transitions"] + 1)

    seen: list[str] = ["3"]
    wait_until(lambda: _watch_quota(cluster, cq, flavor, seen) == "1", timeout=60,
               what="the new leader finishes the transition")
    wait_until(lambda: _transition(cluster, name).get("phase") == "Complete", timeout=15,
               what="transition complete")
    assert (seen, _step_numbers(cluster, cq), _is_leader(follower), follower.healthy()) == (
        ["3", "2", "1"], [1, 2, 3], True, True)


def test_a_leader_that_stops_cleanly_releases_the_lease_so_the_follower_takes_over_at_once(
    operator_factory: Callable[..., OperatorProcess], cluster: Cluster, wait_until: Callable[..., Any]
) -> None:
    s = suffix()
    namespace, lease = shipped("Role")["metadata"]["namespace"], f"qm-{s}"
    flags = ("--leader-elect", "--lease-namespace", namespace, "--lease-name", lease,
             "--lease-duration", "30s")
    cluster.cleanup.append(lambda: _delete_lease(cluster, namespace, lease))
    leader = operator_factory(*flags).start()
    wait_until(lambda: _identity(leader), timeout=20, what="the first replica acquires the Lease")
    follower = operator_factory(*flags).start()
    wait_until(lambda: any("standing by" in str(r.get("message")) for r in follower.log_records()),
               timeout=20, what="the second replica stands by")
    stopped_at = time.monotonic()
    assert leader.stop() == 0  # SIGTERM: kopf stops, then the Lease is released
    wait_until(lambda: _lease(cluster, namespace, lease)["holder"] == _identity(follower) != "",
               timeout=10, what="the follower takes the released Lease")
    took = time.monotonic() - stopped_at
    print(f"\ntakeover after a clean stop: {took:.2f} s (lease 30 s)")
    assert took < 30 / 2
    assert isinstance(_lease(cluster, namespace, lease)["acquire"], datetime)


def test_a_leader_whose_lease_is_taken_stops_acting_at_once(
    operator_factory: Callable[..., OperatorProcess], cluster: Cluster, wait_until: Callable[..., Any]
) -> None:
    """Another holder in the Lease (a partition healed, an operator that took over): the old leader must
    stop before doing anything more. It exits (1), as controller-runtime's manager does."""
    s = suffix()
    namespace, lease = shipped("Role")["metadata"]["namespace"], f"qm-{s}"
    flags = ("--leader-elect", "--lease-namespace", namespace, "--lease-name", lease,
             "--lease-duration", f"{LEASE_SECONDS:g}s")
    cluster.cleanup.append(lambda: _delete_lease(cluster, namespace, lease))
    leader = operator_factory(*flags).start()
    wait_until(lambda: _identity(leader), timeout=20, what="the replica acquires the Lease")
    api = k8s.CoordinationV1Api(cluster.api)
    stored = api.read_namespaced_lease(lease, namespace)
    stored.spec.holder_identity = "intruder"
    stored.spec.renew_time = datetime.now(UTC)
    api.replace_namespaced_lease(lease, namespace, stored)
    taken_at = time.monotonic()
    assert leader.proc is not None
    wait_until(lambda: leader.proc is not None and leader.proc.poll() is not None,
               timeout=3 * RETRY_SECONDS + 5, what="the old leader exits")
    stopped = time.monotonic() - taken_at
    print(f"\nthe old leader exited {stopped:.2f} s after its Lease was taken (renews every "
          f"{RETRY_SECONDS:.2f} s)")
    assert (leader.proc.returncode, _lease(cluster, namespace, lease)["holder"]) == (1, "intruder")
    assert any("leader election: lost" in str(r.get("message")) for r in leader.log_records())
