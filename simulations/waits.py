"""Waits with never-admitted work counted: a workload still pending at the horizon has waited at least
`horizon - creation` (a right-censored observation, in survival-analysis terms).

Two estimators, both over every workload created after the warm-up:

- censored at the horizon: a never-admitted workload counts with the wait it had so far. Its mean and
  percentiles are lower bounds of the true ones (exact when nothing is censored); they always exist, so
  variants can be compared and paired. The headline rows and the report's CDF use it, with the censored
  share shown beside them.
- Kaplan-Meier (Kaplan & Meier 1958, the product-limit estimator): S(t) = Π_{t_i <= t} (1 - d_i / n_i)
  over the distinct admission waits t_i, d_i admissions at t_i, n_i workloads still waiting just before
  t_i (censored ones leave the risk set at their censoring time). It does not assume that a censored
  workload would have been admitted at the horizon; a quantile it cannot reach (more than 1 - q of the
  workloads may never be admitted within the longest follow-up) is None. In summary.json only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from operator import itemgetter
from typing import NamedTuple

from .stats import percentile


class Observation(NamedTuple):
    seconds: float  # the wait (admitted) or the wait so far (censored)
    admitted: bool


_SECONDS = itemgetter(0)  # an Observation's seconds (a C-level key: floats sort on their fast path)


def kaplan_meier_quantiles(ordered: Sequence[Observation], qs: Sequence[float]) -> list[float | None]:
    """For each q of ``qs`` (0 < q < 1), the smallest t with 1 - S(t) >= q, or None when the estimate never
    reaches q; in one pass over observations already sorted by their seconds. Ties: the workloads censored
    at t leave the risk set after the admissions at t are counted (the usual convention); the order of a
    tie's observations does not matter."""
    out: list[float | None] = [None] * len(qs)
    left = len(qs)
    at_risk = n = len(ordered)
    survival = 1.0
    i = 0
    while i < n and left:
        t = ordered[i].seconds
        events = 0
        censored = 0
        while i < n and ordered[i].seconds == t:
            if ordered[i].admitted:
                events += 1
            else:
                censored += 1
            i += 1
        if events:
            survival *= 1.0 - events / at_risk
            for k, q in enumerate(qs):
                if out[k] is None and 1.0 - survival >= q - 1e-12:
                    out[k] = t
                    left -= 1
        at_risk -= events + censored
    return out


class CensoredWaits(NamedTuple):
    n: int
    censored: int
    mean: float | None
    p50: float | None
    p95: float | None
    p99: float | None
    km_p50: float | None
    km_p95: float | None


def censored_waits(observations: Sequence[Observation]) -> CensoredWaits:
    """Statistics of waits censored at the horizon, and the Kaplan-Meier median and p95."""
    if not observations:
        return CensoredWaits(0, 0, None, None, None, None, None, None)
    ordered = sorted(observations, key=_SECONDS)  # (one sort for the percentiles and Kaplan-Meier)
    values = [o.seconds for o in ordered]
    km_p50, km_p95 = kaplan_meier_quantiles(ordered, (0.50, 0.95))
    return CensoredWaits(
        n=len(values),
        censored=sum(1 for o in observations if not o.admitted),
        mean=math.fsum(values) / len(values),
        p50=percentile(values, 50.0),
        p95=percentile(values, 95.0),
        p99=percentile(values, 99.0),
        km_p50=km_p50,
        km_p95=km_p95,
    )
