"""The plan's what-if: a scenario (simulations/scenario.py) that starts from the live cluster and runs the
current policy and the new one (and `--variant`s) through the one controller, with the same random
numbers (docs/plan.md, "The forecast").

- t=0 is the read of the cluster (`initial.at`); the cluster is the current policy's Kueue objects as
  they exist (quotas in force mid-transition included), its status (transitions, evictions, usage
  history) and generation, and the Workloads of its queues: running ones with the flavors they hold,
  pending ones since they became pending (the operator's rule, queue_manager/observe.py).
- Each workload present draws its total work from its kind's run times (calibrated), beyond what it has
  run; a kind no recorded life ever had runs past the horizon (counted in the notes).
- Future work: the calibrated sources (simulations/calibrate.py), or with `--replay` the lives recorded
  in the last span, replayed from t=0.
- Variants: "current policy" (the baseline: nothing applied) and one per policy file, applied at t=0 as
  `kubectl apply` would (`events: [{at: 0, policy: ...}]`): the controller then starts its transitions
  from the quotas in force.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fairshare.control.observe import pending_since, policy_objects, policy_state
from fairshare.policy import QuotaPolicy
from simulations.calibrate import MIN_DURATIONS, Calibration, calibrate, replay_sources
from simulations.durations import RUNS_ON
from simulations.loader import LoadedScenario, load_document

from .inputs import PRIMARY, History, Live, PolicyFile

CURRENT = "current policy"


@dataclass(frozen=True)
class Settings:
    horizon: float
    replications: int
    seed: int
    replay: float | None  # seconds of recorded arrivals to replay (None: the calibrated sources)


@dataclass
class Built:
    """The scenario document, its loaded form, and what it was made of (for the report)."""

    doc: dict[str, Any]
    loaded: LoadedScenario
    calibration: Calibration
    running: int
    pending: int
    notes: list[str] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # policy file path -> its variant's name


def policy_document(doc: dict[str, Any]) -> dict[str, Any]:
    meta = doc.get("metadata") or {}
    return {"apiVersion": doc.get("apiVersion"), "kind": "QuotaPolicy",
            "metadata": {"name": meta.get("name")}, "spec": doc.get("spec")}


def present_workloads(live: Live, policy: QuotaPolicy, calibration: Calibration | None,
                      horizon: float) -> tuple[list[dict[str, Any]], int, int, int]:
    """The policy's Workloads at t=0 as `initial.workloads`; (entries, running, pending, without a run
    time of their kind: they run past the horizon). A running one draws its remaining run time from the
    lives of its own kind (at least MIN_DURATIONS of them), a pending one from its kind's or a pool's.
    Without a calibration (the transition plan's run) every one runs past the horizon."""
    objects = policy_objects(policy, live.lookup)
    state = policy_state(objects, live.workloads())
    docs = live.workload_documents()
    out: list[dict[str, Any]] = []
    running = pending = unknown = 0
    for key in sorted(state.workloads):
        wl = state.workloads[key]
        doc = docs.get(key)
        if doc is None:  # pragma: no cover - parsed from these very documents
            continue
        meta = {k: v for k, v in (doc.get("metadata") or {}).items() if k != "managedFields"}
        entry: dict[str, Any] = {"workload": {**doc, "metadata": meta}}
        holds = wl.has_quota_reservation
        running += holds
        pending += not holds
        if len(wl.pod_sets) == 1:
            count, requests = wl.pod_sets[0].count, tuple(sorted(wl.pod_sets[0].requests))
        else:
            count, requests = 1, tuple(sorted(wl.total_requests().items()))
        # A running workload's remaining run time comes from its own kind's lives only (Calibration.
        # own_work_from); a pending one's from its kind's, else the narrowest pool that has some.
        pick = (calibration.own_work_from if holds else calibration.work_from) if calibration else None
        name = pick(wl.local_queue_key, wl.priority_class, count, requests) if pick is not None else None
        if name is not None:
            entry["workFrom"] = name
        else:
            unknown += 1
            entry["work"] = max(RUNS_ON, horizon + max(0.0, live.now - wl.quota_reserved_time) + 3600.0)
        if not holds:
            entry["pendingSince"] = pending_since(wl)
        out.append(entry)
    return out, running, pending, unknown


def _cluster(live: Live) -> dict[str, Any]:
    cluster: dict[str, Any] = {"quotaPolicy": policy_document(live.doc)}
    if live.capacity is not None:
        cluster["capacity"] = {PRIMARY: f"{live.capacity}m"}
    return cluster


def _initial(live: Live, present: list[dict[str, Any]]) -> dict[str, Any]:
    """The cluster at t=0: the current policy's Kueue objects as they exist, its status and generation."""
    return {"at": live.now, "objects": policy_objects(live.current, live.lookup),
            "status": dict(live.doc.get("status") or {}), "generation": live.generation, "workloads": present}


def plan_scenario(live: Live, new: PolicyFile, changed: bool, horizon: float, path: Path) -> LoadedScenario:
    """The transition plan's run (qm/planning/transitions.py): the live state, the new policy at t=0 (when
    its spec changed), the work present running on past the horizon, nothing arriving."""
    present, _, _, _ = present_workloads(live, live.current, None, horizon)
    queues = sorted(f"{o['metadata'].get('namespace')}/{o['metadata']['name']}"
                    for o in policy_objects(live.current, live.lookup) if o["kind"] == "LocalQueue")
    doc: dict[str, Any] = {
        "name": f"transition plan {live.current.name}",
        "horizon": horizon,
        "cluster": _cluster(live),
        "initial": _initial(live, present),
        "workloads": [{"name": "no-arrivals", "localQueue": queues[0] if queues else "default/none",
                       "recorded": []}],
        "events": [{"at": 0, "policy": policy_document(new.doc)}] if changed else [],
        "scheduler": scheduler_section(live),
    }
    return load_document(doc, path)


def scheduler_section(live: Live) -> dict[str, Any]:
    """The scenario's Kueue Configuration: fair sharing and its strategies as the live Kueue runs them."""
    config = live.scheduler
    if not config.fair_sharing:
        return {"fairSharing": False}
    return {"fairSharing": True, "preemptionStrategies": list(config.fair_sharing_strategies)}


def build(live: Live, history: History | None, new: PolicyFile, variants: Sequence[PolicyFile],
          settings: Settings, path: Path) -> Built:
    """The scenario of the plan (module docstring), validated as `qm simulate` validates a file."""
    now = live.now
    lives = history.lives if history is not None else ()
    since = history.since if history is not None else now
    calibration = calibrate(lives, since=since, until=now,
                            durations_since=history.look_back if history is not None else None)
    current = live.current
    objects = policy_objects(current, live.lookup)
    queues = {f"{o['metadata'].get('namespace')}/{o['metadata']['name']}" for o in objects
              if o["kind"] == "LocalQueue"}
    present, running, pending, unknown = present_workloads(live, current, calibration, settings.horizon)
    notes: list[str] = []
    if settings.replay is not None:
        sources = [s for s in replay_sources(lives, calibration, since=now - settings.replay, until=now)
                   if s["localQueue"] in queues]
    else:
        sources = [s for s in calibration.sources(now) if s["localQueue"] in queues]
    if not sources:
        notes.append("no future arrivals: the ledger has no workloads of the policy's queues in the "
                     "calibration window; the forecast covers the work present at t=0 only")
        sources = [{"name": "no-arrivals", "localQueue": sorted(queues)[0] if queues else "default/none",
                    "recorded": []}]
    if unknown:
        notes.append(f"{unknown} workload(s) present have no recorded run time of their kind (a running "
                     f"one: fewer than {MIN_DURATIONS} recorded lives of its own kind): they run past the "
                     "horizon, as the transition plan assumes")
    names: dict[str, str] = {}
    out_variants: list[dict[str, Any]] = [{"name": CURRENT, "description": f"generation {live.generation} as "
                                           "it runs, nothing applied"}]
    for pf in [new, *variants]:
        name = _unique(pf.label, {v["name"] for v in out_variants})
        names[pf.path] = name
        out_variants.append({"name": name, "description": f"{pf.path} applied at t=0",
                             "overrides": {"events": [{"at": 0, "policy": policy_document(pf.doc)}]}})
    doc: dict[str, Any] = {
        "name": f"plan {current.name}",
        "description": f"{new.path} against QuotaPolicy {current.name} generation {live.generation}, "
                       f"from the cluster at {live.cluster.server}",
        "seed": settings.seed,
        "replications": settings.replications,
        "horizon": settings.horizon,
        "cluster": _cluster(live),
        "initial": _initial(live, present),
        "durations": calibration.distributions(),
        "workloads": sources,
        "baseline": CURRENT,
        "variants": out_variants,
        "scheduler": scheduler_section(live),
    }
    loaded = load_document(doc, path)
    return Built(doc, loaded, calibration, running, pending, notes, names)


def _unique(name: str, taken: set[str]) -> str:
    out, k = name, 2
    while out in taken or out == CURRENT:
        out, k = f"{name} ({k})", k + 1
    return out
