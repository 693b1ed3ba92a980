"""Admission Fair Sharing arithmetic (KEP-4136; Kueue pkg/util/admissionfairsharing).

A LocalQueue's *consumed* resources decay exponentially toward its current admitted usage;
each admission adds an *entry penalty* until the next sampling; the queue's usage, which
orders the heads of an AFS ClusterQueue (lower first), is the weighted sum over resources
divided by the LocalQueue's weight. Quantities come in as milli-units and are used as
floats in resource units, as Kueue's ``AsApproximateFloat64``. Times are seconds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from .models import Milli, ResourceName


def alpha(elapsed: float, half_life: float) -> float:
    """calculateAlphaRate: 1 - 0.5^(elapsed / halfLife); 0 when the half-life is 0."""
    if half_life == 0:
        return 0.0
    return 1.0 - math.pow(0.5, elapsed / half_life)


def decayed_consumed(
    old: Mapping[ResourceName, float], current: Mapping[ResourceName, Milli], elapsed: float, half_life: float
) -> dict[ResourceName, float]:
    """CalculateDecayedConsumed: (1-a)*old + a*current, per resource (old in units, current in milli)."""
    a = alpha(elapsed, half_life)
    out = {r: v * (1 - a) for r, v in old.items()}
    for r, v in current.items():
        out[r] = out.get(r, 0.0) + a * v / 1000.0
    return out


def entry_penalty(
    requests: Mapping[ResourceName, Milli], sampling_interval: float, half_life: float
) -> dict[ResourceName, float]:
    """CalculateEntryPenalty: alpha(samplingInterval) * the workload's total requests (units)."""
    a = alpha(sampling_interval, half_life)
    return {r: a * v / 1000.0 for r, v in requests.items()}


def local_queue_usage(
    consumed: Mapping[ResourceName, float],
    penalty: Mapping[ResourceName, float],
    resource_weights: Mapping[ResourceName, float],
    lq_weight: float,
) -> float:
    """CalculateUsage: sum_r weight[r] (default 1) * (consumed + penalty)[r] / lqWeight; +inf if the
    weight is not positive."""
    total = 0.0
    for r in sorted(set(consumed) | set(penalty)):
        total += resource_weights.get(r, 1.0) * (consumed.get(r, 0.0) + penalty.get(r, 0.0))
    if lq_weight <= 0:
        return math.inf
    return total / lq_weight
