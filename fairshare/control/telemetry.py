"""The GPUs' activity as the controller observes it (`Observed.activity`): what both shells hand it.

The operator reads dcgm-exporter's series through Prometheus (queue_manager/telemetry.py): one series per
GPU of a pod, labels `namespace`, `pod`, `container`, `gpu`, `UUID`, `Hostname`; it maps pods to their
Workloads and reduces each series' samples in the window with `read_series`. The simulator computes the same
reduction from each workload's activity profile (simulations/activity.py; a test checks that both agree on
sampled profiles). The rule that reads them is fairshare.control.idle.

A reading keeps apart what the rule must tell apart: a real zero (a valid sample below the threshold), an
absent series (no reading for the GPU), a stale one (its last sample, or a gap, too old), and a sample that
is not a number in the metric's range (NaN, negative, above 100%): only the first can make a workload idle.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from fairshare.models import WorkloadKey

# dcgm-exporter's activity fields and the factor that makes their values percent: DCGM_FI_DEV_GPU_UTIL is a
# percent (0-100), DCGM_FI_PROF_GR_ENGINE_ACTIVE a ratio (0-1) (dcgm-exporter, etc/dcp-metrics-included.csv).
PERCENT_SCALE: Mapping[str, float] = {"DCGM_FI_DEV_GPU_UTIL": 1.0, "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 100.0}


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU of one pod of a workload, reduced from its samples in the window (`read_series`). Times are
    the samples' own (seconds since the epoch, or simulated seconds)."""

    pod: str
    gpu: str  # dcgm-exporter's `gpu` label (the device index), else its UUID
    valid: int  # samples that are a number in the metric's range
    invalid: int  # samples that are not (NaN, +-Inf, negative, above 100%)
    first: float  # the first valid sample (+inf when none)
    last: float  # the last valid sample (-inf when none)
    last_value: float  # its value, percent (NaN when none)
    last_busy: float | None  # the last valid sample at or above the threshold (None: none in the window)
    gap: float  # the longest time between two consecutive valid samples (0 with fewer than two)

    def describe(self) -> str:
        return f"pod {self.pod} GPU {self.gpu}"


@dataclass(frozen=True)
class ActivityReading:
    """The GPUs' activity of a policy's workloads, read at `measured_at` over the window before it.

    `threshold` is the one the readings' `last_busy` were reduced with, and `window` how far back they go:
    a reading made for other settings (the policy was edited since) is no evidence. `error`: the source
    could not be read (one line): every workload's activity is unknown. `keep`: each workload's
    queuemanager.dev/keep-idle annotation as written (the rule parses it)."""

    measured_at: float
    window: float
    threshold: float
    workloads: Mapping[WorkloadKey, tuple[GpuReading, ...]] = field(default_factory=dict)
    error: str | None = None
    source: str | None = None
    keep: Mapping[WorkloadKey, str] = field(default_factory=dict)


def read_series(samples: Iterable[tuple[float, float]], *, pod: str, gpu: str, scale: float,
                threshold: float) -> GpuReading:
    """Reduce one series' samples (time, value in the metric's unit), in time order, to a `GpuReading`:
    `scale` makes the values percent (PERCENT_SCALE), `threshold` is the policy's thresholdPercent."""
    valid = invalid = 0
    first, last, last_value = math.inf, -math.inf, math.nan
    last_busy: float | None = None
    gap = 0.0
    for t, raw in samples:
        value = raw * scale
        if not math.isfinite(t) or not math.isfinite(value) or value < 0 or value > 100.0:
            invalid += 1
            continue
        if valid:
            gap = max(gap, t - last)
        else:
            first = t
        valid += 1
        last, last_value = t, value
        if value >= threshold:
            last_busy = t
    return GpuReading(pod, gpu, valid, invalid, first, last, last_value, last_busy, gap)
