"""Run generated states against the real Kueue and the model, step by step, and compare.

Per step (one submission): what holds quota after Kueue settled (and on which flavors), and
which workloads were preempted (how often, the reason of the last eviction), or that Kueue never
settled because it preempts in a loop. The model answers the same question twice (resynced and
chained, tests/differential/model.py). Each disagreement is classified by re-running the
resynced step under other timings of Kueue (``classify``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s

from fairshare.settle import KueueTiming
from tests.differential.cluster import (
    EvictionFinisher,
    HarnessError,
    RealCluster,
    StepObservation,
    submission_name,
)
from tests.differential.generator import GeneratedState, generate
from tests.differential.model import (
    ChainedModel,
    ModelStep,
    active_pending,
    creation_second,
    real_admitted,
    resume_flavor_scan,
    resynced_state,
    resynced_step,
)

Obj = dict[str, Any]

# Timing variants tried to classify a disagreement (the first that reproduces Kueue names the class).
VARIANTS: tuple[tuple[str, KueueTiming], ...] = (
    ("timing: victims release their quota one at a time", KueueTiming(release_victims_one_by_one=True)),
    (
        "timing: victims release their quota one at a time, the last chosen first",
        KueueTiming(release_victims_one_by_one=True, release_victims_last_first=True),
    ),
    ("timing: inadmissible workloads requeued without the 1 s batch", KueueTiming(requeue_batch_seconds=0.0)),
    (
        "timing: inadmissible workloads requeued after a ClusterQueue status change (Cohort object)",
        KueueTiming(requeue_on_status_change=True),
    ),
)


SCAN_PROGRESS = "timing: flavor scan resumed after the flavor tried in an earlier cycle"
SCAN_PHASE = "timing: the submission met another phase of the flavor scan of a head Kueue retries every cycle"


@dataclass(frozen=True)
class Verdict:
    agree: bool
    difference: str = ""  # words: what differed
    cls: str = ""  # the disagreement's class


@dataclass
class StepRecord:
    index: int
    name: str
    now: float
    real: StepObservation
    resynced: ModelStep
    resynced_verdict: Verdict
    chained: ModelStep | None
    chained_verdict: Verdict | None
    chained_cycles: tuple[object, ...]  # the chained model's CycleResults of the step (for debugging)
    # The chained model without Kueue's requeue batch (the simulator's timing before it modelled the
    # batch): parked workloads requeued at the quota release itself (what modelling the batch changes).
    unbatched_verdict: Verdict | None
    pre_state: list[Obj]  # the real Workloads before the step (raw), for reproduction cases
    new_workload: Obj
    parked: list[str]


@dataclass
class StateRecord:
    seed: int
    mode: str
    steps: list[StepRecord] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""
    generated: GeneratedState | None = None

    @property
    def resynced_agree(self) -> bool:
        return not self.error and all(s.resynced_verdict.agree for s in self.steps)

    @property
    def chained_agree(self) -> bool:
        return not self.error and all(
            s.chained_verdict is None or s.chained_verdict.agree for s in self.steps
        )

    @property
    def unbatched_agree(self) -> bool:
        return not self.error and all(
            s.unbatched_verdict is None or s.unbatched_verdict.agree for s in self.steps
        )


def compare(real: StepObservation, model: ModelStep) -> Verdict:
    if real.livelock or model.livelock:
        if real.livelock and model.livelock:
            return Verdict(True)
        if real.livelock:
            return Verdict(False, "Kueue preempts in a loop; the model settles", "livelock: Kueue only")
        return Verdict(
            False,
            f"the model preempts in a loop, Kueue settled ({model.livelock_message})",
            "livelock: model only",
        )
    if not real.settled:
        return Verdict(False, "Kueue did not settle in time", "harness: not settled")
    got = real_admitted(real.workloads)
    parts = []
    if set(got) != set(model.admitted):
        only_real = sorted(set(got) - set(model.admitted))
        only_model = sorted(set(model.admitted) - set(got))
        parts.append(f"holding quota: only in Kueue {only_real}, only in the model {only_model}")
    flavor_diffs = [k for k in sorted(set(got) & set(model.admitted)) if got[k] != model.admitted[k]]
    if flavor_diffs:
        parts.append(
            "flavors: " + "; ".join(f"{k} Kueue {got[k]} model {model.admitted[k]}" for k in flavor_diffs)
        )
    if real.preempted != model.preempted:
        parts.append(f"preempted: Kueue {real.preempted}, model {model.preempted}")
    if not parts:
        return Verdict(True)
    if len(parts) == 1 and flavor_diffs:
        cls = "decision: flavor assignment"
    elif real.preempted != model.preempted:
        cls = "decision: victims"
    else:
        cls = "decision: admitted set"
    return Verdict(False, "; ".join(parts), cls)


def classify(
    generated: GeneratedState,
    before: list[Obj],
    new: Obj,
    now: float,
    real: StepObservation,
    verdict: Verdict,
) -> Verdict:
    """A disagreement that another timing of Kueue's reproduces is a timing class."""
    if verdict.agree or not (real.settled or real.livelock):
        return verdict
    for cls, timing in VARIANTS:
        alt, _, _ = resynced_step(generated, before, new, now, timing)
        if compare(real, alt).agree:
            return Verdict(False, verdict.difference, cls)
    # Kueue resumes the flavor scan of a workload it keeps retrying after the flavor it tried last;
    # how far it got depends on how many cycles ran before the step (it spins while heads stay in
    # their heaps), which is timing.
    state, parked = resynced_state(generated, before, new)
    for key in active_pending(generated, state, parked):
        cq = state.cluster_queue_of(state.workloads[key])
        n = 0 if cq is None else max(len(g.flavors) for g in state.cluster_queues[cq].resource_groups)
        for skipped in range(1, n):
            alt, _, _ = resynced_step(generated, before, new, now, change=resume_flavor_scan(key, skipped))
            if compare(real, alt).agree:
                return Verdict(False, verdict.difference, SCAN_PROGRESS)
    return verdict


def classify_chained(
    chain: ChainedModel, new: Obj, now: float, real: StepObservation, verdict: Verdict
) -> Verdict:
    """The chained model's first disagreement on a step the resynced model agrees on: its quota state
    was Kueue's, so its queues made the difference. When the submission meeting a later phase of a
    head Kueue keeps retrying reproduces Kueue, that is timing (``ChainedModel.later_phases``)."""
    for alt in chain.later_phases(new, now):
        if compare(real, alt).agree:
            return Verdict(False, verdict.difference, SCAN_PHASE)
    return verdict


def _wait_for_next_second(after: float, sleep: Callable[[float], None] = time.sleep) -> None:
    """Submit just after a whole second, later than ``after`` + 1 s: distinct creation seconds."""
    now = time.time()
    target = max(int(now) + 1, int(after) + 1) + 0.05
    if target > now:
        sleep(target - now)


def run_state(api: k8s.ApiClient, seed: int, mode: str, *, chained: bool = True) -> StateRecord:
    return run_generated(api, generate(seed, mode), chained=chained)


def run_generated(api: k8s.ApiClient, generated: GeneratedState, *, chained: bool = True) -> StateRecord:
    """A state (generated, or written by hand: tests/differential/storm.py) step by step on the real Kueue
    and in the model."""
    seed, mode = generated.seed, generated.mode
    record = StateRecord(seed, mode, generated=generated)
    began = time.monotonic()
    cluster = RealCluster(api, generated)
    try:
        cluster.setup()
        chain = ChainedModel(generated) if chained else None
        unbatched = ChainedModel(generated, KueueTiming(requeue_batch_seconds=0.0)) if chained else None
        before: list[Obj] = []
        last_created = 0.0
        diverged = False  # the chained model disagreed at an earlier step
        with EvictionFinisher(cluster) as finisher:
            for i, spec in enumerate(generated.workloads):
                _wait_for_next_second(last_created)
                cluster.submit(spec)
                real = cluster.settle(spec.name, before)
                new = next((w for w in real.workloads if submission_name(w) == spec.name), None)
                if new is None:
                    raise HarnessError(f"seed {seed} ({mode}): Kueue made no Workload for {spec.name}")
                now = last_created = creation_second(new)
                model, _, parked = resynced_step(generated, before, new, now)
                verdict = classify(generated, before, new, now, real, compare(real, model))
                cm = chain.step(new, now) if chain is not None else None
                cv = compare(real, cm) if cm is not None else None
                if chain is not None and cv is not None and not cv.agree and verdict.agree and not diverged:
                    cv = classify_chained(chain, new, now, real, cv)
                diverged = diverged or (cv is not None and not cv.agree)
                ccycles = tuple(chain.last_run.cycles) if chain is not None and chain.last_run else ()
                uv = compare(real, unbatched.step(new, now)) if unbatched is not None else None
                record.steps.append(
                    StepRecord(
                        i, spec.name, now, real, model, verdict, cm, cv, ccycles, uv, before, new, parked
                    )
                )
                before = real.workloads
                if real.livelock or not real.settled:
                    break  # Kueue is still busy: later steps would not start from a settled state
            if finisher.errors:
                record.error = f"eviction finisher: {finisher.errors[0]}"
    except HarnessError as err:
        record.error = str(err)
    finally:
        try:
            cluster.teardown()
        finally:
            record.seconds = time.monotonic() - began
    return record
