"""The model side of the differential harness: the same submissions, decided by fairshare.

Two ways to drive it, per step (one submission):

- **resynced**: rebuild the model from the real state just before the step (what Kueue holds, the
  pending workloads; a pending workload of a BestEffortFIFO ClusterQueue is parked, since a
  settled Kueue has tried and parked every one of them, while StrictFIFO heads stay in their heap),
  add the new workload, run until settled. Checks what one step decides, from Kueue's own state.
- **chained**: one model for the whole state, fed the same submissions in order, never looking at
  the real state again: the way the simulator runs.

Both run ``fairshare.settle.KueueModel`` (cycles until nothing changes; victims requeued at once;
inadmissible workloads requeued after Kueue's 1 s batch).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from fairshare.manifests import parse_manifests, parse_time
from fairshare.models import ClusterState, QueueingStrategy
from fairshare.scheduler import SchedulerConfig
from fairshare.settle import KueueModel, KueueTiming, SettleResult
from fairshare.workload import WorkloadInfo
from tests.differential.cluster import ACTIVE_MESSAGES, holds_quota, submission_name
from tests.differential.generator import GeneratedState

Obj = dict[str, Any]
Flavors = dict[str, dict[str, str]]
KEEP_CONDITIONS = ("QuotaReserved", "Admitted", "Evicted", "Preempted", "Requeued")


def scheduler_config(state: GeneratedState) -> SchedulerConfig:
    """Kueue's defaults, with fair sharing (S2-a then S2-b) in fair-sharing mode."""
    return SchedulerConfig(fair_sharing=state.fair_sharing)


def clean_workload(wl: Obj, *, pending: bool = False) -> Obj:
    """A real Workload reduced to what admission reads (the case-file form); ``pending``: as it
    was when created (no status)."""
    meta = wl["metadata"]
    out_meta: Obj = {
        "name": meta["name"],
        "namespace": meta["namespace"],
        "uid": meta["uid"],
        "creationTimestamp": meta["creationTimestamp"],
    }
    if meta.get("ownerReferences"):
        out_meta["ownerReferences"] = [
            {k: r[k] for k in ("apiVersion", "kind", "name", "uid", "controller") if k in r}
            for r in meta["ownerReferences"]
        ]
    spec = wl["spec"]
    pod_sets = []
    for ps in spec["podSets"]:
        containers = [
            {"name": c["name"], "resources": c.get("resources", {})}
            for c in ps["template"]["spec"]["containers"]
        ]
        pod_sets.append(
            {"name": ps["name"], "count": ps["count"], "template": {"spec": {"containers": containers}}}
        )
    out_spec: Obj = {"queueName": spec["queueName"], "priority": spec.get("priority", 0), "podSets": pod_sets}
    if spec.get("priorityClassRef"):
        out_spec["priorityClassRef"] = spec["priorityClassRef"]
    out: Obj = {"apiVersion": wl["apiVersion"], "kind": "Workload", "metadata": out_meta, "spec": out_spec}
    if not pending:
        status = wl.get("status", {}) or {}
        conds = [
            {k: c[k] for k in ("type", "status", "reason", "message", "lastTransitionTime") if k in c}
            for c in status.get("conditions", []) or []
            if c.get("type") in KEEP_CONDITIONS
        ]
        st: Obj = {}
        if conds:
            st["conditions"] = conds
        if status.get("admission"):
            st["admission"] = status["admission"]
        if st:
            out["status"] = st
    return out


def parse_state(generated: GeneratedState, workloads: Iterable[Obj]) -> ClusterState:
    return parse_manifests([*generated.objects, *workloads], file="<real state>")


def parked_keys(generated: GeneratedState, state: ClusterState, *, exclude: Iterable[str] = ()) -> list[str]:
    """Pending workloads a settled Kueue holds as inadmissible, read from what Kueue wrote.

    A settled Kueue has popped every pending workload of a BestEffortFIFO queue (it cycles while
    a heap has a head): each carries the QuotaReserved=False message of its last evaluation
    (requeueAndUpdate). It is parked unless that evaluation requeued it at once (skipped after
    nomination, or waiting for preemptions): those stay in the heap and Kueue keeps retrying them.
    StrictFIFO heads always go back to the heap."""
    skip = set(exclude)
    out = []
    for key, wl in sorted(state.workloads.items()):
        if wl.has_quota_reservation or key in skip:
            continue
        cq = state.cluster_queue_of(wl)
        if cq is None or state.cluster_queues[cq].queueing_strategy != QueueingStrategy.BEST_EFFORT_FIFO:
            continue
        cond = wl.condition("QuotaReserved")
        if cond is None or cond.message.startswith(ACTIVE_MESSAGES):
            continue
        out.append(key)
    return out


def creation_second(wl: Obj) -> float:
    return parse_time(wl["metadata"]["creationTimestamp"])


@dataclass(frozen=True)
class ModelStep:
    """What the model did with one submission: comparable with a StepObservation."""

    admitted: dict[str, Flavors]  # submission name -> flavors, everything holding quota at the end
    preempted: dict[str, tuple[int, str]]  # submission name -> (evictions in the step, last reason)
    livelock: bool
    settled: bool
    livelock_message: str = ""


def summarize(model: KueueModel, run: SettleResult, names: Mapping[str, str]) -> ModelStep:
    """``names``: model key (ns/workload) -> submission name."""
    admitted = {names.get(k, k): f for k, f in model.admitted().items()}
    preempted: dict[str, tuple[int, str]] = {}
    for p in run.evictions:
        n, _ = preempted.get(names.get(p.victim, p.victim), (0, ""))
        preempted[names.get(p.victim, p.victim)] = (n + 1, p.reason.value)
    message = run.livelock.message() if run.livelock is not None else ""
    return ModelStep(admitted, preempted, run.livelock is not None, run.settled, message)


def real_admitted(workloads: Iterable[Obj]) -> dict[str, Flavors]:
    out = {}
    for w in workloads:
        if holds_quota(w):
            out[submission_name(w)] = {
                psa["name"]: dict(psa.get("flavors", {}))
                for psa in w["status"]["admission"]["podSetAssignments"]
            }
    return dict(sorted(out.items()))


def key_names(workloads: Iterable[Obj]) -> dict[str, str]:
    return {f"{w['metadata']['namespace']}/{w['metadata']['name']}": submission_name(w) for w in workloads}


StateChange = Callable[[ClusterState], ClusterState]
RESUME_LABEL = "differential.queuemanager.dev/flavor-scan"


def active_pending(generated: GeneratedState, state: ClusterState, parked: Iterable[str]) -> list[str]:
    """Pending workloads Kueue keeps in its heaps after settling (it retries them every cycle)."""
    skip = set(parked)
    return [
        k
        for k, w in sorted(state.workloads.items())
        if not w.has_quota_reservation and k not in skip and w.condition("QuotaReserved") is not None
    ]


def resume_flavor_scan(key: str, skipped: int) -> StateChange:
    """The state as workload ``key`` sees it when Kueue resumes its flavor scan after the flavor it
    tried last (flavorassigner.go findFlavorForPodSets: ``NextFlavorToTryForPodSetResource``, with
    the LastAssignment kept across cycles, pkg/scheduler/scheduler.go getAssignments): its
    ClusterQueue's first ``skipped`` flavors are not candidates. Expressed with a flavor label that
    only this workload's node selector contradicts (no generated workload has a node selector)."""

    def change(state: ClusterState) -> ClusterState:
        wl = state.workloads[key]
        cq = state.cluster_queue_of(wl)
        if cq is None:  # pragma: no cover - generated workloads always have a ClusterQueue
            return state
        names = [f.name for g in state.cluster_queues[cq].resource_groups for f in g.flavors][:skipped]
        flavors = {
            n: dataclasses.replace(
                f, node_labels=tuple(sorted({**dict(f.node_labels), RESUME_LABEL: "skip"}.items()))
            )
            if n in names
            else f
            for n, f in state.flavors.items()
        }
        pod_sets = tuple(
            dataclasses.replace(
                ps, node_selector=tuple(sorted({**dict(ps.node_selector), RESUME_LABEL: "take"}.items()))
            )
            for ps in wl.pod_sets
        )
        workloads = {**state.workloads, key: dataclasses.replace(wl, pod_sets=pod_sets)}
        return dataclasses.replace(state, flavors=flavors, workloads=workloads)

    return change


def resynced_state(generated: GeneratedState, before: list[Obj], new: Obj) -> tuple[ClusterState, list[str]]:
    docs = [clean_workload(w) for w in before] + [clean_workload(new, pending=True)]
    state = parse_state(generated, docs)
    new_key = f"{new['metadata']['namespace']}/{new['metadata']['name']}"
    return state, parked_keys(generated, state, exclude=[new_key])


def resynced_step(
    generated: GeneratedState,
    before: list[Obj],
    new: Obj,
    now: float,
    timing: KueueTiming | None = None,
    change: StateChange | None = None,
) -> tuple[ModelStep, ClusterState, list[str]]:
    """The model's step from the real state before it (+ the new workload, pending)."""
    state, parked = resynced_state(generated, before, new)
    if change is not None:
        state = change(state)
    model = KueueModel.from_state(state, scheduler_config(generated), parked=parked, timing=timing)
    # The submission arrives now (a ClusterQueue status change in Kueue; see KueueTiming).
    new_key = f"{new['metadata']['namespace']}/{new['metadata']['name']}"
    if new_key in model.snapshot.pending:
        model.status_changed(model.snapshot.pending[new_key].cluster_queue, now)
    run = model.run(now)
    return summarize(model, run, key_names([*before, new])), state, parked


class ChainedModel:
    """One model fed every submission in order (never resynced from the real state)."""

    def __init__(self, generated: GeneratedState, timing: KueueTiming | None = None) -> None:
        self.generated = generated
        self.model = KueueModel.from_state(
            parse_state(generated, []), scheduler_config(generated), timing=timing
        )
        self.names: dict[str, str] = {}
        self.last_run: SettleResult | None = None
        self._before: KueueModel | None = None  # the model as the last step found it

    def step(self, new: Obj, now: float) -> ModelStep:
        self._before = copy.deepcopy(self.model)
        self.names.update(key_names([new]))
        run = self._submit(self.model, new, now)
        self.last_run = run
        return summarize(self.model, run, self.names)

    def _submit(self, model: KueueModel, new: Obj, now: float) -> SettleResult:
        state = parse_state(self.generated, [clean_workload(new, pending=True)])
        (wl,) = state.workloads.values()
        cq = state.cluster_queue_of(wl)
        if cq is None:  # pragma: no cover - every generated LocalQueue names a ClusterQueue
            raise ValueError(f"no ClusterQueue for {wl.key}")
        model.submit(WorkloadInfo.pending(wl, cq))
        return model.run(now)

    def later_phases(self, new: Obj, now: float) -> Iterator[ModelStep]:
        """The last step as it goes when the submission arrives 1, 2, ... idle cycles later.

        A settled Kueue whose heads go straight back to their heaps (a StrictFIFO head that does not
        fit, a head waiting for its preemptions) keeps cycling, about every 10 ms (the scheduler's
        speedy backoff caps at 10 ms, pkg/util/wait/backoff.go maxBackoff), and each idle cycle moves
        the flavor scan of such a head on by one flavor (flavorassigner.go
        NextFlavorToTryForPodSetResource, starting over after the last). Which phase a submission
        meets is when it arrives: timing. Yields one step per phase until the phases repeat; nothing
        when the model was not left cycling."""
        before = self._before
        if before is None or not before.spinning:
            return
        seen: set[tuple[object, ...]] = set()
        ahead = copy.deepcopy(before)
        while True:
            heads, result = ahead.cycle(now)
            if result is None or result.admissions or result.preemptions:
                return  # not an idle cycle: the phases end here
            state = ahead.idle_state(heads)
            if state in seen:
                return
            seen.add(state)
            trial = copy.deepcopy(ahead)
            run = self._submit(trial, new, now)
            yield summarize(trial, run, self.names)
