"""Small statistics: percentiles, Student-t confidence intervals, batch means."""

from __future__ import annotations

import math
from collections.abc import Sequence

# Two-sided 95% Student-t quantiles t_{0.975, df} (standard tables; df > 120 uses the normal 1.960).
_T975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    11: 2.201,
    12: 2.179,
    13: 2.160,
    14: 2.145,
    15: 2.131,
    16: 2.120,
    17: 2.110,
    18: 2.101,
    19: 2.093,
    20: 2.086,
    21: 2.080,
    22: 2.074,
    23: 2.069,
    24: 2.064,
    25: 2.060,
    26: 2.056,
    27: 2.052,
    28: 2.048,
    29: 2.045,
    30: 2.042,
    40: 2.021,
    60: 2.000,
    120: 1.980,
}


def t975(df: int) -> float:
    """t_{0.975, df}, taking the next smaller tabulated df (conservative) between table rows."""
    if df < 1:
        raise ValueError("df must be >= 1")
    if df > 120:
        return 1.960
    return _T975[max(k for k in _T975 if k <= df)]


def t_two_sided(level: float, df: int) -> float:
    """The t with P(|T| < t) = `level` for Student's t with `df` degrees of freedom (e.g. 0.95, 4 -> 2.776):
    the exact finite series of P(|T| < t) for a whole number of degrees of freedom (Abramowitz & Stegun,
    Handbook of Mathematical Functions, 26.7.3 and 26.7.4), inverted by bisection to 1e-12."""
    if df < 1:
        raise ValueError("df must be >= 1")
    if not 0.0 < level < 1.0:
        raise ValueError("level must be within (0, 1)")

    def inside(t: float) -> float:  # P(|T| < t)
        theta = math.atan(t / math.sqrt(df))
        c2, s = math.cos(theta) ** 2, math.sin(theta)
        if df % 2 == 0:  # sin(theta) (1 + 1/2 cos^2 + 1.3/(2.4) cos^4 + ... up to cos^(df-2))
            term = total = 1.0
            for k in range(1, df // 2):
                term *= c2 * (2 * k - 1) / (2 * k)
                total += term
            return s * total
        if df == 1:
            return 2.0 * theta / math.pi
        term = total = math.cos(theta)  # theta + sin(theta) (cos + 2/3 cos^3 + ... up to cos^(df-2))
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        return 2.0 / math.pi * (theta + s * total)

    lo, hi = 0.0, 1.0
    while inside(hi) < level:
        hi *= 2.0
    while hi - lo > 1e-12 * hi:
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if inside(mid) < level else (lo, mid)
    return (lo + hi) / 2.0


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of an already sorted, non-empty sequence."""
    n = len(sorted_values)
    if n == 0:
        raise ValueError("no values")
    pos = (n - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


def mean_ci95(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and half-width of the 95% t-interval (None when undefined)."""
    n = len(values)
    if n == 0:
        return None, None
    mean = math.fsum(values) / n
    if n < 2:
        return mean, None
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, t975(n - 1) * math.sqrt(var / n)


def batch_means(values: Sequence[float], batches: int) -> tuple[float, float]:
    """Grand mean and its standard error from `batches` contiguous batch means.

    Successive waits in a queue are correlated; means of long contiguous batches are
    nearly independent, so their spread estimates the error of the grand mean
    (Law & Kelton, Simulation Modeling and Analysis, §9.5.3).
    """
    size = len(values) // batches
    if batches < 2 or size < 1:
        raise ValueError("need at least 2 batches of at least 1 value")
    means = [math.fsum(values[b * size : (b + 1) * size]) / size for b in range(batches)]
    grand = math.fsum(means) / batches
    var = math.fsum((m - grand) ** 2 for m in means) / (batches - 1)
    return grand, math.sqrt(var / batches)
