"""The plan's report: the forecast's figures pulled from the simulation's outcome, as text and as JSON.

Per priority class: the waits (p50, p95; never-admitted work counted at the wait it had at the horizon)
and the never-admitted share; per team: its waits, goodput, lost GPU-hours and evictions; cluster-wide:
utilization, goodput, lost GPU-hours, evictions. The current policy as mean ± 95% CI over replications,
each policy file as mean and paired Δ ± 95% CI (* better, ! worse: the CI excludes 0). The quota
timeline, the transition steps as the forecast lands them and the budget crossings are replication 1's
(said so); the verdict is the simulator's recommendation paragraph.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fairshare.durations import format_duration
from fairshare.policy import QuotaPolicy
from fairshare.quantity import describe_quantity, parse_quantity
from simulations.gate import Verdict
from simulations.metrics import KINDS, MetricRef
from simulations.record import RunResult
from simulations.runner import ScenarioOutcome
from simulations.summary import MetricInfo, VariantSummary
from simulations.whatif import compare, comparison_table, metric_info

from .diff import ObjectDiff, Step
from .inputs import PRIMARY, History, Live
from .scenario import Built


def rfc3339(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def offset(seconds: float) -> str:
    return "now" if seconds < 1 else f"+{format_duration(seconds)}"


@dataclass
class Forecast:
    variants: list[VariantSummary]  # the rows below only, baseline first
    info: dict[str, MetricInfo]
    timelines: dict[str, dict[str, list[tuple[float, int]]]]  # variant -> team -> [(t, milli)] (rep 1)
    steps: dict[str, list[tuple[float, str, str]]]  # variant -> [(t, target, detail)] transitions (rep 1)
    budgets: dict[str, list[tuple[float, str, str]]]  # variant -> [(t, budget, detail)] crossings (rep 1)
    recommendation: str
    advice: str | None
    notes: list[str] = field(default_factory=list)


def rows(policy: QuotaPolicy, outcome: ScenarioOutcome) -> list[MetricRef]:
    """The forecast's rows for the policy's classes and teams present in the runs."""
    sample = outcome.summary.variants[0].replications[0]
    refs: list[MetricRef] = []
    for pc in sorted(policy.spec.priority_classes, key=lambda c: -c.value):
        if pc.name in sample.priority_classes:
            refs += [MetricRef(KINDS[k], pc.name) for k in ("wait_p50", "wait_p95", "never_admitted")]
    for team in policy.spec.teams:
        if team.name in sample.queues:
            refs += [MetricRef(KINDS[k], team.name) for k in
                     ("team_wait_p50", "team_wait_p95", "goodput", "lost_gpu_hours", "evictions")]
    refs += [MetricRef(KINDS[k], None) for k in ("utilization", "goodput", "lost_gpu_hours", "evictions")]
    return refs


def forecast(policy: QuotaPolicy, live: Live, outcome: ScenarioOutcome, built: Built) -> Forecast:
    refs = rows(policy, outcome)
    arms = [(v.name, v.description, v.baseline, v.replications) for v in outcome.summary.variants]
    compared = compare(arms, refs)
    keys = [r.key for r in refs]
    kept = [v.model_copy(update={"metrics": {k: v.metrics[k] for k in keys if k in v.metrics},
                                 "deltas": {k: v.deltas[k] for k in keys if k in v.deltas}})
            for v in compared]
    info = metric_info(arms, window="1s", extra=refs)
    rec = outcome.summary.recommendation
    return Forecast(
        variants=kept,
        info={k: info[k] for k in keys if k in info},
        timelines={r.variant: _timeline(r, live) for r in outcome.first_runs},
        steps={r.variant: [(a.time, a.target, a.detail) for a in r.actions
                           if a.kind in ("transition-start", "transition-step", "transition-wait",
                                         "transition-finish")] for r in outcome.first_runs},
        budgets={r.variant: [(a.time, a.target, a.detail) for a in r.actions
                             if a.kind in ("budget-crossed", "budget-lifted")] for r in outcome.first_runs},
        recommendation=rec.paragraph if rec is not None else "",
        advice=rec.more_replications if rec is not None else None,
        notes=sorted({n for r in outcome.first_runs for n in r.notes}) + built.notes,
    )


def _timeline(run: RunResult, live: Live) -> dict[str, list[tuple[float, int]]]:
    """Each team's nominal quota of the primary resource over the run, its flavors summed: the live
    ClusterQueue's at t=0, then every step the run applied."""
    flavors: dict[str, dict[str, int]] = {}
    for key, obj in live.index.items():
        if key.kind != "ClusterQueue" or key.name not in run.quota_seconds:
            continue
        per = flavors.setdefault(key.name, {})
        for group in (obj.get("spec") or {}).get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for r in flavor.get("resources") or []:
                    if r.get("name") == run.primary_resource:
                        per[str(flavor.get("name"))] = parse_quantity(r.get("nominalQuota", 0))
    out = {team: [(0.0, sum(per.values()))] for team, per in sorted(flavors.items())}
    for q in run.quota_changes:
        if q.resource != run.primary_resource or q.cluster_queue not in out:
            continue
        flavors[q.cluster_queue][q.flavor] = q.nominal_milli
        point = (q.time, sum(flavors[q.cluster_queue].values()))
        series = out[q.cluster_queue]
        if series[-1][0] == q.time:
            series[-1] = point
        else:
            series.append(point)
    return out


# ------------------------------------------------------------------------------------------------- text


def calibration_lines(built: Built, history: History | None, replay: float | None) -> list[str]:
    cal = built.calibration
    if history is None:
        head = "calibration: no ledger (--no-ledger): no future arrivals, run times unknown"
        return [head]
    groups = [g for g in cal.groups if g.arrivals]
    rate = sum(g.rate_per_hour for g in groups)
    finished = sum(g.durations.finished for g in cal.groups if g.durations is not None and g.durations.pooled
                   is None)
    censored = sum(g.durations.censored for g in cal.groups if g.durations is not None and
                   g.durations.pooled is None)
    out = [f"calibration: {cal.lives:,} workload lives in {history.source}, arrivals fitted over "
           f"{rfc3339(cal.since)} .. {rfc3339(cal.until)} ({format_duration(cal.until - cal.since)}): "
           f"{len(groups)} kind(s) (LocalQueue x priority class x shape), {rate:.2f} arrivals/h in all, "
           f"with each queue's weekly profile (UTC); run times from {finished:,} finished and {censored:,} "
           "still-running lives (Kaplan-Meier)"]
    if replay is not None:
        out.append(f"future arrivals: the {format_duration(replay)} recorded before now, replayed from t=0 "
                   "(their times, shapes and run times; unknown run times drawn from their kind's)")
    for g in sorted(groups, key=lambda g: -g.rate_per_hour)[:8]:
        err = g.rate_rel_error
        median = format_duration(g.durations.median()) if g.durations is not None else "-"
        out.append(f"  {g.local_queue} {g.priority_class or '(no class)'} {g.shape.describe()}: "
                   f"{g.rate_per_hour:.3g}/h (±{100 * (err or 0):.0f}%), {g.arrivals} arrivals, "
                   f"median run {median}" + (f" ({g.durations.pooled})" if g.durations and
                                             g.durations.pooled else ""))
    if len(groups) > 8:
        out.append(f"  ... and {len(groups) - 8} more kinds (-o json lists them all)")
    return out


def diff_text(*, live: Live, new_label: str, new_generation: int, policy_diff: str,
              objects: Sequence[ObjectDiff], final: Sequence[ObjectDiff], steps: Sequence[Step]) -> str:
    """The diff and the transition plan (printed before the forecast is simulated)."""
    name = live.current.name
    out = [f"QuotaPolicy {name} on {live.cluster.server}, read at {rfc3339(live.now)}: generation "
           f"{live.generation} -> {new_generation} with {new_label}", ""]
    out.append("== diff (kubectl diff: the live objects -> what the operator applies now) ==")
    body = policy_diff + "".join(d.text for d in objects)
    out.append(body.rstrip("\n") if body else "(no difference)")
    if objects:
        counts = {a: sum(1 for d in objects if d.action == a) for a in ("create", "update", "delete")}
        out.append(f"({counts['update']} Kueue object(s) updated, {counts['create']} created, "
                   f"{counts['delete']} deleted, at once)")
    out += ["", "== transition plan (the policy controller's, if nothing but its own steps changed) =="]
    out += _plan_lines(steps, live.now) or ["(no transition: every quota already at its target)"]
    later = [d for d in final if d.text not in {o.text for o in objects}]
    if later:
        out += ["", "== diff once every transition has reached its target (the live objects -> the spec) =="]
        out.append("".join(d.text for d in later).rstrip("\n"))
    return "\n".join(out) + "\n"


def forecast_text(*, live: Live, horizon: float, built: Built, fc: Forecast, history: History | None,
                  replay: float | None, replications: int, seed: int, verdicts: Sequence[Verdict],
                  budgets_now: Sequence[str]) -> str:
    out = ["", f"== forecast: {', '.join(v.name for v in fc.variants)} over {format_duration(horizon)}, "
               f"{replications} replications (seed {seed}), the same arrivals in every variant =="]
    out += calibration_lines(built, history, replay)
    out.append(f"start (t=0 = {rfc3339(live.now)}): {built.running} workloads running (their run time drawn "
               f"beyond what they have run), {built.pending} pending in Kueue's order")
    out += [f"note: {n}" for n in fc.notes]
    out.append("")
    out.append(comparison_table(fc.variants, fc.info))
    out += ["", "quota timeline (replication 1; nominal of the primary resource, all flavors):"]
    for variant, teams in fc.timelines.items():
        for team, series in teams.items():
            if len(series) > 1:
                shown = " -> ".join(f"{describe_quantity(m, PRIMARY)} at {offset(t)}" for t, m in series)
                out.append(f"  {variant}: {team}: {shown}")
    if not any(len(s) > 1 for teams in fc.timelines.values() for s in teams.values()):
        out.append("  (no quota changes within the horizon)")
    landed = {v: s for v, s in fc.steps.items() if s}
    if landed:
        out.append("transition steps as the forecast lands them (replication 1; drain waits for running "
                   "work):")
        for variant, items in landed.items():
            for t, target, detail in items:
                shown = detail if target in detail else f"{target}: {detail}"
                out.append(f"  {variant}: {offset(t):>8}  {shown}")
    if budgets_now:
        out.append("budgets (the simulated consumption counts from t=0; before it, as measured now):")
        out += [f"  {b}" for b in budgets_now]
        for variant, items in fc.budgets.items():
            shown = "; ".join(f"{offset(t)} {b}: {d}" for t, b, d in items) or "no threshold reached"
            out.append(f"  {variant} (replication 1): {shown}")
    out += ["", "verdict: " + fc.recommendation]
    if fc.advice:
        out.append(f"more replications would settle: {fc.advice}")
    if verdicts:
        out += ["", "== gate (--fail-if: holds when the whole 95% CI is beyond the bound) =="]
        for v in verdicts:
            out.append(f"{v.outcome.value.upper():>13}  {v.condition.text}  ({v.detail})")
    return "\n".join(out) + "\n"


def _plan_lines(steps: Sequence[Step], now: float) -> list[str]:
    out: list[str] = []
    last_key = None
    for s in steps:
        label = str(s.key) if s.key is not None else "evictions"
        if s.key != last_key:
            out.append(f"{label}:")
            last_key = s.key
        out.append(f"  {rfc3339(s.at)}  {offset(s.at - now):>8}  {s.what}")
    return out


# ------------------------------------------------------------------------------------------------- json


def document(*, live: Live, new_label: str, new_generation: int, policy_diff: str,
             objects: Sequence[ObjectDiff], final: Sequence[ObjectDiff], steps: Sequence[Step],
             horizon: float, built: Built | None,
             fc: Forecast | None, history: History | None, replications: int, seed: int,
             verdicts: Sequence[Verdict], exit_code: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "policy": live.current.name,
        "server": live.cluster.server,
        "readAt": rfc3339(live.now),
        "generation": {"live": live.generation, "new": new_generation, "file": new_label},
        "diff": {"policy": policy_diff, "objects": [
            {"kind": d.key.kind, "namespace": d.key.namespace or None, "name": d.key.name, "action": d.action,
             "diff": d.text} for d in objects],
            "final": [{"kind": d.key.kind, "namespace": d.key.namespace or None, "name": d.key.name,
                       "action": d.action, "diff": d.text} for d in final]},
        "transitions": [{"at": rfc3339(s.at), "offsetSeconds": s.at - live.now,
                         "quota": str(s.key) if s.key is not None else None, "kind": s.kind, "what": s.what}
                        for s in steps],
        "gate": [{"condition": v.condition.text, "outcome": v.outcome.value, "detail": v.detail}
                 for v in verdicts],
        "exitCode": exit_code,
    }
    if built is not None and fc is not None:
        cal = built.calibration
        out["forecast"] = {
            "horizonSeconds": horizon,
            "replications": replications,
            "seed": seed,
            "start": {"running": built.running, "pending": built.pending},
            "calibration": {
                "ledger": history.source if history is not None else None,
                "since": rfc3339(cal.since), "until": rfc3339(cal.until), "lives": cal.lives,
                "kinds": [{"name": g.name, "localQueue": g.local_queue, "priorityClass": g.priority_class,
                           "shape": g.shape.describe(), "arrivals": g.arrivals,
                           "ratePerHour": g.rate_per_hour,
                           "rateRelativeError": g.rate_rel_error,
                           "medianRunSeconds": g.durations.median() if g.durations else None,
                           "runTimesFrom": (g.durations.pooled if g.durations and g.durations.pooled
                                            else "own")}
                          for g in cal.groups],
            },
            "variants": [v.model_dump(mode="json", exclude={"replications"}) for v in fc.variants],
            "metricInfo": {k: m.model_dump(mode="json") for k, m in fc.info.items()},
            "quotaTimeline": {v: {t: [[x, m / 1000] for x, m in s] for t, s in teams.items()}
                              for v, teams in fc.timelines.items()},
            "transitionSteps": {v: [{"offsetSeconds": t, "quota": q, "what": d} for t, q, d in items]
                                for v, items in fc.steps.items()},
            "budgetCrossings": {v: [{"offsetSeconds": t, "budget": b, "what": d} for t, b, d in items]
                                for v, items in fc.budgets.items()},
            "recommendation": fc.recommendation,
            "moreReplications": fc.advice,
            "notes": fc.notes,
        }
    return out


def budget_lines(live: Live) -> list[str]:
    out = []
    for b in live.status.budgets:
        if b.used is None or b.limit is None:
            continue
        out.append(f"{b.name}: {b.used} of {b.limit} {b.unit or ''} in the period from "
                   f"{b.period_start or '?'}")
    return out
