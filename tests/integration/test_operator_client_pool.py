"""The operator's API client keeps a connection for each request its threads make at once.

One reconcile fans out `fanout.WORKERS` requests while kopf's handler threads and the feeds share the same
client. With the client's default pool (5 per CPU) the operator benchmark logged about 150 urllib3
"Connection pool is full, discarding connection" WARNINGs per run: each request beyond the pool opened a
connection of its own and threw it away. Here, on the real kube-apiserver, two reconciles' worth of
fan-out plus the feeds' requests are held open at once (watches that last a second), through the client
configuration the operator builds (`queue_manager.kube.load_configuration`)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
from kubernetes import client as k8s

from queue_manager.fanout import WORKERS, fan_out
from queue_manager.kube import load_configuration

AT_ONCE = 2 * WORKERS + 4  # two reconciles fanning out, and the feeds


def _discarded(cfg: k8s.Configuration, caplog: pytest.LogCaptureFixture) -> int:
    """How many connections the client threw away while AT_ONCE one-second watches ran at once."""
    api = k8s.ApiClient(cfg)
    core = k8s.CoreV1Api(api)
    start = threading.Barrier(AT_ONCE)

    def watch(_: int) -> int:
        start.wait(timeout=30)
        # A watch that the server ends after a second holds its connection for that second.
        resp = core.list_namespace(watch=True, timeout_seconds=1, _request_timeout=30, _preload_content=False)
        try:
            return len(resp.read())
        finally:
            resp.release_conn()

    caplog.clear()
    try:
        with caplog.at_level(logging.WARNING, logger="urllib3.connectionpool"):
            answers: list[int | Exception] = []

            def reconcile(i: int) -> None:
                answers.extend(fan_out(watch, range(i * WORKERS, (i + 1) * WORKERS)))

            def feed(i: int) -> None:
                answers.append(watch(i))

            threads = [threading.Thread(target=reconcile, args=(i,)) for i in range(2)]
            threads += [threading.Thread(target=feed, args=(i,)) for i in range(AT_ONCE - 2 * WORKERS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
            assert not any(t.is_alive() for t in threads), "a watch did not end within 60 s"
            failed = [a for a in answers if isinstance(a, Exception)]
            assert len(answers) == AT_ONCE and not failed, failed
    finally:
        api.close()
    return sum("Connection pool is full" in r.getMessage() for r in caplog.records)


def test_the_operators_client_reuses_a_connection_for_every_request_its_threads_make_at_once(
    kubeconfig: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = load_configuration(str(kubeconfig))
    assert cfg.connection_pool_maxsize >= AT_ONCE
    assert _discarded(cfg, caplog) == 0
    # The same load through a pool of one reconcile's fan-out: connections are thrown away (the test can
    # tell the difference).
    small = load_configuration(str(kubeconfig))
    small.connection_pool_maxsize = WORKERS
    assert _discarded(small, caplog) > 0
