"""The GPU-activity and Kueue rows of the dashboard and the GPU-activity alerts (manifests/monitoring) under
`promtool test rules` (Debian's promtool, as tests/integration/test_monitoring_rules.py runs it), and the
names they read: the operator's (queue_manager/metrics.py), dcgm-exporter's and Kueue v0.19.2's.

An hour of series: research's pod reports two GPUs at 12.5% and 37.5%, business's one at 75%, a namespace of
no team 50%; Kueue counts 4 GPUs in use in research (quota 2: it borrows) and 1 in business (quota 4).
Research uses 0.5 of its 4 GPUs: allocated but idle. A team Kueue counts 8 GPUs for and whose pods report
nothing raises no idle alert (missing telemetry is not idle)."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.integration.test_monitoring_rules import RULE, _alert, _promtool, _series

DASHBOARD = RULE.parent / "grafana-dashboard.json"
ROWS = ("GPU activity (DCGM) and idle GPUs", "Kueue")
# (in this order: $__range_s before $__range)
VARIABLES = {"$policy": "p", "$resource": "nvidia.com/gpu", "$__rate_interval": "5m", "$__range_s": "3600",
             "$__range": "1h"}
GPU = "nvidia.com/gpu"

# Kueue v0.19.2's metric names (pkg/metrics/metrics.go, Subsystem "kueue"), those the monitoring reads.
KUEUE_METRICS = {"kueue_pending_workloads", "kueue_admission_wait_time_seconds",
                 "kueue_cluster_queue_resource_usage", "kueue_cluster_queue_nominal_quota"}
# dcgm-exporter's activity field (its default counters, etc/default-counters.csv).
DCGM_METRICS = {"DCGM_FI_DEV_GPU_UTIL"}


def _panels() -> dict[str, list[str]]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    out: dict[str, list[str]] = {}
    for row in ROWS:
        start = next(i for i, p in enumerate(panels) if p["title"] == row)
        for p in itertools.takewhile(lambda p: p["type"] != "row", panels[start + 1:]):
            exprs = [str(t["expr"]) for t in p["targets"]]
            for var, value in VARIABLES.items():
                exprs = [e.replace(var, value) for e in exprs]
            out[str(p["title"])] = exprs
    return out


def _dcgm(ns: str, pod: str, gpu: int, values: str) -> dict[str, str]:
    return _series("DCGM_FI_DEV_GPU_UTIL", values, gpu=str(gpu), UUID=f"GPU-{pod}-{gpu}", Hostname="node-1",
                   container="main", namespace=ns, pod=pod)


def _usage(name: str, cq: str, resource: str, values: str) -> dict[str, str]:
    return _series(name, values, cohort="org", cluster_queue=cq, flavor="a100", resource=resource,
                   replica_role="leader")


HOUR = [
    _series("qm_namespace_team", "1x80", policy="p", namespace="research", team="research"),
    _series("qm_namespace_team", "1x80", policy="p", namespace="business", team="business"),
    _series("qm_namespace_team", "1x80", policy="p", namespace="silent", team="silent"),
    _dcgm("research", "r1", 0, "12.5x80"),
    _dcgm("research", "r1", 1, "37.5x80"),
    _dcgm("business", "b1", 0, "75x80"),
    _dcgm("other", "x1", 0, "50x80"),
    _usage("kueue_cluster_queue_resource_usage", "research", GPU, "4x80"),
    _usage("kueue_cluster_queue_resource_usage", "research", "cpu", "8x80"),
    _usage("kueue_cluster_queue_resource_usage", "business", GPU, "1x80"),
    _usage("kueue_cluster_queue_resource_usage", "silent", GPU, "8x80"),
    _usage("kueue_cluster_queue_nominal_quota", "research", GPU, "2x80"),
    _usage("kueue_cluster_queue_nominal_quota", "business", GPU, "4x80"),
    _series("kueue_pending_workloads", "3x80", cluster_queue="research", status="active",
            replica_role="leader"),
    _series("kueue_pending_workloads", "1x80", cluster_queue="research", status="inadmissible",
            replica_role="leader"),
    _series("kueue_admission_wait_time_seconds_bucket", "0+1x80", cluster_queue="research",
            priority_class="exp", replica_role="leader", le="30"),
    _series("kueue_admission_wait_time_seconds_bucket", "0+2x80", cluster_queue="research",
            priority_class="exp", replica_role="leader", le="60"),
    _series("kueue_admission_wait_time_seconds_bucket", "0+2x80", cluster_queue="research",
            priority_class="exp", replica_role="leader", le="+Inf"),
    _series("qm_gpu_activity_workloads", "1x80", policy="p", state="idle"),
    _series("qm_gpu_activity_workloads", "2x80", policy="p", state="busy"),
    _series("qm_gpu_activity_workloads", "1x80", policy="p", state="unknown"),
    _series("qm_idle_workloads_warned", "1x80", policy="p"),
    _series("qm_idle_warnings_total", "0+1x80", policy="p", mode="enforced"),
    _series("qm_preemptions_total", "0+0.25x80", policy="p", reason="idle-gpus", mode="enforced"),
    _series("qm_preemptions_total", "0+1x80", policy="p", reason="starved-protected-work", mode="enforced"),
    _series("qm_telemetry_up", "1x80", policy="p"),
    _series("qm_telemetry_up", "0x80", policy="q"),
]


def _at_60m(expr: str, samples: list[tuple[str, float]]) -> dict[str, Any]:
    return {"expr": expr, "eval_time": "60m",
            "exp_samples": [{"labels": labels, "value": value} for labels, value in samples]}


def test_the_gpu_activity_and_kueue_panels_compute_what_their_titles_say(tmp_path: Path) -> None:
    promtool = _promtool()
    panels = _panels()
    research, business = '{team="research"}', '{team="business"}'
    expected: dict[str, list[list[tuple[str, float]]]] = {
        # The namespace of no team is left out; the silent team has no line (no series, not 0%).
        "GPU utilization by team (DCGM)": [[(research, 25.0), (business, 75.0)]],
        "GPU utilization by namespace (DCGM)": [[('{namespace="research"}', 25.0),
                                                 ('{namespace="business"}', 75.0)]],
        "GPUs allocated vs active by team": [[(research, 4.0), (business, 1.0), ('{team="silent"}', 8.0)],
                                             [(research, 0.5), (business, 0.75)]],
        "GPU-hours allocated vs active in the time range by team": [
            [(research, 4.0), (business, 1.0), ('{team="silent"}', 8.0)],
            [(research, 0.5), (business, 0.75)]],
        "Experiments by GPU activity": [[('{state="idle"}', 1.0), ('{state="busy"}', 2.0),
                                         ('{state="unknown"}', 1.0)], [("{}", 1.0)]],
        "Idle-GPU warnings and reclamations": [[('{mode="enforced"}', 5.0)], [('{mode="enforced"}', 1.25)],
                                               [("{}", 1.0)]],
        "Pending workloads by ClusterQueue (Kueue)": [[('{cluster_queue="research", status="active"}', 3.0),
                                                       ('{cluster_queue="research", status="inadmissible"}',
                                                        1.0)]],
        # Per second, one wait in (0, 30] s and one in (30, 60] s: p50 at 30 s, p95 at 57 s (interpolated, in
        # floating point: 56.99999999999999).
        "Admission wait time p50 / p95 (Kueue)": [[('{cluster_queue="research"}', 30.0)],
                                                   [('{cluster_queue="research"}', 56.99999999999999)]],
        "ClusterQueue usage vs nominal quota (Kueue)": [[
            ('{cluster_queue="research", resource="nvidia.com/gpu"}', 2.0),
            ('{cluster_queue="business", resource="nvidia.com/gpu"}', 0.25)]],
    }
    assert sorted(panels) == sorted(expected)
    cases = [_at_60m(expr, samples) for title, exprs in panels.items()
             for expr, samples in zip(exprs, expected[title], strict=True)]
    tests = [{"interval": "1m", "input_series": HOUR, "promql_expr_test": cases}]
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump({"tests": tests}, sort_keys=False))
    done = subprocess.run([str(promtool), "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


IDLE, DOWN = "QueueManagerGPUsAllocatedButIdle", "QueueManagerGPUTelemetryDown"
UNKNOWN, RECLAIMED = "QueueManagerGPUActivityUnknown", "QueueManagerIdleGPUsReclaimed"


def test_the_gpu_activity_alerts_pass_promtool_test_rules(tmp_path: Path) -> None:
    promtool = _promtool()
    doc = yaml.safe_load(RULE.read_text())
    groups = [g for g in doc["spec"]["groups"] if g["name"] == "queue-manager-gpu-activity.rules"]
    assert len(groups) == 1
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    tests = [{"interval": "1m", "input_series": HOUR, "alert_rule_test": [
        # Research uses 12.5% of its 4 GPUs from 0m: firing once an hour has passed, not before; business
        # (75%) never; silent (no DCGM series) never.
        {"eval_time": "59m", "alertname": IDLE, "exp_alerts": []},
        {"eval_time": "70m", "alertname": IDLE, "exp_alerts": [
            _alert(IDLE, "warning", "Team research uses 12.5% of the GPUs it holds", team="research")]},
        {"eval_time": "9m", "alertname": DOWN, "exp_alerts": []},
        {"eval_time": "15m", "alertname": DOWN, "exp_alerts": [
            _alert(DOWN, "warning", "GPU telemetry of policy q is not read", policy="q")]},
        {"eval_time": "40m", "alertname": UNKNOWN, "exp_alerts": [
            _alert(UNKNOWN, "info", "1 experiment(s) of policy p have no usable GPU telemetry", policy="p")]},
        {"eval_time": "70m", "alertname": RECLAIMED, "exp_alerts": [
            _alert(RECLAIMED, "info", "15 idle experiment(s) of policy p reclaimed in the last hour",
                   policy="p")]},
    ]}]
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(
        {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": tests}, sort_keys=False))
    check = subprocess.run([str(promtool), "check", "rules", "rules.yaml"], cwd=tmp_path, capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    done = subprocess.run([str(promtool), "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_monitoring_reads_only_names_kueue_and_dcgm_exporter_export() -> None:
    text = RULE.read_text() + DASHBOARD.read_text()
    kueue = {re.sub(r"_(bucket|sum|count)$", "", n) for n in re.findall(r"\bkueue_[a-z_]+", text)}
    dcgm = set(re.findall(r"\bDCGM_FI_[A-Z_]+", text))
    assert (kueue, dcgm) == (KUEUE_METRICS, DCGM_METRICS)
