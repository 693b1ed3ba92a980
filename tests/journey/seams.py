"""The seams of the journey (issue 31): what `qm plan` said, what the operator did and what the ledger bills
describe the same events, so they must agree. Each seam reads a `Record` and gives its figures and what
disagrees (an empty `problems` list: it holds).

(a) the plan's transition steps = the forecast's quota timeline = the operator's steps (offsets from each
    one's own start, within one reconcile tick plus API latency), and the same victims;
(b) the forecast's lost GPU-hours = the victims' GPUs x their run time (no checkpoints: since admission),
    and so are the ledger's;
(c) each team's cost = its resource-hours x the price in the price's declared unit (GPU-hour, core-hour,
    GiB-hour), what Kueue's own times say was held, the Prometheus counters, `qm budget status`; and it is
    cents to dollars, not millions;
(d) every audit row of an action on a workload names its team, LocalQueue and project; the shift's rows
    name the person who applied it;
(e) no workload the operator evicted is admitted again while its team holds more than its new quota.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from tests.journey.journey import BUSINESS, GPU, PEOPLE, RESEARCH, SHIFT, Record, epoch

TOLERANCE_S = 4.0  # one reconcile tick (1 s) + Kueue's batching and the API's latency on a loaded machine
GI = Decimal(2**30)
SANE_COST = Decimal(100)  # ten minutes of sample jobs: cents to dollars


@dataclass
class Seam:
    name: str
    figures: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def report(self) -> str:
        head = f"({self.name}) {'holds' if self.ok else 'FAILS'}"
        lines = [head, *(f"    {f}" for f in self.figures), *(f"    ! {p}" for p in self.problems)]
        return "\n".join(lines)


# ------------------------------------------------------------------------------------------ what happened


@dataclass(frozen=True)
class Act:
    """One action of the operator (an audit line it logged), its time in seconds since the epoch."""

    at: float
    action: str
    target: str
    what: str


def acts(record: Record) -> list[Act]:
    out = [
        Act(epoch(str(r["time"])), str(r["action"]), str(r["target"]), str(r["what"]))
        for r in record.operator_log
        if r.get("audit")
    ]
    return sorted(out, key=lambda a: a.at)


def _team_of_quota(text: str) -> str:
    return next((t for t in (RESEARCH, BUSINESS) if t in text), text)


def live_steps(record: Record) -> dict[str, list[tuple[float, str]]]:
    """team -> [(seconds since its transition started, "k/n: A -> B")] of the GPU quota."""
    started = {
        _team_of_quota(a.what): a.at
        for a in acts(record)
        if a.action == "transition-started" and GPU in a.what and a.at >= record.applied_at - 1
    }
    out: dict[str, list[tuple[float, str]]] = {}
    for a in acts(record):
        # "(step 2/3)"; a paired move's receiver: "(+3 GPUs at once)" (AdvanceTransition.progress)
        m = re.search(r"nominalQuota \S+ (.+) \((?:step )?(\d+/\d+|[+-][^)]* at once)\)", a.what)
        if a.action == "transition-step" and GPU in a.what and m:
            team = a.target.split()[-1]
            out.setdefault(team, []).append((a.at - started.get(team, a.at), f"{m.group(2)}: {m.group(1)}"))
    return out


def live_victims(record: Record) -> list[tuple[float, str]]:
    """(time, namespace/name) of every eviction the operator asked of Kueue."""
    return [(a.at, a.target.removeprefix("Workload ")) for a in acts(record) if a.action == "preempt"]


def planned_steps(plan: dict[str, Any]) -> dict[str, list[tuple[float, str]]]:
    """team -> [(seconds since the plan's start of it, "k/n: A -> B")]: the controller's transition plan."""
    rows = plan.get("transitions") or []
    starts = {
        _team_of_quota(str(r["quota"])): float(r["offsetSeconds"])
        for r in rows
        if r["kind"] == "start" and GPU in str(r["quota"])
    }
    out: dict[str, list[tuple[float, str]]] = {}
    for r in rows:
        # "step 2/3: A -> B"; a receiver: "+3 GPUs at once: A -> B, freed by research (paired move)"
        m = re.match(r"(?:step )?(\d+/\d+|[+-][^:]* at once): (.+?)(?:, freed by .*)?$", str(r["what"]))
        if r["kind"] == "step" and GPU in str(r["quota"]) and m:
            team = _team_of_quota(str(r["quota"]))
            out.setdefault(team, []).append(
                (float(r["offsetSeconds"]) - starts.get(team, 0.0), f"{m.group(1)}: {m.group(2)}")
            )
    return out


def planned_victims(plan: dict[str, Any]) -> list[tuple[float, str]]:
    out = []
    for r in plan.get("transitions") or []:
        m = re.match(r"evicts (\S+):", str(r["what"]))
        if r["kind"] == "evict" and m:
            out.append((float(r["offsetSeconds"]), m.group(1)))
    return out


def _values(step: str) -> str:
    """ "3/3: 4 GPUs -> 1 GPU" -> "4 GPUs -> 1 GPU": what a step changes, without its label."""
    return step.split(": ", 1)[-1]


def new_variant(plan: dict[str, Any]) -> str:
    """The forecast's name of the new policy's variant (the one that is not the baseline)."""
    variants = (plan.get("forecast") or {}).get("variants") or []
    names = [str(v.get("name")) for v in variants if not v.get("baseline")]
    if len(names) != 1:
        raise LookupError(f"the forecast has no single new variant: {[v.get('name') for v in variants]}")
    return names[0]


def forecast_timeline(plan: dict[str, Any]) -> dict[str, list[tuple[float, float]]]:
    """team -> [(offset, GPUs)] of the new variant's quota timeline (replication 1)."""
    timeline = (plan.get("forecast") or {}).get("quotaTimeline") or {}
    teams = timeline.get(new_variant(plan)) or {}
    return {_team_of_quota(t): [(float(x), float(v)) for x, v in points] for t, points in teams.items()}


def forecast_metric(plan: dict[str, Any], metric: str) -> float | None:
    """The new variant's mean of a forecast metric (`lost_gpu_hours`, `evictions[TEAM]`, ...), if any."""
    for v in (plan.get("forecast") or {}).get("variants") or []:
        if v.get("name") == new_variant(plan):
            value = ((v.get("metrics") or {}).get(metric) or {}).get("mean")
            return None if value is None else float(value)
    return None


# ------------------------------------------------------------------------------------------ the seams


def seam_a(record: Record) -> Seam:
    s = Seam("a: plan = forecast = act")
    plan, live = planned_steps(record.plan), live_steps(record)
    for team in sorted(set(plan) | set(live)):
        p, a = plan.get(team, []), live.get(team, [])
        s.figures.append(f"{team}: plan {[(round(t, 1), w) for t, w in p]}")
        s.figures.append(f"{' ' * len(team)}  live {[(round(t, 1), w) for t, w in a]}")
        # The quotas each step puts in force (the "k/n" labels are each side's own wording).
        if [_values(w) for _, w in p] != [_values(w) for _, w in a]:
            s.problems.append(
                f"{team}: the plan's steps {[w for _, w in p]} are not the operator's {[w for _, w in a]}"
            )
        else:
            late = [
                (w, round(tl - tp, 1))
                for (tp, w), (tl, _) in zip(p, a, strict=True)
                if abs(tl - tp) > TOLERANCE_S
            ]
            if late:
                s.problems.append(f"{team}: steps off the plan by more than {TOLERANCE_S:g} s: {late}")
    pv, lv = planned_victims(record.plan), live_victims(record)
    s.figures.append(f"victims: plan {sorted(v for _, v in pv)}; live {sorted(v for _, v in lv)}")
    if sorted(v for _, v in pv) != sorted(v for _, v in lv):
        s.problems.append("the plan's victims are not the operator's")
    try:
        timeline = forecast_timeline(record.plan)
    except LookupError as err:
        s.problems.append(str(err))
        return s
    for team, points in sorted(timeline.items()):
        changes = [(x, v) for (x, v), (_, before) in zip(points[1:], points, strict=False) if v != before]
        s.figures.append(f"{team}: forecast quota timeline {[(round(x, 1), v) for x, v in changes]}")
        steps = plan.get(team, [])
        start = next(
            (
                float(r["offsetSeconds"])
                for r in record.plan.get("transitions") or []
                if r["kind"] == "start" and team in str(r["quota"]) and GPU in str(r["quota"])
            ),
            0.0,
        )
        want = [(t + start, float(re.sub(r"[^0-9.]", "", w.split("->")[-1]))) for t, w in steps]
        if [v for _, v in changes] != [v for _, v in want] or any(
            abs(x - t) > TOLERANCE_S for (x, _), (t, _) in zip(changes, want, strict=False)
        ):
            s.problems.append(
                f"{team}: the forecast's quota timeline {changes} is not the plan's steps {want}"
            )
    evictions = forecast_metric(record.plan, "evictions")
    s.figures.append(f"forecast evictions {evictions}; plan victims {len(pv)}")
    if evictions is None or round(evictions) != len(pv):
        s.problems.append(f"the forecast's evictions ({evictions}) are not the plan's victims ({len(pv)})")
    return s


def _admitted_at(record: Record) -> dict[str, float]:
    """namespace/name -> when its first attempt reserved quota (Kueue's condition time, as polled)."""
    out: dict[str, float] = {}
    for obs in record.observations:
        for key, life in obs.lives.items():
            if life.reserved_at is not None and key not in out:
                out[key] = life.reserved_at
    return out


def _gpus(record: Record) -> dict[str, int]:
    return {k: life.gpus for obs in record.observations for k, life in obs.lives.items()}


def seam_b(record: Record) -> Seam:
    s = Seam("b: lost GPU-hours = victims' GPUs x run time")
    admitted, gpus = _admitted_at(record), _gpus(record)
    live = live_victims(record)
    lost_live = sum(gpus.get(v, 0) * (at - admitted.get(v, at)) for at, v in live) / 3600
    planned = planned_victims(record.plan)
    plan_at = record.plan_at
    lost_plan = (
        sum(gpus.get(v, 0) * (plan_at + off - admitted.get(v, plan_at + off)) for off, v in planned) / 3600
    )
    forecast = forecast_metric(record.plan, "lost_gpu_hours")
    ledger = sum(
        Decimal(r["lost_h"])
        for r in record.usage.get("rows") or []
        if r.get("resource") == GPU and r.get("team") == RESEARCH
    )
    s.figures.append(
        f"victims' GPUs x run time: live {lost_live:.4f} GPU-h, by the plan's times {lost_plan:.4f}; "
        f"forecast {'none' if forecast is None else f'{forecast:.4f}'}; ledger (research lost) {ledger:.4f}"
    )
    slack = sum(gpus.get(v, 0) for _, v in live) * TOLERANCE_S / 3600
    if forecast is None or abs(forecast - lost_plan) > slack + 1e-6:
        s.problems.append(
            f"the forecast's lost GPU-hours ({forecast}) are not its victims' GPUs x their run "
            f"time ({lost_plan:.4f})"
        )
    if abs(float(ledger) - lost_live) > slack:
        s.problems.append(
            f"the ledger's lost GPU-hours ({ledger:.4f}) are not the victims' GPUs x their run "
            f"time ({lost_live:.4f})"
        )
    if not live:
        s.problems.append("the operator evicted nothing: the deadline's victims are what this seam checks")
    return s


def _prices() -> dict[str, Decimal]:
    from fairshare.policy import load_policy_file

    (flavor,) = load_policy_file(SHIFT).spec.flavors
    return {r: Decimal(str(p)) for r, p in flavor.price_per_unit_hour.items()}


def _declared_unit(resource: str) -> Decimal:
    """Resource units per priced unit: a price is per GPU-hour, core-hour or GiB-hour (issue 31 item 2)."""
    return GI if resource == "memory" else Decimal(1)


def _usage_hours(record: Record) -> dict[tuple[str, str], Decimal]:
    """(team, resource) -> resource-hours held, in the unit `qm usage` states for the resource."""
    out: dict[tuple[str, str], Decimal] = {}
    for r in record.usage.get("rows") or []:
        key = (str(r["team"]), str(r["resource"]))
        out[key] = out.get(key, Decimal(0)) + Decimal(str(r["held_h"]))
    return out


def _usage_unit(record: Record, resource: str) -> Decimal:
    """Resource units per unit of `qm usage`'s figure: GiB for memory when it says so, else the raw unit."""
    units = record.usage.get("units") or {}
    return GI if resource == "memory" and "GiB" in str(units.get(resource, "")) else Decimal(1)


def _cost_by_team(record: Record) -> dict[str, dict[str, Decimal]]:
    out: dict[str, dict[str, Decimal]] = {}
    for r in record.cost.get("rows") or []:
        team = out.setdefault(
            str(r["team"]),
            {"cost": Decimal(0), "useful": Decimal(0), "lost": Decimal(0), "running": Decimal(0)},
        )
        for k in team:
            team[k] += Decimal(str(r[k]))
    return out


def _counter(metrics: str, name: str, team: str) -> Decimal:
    total = Decimal(0)
    for line in metrics.splitlines():
        if line.startswith(name + "{") and f'team="{team}"' in line:
            total += Decimal(line.rsplit(" ", 1)[1])
    return total


def _held_gpu_hours(record: Record, team: str) -> float:
    """GPU-hours the team held by Kueue's own condition times, attempt by attempt as the polls saw them."""
    total = 0.0
    keys = {k for obs in record.observations for k, life in obs.lives.items() if life.team == team}
    for key in keys:
        start: float | None = None
        gpus = 0
        for obs in record.observations:
            life = obs.lives.get(key)
            if life is None:
                continue
            gpus = life.gpus
            if life.reserved and start is None:
                start = life.reserved_at
            elif not life.reserved and start is not None:
                end = life.evicted_at if life.evicted_at is not None and life.evicted_at >= start else obs.at
                total += gpus * (end - start)
                start = None
        if start is not None:
            total += gpus * (record.until - start)
    return total / 3600


def seam_c(record: Record) -> Seam:
    s = Seam("c: cost = resource-hours x price, = Kueue's times, = Prometheus, = budget")
    prices, hours, costs = _prices(), _usage_hours(record), _cost_by_team(record)
    for team in (RESEARCH, BUSINESS):
        expected = Decimal(0)
        for (t, resource), h in sorted(hours.items()):
            if t == team and resource in prices:
                in_unit = h * _usage_unit(record, resource) / _declared_unit(resource)
                expected += in_unit * prices[resource]
        billed = costs.get(team, {}).get("cost", Decimal(0))
        s.figures.append(f"{team}: qm cost {billed:.6f}; Σ resource-hours x price {expected:.6f}")
        if abs(billed - expected) > Decimal("0.00001") * max(Decimal(1), expected):
            s.problems.append(
                f"{team}: cost {billed} is not its resource-hours x the prices in their declared "
                f"units ({expected})"
            )
        if not Decimal(0) < billed < SANE_COST:
            s.problems.append(f"{team}: {billed} for minutes of sample jobs (expected cents to dollars)")
        gpu_h = hours.get((team, GPU), Decimal(0))
        by_kueue = _held_gpu_hours(record, team)
        s.figures.append(f"{team}: GPU-hours ledger {gpu_h:.4f}, by Kueue's times {by_kueue:.4f}")
        if abs(float(gpu_h) - by_kueue) > 8 * TOLERANCE_S / 3600 * 4:
            s.problems.append(
                f"{team}: the ledger's {gpu_h:.4f} GPU-hours are not what Kueue says it held ({by_kueue:.4f})"
            )
        ended = costs.get(team, {}).get("useful", Decimal(0)) + costs.get(team, {}).get("lost", Decimal(0))
        counted = _counter(record.metrics, "qm_cost_total", team)
        s.figures.append(f"{team}: ended attempts' cost ledger {ended:.6f}, qm_cost_total {counted:.6f}")
        if abs(ended - counted) > Decimal("0.000001") * 10:
            s.problems.append(f"{team}: qm_cost_total {counted} is not the ledger's ended cost {ended}")
    # The budget's used is the team's cost in the same window: the file's measured at the query's end, the
    # operator's at its own last measurement (status.budgets' measuredAt). Shown with two decimals.
    at_measure = _cost_by_team(Record(cost=record.cost_at_measure))
    for source, doc, cost in (
        ("qm budget status FILE", record.budget_file, costs.get(RESEARCH, {}).get("cost")),
        ("status.budgets", record.budget_live, at_measure.get(RESEARCH, {}).get("cost")),
    ):
        rows = [r for r in doc.get("rows") or [] if r.get("budget") == "research-month"]
        used = Decimal(str(rows[0]["used"])) if rows and rows[0].get("used") not in (None, "") else None
        s.figures.append(
            f"research-month: {source} used {used} ({rows[0].get('used_percent') if rows else None}%), "
            f"research's cost then {cost}"
        )
        if used is None or cost is None or abs(used - cost) > Decimal("0.006") + cost * Decimal("0.005"):
            s.problems.append(f"{source}: research-month used {used} is not research's cost {cost}")
    return s


def _local_queue(row: dict[str, Any]) -> str:
    return str(row.get("local_queue") or "")


def seam_d(record: Record) -> Seam:
    s = Seam("d: audit rows name team, LocalQueue, project and person")
    rows = record.audit.get("rows") or []
    on_workloads = [r for r in rows if str(r.get("target", "")).startswith("Workload ")]
    for r in on_workloads:
        missing = [
            k
            for k, v in (
                ("team", r.get("team")),
                ("local_queue", _local_queue(r)),
                ("project", r.get("project")),
            )
            if not v
        ]
        if missing:
            s.problems.append(f"{r['action']} {r['target']}: no {', '.join(missing)}")
    shift = [r for r in rows if r.get("action", "").startswith("transition")]
    people = sorted({str(r.get("editor")) for r in shift})
    s.figures.append(f"{len(on_workloads)} rows on workloads; transition rows edited by {people}")
    for r in rows[:40]:
        s.figures.append(
            f"{r.get('time')} {r.get('action'):<22} {r.get('target')}  team={r.get('team')} "
            f"lq={_local_queue(r)} project={r.get('project')} editor={r.get('editor')}"
        )
    if not on_workloads:
        s.problems.append("no audit row on a workload (the deadline's evictions should have some)")
    if people != [PEOPLE["alice"]]:
        s.problems.append(
            f"the shift's rows name {people}, not the person who applied it ({PEOPLE['alice']})"
        )
    return s


def seam_e(record: Record) -> Seam:
    s = Seam("e: no futile eviction")
    for at, victim in live_victims(record):
        readmitted = []
        for obs in record.observations:
            life = obs.lives.get(victim)
            if obs.at <= at or life is None or not life.reserved or life.reserved_at is None:
                continue
            if life.reserved_at <= at:
                continue
            team = life.team
            held = sum(x.gpus for x in obs.lives.values() if x.team == team and x.reserved)
            if held * 1000 > obs.quotas.get(team, 0):
                readmitted.append(
                    f"{obs.at - at:.0f} s after its eviction ({team} holds {held} GPUs of "
                    f"{obs.quotas.get(team, 0) // 1000})"
                )
        if readmitted:
            s.problems.append(f"{victim} re-admitted above its team's quota: {readmitted[0]}")
        s.figures.append(
            f"{victim}: evicted at +{at - record.applied_at:.1f} s after the apply; "
            f"{'re-admitted above quota' if readmitted else 'not re-admitted above quota'}"
        )
    return s


def check(record: Record) -> list[Seam]:
    out = []
    for fn in (seam_a, seam_b, seam_c, seam_d, seam_e):
        try:
            out.append(fn(record))
        except (LookupError, KeyError, ValueError, TypeError) as err:  # a document not shaped as expected
            out.append(Seam(fn.__name__.replace("seam_", ""), problems=[f"{type(err).__name__}: {err}"]))
    return out


def summary(record: Record) -> Iterable[str]:
    """The journey's headline figures (the closing note's)."""
    for team, steps in sorted(live_steps(record).items()):
        yield f"{team}: live steps {[(round(t, 1), w) for t, w in steps]}"
    yield f"victims: {[v for _, v in live_victims(record)]}"
    for team, c in sorted(_cost_by_team(record).items()):
        yield (
            f"{team}: cost {c['cost']:.4f} (useful {c['useful']:.4f}, lost {c['lost']:.4f}, running "
            f"{c['running']:.4f})"
        )


__all__: Sequence[str] = ("Seam", "check", "summary")
