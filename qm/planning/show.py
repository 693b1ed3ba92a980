"""The plan's report: the forecast's figures pulled from the simulation's outcome, as text and as JSON.

Per priority class: the waits (p50, p95; never-admitted work counted at the wait it had at the horizon)
and the never-admitted share; per team: its waits, goodput, lost GPU-hours and evictions; cluster-wide:
utilization, goodput, lost GPU-hours, evictions. The current policy as mean ± 95% CI over replications,
each policy file as mean and paired Δ ± 95% CI (* better, ! worse: the CI excludes 0). The quota
timeline, the transition steps as the forecast lands them and the budget crossings are replication 1's
(said so); the verdict is the simulator's recommendation paragraph.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fairshare.durations import format_duration, to_text
from fairshare.policy import QuotaPolicy, format_milli
from fairshare.quantity import describe_quantity, parse_quantity
from fairshare.timestamps import rfc3339
from simulations.durations import RUNS_ON
from simulations.gate import MIN_REPLICATIONS, Verdict
from simulations.metrics import KINDS, MetricRef
from simulations.record import RunResult
from simulations.runner import ScenarioOutcome, Stopped
from simulations.summary import MetricInfo, VariantSummary
from simulations.whatif import compare, comparison_table, metric_info

from .diff import ObjectDiff
from .inputs import PRIMARY, History, Live
from .scenario import Built
from .semantic import show as show_value
from .transitions import SIMULATED, Plan, QuotaPoint, Step

TEMPLATES = Path(__file__).parent / "templates"  # plan.html (extends simulations/templates/report.html)


def offset(seconds: float) -> str:
    """Seconds from the read, to the second (+1m30s): a step lands within a reconcile tick of it."""
    return "now" if seconds < 1 else f"+{to_text(round(seconds))}"


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
    against_plan: Agreement | None = None  # replication 1 of the new policy against the transition plan


@dataclass(frozen=True)
class Agreement:
    """Whether a forecast run lands the transition plan's quota changes at its times and evicts its victims
    (qm/planning/transitions.py: the plan is the same run without drawn run times and arrivals)."""

    variant: str
    same: bool
    detail: str
    victims: list[tuple[float, str, float, float]]  # (seconds from t=0, workload, GPUs, seconds it ran)

    @property
    def lost_gpu_hours(self) -> float:
        return sum(g * ran for _, _, g, ran in self.victims) / 3600.0


def _quota_text(point: QuotaPoint | None) -> str:
    if point is None:
        return "nothing more"
    _, team, flavor, resource, milli = point
    return f"{team} {flavor}/{resource} at {describe_quantity(milli, resource)}"


def against_plan(plan: Plan, run: RunResult, variant: str) -> Agreement:
    """Replication 1 of the new policy against the transition plan: the same quota changes at the same times
    and the same victims at the same times, or the first difference and what the run had that the plan
    leaves out by then (work present at t=0 that ended, work that arrived)."""
    ours = [(round(q.time, 3), q.cluster_queue, q.flavor, q.resource, q.nominal_milli)
            for q in run.quota_changes]
    planned = [(round(t, 3), team, flavor, r, m) for t, team, flavor, r, m in plan.quotas]
    origin = plan.origin
    victims = [(p.time, p.victim, p.gpus_milli / 1000, p.lost_seconds) for p in run.preemptions]
    planned_victims = [(round(s.at - origin, 3), s.victim or "") for s in plan.evictions]
    run_victims = [(round(t, 3), v) for t, v, _, _ in victims]
    if ours == planned and run_victims == planned_victims:
        return Agreement(variant, True, f"replication 1 follows the transition plan: the same {len(ours)} "
                         f"quota change(s) at the same times and the same {len(victims)} eviction(s)",
                         victims)
    at, what, instead = _first_difference(planned, ours, planned_victims, run_victims)
    from simulations.initial import PENDING_AT_START, RUNNING_AT_START

    ended = sum(1 for i, j in enumerate(run.jobs)
                if j.source == RUNNING_AT_START and run.finished_at[i] <= at)
    arrived = sum(1 for j in run.jobs
                  if j.source not in (RUNNING_AT_START, PENDING_AT_START) and j.arrival <= at)
    return Agreement(variant, False, f"replication 1 departs from the transition plan at {offset(at)}: the "
                     f"plan has {what}, the run {instead}; by then {ended} workload(s) running at t=0 had "
                     f"finished and {arrived} had arrived in the run (its drawn run times and arrivals, "
                     "which the plan leaves out)", victims)


def _first_difference(planned: list[QuotaPoint], ours: list[QuotaPoint],
                      planned_victims: list[tuple[float, str]],
                      run_victims: list[tuple[float, str]]) -> tuple[float, str, str]:
    events: list[tuple[float, str, str]] = []
    for i in range(max(len(planned), len(ours))):
        a = planned[i] if i < len(planned) else None
        b = ours[i] if i < len(ours) else None
        if a != b:
            events.append((min(x[0] for x in (a, b) if x is not None), _quota_text(a) + _when(a),
                           _quota_text(b) + _when(b)))
            break
    for i in range(max(len(planned_victims), len(run_victims))):
        a2 = planned_victims[i] if i < len(planned_victims) else None
        b2 = run_victims[i] if i < len(run_victims) else None
        if a2 != b2:
            events.append((min(x[0] for x in (a2, b2) if x is not None),
                           f"evicts {a2[1]} at {offset(a2[0])}" if a2 else "no more eviction",
                           f"evicts {b2[1]} at {offset(b2[0])}" if b2 else "no more eviction"))
            break
    return min(events)


def _when(point: QuotaPoint | None) -> str:
    return f" at {offset(point[0])}" if point is not None else ""


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


def forecast(policy: QuotaPolicy, live: Live, outcome: ScenarioOutcome, built: Built,
             plan: Plan | None, new_variant: str | None = None) -> Forecast:
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
        against_plan=next((against_plan(plan, r, r.variant) for r in outcome.first_runs
                           if r.variant == new_variant), None) if plan is not None else None,
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
    warning = cal.too_short()
    out = [f"warning: {warning}"] if warning is not None else []
    cached = f" (through the lives cache: {history.reused:,} ended lives reused)" if history.reused else ""
    out += [f"calibration: {cal.lives:,} workload lives in {history.source}{cached}, arrivals fitted over "
           f"{rfc3339(cal.since)} .. {rfc3339(cal.until)} ({format_duration(cal.until - cal.since)}): "
           f"{len(groups)} kind(s) (LocalQueue x priority class x shape), {rate:.2f} arrivals/h in all, "
           f"with each queue's weekly profile (UTC); run times from {finished:,} finished and {censored:,} "
           "still-running lives (Kaplan-Meier)"]
    if replay is not None:
        out.append(f"future arrivals: the {format_duration(replay)} recorded before now, replayed from t=0 "
                   "(their times, shapes and run times; unknown run times drawn from their kind's)")
    for g in sorted(groups, key=lambda g: -g.rate_per_hour)[:8]:
        err = g.rate_rel_error
        median = g.durations.median_text() if g.durations is not None else "-"
        out.append(f"  {g.local_queue} {g.priority_class or '(no class)'} {g.shape.describe()}: "
                   f"{g.rate_per_hour:.3g}/h (±{100 * (err or 0):.0f}%), {g.arrivals} arrivals, "
                   f"median run {median}" + (f" ({g.durations.pooled})" if g.durations and
                                             g.durations.pooled else ""))
    if len(groups) > 8:
        out.append(f"  ... and {len(groups) - 8} more kinds (-o json lists them all)")
    return out


def diff_text(*, live: Live, new_label: str, new_generation: int, policy_diff: ObjectDiff,
              objects: Sequence[ObjectDiff], final: Sequence[ObjectDiff], plan: Plan) -> str:
    """The diff and the transition plan (printed before the forecast is simulated)."""
    name = live.current.name
    out = [f"QuotaPolicy {name} on {live.cluster.server}, read at {rfc3339(live.now)}: generation "
           f"{live.generation} -> {new_generation} with {new_label}", ""]
    out.append("== diff (what changes, field by field, API-server defaults on both sides; then the Kueue "
               "objects the operator applies now) ==")
    body = policy_diff.text + "".join(d.text for d in objects)
    out.append(body.rstrip("\n"))
    if objects:
        counts = {a: sum(1 for d in objects if d.action == a) for a in ("create", "update", "delete")}
        out.append(f"({counts['update']} Kueue object(s) updated, {counts['create']} created, "
                   f"{counts['delete']} deleted, at once)")
    out += ["", "== transition plan " + (
        "(the policy controller's decisions over the live state, simulated: the work running now runs on, "
        "nothing new arrives) ==" if plan.how == SIMULATED else f"({plan.how}) ==")]
    out += plan_lines(plan) or ["(no transition: every quota already at its target)"]
    later = [d for d in final if d.text not in {o.text for o in objects}]
    if later:
        out += ["", "== diff once every transition has reached its target (the live objects -> the spec) =="]
        out.append("".join(d.text for d in later).rstrip("\n"))
    return "\n".join(out) + "\n"


def replication_lines(replications: int, stopped: Stopped | None, verdicts: Sequence[Verdict]) -> list[str]:
    """How many replications ran of those asked, and why the runs stopped there (simulations/gate.py:
    Sequential)."""
    if stopped is None:
        why = "no --fail-if condition to stop on earlier" if not verdicts else \
            f"too few to stop earlier: an early stop needs more than {MIN_REPLICATIONS}"
        return [f"replications: ran all {replications} ({why})"]
    looks = (f"{100 * stopped.level:.3g}% intervals: 95% over {stopped.looks} looks, Bonferroni"
             if stopped.looks > 1 else "95% intervals")
    if stopped.decided and stopped.ran < stopped.maximum:
        return [f"replications: decided after {stopped.ran} of {stopped.maximum}: every --fail-if "
                f"condition's interval is clear of its bound ({looks})"]
    if stopped.decided:
        return [f"replications: ran all {stopped.maximum}: every --fail-if condition decided only at the "
                f"last look ({looks} before it)"]
    open_ = [v.condition.text for v in verdicts if v.outcome.value == "uncertain"]
    return [f"replications: ran all {stopped.maximum}: undecided: "
            + ("; ".join(open_) if open_ else "a condition's interval still straddled its bound at a look")
            + " (its 95% interval straddles its bound: more replications would tell)"]


def forecast_text(*, live: Live, horizon: float, built: Built, fc: Forecast, history: History | None,
                  replay: float | None, replications: int, seed: int, verdicts: Sequence[Verdict],
                  budgets_now: Sequence[str], stopped: Stopped | None = None) -> str:
    part = forecast_sections(live=live, built=built, fc=fc, history=history, replay=replay,
                             verdicts=verdicts, budgets_now=budgets_now, replications=replications,
                             stopped=stopped)
    ran = stopped.ran if stopped is not None else replications
    out = ["", f"== forecast: {', '.join(v.name for v in fc.variants)} over {format_duration(horizon)}, "
               f"{ran} replications (seed {seed}), the same arrivals in every variant =="]
    out += part["replications"]
    out += part["calibration"] + part["start"] + [f"note: {n}" for n in part["notes"]]
    out += ["", comparison_table(fc.variants, fc.info), ""]
    out += part["timeline"] + part["against"] + part["budgets"]
    out += ["", *part["verdict"]]
    if part["gate"]:
        out += ["", "== gate (--fail-if: holds when the whole 95% CI is beyond the bound) ==", *part["gate"]]
    return "\n".join(out) + "\n"


def forecast_sections(*, live: Live, built: Built, fc: Forecast, history: History | None,
                      replay: float | None, verdicts: Sequence[Verdict],
                      budgets_now: Sequence[str], replications: int,
                      stopped: Stopped | None = None) -> dict[str, list[str]]:
    """The forecast's parts as lines, for the text and for report.html."""
    start = [f"start (t=0 = {rfc3339(live.now)}): {built.running} workloads running (their run time drawn "
             f"beyond what they have run), {built.pending} pending in Kueue's order"]
    timeline = ["quota timeline (replication 1; nominal of the primary resource, all flavors):"]
    for variant, teams in fc.timelines.items():
        for team, series in teams.items():
            if len(series) > 1:
                shown = " -> ".join(f"{describe_quantity(m, PRIMARY)} at {offset(t)}" for t, m in series)
                timeline.append(f"  {variant}: {team}: {shown}")
    if not any(len(s) > 1 for teams in fc.timelines.values() for s in teams.values()):
        timeline.append("  (no quota changes within the horizon)")
    landed = {v: s for v, s in fc.steps.items() if s}
    if landed:
        timeline.append("transition steps as the forecast lands them (replication 1; drain waits for running "
                        "work):")
        for variant, items in landed.items():
            for t, target, detail in items:
                shown = detail if target in detail else f"{target}: {detail}"
                timeline.append(f"  {variant}: {offset(t):>8}  {shown}")
    against: list[str] = []
    if fc.against_plan is not None:
        a = fc.against_plan
        against.append(f"against the transition plan ({a.variant}): {a.detail}")
        if a.victims:
            against.append(f"  lost to evictions in replication 1: {a.lost_gpu_hours:.3g} GPU-h ("
                           + ", ".join(f"{v} {g:g} GPU(s) x {to_text(round(ran))} at {offset(t)}"
                                       for t, v, g, ran in a.victims)
                           + "; since each attempt started: no checkpoints)")
    budgets: list[str] = []
    if budgets_now:
        budgets.append("budgets (the simulated consumption counts from t=0; before it, as measured now):")
        budgets += [f"  {b}" for b in budgets_now]
        for variant, items in fc.budgets.items():
            shown = "; ".join(f"{offset(t)} {b}: {d}" for t, b, d in items) or "no threshold reached"
            budgets.append(f"  {variant} (replication 1): {shown}")
    verdict = ["verdict: " + fc.recommendation]
    if fc.advice:
        verdict.append(f"more replications would settle: {fc.advice}")
    gate = [f"{v.outcome.value.upper():>13}  {v.condition.text}  ({v.detail})" for v in verdicts]
    return {"replications": replication_lines(replications, stopped, verdicts),
            "calibration": calibration_lines(built, history, replay), "start": start, "notes": list(fc.notes),
            "timeline": timeline, "against": against, "budgets": budgets, "verdict": verdict, "gate": gate}


def plan_lines(plan: Plan) -> list[str]:
    """Each quota's steps in time order, then the evictions with the work each loses, and their total."""
    out: list[str] = []
    keys = [s.key for s in plan.steps if s.key is not None]
    for key in dict.fromkeys(keys):
        out.append(f"{key}:")
        out += [_line(s, plan.origin) for s in plan.steps if s.key == key]
    evictions = [s for s in plan.steps if s.key is None]
    if evictions:
        out.append("evictions:")
        out += [_line(s, plan.origin) for s in evictions]
    if plan.evictions and plan.how == SIMULATED:
        out.append(f"  lost: {plan.lost_gpu_hours:.3g} GPU-h (each victim's GPUs x its run time since its "
                   "attempt started: no checkpoints)")
    return out


def _line(s: Step, origin: float) -> str:
    return f"  {rfc3339(s.at)}  {offset(s.at - origin):>8}  {_what(s)}"


def _what(s: Step) -> str:
    if s.kind == "evict" and s.ran is not None:
        lost = f"{s.lost_gpu_hours:.3g}"
        return f"{s.what} [{s.gpus:g} GPU(s), ran {to_text(round(s.ran))}: {lost} GPU-h lost]"
    return s.what


# ------------------------------------------------------------------------------------------------- json


def document(*, live: Live, new_label: str, new_generation: int, policy_diff: ObjectDiff,
             objects: Sequence[ObjectDiff], final: Sequence[ObjectDiff], plan: Plan,
             horizon: float, built: Built | None,
             fc: Forecast | None, history: History | None, replications: int, seed: int,
             verdicts: Sequence[Verdict], exit_code: int, stopped: Stopped | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "policy": live.current.name,
        "server": live.cluster.server,
        # Kueue as the decision, the transition plan and the forecast model it (its live Configuration).
        "kueue": {"fairSharing": live.scheduler.fair_sharing,
                  "preemptionStrategies": list(live.scheduler.fair_sharing_strategies)
                  if live.scheduler.fair_sharing else []},
        "readAt": rfc3339(live.now),
        "generation": {"live": live.generation, "new": new_generation, "file": new_label},
        "diff": {"policy": policy_diff.text, "policyChanges": [c.document() for c in policy_diff.changes],
                 "objects": [d.document() for d in objects], "final": [d.document() for d in final]},
        "transitions": [_step_document(s, live.now) for s in plan.steps],
        "transitionPlan": {
            "how": plan.how,
            "quotaTimeline": [{"offsetSeconds": t, "team": team, "flavor": flavor, "resource": r,
                               "nominal": format_milli(m)} for t, team, flavor, r, m in plan.quotas],
            "evictions": [_step_document(s, live.now) for s in plan.evictions],
            "lostGpuHours": plan.lost_gpu_hours,
            "notes": plan.notes,
        },
        "gate": [{"condition": v.condition.text, "outcome": v.outcome.value, "detail": v.detail}
                 for v in verdicts],
        "exitCode": exit_code,
    }
    if built is not None and fc is not None:
        cal = built.calibration
        out["forecast"] = {
            "horizonSeconds": horizon,
            "replications": stopped.ran if stopped is not None else replications,
            "replicationsAsked": replications,
            "stoppedEarly": stopped is not None and stopped.ran < stopped.maximum,
            "replicationsWhy": replication_lines(replications, stopped, verdicts)[0].removeprefix(
                "replications: "),
            "seed": seed,
            "start": {"running": built.running, "pending": built.pending},
            "calibration": {
                "ledger": history.source if history is not None else None,
                "fromCache": history.reused if history is not None else 0,
                "since": rfc3339(cal.since), "until": rfc3339(cal.until), "lives": cal.lives,
                "finished": cal.finished, "first": rfc3339(cal.first) if cal.first is not None else None,
                "spanSeconds": cal.span,
                "warning": cal.too_short() if history is not None else None,
                "kinds": [{"name": g.name, "localQueue": g.local_queue, "priorityClass": g.priority_class,
                           "shape": g.shape.describe(), "arrivals": g.arrivals,
                           "ratePerHour": g.rate_per_hour,
                           "rateRelativeError": g.rate_rel_error,
                           "medianRunSeconds": (g.durations.median() if g.durations and g.durations.median()
                                                < RUNS_ON else None),
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
            "againstPlan": None if fc.against_plan is None else {
                "variant": fc.against_plan.variant, "replication": 1, "same": fc.against_plan.same,
                "detail": fc.against_plan.detail,
                "evictions": [{"offsetSeconds": t, "victim": v, "gpus": g, "ranSeconds": ran,
                               "lostGpuHours": g * ran / 3600.0} for t, v, g, ran in fc.against_plan.victims],
                "lostGpuHours": fc.against_plan.lost_gpu_hours},
            "recommendation": fc.recommendation,
            "moreReplications": fc.advice,
            "notes": fc.notes,
        }
    return out


def _step_document(s: Step, origin: float) -> dict[str, Any]:
    out: dict[str, Any] = {"at": rfc3339(s.at), "offsetSeconds": s.at - origin,
                           "quota": str(s.key) if s.key is not None else None, "kind": s.kind, "what": s.what}
    if s.victim is not None:
        out["victim"] = s.victim
    if s.ran is not None:
        out.update(gpus=s.gpus, ranSeconds=s.ran, lostGpuHours=s.lost_gpu_hours)
    return out


def budget_lines(live: Live) -> list[str]:
    out = []
    for b in live.status.budgets:
        if b.used is None or b.limit is None:
            continue
        out.append(f"{b.name}: {b.used} of {b.limit} {b.unit or ''} in the period from "
                   f"{b.period_start or '?'}")
    return out


# ------------------------------------------------------------------------------------------------- html


def report_view(*, live: Live, new_label: str, new_generation: int, policy_diff: ObjectDiff,
                objects: Sequence[ObjectDiff], final: Sequence[ObjectDiff], plan: Plan,
                sections: Mapping[str, list[str]], verdicts: Sequence[Verdict],
                exit_code: int) -> dict[str, Any]:
    """What qm/planning/templates/plan.html shows before the forecast's comparison and plots: the change,
    the diff, the transition plan, the forecast against it and the gate (values as the text shows them)."""
    def diff_rows(diffs: Sequence[ObjectDiff]) -> list[dict[str, Any]]:
        return [{"object": d.text.splitlines()[0], "changes": [
            {"op": c.op, "path": c.path, "before": "" if c.op == "+" else show_value(c.before),
             "after": "" if c.op == "-" else show_value(c.after)} for c in d.changes]} for d in diffs]

    later = [d for d in final if d.text not in {o.text for o in objects}]
    steps = [{"quota": str(s.key) if s.key is not None else "eviction", "at": rfc3339(s.at),
              "offset": offset(s.at - plan.origin), "what": _what(s)}
             for s in sorted(plan.steps, key=lambda s: (s.key is None, str(s.key), s.at))]
    return {"plan": {
        "policy": live.current.name, "server": live.cluster.server, "read_at": rfc3339(live.now),
        "generation": f"{live.generation} -> {new_generation}", "file": new_label, "exit_code": exit_code,
        "diff": diff_rows([policy_diff, *objects]), "final": diff_rows(later),
        "how": plan.how, "simulated": plan.how == SIMULATED, "steps": steps,
        "lost": f"{plan.lost_gpu_hours:.3g}" if plan.evictions and plan.how == SIMULATED else None,
        "gate": [{"outcome": v.outcome.value, "condition": v.condition.text, "detail": v.detail}
                 for v in verdicts],
        **{k: list(v) for k, v in sections.items() if k != "gate"},  # the gate: the table above
    }}
