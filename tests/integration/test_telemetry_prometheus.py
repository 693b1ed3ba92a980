"""The telemetry seam on a real Prometheus (Debian's 2.42, tests/prometheus_server.py): DCGM-format series
served by the test exporter, scraped every second, read back by the operator's reader
(queue_manager/telemetry.py: the query, the pods mapped to Workloads, the reduction) and judged by the
controller's rule (fairshare.control.idle.verdict). Real zeros are idle; a busy GPU is busy; a series that
vanished (Prometheus marks it stale), one never reported, a NaN, and a pod reporting fewer GPUs than it holds
are unknown; the ratio metric is read as percent."""

from __future__ import annotations

import time
from typing import Any

from fairshare.control import PolicyRules
from fairshare.control.idle import Activity, verdict
from fairshare.policy import parse_policy
from queue_manager.cache import WorkloadCache
from queue_manager.metrics import Metrics
from queue_manager.telemetry import TelemetryFeed
from tests.builders import WorkloadBuilder
from tests.prometheus_server import Telemetry
from tests.unit.policy.helpers import sample

NS = "ai-frontier-research"
GPU = "nvidia.com/gpu"
JOBS = {"zero": 1, "busy": 1, "nan": 1, "vanish": 1, "absent": 1, "half": 2}


def _policy(metric: str) -> Any:
    doc = sample()
    doc["metadata"]["name"] = f"idle-{metric.lower().replace('_', '-')}"
    doc["spec"]["idle"] = {"enabled": True, "metric": metric, "thresholdPercent": 10, "window": "8s",
                           "scrapeInterval": "1s", "staleAfterScrapes": 3, "prometheus": {"timeout": "5s"}}
    return parse_policy(doc)


def _pods() -> list[dict[str, Any]]:
    """One pod per Job, owned by it (no Kueue annotation: the Job is the way to its Workload here)."""
    return [{"metadata": {"namespace": NS, "name": f"{job}-abcde",
                          "ownerReferences": [{"kind": "Job", "name": job, "controller": True}]}}
            for job in JOBS]


def _cache() -> WorkloadCache:
    cache = WorkloadCache()
    for job, gpus in JOBS.items():
        w = (WorkloadBuilder(NS, f"job-{job}-1a2b3").queue(NS).priority(100).owner("Job", job)
             .request(GPU, str(gpus)).admitted(NS, "gpu-a100", at=0.0).build())
        cache.put(w.key, w)
    return cache


def test_real_zeros_are_idle_and_vanished_absent_nan_or_partial_telemetry_is_unknown(
    prometheus: Telemetry,
) -> None:
    ex = prometheus.exporter
    ex.set_pod(NS, "zero-abcde", 0.0)
    ex.set_pod(NS, "busy-abcde", 80.0)
    ex.set_pod(NS, "nan-abcde", float("nan"))
    ex.set_pod(NS, "vanish-abcde", 0.0)
    ex.set_pod(NS, "half-abcde", 0.0)  # one GPU of the two its workload holds
    prometheus.server.wait_for_series("DCGM_FI_DEV_GPU_UTIL", 5)
    time.sleep(8)  # the 8 s window covered with samples
    ex.remove_pod(NS, "vanish-abcde")
    time.sleep(4.5)  # its last sample older than 3 scrapes (stale), still in the window
    feed = TelemetryFeed(lambda ns: _pods() if ns == NS else [], _cache(), Metrics(), time.time,
                         url=prometheus.url)
    try:
        verdicts: dict[str, dict[str, tuple[Activity, str]]] = {}
        for metric in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"):
            policy = _policy(metric)
            reading = feed.read(policy)
            assert reading.error is None, reading.error
            rules = PolicyRules.of(policy).idle
            assert rules is not None
            now = time.time()
            verdicts[metric] = {}
            for job, gpus in JOBS.items():
                v = verdict(rules, reading, f"{NS}/job-{job}-1a2b3", gpus, now)
                verdicts[metric][job] = (v.activity, v.reason)
    finally:
        feed.close()
    for metric, got in verdicts.items():
        assert {job: a for job, (a, _) in got.items()} == {
            "zero": Activity.IDLE, "busy": Activity.BUSY, "nan": Activity.UNKNOWN, "vanish": Activity.UNKNOWN,
            "absent": Activity.UNKNOWN, "half": Activity.UNKNOWN}, (metric, got)
        assert "not a number in 0-100%" in got["nan"][1]
        assert "(stale)" in got["vanish"][1]
        assert got["absent"][1] == "no DCGM series for its pods (absent)"
        assert got["half"][1] == "1 of its 2 GPUs report"


def test_a_prometheus_that_is_down_makes_every_activity_unknown_in_one_line(prometheus: Telemetry) -> None:
    prometheus.exporter.set_pod(NS, "zero-abcde", 0.0)
    url = prometheus.url
    prometheus.server.stop()
    feed = TelemetryFeed(lambda ns: _pods(), _cache(), Metrics(), time.time, url=url)
    try:
        policy = _policy("DCGM_FI_DEV_GPU_UTIL")
        reading = feed.read(policy)
    finally:
        feed.close()
    assert reading.error is not None and reading.error.startswith(f"{url}: cannot connect:"), reading.error
    rules = PolicyRules.of(policy).idle
    assert rules is not None
    v = verdict(rules, reading, f"{NS}/job-zero-1a2b3", 1, time.time())
    assert v.activity is Activity.UNKNOWN and v.reason.startswith("telemetry not read:")
