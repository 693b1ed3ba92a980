"""The gate of `qm plan --fail-if EXPR`: conditions over the forecast that fail a change in CI.

Grammar (parsed, never evaluated; metric names are the headline vocabulary of simulations/metrics.py, the
one grammar the objectives use too):

    EXPR    = METRIC OP BOUND
    METRIC  = NAME | NAME[ARGUMENT]          e.g. wait_p95[high-priority-business], lost_gpu_hours
    OP      = >  |  >=  |  <  |  <=
    BOUND   = NUMBER [UNIT]                  the new policy's value:       lost_gpu_hours > 50
            | (+|-) NUMBER [UNIT]            its change vs the current one: goodput[research] < -200
            | (+|-) NUMBER %                 the change in % of the current: wait_p95[business] > +10%
    UNIT    = a duration (30m, 2h, 1d) for a metric measured in time (h, min)

A condition HOLDS when the whole 95% confidence interval is beyond the bound (over replications for a
value; of the paired difference for a change: common random numbers): it holds with significance. It
does NOT HOLD when the whole interval is on the other side, and is UNCERTAIN when the interval straddles
the bound (more replications would tell). `qm plan` exits 1 when a condition holds, else 0.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from fairshare.durations import parse_duration
from fairshare.errors import InputError, Location

from .metrics import Arg, MetricRef, parse_ref
from .stats import t975, t_two_sided
from .summary import Interval, VariantSummary
from .whatif import Arm, compare, fmt

# ASCII only (re.ASCII): Python's \d would take "١٠" or "５０" as digits and float() would read them
# (issue 33); \Z, not $, so that no newline hides after the bound.
_EXPR = re.compile(
    r"^\s*(?P<metric>[^<>=\s]+(?:\s*\[[^\]]*\])?)\s*(?P<op>>=|<=|>|<)\s*"
    r"(?P<sign>[+-])?\s*(?P<number>\d+(?:\.\d+)?)\s*(?P<unit>%|[a-z0-9.]*)\s*\Z",
    re.ASCII,
)
_TIME_UNITS = {"h": 3600.0, "min": 60.0}
# A bound is a number a person writes (GPU-hours, hours, percent): 30 digits are far past any of them, and
# more would make float() infinite (a condition that can never hold).
MAX_BOUND_DIGITS = 30


class Op(StrEnum):
    GT = ">"
    GE = ">="
    LT = "<"
    LE = "<="


class Outcome(StrEnum):
    HOLDS = "holds"
    DOES_NOT_HOLD = "does not hold"
    UNCERTAIN = "uncertain"


@dataclass(frozen=True)
class Condition:
    text: str
    ref: MetricRef
    op: Op
    value: float  # in the metric's unit; a fraction when `percent`
    change: bool  # vs the current policy (signed bound)
    percent: bool

@dataclass(frozen=True)
class Verdict:
    condition: Condition
    outcome: Outcome
    detail: str  # the figures: the value or change, its 95% CI, the bound


def parse_condition(text: str) -> Condition:
    """One `--fail-if` expression; InputError naming --fail-if and the expression when it is not one."""

    def bad(why: str) -> InputError:
        return InputError(why, location=Location(field="--fail-if"), value=text)

    m = _EXPR.match(text)
    if m is None:
        raise bad("must be METRIC OP BOUND, e.g. 'wait_p95[CLASS] > +10%' or 'lost_gpu_hours > 50' "
                  "(OP: > >= < <=; BOUND: a number, a signed change, or a signed percentage)")
    try:
        ref = parse_ref(m.group("metric").replace(" ", ""))
    except ValueError as err:
        raise bad(str(err)) from None
    sign, unit = m.group("sign"), m.group("unit")
    number = float(m.group("number"))
    if not math.isfinite(number) or len(m.group("number")) > MAX_BOUND_DIGITS:
        raise bad(f"the bound has more than {MAX_BOUND_DIGITS} digits")
    percent = unit == "%"
    if percent and sign is None:
        raise bad("a percentage is a change vs the current policy: write it signed, e.g. +10% or -5%")
    if unit and not percent:
        scale = _TIME_UNITS.get(ref.kind.unit)
        if scale is None:
            raise bad(f"{ref.kind.name} is measured in {ref.kind.unit or 'plain numbers'}: a unit "
                      f"{unit!r} does not apply (write the number alone)")
        try:
            seconds = float(parse_duration(m.group("number") + unit))
        except ValueError as err:
            raise bad(f"{m.group('number')}{unit}: {err}") from None
        number = seconds / scale
    value = number / 100.0 if percent else number
    if sign == "-":
        value = -value
    return Condition(text.strip(), ref, Op(m.group("op")), value, sign is not None, percent)


def check_names(conditions: Sequence[Condition], *, classes: set[str], teams: set[str]) -> None:
    """Every condition's argument names a priority class / team of the cluster: one line otherwise."""
    for c in conditions:
        arg = c.ref.arg
        if arg is None:
            continue
        by_class = c.ref.kind.arg in (Arg.CLASS, Arg.CLASS_OPTIONAL)
        known = classes if by_class else teams
        if arg not in known:
            what = "priority class" if by_class else "team (ClusterQueue)"
            raise InputError(f"no {what} {arg!r} in the policy; known: {', '.join(sorted(known))}",
                             location=Location(field="--fail-if"), value=c.text)


def _beyond(lo: float, hi: float, bound: float, op: Op) -> Outcome:
    if op == Op.GT:
        return Outcome.HOLDS if lo > bound else Outcome.DOES_NOT_HOLD if hi <= bound else Outcome.UNCERTAIN
    if op == Op.GE:
        return Outcome.HOLDS if lo >= bound else Outcome.DOES_NOT_HOLD if hi < bound else Outcome.UNCERTAIN
    if op == Op.LT:
        return Outcome.HOLDS if hi < bound else Outcome.DOES_NOT_HOLD if lo >= bound else Outcome.UNCERTAIN
    return Outcome.HOLDS if hi <= bound else Outcome.DOES_NOT_HOLD if lo > bound else Outcome.UNCERTAIN


def evaluate(conditions: Sequence[Condition], variants: Sequence[VariantSummary],
             candidate: str) -> list[Verdict]:
    """Each condition on the variant named `candidate` against the baseline (the current policy)."""
    return evaluate_arms(conditions, [(v.name, v.description, v.baseline, v.replications) for v in variants],
                         candidate)


def evaluate_arms(conditions: Sequence[Condition], arms: Sequence[Arm], candidate: str, *,
                  level: float = 0.95) -> list[Verdict]:
    """`evaluate` over the runs' summaries; `level`: the confidence of the intervals the outcomes are read
    from (the 95% interval widened by t_level / t_0.95 of its degrees of freedom; the details still say
    95%): the sequential stopping rule's corrected level (`Sequential`)."""
    compared = {v.name: v for v in compare(arms, [c.ref for c in conditions])}
    base = next(v for v in compared.values() if v.baseline)
    new = compared[candidate]
    out = []
    for c in conditions:
        key, unit = c.ref.key, c.ref.kind.unit
        shown = f" {unit}" if unit and unit != "%" else unit
        current: float | None = None
        if c.change:
            iv = new.deltas.get(key) or Interval(mean=None, ci95=None, n=0)
            current = (base.metrics.get(key) or Interval(mean=None, ci95=None, n=0)).mean
            if c.percent and current is None:
                out.append(Verdict(c, Outcome.UNCERTAIN, f"{key}: no value under the current policy"))
                continue
            bound = c.value * abs(current or 0.0) if c.percent else c.value
            what = "change"
        else:
            iv = new.metrics.get(key) or Interval(mean=None, ci95=None, n=0)
            bound = c.value
            what = "value"
        if iv.mean is None or iv.ci95 is None:
            why = "no value" if iv.mean is None else "one replication: no confidence interval"
            out.append(Verdict(c, Outcome.UNCERTAIN, f"{key}: {why}"))
            continue
        lo, hi = iv.mean - iv.ci95, iv.mean + iv.ci95
        if level != 0.95:
            half = iv.ci95 * t_two_sided(level, iv.n - 1) / t975(iv.n - 1)
            outcome = _beyond(iv.mean - half, iv.mean + half, bound, c.op)
        else:
            outcome = _beyond(lo, hi, bound, c.op)
        sign = c.change
        figures = (f"{what} {fmt(iv.mean, sign=sign)}{shown} [95% CI {fmt(lo, sign=sign)}, "
                   f"{fmt(hi, sign=sign)}], bound {c.op.value} {fmt(bound, sign=sign)}{shown}")
        if c.percent:
            figures += f" ({c.value * 100:+g}% of the current {fmt(current or 0.0)}{shown})"
        out.append(Verdict(c, outcome, figures))
    return out


# The fewest replications an early stop may rest on: with 2, a t-interval has one degree of freedom and its
# spread estimate is too unstable to stop on (t_0.99,1 = 63.7).
MIN_REPLICATIONS = 3
LEVEL = 0.95


@dataclass(frozen=True)
class Sequential:
    """When `qm plan` stops replicating: the gate's conditions decided before the maximum.

    Sequential testing over the paired differences (every replication runs the baseline and the new policy
    on the same random numbers): after `looks[0]` = MIN_REPLICATIONS replications, then after each further
    one up to the maximum, every condition is read from its interval; the runs stop at the first look where
    every condition HOLDS or DOES NOT HOLD, i.e. its interval is wholly beyond its bound or wholly on the
    other side. Each look reads the interval at the level 1 - 0.05 / L for L looks (Bonferroni over the
    looks): the intervals of all looks then cover the true values together with probability at least 95%,
    whichever look the run stops at, which is the repeated-confidence-interval construction of Jennison &
    Turnbull (Group Sequential Methods with Applications to Clinical Trials, 2000, ch. 9; Bonferroni being
    its conservative bound). The verdict shown is read from the 95% interval, which lies inside the
    look's: an early stop never shows a verdict other than the one the look decided. A run that reaches the
    maximum is the fixed-sample gate of `--replications` replications.

    Every replication's runs depend only on the seed and the replication (simulations/rng.py), so stopping
    after n gives the very outcome of running exactly n (tests/unit/plan/test_sequential.py)."""

    conditions: tuple[Condition, ...]
    candidate: str  # the variant whose change the conditions test (the new policy's)
    looks: tuple[int, ...]  # replication counts to look at, ascending; the last is the maximum

    @property
    def level(self) -> float:
        return 1.0 - (1.0 - LEVEL) / len(self.looks)

    def decided(self, arms: Sequence[Arm]) -> bool:
        """Whether every condition is decided at this look's corrected level (at the last look, the
        maximum: at 95%, the verdict shown)."""
        last = min(len(a[3]) for a in arms) >= self.looks[-1]
        verdicts = evaluate_arms(self.conditions, arms, self.candidate, level=LEVEL if last else self.level)
        return all(v.outcome != Outcome.UNCERTAIN for v in verdicts)


def sequential(conditions: Sequence[Condition], candidate: str, maximum: int) -> Sequential | None:
    """The stopping rule for these conditions and at most `maximum` replications (None: nothing to decide
    early: no condition, or a maximum at or below MIN_REPLICATIONS)."""
    if not conditions or maximum <= MIN_REPLICATIONS:
        return None
    return Sequential(tuple(conditions), candidate, tuple(range(MIN_REPLICATIONS, maximum + 1)))
