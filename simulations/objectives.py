"""What a scenario wants (`objectives:`), and the ranked recommendation of its variants against it.

An objective names one metric of the headline vocabulary (simulations/metrics.py) and exactly one of:

    goal: minimize | maximize      rank by it: met = significantly better than the baseline (paired 95% CI
                                   excludes 0), missed = significantly worse, uncertain = neither
    max: 500 / min: 75             a bound on the variant's mean: met when the 95% CI lies within it,
                                   missed when it lies outside, uncertain when it straddles it
    maxLoss: 20% (or 900)          the metric may fall at most this much below the baseline (a percentage
                                   of the baseline's mean, or an amount in the metric's unit)
    maxIncrease: 10% (or 0.5)      it may rise at most this much above the baseline

e.g. `[{metric: wait_p95[high-priority-business], goal: minimize}, {metric: lost_gpu_hours, max: 500},
{metric: goodput[ai-frontier-research], maxLoss: 20%}]`. Parsed, never evaluated.

The ranking and the recommendation against them: simulations/recommend.py. Without declared objectives:
minimize the p95 wait of the highest priority class, minimize lost GPU-hours, maximize goodput.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator
from pydantic.alias_generators import to_camel

from fairshare.errors import InputError, Location

from .metrics import Arg, MetricRef, parse_ref
from .summary import Interval, ObjectiveResult, VariantSummary
from .whatif import fmt, significant

_AMOUNT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


class Bound(StrEnum):
    GOAL = "goal"
    MAX = "max"
    MIN = "min"
    MAX_LOSS = "maxLoss"
    MAX_INCREASE = "maxIncrease"


class Status(StrEnum):
    MET = "met"
    MISSED = "missed"
    UNCERTAIN = "uncertain"
    REFERENCE = "reference"  # the baseline, for a goal measured against itself


@dataclass(frozen=True)
class Amount:
    """maxLoss / maxIncrease: a fraction of the baseline's mean, or an amount in the metric's unit."""

    value: float
    relative: bool

    def of(self, baseline: float) -> float:
        return self.value * abs(baseline) if self.relative else self.value

    def describe(self, unit: str) -> str:
        return f"{self.value * 100:g}%" if self.relative else f"{self.value:g} {unit}".rstrip()


def parse_amount(value: float | int | str) -> Amount:
    if isinstance(value, bool):
        raise ValueError("must be a percentage such as 20% or a number >= 0")
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise ValueError("must be a percentage such as 20% or a number >= 0")
        return Amount(float(value), relative=False)
    m = _AMOUNT.match(value)
    if m is None:
        raise ValueError("must be a percentage such as 20% or a number >= 0")
    return Amount(float(m.group(1)) / 100.0, relative=True)


class Objective(BaseModel):
    """One goal of the scenario, against a headline metric (see simulations/objectives.py)."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True)

    metric: str
    goal: Literal["minimize", "maximize"] | None = None
    max: float | None = None
    min: float | None = None
    max_loss: float | str | None = None
    max_increase: float | str | None = None

    @field_validator("metric")
    @classmethod
    def _metric(cls, value: str) -> str:
        parse_ref(value)
        return value

    @field_validator("max_loss", "max_increase")
    @classmethod
    def _amount(cls, value: float | str | None) -> float | str | None:
        if value is not None:
            parse_amount(value)
        return value

    @field_validator("max", "min")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> Objective:
        given = [b for b in Bound if getattr(self, _FIELD[b]) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of goal, max, min, maxLoss, maxIncrease")
        return self

    @property
    def kind(self) -> Bound:
        return next(b for b in Bound if getattr(self, _FIELD[b]) is not None)

    @property
    def ref(self) -> MetricRef:
        return parse_ref(self.metric)

    def amount(self) -> Amount:
        raw = self.max_loss if self.max_loss is not None else self.max_increase
        if raw is None:
            raise ValueError("not a maxLoss or maxIncrease objective")
        return parse_amount(raw)

    def describe(self) -> str:
        k = self.kind
        unit = self.ref.kind.unit
        if k == Bound.GOAL:
            return f"{self.metric}: {self.goal}"
        if k == Bound.MAX:
            return f"{self.metric} <= {fmt(self.max or 0.0)} {unit}".rstrip()
        if k == Bound.MIN:
            return f"{self.metric} >= {fmt(self.min or 0.0)} {unit}".rstrip()
        what = "loses" if k == Bound.MAX_LOSS else "gains"
        return f"{self.metric} {what} at most {self.amount().describe(unit)} vs the baseline"


_FIELD = {
    Bound.GOAL: "goal",
    Bound.MAX: "max",
    Bound.MIN: "min",
    Bound.MAX_LOSS: "max_loss",
    Bound.MAX_INCREASE: "max_increase",
}


def default_objectives(top_class: str | None) -> list[Objective]:
    out = []
    if top_class is not None:
        out.append(Objective(metric=f"wait_p95[{top_class}]", goal="minimize"))
    out.append(Objective(metric="lost_gpu_hours", goal="minimize"))
    out.append(Objective(metric="goodput", goal="maximize"))
    return out


def check_objectives(
    objectives: Sequence[Objective], *, classes: set[str], teams: set[str], file: str
) -> None:
    """Every objective names a priority class / team the scenario has: one located line otherwise."""
    for i, o in enumerate(objectives):
        ref = o.ref
        if ref.arg is None:
            continue
        by_class = ref.kind.arg in (Arg.CLASS, Arg.CLASS_OPTIONAL)
        known = classes if by_class else teams
        what = "priority class" if by_class else "team (ClusterQueue)"
        if ref.arg not in known:
            raise InputError(
                f"no {what} {ref.arg!r} in the scenario; known: {', '.join(sorted(known))}",
                location=Location(file=file, field=f"objectives[{i}].metric"),
                value=o.metric,
            )


# ------------------------------------------------------------------------------------- evaluation


def _ci(iv: Interval) -> str:
    if iv.mean is None:
        return "-"
    if iv.ci95 is None:
        return fmt(iv.mean, sign=True)
    lo, hi = iv.mean - iv.ci95, iv.mean + iv.ci95
    return f"{fmt(iv.mean, sign=True)} [95% CI {fmt(lo, sign=True)}, {fmt(hi, sign=True)}]"


def _value(iv: Interval, unit: str) -> str:
    if iv.mean is None:
        return "-"
    text = f"{fmt(iv.mean)} {unit}".rstrip()
    return text + (f" (±{fmt(iv.ci95)})" if iv.ci95 is not None else "")


def evaluate(o: Objective, variant: VariantSummary, baseline: VariantSummary, label: str) -> ObjectiveResult:
    """One objective for one variant: met / missed / uncertain, with the figures."""
    key = o.ref.key
    unit = o.ref.kind.unit
    value = variant.metrics.get(key) or Interval(mean=None, ci95=None, n=0)
    delta = variant.deltas.get(key) or Interval(mean=None, ci95=None, n=0)
    base = baseline.metrics.get(key) or Interval(mean=None, ci95=None, n=0)
    k = o.kind

    def result(status: Status, detail: str) -> ObjectiveResult:
        return ObjectiveResult(objective=o.describe(), metric=key, status=status.value, detail=detail)

    if value.mean is None:
        return result(Status.UNCERTAIN, f"{label}: no value in this variant")
    if k == Bound.GOAL:
        if variant is baseline:
            return result(Status.REFERENCE, f"{label} {_value(value, unit)} (reference)")
        sign = -1.0 if o.goal == "minimize" else 1.0
        sig = significant(delta)
        d = delta.mean or 0.0
        change = f"{label} {_ci(delta)} {unit} vs the baseline".replace("  ", " ")
        if sig is None:
            return result(Status.UNCERTAIN, f"{change} (one replication: no CI)")
        if not sig:
            return result(Status.UNCERTAIN, f"{change}, not significant")
        good = d * sign > 0
        word = "better" if good else "worse"
        return result(Status.MET if good else Status.MISSED, f"{change}, significantly {word}")
    if k in (Bound.MAX, Bound.MIN):
        bound = o.max if k == Bound.MAX else o.min
        limit = bound if bound is not None else 0.0
        h = value.ci95 or 0.0
        lo, hi = value.mean - h, value.mean + h
        within = hi <= limit if k == Bound.MAX else lo >= limit
        outside = lo > limit if k == Bound.MAX else hi < limit
        op = "<=" if k == Bound.MAX else ">="
        detail = f"{label} {_value(value, unit)}, bound {op} {fmt(limit)}"
        if within:
            return result(Status.MET, detail)
        if outside:
            return result(Status.MISSED, detail)
        return result(Status.UNCERTAIN, detail + " (CI straddles it)")
    # maxLoss / maxIncrease, relative to the baseline's mean
    amount = o.amount()
    allowed = amount.of(base.mean or 0.0)
    if variant is baseline:
        return result(Status.MET, f"{label} {_value(value, unit)} (the baseline)")
    if delta.mean is None:
        return result(Status.UNCERTAIN, f"{label}: no paired delta")
    h = delta.ci95 or 0.0
    pct = f" ({100.0 * delta.mean / base.mean:+.0f}%)" if base.mean else ""
    if k == Bound.MAX_LOSS:
        met, missed = delta.mean - h >= -allowed, delta.mean + h < -allowed
        allowance = f"at most -{fmt(allowed)} allowed ({amount.describe(unit)})"
    else:
        met, missed = delta.mean + h <= allowed, delta.mean - h > allowed
        allowance = f"at most +{fmt(allowed)} allowed ({amount.describe(unit)})"
    detail = f"{label} {_ci(delta)} {unit}{pct} vs the baseline, {allowance}".replace("  ", " ")
    if met:
        return result(Status.MET, detail)
    if missed:
        return result(Status.MISSED, detail)
    return result(Status.UNCERTAIN, detail + " (CI straddles it)")
