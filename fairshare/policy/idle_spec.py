"""`spec.idle` of a QuotaPolicy: idle-GPU reclamation (docs/policy.md, "Idle GPUs"). Pydantic models like the
rest of the spec (fairshare/policy/model.py imports them); the rule that applies them is
fairshare/control/idle.py, the cross-field checks are in fairshare/policy/semantics.py.

An experiment whose GPUs all stay below `thresholdPercent` of activity for `window` (read from dcgm-exporter's
metrics through Prometheus) is warned, and evicted `grace` later if it is still idle. Off by default, and a
dry run until `dryRun: false`. Missing or stale telemetry is "unknown", never "idle".
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from .names import RESOURCE_NAME
from .units import Duration, Integer

# dcgm-exporter's two activity fields (its default counters file, dcp-metrics-included.csv):
# DCGM_FI_DEV_GPU_UTIL in percent (0-100), DCGM_FI_PROF_GR_ENGINE_ACTIVE as a ratio (0-1).
IdleMetric = Literal["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
# The operator's own `qm run --prometheus-url` may give the URL instead; a URL that is not http(s) is refused.
PROMETHEUS_URL = r"^https?://[^\s/?#]+(/[^\s?#]*)?$"


class _Spec(BaseModel):
    """The spec's conventions (fairshare.policy.model._Spec, which imports this module): strict types as the
    API server's schema (`dryRun: "yes"` is refused, not read as true)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True,
                              strict=True)


class IdlePrometheus(_Spec):
    """Where the operator reads the GPUs' activity: a Prometheus HTTP API that scrapes dcgm-exporter."""

    url: str | None = Field(
        default=None, pattern=PROMETHEUS_URL, max_length=2048,
        description="Base URL of the Prometheus HTTP API, e.g. http://prometheus.monitoring:9090 (the "
        "operator queries <url>/api/v1/query). Unset: qm run's --prometheus-url.")
    timeout: Duration = Field(default="5s", description="The most one query may take; a slower answer is "
                              "\"unknown\" telemetry for that reading.")


class IdleKeep(_Spec):
    """How far a user may opt a workload out with the annotation queuemanager.dev/keep-idle."""

    max_duration: Duration = Field(
        default="8h", description="The longest a keep-idle annotation (a duration, or \"true\" for this "
        "maximum) delays the reclamation of an idle workload beyond grace. 0s: the annotation is ignored.")


class IdleBudget(_Spec):
    """Most idle workloads reclaimed within a sliding window (their own budget, apart from
    spec.preemption.budget)."""

    max_victims: Integer = Field(default=10, ge=0, le=10000,
                                 description="Most reclaimed workloads per window.")
    window: Duration = Field(default="1h", description="Length of the sliding window.")


class IdleReclamation(_Spec):
    """Reclaim allocated-but-idle GPUs from experiments (the classes below spec.preemption's experiment
    priority; protected classes are never touched)."""

    enabled: bool = Field(default=False, description="Read the GPUs' activity and apply the rule.")
    dry_run: bool = Field(default=True, description="Only report (Events on the Workload and its Job, "
                          "status, metrics): no annotation, no eviction. Set false to enforce.")
    metric: IdleMetric = Field(default="DCGM_FI_DEV_GPU_UTIL", description="dcgm-exporter's activity "
                               "field: DCGM_FI_DEV_GPU_UTIL (percent) or DCGM_FI_PROF_GR_ENGINE_ACTIVE "
                               "(a ratio, read as percent).")
    resource: str = Field(default="nvidia.com/gpu", pattern=RESOURCE_NAME, max_length=63,
                          description="The resource whose "
                          "devices the metric describes (a workload reports one series per device it holds).")
    threshold_percent: Integer = Field(default=5, ge=1, le=100, description="A GPU whose activity reaches "
                                       "this (percent) at any sample of the window is busy.")
    window: Duration = Field(default="30m", description="How long every GPU of a workload must stay below "
                             "the threshold, with telemetry throughout, for it to be idle (and warned).")
    grace: Duration = Field(default="15m", description="Time between the warning and the eviction; a busy "
                            "sample in between cancels the warning.")
    scrape_interval: Duration = Field(default="30s", description="Prometheus's scrape interval of "
                                      "dcgm-exporter (the operator reads the telemetry this often).")
    stale_after_scrapes: Integer = Field(default=3, ge=1, le=100, description="A series whose last sample, "
                                         "or a gap between samples, is older than this many scrape "
                                         "intervals is stale: its workload's activity is unknown.")
    keep: IdleKeep = Field(default_factory=IdleKeep, description="The keep-idle annotation's limits.")
    budget: IdleBudget = Field(default_factory=IdleBudget, description="Reclamation budget.")
    prometheus: IdlePrometheus = Field(default_factory=IdlePrometheus, description="The telemetry source.")
