"""The recommendation: the variants ranked against the scenario's objectives (simulations/objectives.py),
said in at most three sentences, the details in the ranking (a table in the terminal and the report).

Ranking, the first rule that separates two variants decides:

1. A variant with an eviction storm in any replication (fairshare.control.storms: repeated preempt ->
   re-admit cycles) is never recommended: it is flagged with its reason and ranked after the others. Each
   loop eviction loses little work, so without this rule a storm can look cheap.
2. Fewest bounds missed, then fewest bounds uncertain, then most goals met minus goals missed.
3. The goals in declared order, each by the paired difference of the two variants replication by replication
   (common random numbers): the first whose 95% CI excludes 0 decides.
4. Tied within the CIs on every goal: the least-disruption rule, fewer evictions (mean), then less lost work
   (mean lost GPU-hours). The paragraph says so when it decides the recommendation.
5. Scenario order.

Each variant also gets a verdict against the baseline (does its change pay, cost, or not pay?), and the
recommendation notes what the ranking does not say: flagged variants, a team whose quota a variant cuts that
keeps its goodput by borrowing (and the knob that would change that), Kueue's own evictions thrashing (and
the setting that would bound them), runs that are deterministic (no advice to add replications).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from .metrics import MetricRef, parse_ref
from .objectives import Bound, Objective, Status, evaluate
from .stats import mean_ci95
from .summary import Interval, ObjectiveResult, Recommendation, RunSummary, VariantSummary, VariantVerdict
from .whatif import fmt, ordered, significant

EVICTIONS = parse_ref("preemptions")
LOST = parse_ref("lost_gpu_hours")
THRASH_NOTE = 10  # Kueue's own evictions of one workload from which the recommendation names a bound
CUT = 0.9  # a team's quota-hours below this share of the baseline's: the variant cuts it
LEAST_DISRUPTION = "tied within the 95% CIs on every goal, so chosen by the least-disruption rule: fewer " \
                   "evictions, then less lost work"


@dataclass
class _Scored:
    variant: VariantSummary
    order: int
    results: list[ObjectiveResult]
    objectives: list[Objective]
    flags: list[str]

    def count(self, status: Status, *, goals: bool) -> int:
        return sum(1 for o, r in zip(self.objectives, self.results, strict=True)
                   if (o.kind == Bound.GOAL) == goals and r.status == status.value)

    def primary(self) -> tuple[int, ...]:
        return (
            1 if self.flags else 0,
            self.count(Status.MISSED, goals=False),
            self.count(Status.UNCERTAIN, goals=False),
            -(self.count(Status.MET, goals=True) - self.count(Status.MISSED, goals=True)),
        )


def _mean(v: VariantSummary, ref: MetricRef) -> float:
    m = v.metrics.get(ref.key)
    if m is not None and m.mean is not None:
        return m.mean
    values = [x for x in (ref.value(r) for r in v.replications) if x is not None]
    return math.fsum(values) / len(values) if values else math.inf


def paired(a: VariantSummary, b: VariantSummary, ref: MetricRef) -> Interval:
    """a - b on `ref`, paired by replication (common random numbers); without the replications, the
    difference of the means with the sum of the half-widths (conservative)."""
    if a.replications and len(a.replications) == len(b.replications):
        diffs: list[float] = []
        for ra, rb in zip(a.replications, b.replications, strict=True):
            x, y = ref.value(ra), ref.value(rb)
            if x is not None and y is not None:
                diffs.append(x - y)
        mean, ci = mean_ci95(diffs)
        return Interval(mean=mean, ci95=ci, n=len(diffs))
    ma, mb = a.metrics.get(ref.key), b.metrics.get(ref.key)
    if ma is None or mb is None or ma.mean is None or mb.mean is None:
        return Interval(mean=None, ci95=None, n=0)
    ci = None if ma.ci95 is None or mb.ci95 is None else ma.ci95 + mb.ci95
    return Interval(mean=ma.mean - mb.mean, ci95=ci, n=min(ma.n, mb.n))


def _goal_order(a: _Scored, b: _Scored) -> int:
    """Rule 3: the first goal on which a and b differ significantly (paired), -1 when a is better."""
    for o in a.objectives:
        if o.kind != Bound.GOAL:
            continue
        d = paired(a.variant, b.variant, o.ref)
        if significant(d) and d.mean is not None:
            better = d.mean < 0 if o.goal == "minimize" else d.mean > 0
            return -1 if better else 1
    return 0


def _disruption(s: _Scored) -> tuple[float, float]:
    return (_mean(s.variant, EVICTIONS), _mean(s.variant, LOST))


def _compare(a: _Scored, b: _Scored) -> int:
    if a.primary() != b.primary():
        return -1 if a.primary() < b.primary() else 1
    by_goal = _goal_order(a, b)
    if by_goal:
        return by_goal
    da, db = _disruption(a), _disruption(b)
    if da != db:
        return -1 if da < db else 1
    return -1 if a.order < b.order else 1 if a.order > b.order else 0


def storm_flags(v: VariantSummary) -> list[str]:
    """Rule 1: the variant's eviction storms, as one reason (empty: none)."""
    stormy = [r for r in v.replications if r.storms]
    if not stormy:
        return []
    first = stormy[0].storms[0]
    most = max(s.evictions for r in stormy for s in r.storms)
    return [f"eviction storms in {len(stormy)} of {len(v.replications)} replications (up to {most:,} "
            f"evictions in one; replication {stormy[0].replication + 1}: {first.message})"]


def deterministic(v: VariantSummary) -> bool:
    """Its replications gave identical figures (nothing random varies between them, e.g. a trace replay)."""
    return len(v.replications) > 1 and all(m.ci95 in (None, 0.0) for m in v.metrics.values())


def verdict(s: _Scored, base: VariantSummary, labels: dict[str, str]) -> str:
    """Does the variant's change pay against the baseline, on the goals?"""
    if s.variant is base:
        return "the baseline"
    better, worse = [], []
    for o, r in zip(s.objectives, s.results, strict=True):
        if o.kind != Bound.GOAL:
            continue
        d = s.variant.deltas.get(o.ref.key)
        label = labels.get(o.ref.key, o.ref.key)
        text = f"{label} {fmt(d.mean, sign=True)}" if d is not None and d.mean is not None else label
        if r.status == Status.MET.value:
            better.append(text)
        elif r.status == Status.MISSED.value:
            worse.append(text)
    missed = [r.objective for o, r in zip(s.objectives, s.results, strict=True)
              if o.kind != Bound.GOAL and r.status == Status.MISSED.value]
    if better and not missed:
        return "pays: " + ", ".join(better) + (" (but " + ", ".join(worse) + ")" if worse else "")
    if better:
        return "pays on " + ", ".join(better) + ", but misses " + "; ".join(missed)
    if worse:
        return "costs: " + ", ".join(worse)
    return "does not pay: no goal significantly better than the baseline"


def _lever(s: _Scored, scored: Sequence[_Scored], labels: dict[str, str]) -> str:
    """For a variant that is another plus a lever (leverOf): does the lever pay against that variant, on the
    goals (paired), and what does it cost in evictions and lost work?"""
    other = next((x for x in scored if x.variant.name == s.variant.lever_of), None)
    if other is None:
        return ""
    better: list[str] = []
    worse: list[str] = []
    same: list[str] = []
    for o in s.objectives:
        if o.kind != Bound.GOAL:
            continue
        d = paired(s.variant, other.variant, o.ref)
        if d.mean is None:
            continue
        label = labels.get(o.ref.key, o.ref.key)
        ci = f" ±{fmt(d.ci95)}" if d.ci95 is not None else ""
        text = f"{label} {fmt(d.mean, sign=True)}{ci}"
        if significant(d):
            (better if (d.mean < 0) == (o.goal == "minimize") else worse).append(text)
        else:
            same.append(text + " n.s.")
    costs = []
    for ref in (EVICTIONS, LOST):
        d = paired(s.variant, other.variant, ref)
        if d.mean is not None and significant(d) and d.mean > 0:
            costs.append(f"{labels.get(ref.key, ref.label())} {fmt(d.mean, sign=True)}")
    if better:
        head = "pays: " + ", ".join(better)
    elif worse:
        head = "costs: " + ", ".join(worse)
    else:
        head = "does not pay: " + (", ".join(same) if same else "no goal differs significantly")
    tail = f" (and {', '.join(costs)})" if costs else ""
    return f"; its lever against {other.variant.name} {head}{tail}"


def _trade_off(v: VariantSummary, base: VariantSummary, objectives: Sequence[Objective],
               labels: dict[str, str]) -> str:
    """The third sentence: what the recommended variant gains and gives up against the baseline
    (significant paired deltas on the objectives' metrics, lost work and evictions)."""
    if v is base:
        return "No other variant gains significantly on the goals without missing a bound or being flagged."
    refs: dict[str, MetricRef] = {o.ref.key: o.ref for o in objectives}
    refs.setdefault(LOST.key, LOST)
    refs.setdefault(EVICTIONS.key, EVICTIONS)
    gains: list[str] = []
    costs: list[str] = []
    for key, ref in refs.items():
        d = v.deltas.get(key)
        if d is None or d.mean is None or not significant(d) or ref.kind.direction == 0:
            continue
        text = f"{labels.get(key, ref.label())} {fmt(d.mean, sign=True)} {ref.kind.unit}".rstrip()
        (gains if d.mean * ref.kind.direction > 0 else costs).append(text)
    if not gains and not costs:
        return f"Against {base.name}, no difference on these metrics is significant."
    if gains and costs:
        return f"Trade-off against {base.name}: {', '.join(gains)}, for {', '.join(costs)}."
    if gains:
        return f"Against {base.name} it gains {', '.join(gains)} at no significant cost."
    return f"Against {base.name} it costs {', '.join(costs)} and gains nothing significant."


def _thrash_notes(variants: Sequence[VariantSummary]) -> list[str]:
    """Kueue's own evictions of one workload beyond THRASH_NOTE (the worst over the variants, per team):
    which setting would bound them."""
    worst: dict[str, tuple[int, VariantSummary, RunSummary]] = {}
    seen: dict[str, list[int]] = {}
    for v in variants:
        for r in v.replications:
            lw = r.lost_work
            if lw.kueue_max < THRASH_NOTE or lw.kueue_max_team is None:
                continue
            team = lw.kueue_max_team
            seen.setdefault(team, []).append(lw.kueue_max)
            if team not in worst or lw.kueue_max > worst[team][0]:
                worst[team] = (lw.kueue_max, v, r)
    out = []
    for team in sorted(worst):
        most, v, r = worst[team]
        lw = r.lost_work
        reasons = set(lw.kueue_max_reasons)
        if reasons & {"InCohortReclamation", "InCohortReclaimWhileBorrowing"}:
            knob = (f"a borrowingLimit on {team}'s quota (what it borrows, and so loses to reclaim) would "
                    "bound it, or the lending teams' reclaimWithinCohort")
        elif "InCohortFairSharing" in reasons:
            knob = f"a borrowingLimit on {team}'s quota, or its fairShareWeight, would bound it"
        else:
            knob = f"{team}'s withinClusterQueue preemption or its priority classes would bound it"
        why = ", ".join(sorted(reasons))
        out.append(f"Kueue's own preemption evicts one workload of {team} up to {most} times ({v.name}, "
                   f"replication {r.replication + 1}, {lw.kueue_max_workload}; {why}; {len(seen[team])} "
                   f"replications reach {THRASH_NOTE}): spec.preemption.maxEvictionsPerWorkload caps only "
                   f"the policy's evictions; {knob}.")
    return out


def _quota_hours(r: RunSummary, team: str) -> float | None:
    g = r.queues.get(team)
    if g is None or not g.utilization_of_quota:
        return None
    return g.gpu_hours / g.utilization_of_quota


def _borrowing_notes(variants: Sequence[VariantSummary], base: VariantSummary) -> list[str]:
    """A team a variant cuts (quota-hours below CUT x the baseline's) that keeps its goodput (no
    significant loss) by using more than its quota: it borrows what the cut took. One note per team."""
    found: dict[str, list[tuple[str, float, float]]] = {}  # team -> (variant, goodput delta, held / quota)
    if not base.replications:
        return []
    for v in variants:
        if v is base or not v.replications:
            continue
        for team in sorted(base.replications[0].queues):
            q_base = [q for q in (_quota_hours(r, team) for r in base.replications) if q is not None]
            q_var = [q for q in (_quota_hours(r, team) for r in v.replications) if q is not None]
            if not q_base or not q_var:
                continue
            if math.fsum(q_var) / len(q_var) >= CUT * math.fsum(q_base) / len(q_base):
                continue
            d = v.deltas.get(f"goodput[{team}]")
            if d is None or d.mean is None or (significant(d) and d.mean < 0):
                continue
            used = [g.utilization_of_quota for r in v.replications
                    if (g := r.queues.get(team)) is not None and g.utilization_of_quota]
            ratio = math.fsum(used) / len(used) if used else 0.0
            if ratio > 1.0:
                found.setdefault(team, []).append((v.name, d.mean, ratio))
    out = []
    for team, rows in sorted(found.items()):
        names = ", ".join(n for n, _, _ in rows)
        deltas = ", ".join(fmt(d, sign=True) for _, d, _ in rows)
        lo, hi = min(x for _, _, x in rows), max(x for _, _, x in rows)
        held = f"{lo:.1f}x" if f"{lo:.1f}" == f"{hi:.1f}" else f"{lo:.1f}-{hi:.1f}x"
        out.append(f"{team} keeps its goodput despite its cut ({names}: goodput Δ {deltas} GPU-h, no "
                   f"significant loss) by borrowing: it held {held} its quota. A borrowingLimit on {team} "
                   "would hold it to the cut (or lendingLimits on the teams that lend to it).")
    return out


def _replications_advice(s: _Scored, labels: dict[str, str]) -> list[str]:
    """For each deciding delta that is not significant: about how many replications would resolve it
    (the CI half-width shrinks as 1/√n: n' ≈ n·(ci/|Δ|)²). None for deterministic runs."""
    if deterministic(s.variant):
        return []
    out = []
    for o, r in zip(s.objectives, s.results, strict=True):
        if r.status != Status.UNCERTAIN.value:
            continue
        d = s.variant.deltas.get(o.ref.key)
        if d is None or d.mean is None or not d.ci95:
            continue
        label = labels.get(o.ref.key, o.ref.key)
        n = d.n
        if abs(d.mean) < 1e-9:  # no difference (float noise in a sum is not one)
            out.append(f"{label}: no difference from the baseline in {n} replications")
            continue
        need = max(n + 1, math.ceil(n * (d.ci95 / abs(d.mean)) ** 2 * 1.1))
        out.append(
            f"{label}: Δ {fmt(d.mean, sign=True)} ±{fmt(d.ci95)} (CI width {fmt(2 * d.ci95)}) is not "
            f"significant with {n} replications; about {need} would resolve a difference this size "
            f"(--replications {need})"
        )
    return out


def _counts(s: _Scored) -> str:
    counted = [r for r in s.results if r.status != Status.REFERENCE.value]
    met = sum(1 for r in counted if r.status == Status.MET.value)
    missed = sum(1 for r in counted if r.status == Status.MISSED.value)
    uncertain = len(counted) - met - missed
    text = f"{met} of {len(counted)} objectives met"
    text += f", {missed} missed" if missed else ""
    text += f", {uncertain} uncertain" if uncertain else ""
    return text


def recommend(
    variants: Sequence[VariantSummary],
    objectives: Sequence[Objective],
    *,
    labels: dict[str, str],
    declared: bool,
) -> Recommendation:
    """Rank the variants (the module docstring's rules) and say why in at most three sentences."""
    cols = ordered(variants)
    base = cols[0]
    scored = []
    for order, v in enumerate(cols):
        results = [evaluate(o, v, base, labels.get(o.ref.key, o.ref.key)) for o in objectives]
        scored.append(_Scored(v, order, results, list(objectives), storm_flags(v)))
    scored.sort(key=functools.cmp_to_key(_compare))
    best = scored[0]
    pick = None if best.flags else best.variant.name
    tie_break = None
    tied = [s for s in scored[1:]
            if not s.flags and s.primary() == best.primary() and _goal_order(best, s) == 0]
    if pick is not None and tied:
        group = [best, *tied]
        names = ", ".join(s.variant.name for s in group[:-1]) + f" and {group[-1].variant.name}"
        evictions = " vs ".join(fmt(_mean(s.variant, EVICTIONS)) for s in group)
        lost = " vs ".join(fmt(_mean(s.variant, LOST)) for s in group)
        tie_break = f"{names} are {LEAST_DISRUPTION} ({evictions} evictions, {lost} lost GPU-h)"
    ranking = [
        VariantVerdict(
            name=s.variant.name, rank=i + 1, description=s.variant.description,
            met=[r.objective for r in s.results if r.status == Status.MET.value],
            missed=[r.objective for r in s.results if r.status == Status.MISSED.value],
            uncertain=[r.objective for r in s.results if r.status == Status.UNCERTAIN.value],
            results=s.results, verdict=verdict(s, base, labels) + _lever(s, scored, labels), flags=s.flags,
        )
        for i, s in enumerate(scored)
    ]
    against = "the scenario's objectives" if declared else "default objectives (the scenario declares none)"
    if pick is None:
        sentences = [f"No variant is recommended: every one has eviction storms ({best.flags[0]})."]
    else:
        described = f" ({best.variant.description})" if best.variant.description else ""
        if "(" in best.variant.description:
            described = f": {best.variant.description}"
        second_sentence = f"Against {against} it has {_counts(best)}"
        second_sentence += f"; {tie_break}." if tie_break else "."
        sentences = [f"Recommended: {pick}{described}.", second_sentence,
                     _trade_off(best.variant, base, objectives, labels)]
    notes = [f"{s.variant.name} is never recommended: {s.flags[0]}." for s in scored if s.flags]
    notes += _borrowing_notes(cols, base)
    notes += _thrash_notes(cols)
    if all(deterministic(v) for v in cols):
        notes.append("The replications gave identical figures (nothing random varies between them): more "
                     "replications would not change any figure.")
    advice: list[str] = []
    for s in scored[:2]:
        if not s.flags:
            advice += [f"{s.variant.name}: {a}" for a in _replications_advice(s, labels)]
    return Recommendation(
        variant=pick,
        reasons=[f"{r.detail} ({r.status})" for r in best.results],
        paragraph=" ".join(sentences),
        tie_break=tie_break,
        notes=notes,
        objectives=[o.describe() for o in objectives],
        declared=declared,
        ranking=ranking,
        more_replications="; ".join(advice) if advice else None,
    )


def ranking_table(rec: Recommendation, *, width: int = 110) -> str:
    """The ranking in the terminal: rank, variant, objectives met / missed / uncertain, verdict, flags, and
    each variant's description."""
    import textwrap

    lines = ["rank  variant (description)", "      objectives; verdict"]
    for v in rec.ranking:
        mark = " (flagged)" if v.flags else ""
        head = f"{v.rank:>4}  {v.name}{mark}" + (f" ({v.description})" if v.description else "")
        lines += textwrap.wrap(head, width, subsequent_indent="      ")
        body = f"{len(v.met)} met, {len(v.missed)} missed, {len(v.uncertain)} uncertain; {v.verdict}"
        lines += textwrap.wrap(body, width, initial_indent="      ", subsequent_indent="      ")
    return "\n".join(lines)
